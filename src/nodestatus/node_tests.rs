//! Tests of the Node builders: labels, status, version, images, the
//! changed-status test and the lease.

use super::*;
use k8s_openapi::api::core::v1::Taint;

fn t(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(s).unwrap()
}

fn capacity() -> NodeResources {
    NodeResources::from_machine(2, 4 << 30, 110)
}

fn inputs<'a>(
    system: &'a NodeSystem,
    capacity: &'a NodeResources,
    pressure: &'a BTreeSet<PressureCondition>,
    port: u16,
) -> NodeStatusInputs<'a> {
    NodeStatusInputs {
        name: "node-a",
        ip: "192.0.2.7",
        runtime_version: "containerd://1.6.20",
        system,
        kubelet_port: port,
        capacity,
        allocatable: capacity,
        images: vec![],
        under_pressure: pressure,
        runtime_handlers: &[],
        not_ready: &[],
    }
}

fn status_at(
    port: u16,
    pressure: &BTreeSet<PressureCondition>,
    previous: &[NodeCondition],
    now: i64,
) -> NodeStatus {
    let system = NodeSystem::default();
    let c = capacity();
    node_status(&inputs(&system, &c, pressure, port), previous, t(now))
}

#[test]
fn node_is_labelled_like_the_kubelets_and_carries_its_status() {
    let status = status_at(10250, &BTreeSet::new(), &[], 100);
    let n = new_node("node-a", status.clone(), &[]);
    assert_eq!(n.status, Some(status), "registered with its status");
    assert_eq!(n.spec, None, "no taints: no spec");
    let l = n.metadata.labels.unwrap();
    assert_eq!(l["kubernetes.io/hostname"], "node-a");
    assert_eq!(l["kubernetes.io/os"], "linux");
    assert_eq!(l["kubernetes.io/arch"], kube_arch());
    // The deprecated pair the kubelet still sets, and its annotation.
    assert_eq!(l["beta.kubernetes.io/os"], "linux");
    assert_eq!(l["beta.kubernetes.io/arch"], kube_arch());
    assert_eq!(l.len(), 5, "{l:?}");
    let a = n.metadata.annotations.unwrap();
    assert_eq!(a[CONTROLLER_MANAGED_ATTACH_DETACH], "true");
    assert_eq!(a.len(), 1, "{a:?}");
    // Kubernetes names, not Rust's.
    #[cfg(target_arch = "x86_64")]
    assert_eq!(kube_arch(), "amd64");
    #[cfg(target_arch = "aarch64")]
    assert_eq!(kube_arch(), "arm64");
}

#[test]
fn node_is_created_with_its_registration_taints_in_order() {
    let status = status_at(0, &BTreeSet::new(), &[], 100);
    let taints = [
        Taint {
            key: "crilet.dev/static-pods-only".into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        },
        Taint {
            key: "b".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        },
    ];
    let n = new_node("n", status, &taints);
    let spec = serde_json::to_value(n.spec).unwrap();
    assert_eq!(
        spec,
        serde_json::json!({"taints": [
            {"key": "crilet.dev/static-pods-only", "value": "true", "effect": "NoSchedule"},
            {"key": "b", "effect": "NoExecute"},
        ]})
    );
}

#[test]
fn status_has_capacity_conditions_addresses_and_the_system() {
    let system = NodeSystem {
        kernel_version: "6.1.0-18-amd64".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        machine_id: "m".into(),
        boot_id: "b".into(),
        system_uuid: "u".into(),
    };
    let c = capacity();
    let mut allocatable = c.clone();
    allocatable.memory_bytes -= 100 << 20;
    let none = BTreeSet::new();
    let mut i = inputs(&system, &c, &none, 10250);
    i.allocatable = &allocatable;
    let s = node_status(&i, &[], t(100));
    assert_eq!(s.capacity.as_ref().unwrap()["memory"].0, "4Gi");
    assert_eq!(s.allocatable.as_ref().unwrap()["memory"].0, "3996Mi");
    let kinds: Vec<(&str, &str, Option<&str>)> = (s.conditions.iter().flatten())
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "MemoryPressure",
                "False",
                Some("KubeletHasSufficientMemory")
            ),
            ("DiskPressure", "False", Some("KubeletHasNoDiskPressure")),
            ("PIDPressure", "False", Some("KubeletHasSufficientPID")),
            ("Ready", "True", Some("KubeletReady")),
        ]
    );
    let a: Vec<(String, String)> = (s.addresses.clone().unwrap().into_iter())
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        a,
        [
            ("InternalIP".to_string(), "192.0.2.7".to_string()),
            ("Hostname".to_string(), "node-a".to_string())
        ]
    );
    let info = s.node_info.unwrap();
    assert_eq!(info.container_runtime_version, "containerd://1.6.20");
    assert_eq!(info.kernel_version, "6.1.0-18-amd64");
    assert_eq!(info.os_image, "Debian GNU/Linux 12 (bookworm)");
    assert_eq!(info.kubelet_version, kubelet_version());
    assert_eq!(
        info.kube_proxy_version,
        kubelet_version(),
        "as kubelet v1.32 sets it"
    );
    let ids = (info.machine_id, info.boot_id, info.system_uuid);
    assert_eq!(ids, ("m".into(), "b".into(), "u".into()));
}

#[test]
fn transition_times_move_only_when_a_status_does() {
    let none = BTreeSet::new();
    let first = status_at(10250, &none, &[], 100);
    let later = status_at(10250, &none, first.conditions.as_ref().unwrap(), 200);
    for (a, b) in first
        .conditions
        .iter()
        .flatten()
        .zip(later.conditions.iter().flatten())
    {
        assert_eq!(
            a.last_transition_time, b.last_transition_time,
            "{}",
            a.type_
        );
        assert_eq!(b.last_heartbeat_time, Some(Time(t(200))), "{}", a.type_);
    }
    assert!(!status_has_changed(&first, &later), "only heartbeats moved");
    let disk = BTreeSet::from([PressureCondition::DiskPressure]);
    let pressed = status_at(10250, &disk, later.conditions.as_ref().unwrap(), 300);
    assert!(status_has_changed(&later, &pressed));
    let c = (pressed.conditions.iter().flatten())
        .find(|c| c.type_ == "DiskPressure")
        .unwrap();
    assert_eq!(c.status, "True");
    assert_eq!(c.last_transition_time, Some(Time(t(300))));
    assert_eq!(
        pressure_of(&pressed),
        BTreeSet::from(["DiskPressure".to_string()])
    );
    // Ready keeps its time across all of it.
    let ready = |s: &NodeStatus| {
        (s.conditions.iter().flatten())
            .find(|c| c.type_ == "Ready")
            .and_then(|c| c.last_transition_time.clone())
    };
    assert_eq!(ready(&pressed), Some(Time(t(100))));
    assert!(status_has_changed(
        &later,
        &status_at(1, &none, later.conditions.as_ref().unwrap(), 200)
    ));
}

#[test]
fn kubelet_version_is_a_kubernetes_version_with_crilets_as_build_metadata() {
    let v = kubelet_version();
    let (release, build) = v.split_once('+').expect("build metadata");
    assert_eq!(release, KUBERNETES_VERSION);
    assert_eq!(build, format!("crilet.{}", env!("CARGO_PKG_VERSION")));
    // vMAJOR.MINOR.PATCH, numbers only: what ParseSemantic takes before '+'.
    let numbers: Vec<&str> = release.strip_prefix('v').unwrap().split('.').collect();
    assert_eq!(numbers.len(), 3);
    assert!(numbers.iter().all(|n| n.parse::<u64>().is_ok()), "{v}");
    // Build identifiers: [0-9A-Za-z-], dot-separated, none empty.
    assert!(
        build
            .split('.')
            .all(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    );
}

fn image(id: &str, size: u64, tags: &[&str], digests: &[&str]) -> Image {
    Image {
        id: id.into(),
        size,
        repo_tags: tags.iter().map(|s| s.to_string()).collect(),
        repo_digests: digests.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn images_are_listed_largest_first_digests_then_tags_at_most_five_names() {
    let images = [
        image("sha256:a", 10, &["a:1"], &["a@sha256:1"]),
        image(
            "sha256:b",
            30,
            &["b:1", "b:2", "b:3", "b:4"],
            &["b@sha256:1", "b@sha256:2"],
        ),
        image("sha256:c", 20, &[], &[]),
        image("sha256:d", 20, &["d:1"], &[]),
    ];
    let listed = node_images(&images, 50);
    let got: Vec<(Option<Vec<String>>, Option<i64>)> = listed
        .into_iter()
        .map(|i| (i.names, i.size_bytes))
        .collect();
    let names = |n: &[&str]| Some(n.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        got,
        [
            (
                names(&["b@sha256:1", "b@sha256:2", "b:1", "b:2", "b:3"]),
                Some(30)
            ),
            (names(&["d:1"]), Some(20)),
            (None, Some(20)),
            (names(&["a@sha256:1", "a:1"]), Some(10)),
        ],
        "ties by id, descending, as the kubelet's ByImageSize"
    );
    assert_eq!(node_images(&images, 2).len(), 2);
    assert_eq!(node_images(&images, 0).len(), 0);
    assert_eq!(node_images(&images, -1).len(), 4, "-1: no limit");
}

fn kubelet_port(s: &NodeStatus) -> Option<i32> {
    Some(s.daemon_endpoints.as_ref()?.kubelet_endpoint.as_ref()?.port)
}

#[test]
fn the_kubelet_endpoint_carries_the_servers_port() {
    let none = BTreeSet::new();
    let s = |port| status_at(port, &none, &[], 100);
    for port in [10250, 1, 65535, 12345] {
        assert_eq!(kubelet_port(&s(port)), Some(i32::from(port)), "{port}");
    }
    // No server: 0 is sent, not left out, so a patch clears an old port.
    assert_eq!(kubelet_port(&s(0)), Some(0));
    let patch = serde_json::json!({ "status": s(0) });
    assert_eq!(
        patch["status"]["daemonEndpoints"],
        serde_json::json!({ "kubeletEndpoint": { "Port": 0 } })
    );
    let patch = serde_json::json!({ "status": s(10250) });
    assert_eq!(
        patch["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );
}

#[test]
fn lease_is_held_by_the_node_and_owned_by_it() {
    let l = node_lease("node-a", "uid-1", t(100));
    assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
    assert_eq!(l.metadata.owner_references.unwrap()[0].uid, "uid-1");
    let spec = l.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("node-a"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
}

#[test]
fn the_runtime_version_is_read_as_a_generic_version() {
    let rows = [
        ("containerd", "1.6.20~ds1", "containerd://1.6.20"),
        ("containerd", "v2.1.5", "containerd://2.1.5"),
        ("containerd", "2.1.5", "containerd://2.1.5"),
        ("cri-o", "1.32.13", "cri-o://1.32.13"),
        ("cri-o", "1.32.0-rc.1", "cri-o://1.32.0"),
        ("cri-o", "1.32", "cri-o://1.32"),
        ("x", "1", "x://Unknown"),
        ("x", "01.2", "x://Unknown"),
        ("x", "1.02.3", "x://1.2.3"),
        ("x", "", "x://Unknown"),
    ];
    for (name, version, want) in rows {
        assert_eq!(
            container_runtime_version(name, version),
            want,
            "{version:?}"
        );
    }
}

#[test]
fn runtime_handlers_are_listed_in_the_runtime_s_order_with_their_features() {
    let system = NodeSystem::default();
    let c = capacity();
    let none = BTreeSet::new();
    let handler = |name: &str, rro| crate::cri::RuntimeHandler {
        name: name.into(),
        recursive_read_only_mounts: rro,
        user_namespaces: false,
    };
    let handlers = [handler("runc", true), handler("", false)];
    let mut i = inputs(&system, &c, &none, 10250);
    i.runtime_handlers = &handlers;
    let status = node_status(&i, &[], t(100));
    assert_eq!(
        serde_json::to_value(status.runtime_handlers).unwrap(),
        serde_json::json!([
            {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": false}},
            {"name": "", "features": {"recursiveReadOnlyMounts": false, "userNamespaces": false}}
        ])
    );
    // A runtime that lists none (containerd 1.6): no field at all.
    let status = node_status(&inputs(&system, &c, &none, 10250), &[], t(100));
    assert_eq!(status.runtime_handlers, None);
}

#[test]
fn ready_is_false_with_the_kubelets_reason_while_anything_keeps_the_node_not_ready() {
    let system = NodeSystem::default();
    let c = capacity();
    let none = BTreeSet::new();
    let ready_of = |s: &NodeStatus| {
        let cs = s.conditions.clone().unwrap();
        cs.into_iter().find(|c| c.type_ == "Ready").unwrap()
    };
    let up = node_status(&inputs(&system, &c, &none, 0), &[], t(100));
    let errors = [
        "container runtime is down".to_string(),
        "network state unknown".into(),
    ];
    let mut down_inputs = inputs(&system, &c, &none, 0);
    down_inputs.not_ready = &errors;
    let down = node_status(&down_inputs, up.conditions.as_deref().unwrap(), t(110));
    let r = ready_of(&down);
    assert_eq!(r.status, "False");
    assert_eq!(r.reason.as_deref(), Some("KubeletNotReady"));
    assert_eq!(
        r.message.as_deref(),
        Some("[container runtime is down, network state unknown]")
    );
    assert_eq!(r.last_transition_time, Some(Time(t(110))), "it moved");
    let still = node_status(&down_inputs, down.conditions.as_deref().unwrap(), t(120));
    assert_eq!(ready_of(&still).last_transition_time, Some(Time(t(110))));
    assert_eq!(ready_of(&still).last_heartbeat_time, Some(Time(t(120))));
    let back = node_status(
        &inputs(&system, &c, &none, 0),
        still.conditions.as_deref().unwrap(),
        t(130),
    );
    let r = ready_of(&back);
    assert_eq!(
        (r.status.as_str(), r.reason.as_deref()),
        ("True", Some("KubeletReady"))
    );
    assert_eq!(r.last_transition_time, Some(Time(t(130))));
}
