use super::security::{DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS};
use super::*;
use crate::kuberuntime::labels::{
    CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, CONTAINER_PORTS_ANNOTATION,
    CONTAINER_RESTART_COUNT_ANNOTATION, POD_DELETION_GRACE_PERIOD_ANNOTATION, POD_NAME_LABEL,
    POD_NAMESPACE_LABEL, POD_TERMINATION_GRACE_PERIOD_ANNOTATION, POD_UID_LABEL,
    TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const UID: &str = "6f1c0ffee0ddf00d6f1c0ffee0ddf00d";
const GIB: u64 = 1 << 30;

fn ctx() -> NodeContext {
    NodeContext {
        node_name: "node-1".into(),
        root_dir: "/var/lib/crilet".into(),
        log_dirs: Default::default(),
        cgroup_root: "/".into(),
        cgroup_driver: CgroupDriver::Cgroupfs,
        host_dns: DnsConfig {
            servers: vec!["10.0.0.2".into()],
            searches: vec!["lan".into()],
            options: vec!["ndots:1".into()],
        },
        host_ip: "192.168.1.10".into(),
        memory_capacity: 8 * GIB,
        oom_score_adj_floor: None,
        ..Default::default()
    }
}

/// An instance's start facts, the image left as the spec names it.
fn at(restart_count: u32, attempt: u32, pod_ip: &str) -> ContainerStart<'_> {
    ContainerStart {
        restart_count,
        attempt,
        pod_ip,
        image_ref: "",
        image_user: None,
        etc_hosts: None,
        service_env: &[],
    }
}

fn pod(spec: Value) -> Pod {
    pod_with(json!({}), spec)
}

/// A pod named web-node-1 in default; `meta` is merged into its metadata.
fn pod_with(meta: Value, spec: Value) -> Pod {
    let mut metadata = json!({"name": "web-node-1", "namespace": "default", "uid": UID});
    for (k, v) in meta.as_object().unwrap() {
        metadata[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": metadata, "spec": spec})).unwrap()
}

/// A pod whose single container "app" has the given fields.
fn pod_one(container: Value, spec_extra: Value) -> Pod {
    let mut c = json!({"name": "app", "image": "busybox"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut spec = json!({"containers": [c]});
    for (k, v) in spec_extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    pod(spec)
}

fn app(p: &Pod) -> &Container {
    &spec(p).containers[0]
}

fn map_app(p: &Pod) -> Result<ContainerConfig, MappingError> {
    container_config(&ctx(), p, app(p), &at(0, 0, "10.88.0.5"))
}

fn resources_of(req: Value, lim: Value) -> Value {
    json!({"resources": {"requests": req, "limits": lim}})
}

fn field_of(err: &MappingError) -> &str {
    match err {
        MappingError::Unsupported { field, .. } | MappingError::Invalid { field, .. } => field,
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn qos_class_follows_kubelet_rules() {
    use QosClass::*;
    let full = json!({"cpu": "500m", "memory": "128Mi"});
    let rows = [
        ("nothing set", json!([{"name": "a"}]), json!([]), BestEffort),
        (
            "zero requests",
            json!([{"name": "a", "resources": {"requests": {"cpu": "0"}}}]),
            json!([]),
            BestEffort,
        ),
        (
            "other resources only",
            json!([{"name": "a", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]),
            json!([]),
            BestEffort,
        ),
        (
            "limits only",
            json!([{"name": "a", "resources": {"limits": full}}]),
            json!([]),
            Guaranteed,
        ),
        (
            "requests equal limits",
            json!([{"name": "a", "resources": {"requests": full, "limits": full}}]),
            json!([]),
            Guaranteed,
        ),
        (
            "equal in other units",
            json!([{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1073741824"}}}]),
            json!([]),
            Guaranteed,
        ),
        (
            "requests below limits",
            json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": full}}]),
            json!([]),
            Burstable,
        ),
        (
            "cpu request only",
            json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]),
            json!([]),
            Burstable,
        ),
        (
            "memory limit only",
            json!([{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]),
            json!([]),
            Burstable,
        ),
        (
            "one container without",
            json!([{"name": "a", "resources": {"limits": full}}, {"name": "b"}]),
            json!([]),
            Burstable,
        ),
        (
            "init container without",
            json!([{"name": "a", "resources": {"limits": full}}]),
            json!([{"name": "i"}]),
            Burstable,
        ),
        (
            "init container guaranteed too",
            json!([{"name": "a", "resources": {"limits": full}}]),
            json!([{"name": "i", "resources": {"limits": full}}]),
            Guaranteed,
        ),
        (
            "burstable init, nothing else",
            json!([{"name": "a"}]),
            json!([{"name": "i", "resources": {"requests": {"memory": "1Mi"}}}]),
            Burstable,
        ),
    ];
    for (what, containers, init, want) in rows {
        let p = pod(json!({"containers": containers, "initContainers": init}));
        assert_eq!(qos_class(&p), want, "{what}");
    }
    assert_eq!(
        [Guaranteed, Burstable, BestEffort].map(QosClass::as_str),
        ["Guaranteed", "Burstable", "BestEffort"]
    );
}

#[test]
fn cgroup_parent_by_root_and_qos() {
    let guaranteed = pod_one(
        resources_of(json!({}), json!({"cpu": "1", "memory": "1Gi"})),
        json!({}),
    );
    let burstable = pod_one(resources_of(json!({"cpu": "1"}), json!({})), json!({}));
    let best_effort = pod_one(json!({}), json!({}));
    let rows = [
        ("/", &guaranteed, format!("/kubepods/pod{UID}")),
        ("/", &burstable, format!("/kubepods/burstable/pod{UID}")),
        ("/", &best_effort, format!("/kubepods/besteffort/pod{UID}")),
        ("", &guaranteed, format!("/kubepods/pod{UID}")),
        (
            "/crilet-test",
            &burstable,
            format!("/crilet-test/kubepods/burstable/pod{UID}"),
        ),
        (
            "crilet-test/",
            &best_effort,
            format!("/crilet-test/kubepods/besteffort/pod{UID}"),
        ),
        ("//a//b/", &guaranteed, format!("/a/b/kubepods/pod{UID}")),
    ];
    for (root, p, want) in rows {
        let ctx = NodeContext {
            cgroup_root: root.into(),
            ..ctx()
        };
        assert_eq!(pod_cgroup_parent(&ctx, p), want, "root {root:?}");
        assert!(cgroup_parent_candidates(&ctx, UID).contains(&want));
    }
    let ctx = NodeContext {
        cgroup_root: "/crilet-test".into(),
        ..ctx()
    };
    assert_eq!(
        cgroup_parent_candidates(&ctx, "u1"),
        strings(&[
            "/crilet-test/kubepods/podu1",
            "/crilet-test/kubepods/burstable/podu1",
            "/crilet-test/kubepods/besteffort/podu1",
        ])
    );
}

#[test]
fn systemd_cgroup_parent_is_the_kubelets_nested_slices() {
    let with_uid = |uid: &str, resources: Value| {
        let mut p = pod_one(resources, json!({}));
        p.metadata.uid = Some(uid.into());
        p
    };
    let guaranteed = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
    let burstable = json!({"requests": {"cpu": "1"}});
    let dashed = "6f1c0ffe-e0dd-f00d-6f1c-0ffee0ddf00d";
    let escaped = "6f1c0ffe_e0dd_f00d_6f1c_0ffee0ddf00d";
    let rows = [
        (
            "/",
            guaranteed.clone(),
            UID,
            format!("/kubepods.slice/kubepods-pod{UID}.slice"),
        ),
        (
            "/",
            burstable.clone(),
            UID,
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID}.slice"),
        ),
        (
            "",
            json!({}),
            UID,
            format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID}.slice"),
        ),
        (
            "/",
            burstable.clone(),
            dashed,
            format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice"
            ),
        ),
        (
            "/crilet",
            guaranteed,
            dashed,
            format!("/crilet.slice/crilet-kubepods.slice/crilet-kubepods-pod{escaped}.slice"),
        ),
        (
            "/crilet/",
            burstable,
            UID,
            format!(
                "/crilet.slice/crilet-kubepods.slice/crilet-kubepods-burstable.slice\
                 /crilet-kubepods-burstable-pod{UID}.slice"
            ),
        ),
        (
            "/crilet-test",
            json!({}),
            UID,
            format!(
                "/crilet_test.slice/crilet_test-kubepods.slice\
                 /crilet_test-kubepods-besteffort.slice\
                 /crilet_test-kubepods-besteffort-pod{UID}.slice"
            ),
        ),
    ];
    for (root, resources, uid, want) in rows {
        let ctx = NodeContext {
            cgroup_root: root.into(),
            cgroup_driver: CgroupDriver::Systemd,
            ..ctx()
        };
        let p = with_uid(uid, json!({"resources": resources}));
        assert_eq!(pod_cgroup_parent(&ctx, &p), want, "root {root:?}");
        assert!(
            cgroup_parent_candidates(&ctx, uid).contains(&want),
            "{want}"
        );
    }
    let ctx = NodeContext {
        cgroup_driver: CgroupDriver::Systemd,
        ..ctx()
    };
    assert_eq!(
        cgroup_parent_candidates(&ctx, "u-1"),
        strings(&[
            "/kubepods.slice/kubepods-podu_1.slice",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu_1.slice",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_1.slice",
        ])
    );
}

#[test]
fn paths_and_grace_period() {
    let p = pod(json!({"containers": []}));
    assert_eq!(
        pod_log_dir(&ctx(), &p),
        PathBuf::from(format!("/var/log/pods/default_web-node-1_{UID}"))
    );
    assert_eq!(
        empty_dir_path(&ctx(), &p, "cache"),
        PathBuf::from(format!(
            "/var/lib/crilet/pods/{UID}/volumes/kubernetes.io~empty-dir/cache"
        ))
    );
    assert_eq!(
        empty_dir_plugin_dir(&ctx(), &p, "cache"),
        PathBuf::from(format!(
            "/var/lib/crilet/pods/{UID}/plugins/kubernetes.io~empty-dir/cache"
        ))
    );
    assert_eq!(
        etc_hosts_file(&ctx(), UID),
        PathBuf::from(format!("/var/lib/crilet/pods/{UID}/etc-hosts"))
    );
    for (name, restarts, want) in [("app", 0, "app/0.log"), ("side-car", 12, "side-car/12.log")] {
        assert_eq!(container_log_path(name, restarts), want);
    }
    for (spec, want) in [
        (json!({"containers": []}), 30),
        (
            json!({"containers": [], "terminationGracePeriodSeconds": 0}),
            0,
        ),
        (
            json!({"containers": [], "terminationGracePeriodSeconds": 5}),
            5,
        ),
    ] {
        assert_eq!(termination_grace_period(&pod(spec)), want);
    }
    assert_eq!(termination_grace_period(&Pod::default()), 30);
}

#[test]
fn sandbox_hostname() {
    let long = "a".repeat(62) + "-.b";
    let rows = [
        (json!({}), "web-node-1".to_owned()),
        (json!({"hostNetwork": true}), String::new()),
        (json!({"hostNetwork": true, "hostname": "x"}), String::new()),
        (json!({"hostname": "custom"}), "custom".into()),
        (json!({"hostname": ""}), "web-node-1".into()),
        (json!({"hostname": long}), "a".repeat(62)),
        (json!({"hostname": "b".repeat(63)}), "b".repeat(63)),
        (json!({"hostname": "c".repeat(70)}), "c".repeat(63)),
        (
            json!({"hostname": "ends-with-dash-"}),
            "ends-with-dash-".into(),
        ),
    ];
    for (extra, want) in rows {
        let got = sandbox_config(&ctx(), &pod_one(json!({}), extra.clone()), 0).unwrap();
        assert_eq!(got.hostname, want, "{extra}");
    }
}

#[test]
fn sandbox_dns() {
    let host = ctx().host_dns;
    let dns = |servers: &[&str], searches: &[&str], options: &[&str]| DnsConfig {
        servers: strings(servers),
        searches: strings(searches),
        options: strings(options),
    };
    let extra = json!({
        "nameservers": ["1.1.1.1", "10.0.0.2"],
        "searches": ["svc.example", "lan"],
        "options": [{"name": "ndots", "value": "5"}, {"name": "edns0"}]
    });
    let many_searches: Vec<String> = (0..40).map(|i| format!("s{i}.example")).collect();
    let rows = [
        (json!({}), host.clone()),
        (json!({"dnsPolicy": "ClusterFirst"}), host.clone()),
        (
            json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true}),
            host.clone(),
        ),
        (json!({"dnsPolicy": "Default"}), host.clone()),
        (
            json!({"dnsPolicy": "ClusterFirst", "hostNetwork": true}),
            host.clone(),
        ),
        (json!({"dnsPolicy": "None"}), DnsConfig::default()),
        (
            json!({"dnsPolicy": "None", "hostNetwork": true, "dnsConfig": {"nameservers": ["9.9.9.9"]}}),
            dns(&["9.9.9.9"], &[], &[]),
        ),
        (
            json!({"dnsPolicy": "Default", "dnsConfig": extra}),
            dns(
                &["10.0.0.2", "1.1.1.1"],
                &["lan", "svc.example"],
                &["ndots:5", "edns0"],
            ),
        ),
        (
            json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]}}),
            dns(&["1.1.1.1", "2.2.2.2", "3.3.3.3"], &[], &[]),
        ),
        (
            json!({"dnsPolicy": "None", "dnsConfig": {"searches": many_searches}}),
            dns(
                &[],
                &many_searches[..32]
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                &[],
            ),
        ),
        (
            json!({"dnsPolicy": "None", "dnsConfig": {"searches": ["x".repeat(254), "ok"]}}),
            dns(&[], &["ok"], &[]),
        ),
        (
            json!({"dnsPolicy": "None", "dnsConfig": {"searches": (0..12).map(|i| format!("{i}{}", "y".repeat(199))).collect::<Vec<_>>()}}),
            dns(
                &[],
                &(0..10)
                    .map(|i| format!("{i}{}", "y".repeat(199)))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                &[],
            ),
        ),
        (
            json!({"dnsPolicy": "None", "dnsConfig": {"options": [{"name": "timeout", "value": "2"}, {"name": "timeout", "value": "3"}]}}),
            dns(&[], &[], &["timeout:3"]),
        ),
    ];
    for (extra, want) in rows {
        let got = sandbox_config(&ctx(), &pod_one(json!({}), extra.clone()), 0).unwrap();
        assert_eq!(got.dns_config, Some(want), "{extra}");
    }
    let err = sandbox_config(
        &ctx(),
        &pod_one(json!({}), json!({"dnsPolicy": "Bogus"})),
        0,
    )
    .unwrap_err();
    assert_eq!(field_of(&err), "spec.dnsPolicy");
}

#[test]
fn sandbox_port_mappings() {
    let mapping = |protocol, container_port, host_port, host_ip: &str| PortMapping {
        protocol,
        container_port,
        host_port,
        host_ip: host_ip.into(),
    };
    let rows = [
        // Every port is listed, with or without a hostPort.
        (
            json!([{"containerPort": 80}]),
            vec![mapping(Protocol::Tcp, 80, 0, "")],
        ),
        (
            json!([{"containerPort": 80, "hostPort": 0}]),
            vec![mapping(Protocol::Tcp, 80, 0, "")],
        ),
        (
            json!([{"containerPort": 80, "hostPort": 8080}]),
            vec![mapping(Protocol::Tcp, 80, 8080, "")],
        ),
        (
            json!([{"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "127.0.0.1"}, {"containerPort": 9, "hostPort": 9, "protocol": "SCTP"}, {"containerPort": 81, "hostPort": 81, "protocol": "TCP"}]),
            vec![
                mapping(Protocol::Udp, 53, 5353, "127.0.0.1"),
                mapping(Protocol::Sctp, 9, 9, ""),
                mapping(Protocol::Tcp, 81, 81, ""),
            ],
        ),
    ];
    for (ports, want) in rows {
        let p = pod_one(json!({"ports": ports}), json!({}));
        assert_eq!(
            sandbox_config(&ctx(), &p, 0).unwrap().port_mappings,
            want,
            "{ports}"
        );
    }
    // Init containers' ports are not published.
    let p = pod(
        json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 1}]}]}),
    );
    assert!(
        sandbox_config(&ctx(), &p, 0)
            .unwrap()
            .port_mappings
            .is_empty()
    );
}

#[test]
fn sandbox_identity_labels_and_layout() {
    let p = pod_with(
        json!({"labels": {"app": "web"}, "annotations": {"kubernetes.io/config.source": "file"}}),
        json!({"containers": [{"name": "a"}], "securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]}}),
    );
    let got = sandbox_config(&ctx(), &p, 3).unwrap();
    assert_eq!(
        got.metadata,
        PodSandboxMetadata {
            name: "web-node-1".into(),
            uid: UID.into(),
            namespace: "default".into(),
            attempt: 3
        }
    );
    let back = PodSandboxLabels::from_labels(&got.labels, &got.annotations).unwrap();
    assert_eq!(
        back.pod_labels,
        BTreeMap::from([("app".to_owned(), "web".to_owned())])
    );
    assert_eq!(got.labels[POD_UID_LABEL], UID);
    assert_eq!(got.annotations["kubernetes.io/config.source"], "file");
    assert_eq!(
        got.log_directory,
        format!("/var/log/pods/default_web-node-1_{UID}")
    );
    assert_eq!(got.cgroup_parent, format!("/kubepods/besteffort/pod{UID}"));
    assert_eq!(
        got.sysctls,
        HashMap::from([("net.ipv4.ip_forward".to_owned(), "1".to_owned())])
    );
    assert_eq!(got.runtime_handler, "");
}

#[test]
fn sandbox_security() {
    use NamespaceMode::*;
    let ns = |network, pid, ipc| NamespaceOptions {
        network,
        pid,
        ipc,
        target_id: String::new(),
    };
    // The pause container runs RuntimeDefault whatever the pod sets.
    let base = SandboxSecurity {
        namespace_options: ns(Pod, Container, Pod),
        seccomp: Some(SecurityProfile::RuntimeDefault),
        ..Default::default()
    };
    let rows = [
        (json!({}), json!({}), base.clone()),
        (
            json!({"hostNetwork": true}),
            json!({}),
            SandboxSecurity {
                namespace_options: ns(Node, Container, Pod),
                ..base.clone()
            },
        ),
        (
            json!({"hostPID": true, "hostIPC": true, "shareProcessNamespace": true}),
            json!({}),
            SandboxSecurity {
                namespace_options: ns(Pod, Node, Node),
                ..base.clone()
            },
        ),
        (
            json!({"shareProcessNamespace": true}),
            json!({}),
            SandboxSecurity {
                namespace_options: ns(Pod, Pod, Pod),
                ..base.clone()
            },
        ),
        (
            json!({}),
            json!({"securityContext": {"privileged": true}}),
            SandboxSecurity {
                privileged: true,
                ..base.clone()
            },
        ),
        (
            json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 3000, "supplementalGroups": [4000, 5000]}}),
            json!({}),
            SandboxSecurity {
                run_as_user: Some(1000),
                run_as_group: Some(2000),
                supplemental_groups: vec![3000, 4000, 5000],
                ..base.clone()
            },
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
            json!({}),
            SandboxSecurity {
                seccomp: Some(SecurityProfile::RuntimeDefault),
                ..base.clone()
            },
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
            json!({}),
            base.clone(),
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}}),
            json!({}),
            base.clone(),
        ),
    ];
    for (spec_extra, container, want) in rows {
        let p = pod_one(container.clone(), spec_extra.clone());
        assert_eq!(
            sandbox_config(&ctx(), &p, 0).unwrap().security,
            want,
            "{spec_extra} {container}"
        );
    }
    // A privileged init container makes the sandbox privileged too.
    let p = pod(
        json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "securityContext": {"privileged": true}}]}),
    );
    assert!(sandbox_config(&ctx(), &p, 0).unwrap().security.privileged);
    for (profile, field) in [
        (
            json!({"type": "Localhost"}),
            "spec.securityContext.seccompProfile.localhostProfile",
        ),
        (
            json!({"type": "Strict"}),
            "spec.securityContext.seccompProfile.type",
        ),
    ] {
        let p = pod_one(
            json!({}),
            json!({"securityContext": {"seccompProfile": profile}}),
        );
        assert_eq!(field_of(&sandbox_config(&ctx(), &p, 0).unwrap_err()), field);
    }
}

#[test]
fn variable_expansion() {
    let vars = vec![
        ("A".to_owned(), "x".to_owned()),
        ("EMPTY".to_owned(), String::new()),
        ("B".to_owned(), "$(A)".to_owned()),
    ];
    let rows = [
        ("plain", "plain"),
        ("$(A)", "x"),
        ("pre-$(A)-post", "pre-x-post"),
        ("$(A)$(A)", "xx"),
        ("$(EMPTY)|", "|"),
        ("$(B)", "$(A)"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$x"),
        ("$$", "$"),
        ("$", "$"),
        ("a$", "a$"),
        ("$A", "$A"),
        ("$(A", "$(A"),
        ("$()", "$()"),
        ("$(é)ü$", "$(é)ü$"),
        ("100$ and $(A)", "100$ and x"),
    ];
    for (input, want) in rows {
        assert_eq!(expand(input, &vars), want, "{input:?}");
    }
}

#[test]
fn container_env() {
    let p = pod_with(
        json!({"labels": {"app": "web"}, "annotations": {"note": "hi"}}),
        json!({"containers": [{"name": "app"}], "serviceAccountName": "sa"}),
    );
    let field_ref = |path: &str| json!({"fieldRef": {"fieldPath": path}});
    let rows: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (
            json!([{"name": "A", "value": "1"}, {"name": "B"}]),
            vec![("A", "1"), ("B", "")],
        ),
        (
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$(C)"}, {"name": "C", "value": "3"}]),
            vec![("A", "1"), ("B", "1-$(C)"), ("C", "3")],
        ),
        (
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "x"}, {"name": "A", "value": "$(A)2"}]),
            vec![("A", "12"), ("B", "x")],
        ),
        (
            json!([{"name": "P", "value": "$$(HOME)"}]),
            vec![("P", "$(HOME)")],
        ),
        (
            json!([
                {"name": "N", "valueFrom": field_ref("metadata.name")},
                {"name": "NS", "valueFrom": field_ref("metadata.namespace")},
                {"name": "U", "valueFrom": field_ref("metadata.uid")},
                {"name": "NODE", "valueFrom": field_ref("spec.nodeName")},
                {"name": "SA", "valueFrom": field_ref("spec.serviceAccountName")},
                {"name": "IP", "valueFrom": field_ref("status.podIP")},
                {"name": "HIP", "valueFrom": field_ref("status.hostIP")},
                {"name": "L", "valueFrom": field_ref("metadata.labels['app']")},
                {"name": "AN", "valueFrom": field_ref("metadata.annotations['note']")},
                {"name": "MISSING", "valueFrom": field_ref("metadata.labels['nope']")},
                {"name": "RAW", "value": "$(N)@$(NODE)"},
            ]),
            vec![
                ("N", "web-node-1"),
                ("NS", "default"),
                ("U", UID),
                ("NODE", "node-1"),
                ("SA", "sa"),
                ("IP", "10.88.0.5"),
                ("HIP", "192.168.1.10"),
                ("L", "web"),
                ("AN", "hi"),
                ("MISSING", ""),
                ("RAW", "web-node-1@node-1"),
            ],
        ),
    ];
    for (env, want) in rows {
        let mut p = p.clone();
        p.spec.as_mut().unwrap().containers[0].env = serde_json::from_value(env.clone()).unwrap();
        let got = map_app(&p).unwrap().envs;
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        assert_eq!(got, want, "{env}");
    }
    let mut on_node = p.clone();
    on_node.spec.as_mut().unwrap().node_name = Some("other".into());
    on_node.spec.as_mut().unwrap().containers[0].env =
        serde_json::from_value(json!([{"name": "NODE", "valueFrom": field_ref("spec.nodeName")}]))
            .unwrap();
    assert_eq!(
        map_app(&on_node).unwrap().envs,
        vec![("NODE".into(), "other".into())]
    );

    let errors = [
        (
            json!({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}),
            "spec.containers{app}.env{X}.valueFrom.configMapKeyRef",
        ),
        (
            json!({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
            "spec.containers{app}.env{X}.valueFrom.secretKeyRef",
        ),
        (
            json!({"env": [{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "containerName": "nope"}}}]}),
            "spec.containers{app}.env{X}.valueFrom.resourceFieldRef.containerName",
        ),
        (
            json!({"env": [{"name": "X", "valueFrom": field_ref("metadata.generateName")}]}),
            "spec.containers{app}.env{X}.valueFrom.fieldRef",
        ),
        (
            json!({"env": [{"name": "X", "valueFrom": {}}]}),
            "spec.containers{app}.env{X}.valueFrom",
        ),
        (
            json!({"envFrom": [{"configMapRef": {"name": "cm"}}]}),
            "spec.containers{app}.envFrom",
        ),
    ];
    for (container, field) in errors {
        let err = map_app(&pod_one(container.clone(), json!({}))).unwrap_err();
        assert_eq!(field_of(&err), field, "{container}");
        let text = err.to_string();
        assert!(
            text.contains("web-node-1_default") && text.contains(field),
            "{text}"
        );
    }
}

#[test]
fn container_command_and_args_are_expanded() {
    let p = pod_one(
        json!({
            "env": [{"name": "MSG", "value": "hi"}],
            "command": ["sh", "-c", "echo $(MSG) $$(MSG) $(NOPE)"],
            "args": ["$(MSG)"],
            "workingDir": "/work/$(MSG)"
        }),
        json!({}),
    );
    let got = map_app(&p).unwrap();
    assert_eq!(
        got.command,
        strings(&["sh", "-c", "echo hi $(MSG) $(NOPE)"])
    );
    assert_eq!(got.args, strings(&["hi"]));
    assert_eq!(
        got.working_dir, "/work/$(MSG)",
        "workingDir is not expanded"
    );
}

#[test]
fn container_mounts() {
    let volumes = json!([
        {"name": "host", "hostPath": {"path": "/srv/data"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "bare"},
        {"name": "cm", "configMap": {"name": "x"}},
        {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}},
    ]);
    let empty = format!("/var/lib/crilet/pods/{UID}/volumes/kubernetes.io~empty-dir");
    // A subPath mount mounts its bind target (the only mount: index 0).
    let bind = |volume: &str| format!("/var/lib/crilet/pods/{UID}/volume-subpaths/{volume}/app/0");
    let mount = |container_path: &str, host_path: String, readonly, propagation| Mount {
        container_path: container_path.into(),
        host_path,
        readonly,
        selinux_relabel: false,
        recursive_read_only: false,
        propagation,
    };
    let rows = [
        (
            json!({"name": "host", "mountPath": "/data"}),
            mount(
                "/data",
                "/srv/data".into(),
                false,
                MountPropagation::Private,
            ),
        ),
        (
            json!({"name": "host", "mountPath": "/data", "readOnly": true, "subPath": "a/b"}),
            mount("/data", bind("host"), true, MountPropagation::Private),
        ),
        (
            json!({"name": "host", "mountPath": "/d", "subPathExpr": "logs/$(POD)"}),
            mount("/d", bind("host"), false, MountPropagation::Private),
        ),
        (
            json!({"name": "host", "mountPath": "/d", "mountPropagation": "HostToContainer"}),
            mount(
                "/d",
                "/srv/data".into(),
                false,
                MountPropagation::HostToContainer,
            ),
        ),
        (
            json!({"name": "scratch", "mountPath": "/tmp"}),
            mount(
                "/tmp",
                format!("{empty}/scratch"),
                false,
                MountPropagation::Private,
            ),
        ),
        (
            json!({"name": "bare", "mountPath": "/b", "subPath": "x"}),
            mount("/b", bind("bare"), false, MountPropagation::Private),
        ),
    ];
    let env = json!([{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    // Every container also gets its termination-message file, last.
    let termination = mount(
        "/dev/termination-log",
        format!("/var/lib/crilet/pods/{UID}/containers/app/0"),
        false,
        MountPropagation::Private,
    );
    for (vm, want) in rows {
        let p = pod_one(
            json!({"volumeMounts": [vm], "env": env}),
            json!({"volumes": volumes}),
        );
        let got = map_app(&p).unwrap().mounts;
        assert_eq!(got, vec![want, termination.clone()], "{vm}");
    }
    let privileged = pod_one(
        json!({"volumeMounts": [{"name": "host", "mountPath": "/d", "mountPropagation": "Bidirectional"}], "securityContext": {"privileged": true}}),
        json!({"volumes": volumes}),
    );
    assert_eq!(
        map_app(&privileged).unwrap().mounts[0].propagation,
        MountPropagation::Bidirectional
    );

    let errors = [
        (
            json!({"name": "cm", "mountPath": "/c"}),
            "spec.volumes{cm}",
            "configMap",
        ),
        (
            json!({"name": "claim", "mountPath": "/c"}),
            "spec.volumes{claim}",
            "persistentVolumeClaim",
        ),
        (
            json!({"name": "ghost", "mountPath": "/g"}),
            "spec.containers{app}.volumeMounts{ghost}.name",
            "ghost",
        ),
        (
            json!({"name": "host", "mountPath": "/d", "subPath": "../etc"}),
            "spec.containers{app}.volumeMounts{host}.subPath",
            "../etc",
        ),
        (
            json!({"name": "host", "mountPath": "/d", "subPath": "/etc"}),
            "spec.containers{app}.volumeMounts{host}.subPath",
            "/etc",
        ),
        (
            json!({"name": "host", "mountPath": "/d", "mountPropagation": "Bidirectional"}),
            "spec.containers{app}.volumeMounts{host}.mountPropagation",
            "Bidirectional",
        ),
        (
            json!({"name": "host", "mountPath": "/d", "mountPropagation": "Sideways"}),
            "spec.containers{app}.volumeMounts{host}.mountPropagation",
            "Sideways",
        ),
    ];
    for (vm, field, mentioned) in errors {
        let p = pod_one(json!({"volumeMounts": [vm]}), json!({"volumes": volumes}));
        let err = map_app(&p).unwrap_err();
        assert_eq!(field_of(&err), field, "{vm}");
        assert!(err.to_string().contains(mentioned), "{err}");
    }
}

#[test]
fn etc_hosts_mount_comes_after_the_volumes_and_before_the_termination_file() {
    let p = pod_one(
        json!({"volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}]}),
        json!({"volumes": [{"name": "data", "emptyDir": {}}]}),
    );
    let hosts = PathBuf::from("/var/lib/crilet/pods/u/etc-hosts");
    let with_hosts = ContainerStart {
        etc_hosts: Some(&hosts),
        ..at(0, 0, "10.0.0.2")
    };
    let got = container_config(&ctx(), &p, app(&p), &with_hosts).unwrap();
    let paths: Vec<&str> = got
        .mounts
        .iter()
        .map(|m| m.container_path.as_str())
        .collect();
    assert_eq!(paths, ["/data", "/etc/hosts", "/dev/termination-log"]);
    assert_eq!(
        got.mounts[1],
        Mount {
            container_path: "/etc/hosts".into(),
            host_path: "/var/lib/crilet/pods/u/etc-hosts".into(),
            readonly: false,
            selinux_relabel: false,
            recursive_read_only: false,
            propagation: MountPropagation::Private,
        }
    );
    // Without a file (the worker decided the container gets none): no mount.
    let none = container_config(&ctx(), &p, app(&p), &at(0, 0, "10.0.0.2")).unwrap();
    assert!(none.mounts.iter().all(|m| m.container_path != "/etc/hosts"));
    // The file is not part of the spec hash.
    assert_eq!(
        got.annotations[CONTAINER_HASH_ANNOTATION],
        none.annotations[CONTAINER_HASH_ANNOTATION]
    );
}

#[test]
fn host_name_and_domain_for_the_hosts_file() {
    // (spec fields, hostname, host domain)
    let long = "a".repeat(61) + "-.x";
    let rows = [
        (json!({}), "web-node-1", ""),
        (json!({"hostname": "db"}), "db", ""),
        (
            json!({"subdomain": "sub"}),
            "web-node-1",
            "sub.default.svc.",
        ),
        (
            json!({"hostname": "db", "subdomain": "sub"}),
            "db",
            "sub.default.svc.",
        ),
        (json!({"hostname": long}), &"a".repeat(61), ""),
    ];
    for (fields, hostname, domain) in rows {
        let mut spec = json!({"containers": []});
        spec.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let p = pod(spec);
        let got = host_name_and_domain(&p);
        assert_eq!(
            (got.0.as_str(), got.1.as_str()),
            (hostname, domain),
            "{fields}"
        );
    }
}

#[test]
fn termination_message_mount() {
    let termination_mounts = |container: Value, restart_count: u32, attempt: u32| {
        let p = pod_one(container, json!({}));
        let config =
            container_config(&ctx(), &p, app(&p), &at(restart_count, attempt, "")).unwrap();
        let hash = config.annotations[CONTAINER_HASH_ANNOTATION].clone();
        let mounts: Vec<Mount> = config
            .mounts
            .into_iter()
            .filter(|m| m.host_path.contains("/containers/"))
            .collect();
        (mounts, hash)
    };
    let file = |attempt: u32| format!("/var/lib/crilet/pods/{UID}/containers/app/{attempt}");
    let rw = |container_path: &str, host_path: String| Mount {
        container_path: container_path.into(),
        host_path,
        readonly: false,
        selinux_relabel: false,
        recursive_read_only: false,
        propagation: MountPropagation::Private,
    };
    // Named by the attempt (new for every instance), not the restart count.
    let rows = [
        (json!({}), 0, 0, vec![rw("/dev/termination-log", file(0))]),
        (json!({}), 1, 3, vec![rw("/dev/termination-log", file(3))]),
        (
            json!({"terminationMessagePath": "/tmp/status"}),
            0,
            1,
            vec![rw("/tmp/status", file(1))],
        ),
        (
            json!({"terminationMessagePath": "/dev/termination-log"}),
            2,
            2,
            vec![rw("/dev/termination-log", file(2))],
        ),
        (json!({"terminationMessagePath": ""}), 0, 0, vec![]),
    ];
    for (container, restart_count, attempt, want) in rows {
        let (got, _) = termination_mounts(container.clone(), restart_count, attempt);
        assert_eq!(got, want, "{container} attempt {attempt}");
    }
    assert_eq!(
        termination_message_file(&ctx(), UID, "app", 4),
        PathBuf::from(file(4))
    );
    // The file differs per instance; the spec hash does not.
    let (first, hash_0) = termination_mounts(json!({}), 0, 0);
    let (second, hash_1) = termination_mounts(json!({}), 1, 1);
    assert_ne!(first, second);
    assert_eq!(hash_0, hash_1);
}

#[test]
fn container_resources() {
    let res = |shares, period, quota, memory, oom| LinuxContainerResources {
        cpu_shares: shares,
        cpu_period: period,
        cpu_quota: quota,
        memory_limit_in_bytes: memory,
        oom_score_adj: oom,
        ..Default::default()
    };
    let gi = GIB as i64;
    let rows = [
        ("nothing", json!({}), json!({}), res(2, 100_000, 0, 0, 1000)),
        (
            "cpu request",
            json!({"cpu": "100m"}),
            json!({}),
            res(102, 100_000, 0, 0, 999),
        ),
        (
            "tiny cpu request",
            json!({"cpu": "1m"}),
            json!({}),
            res(2, 100_000, 0, 0, 999),
        ),
        (
            "cpu limit only",
            json!({}),
            json!({"cpu": "500m"}),
            res(512, 100_000, 50_000, 0, 999),
        ),
        (
            "zero request, limit",
            json!({"cpu": "0"}),
            json!({"cpu": "2"}),
            // A request that is set, even to 0, gives the shares.
            res(2, 100_000, 200_000, 0, 999),
        ),
        (
            "tiny limit",
            json!({}),
            json!({"cpu": "5m"}),
            res(5, 100_000, 1_000, 0, 999),
        ),
        (
            "huge cpu",
            json!({"cpu": "1000"}),
            json!({}),
            res(262_144, 100_000, 0, 0, 999),
        ),
        (
            "guaranteed",
            json!({}),
            json!({"cpu": "1", "memory": "1Gi"}),
            res(1024, 100_000, 100_000, gi, -997),
        ),
        (
            "burstable 1Gi of 8Gi",
            json!({"memory": "1Gi"}),
            json!({"memory": "2Gi"}),
            res(2, 100_000, 0, 2 * gi, 875),
        ),
        (
            "burstable whole node",
            json!({"memory": "8Gi"}),
            json!({}),
            res(2, 100_000, 0, 0, 3),
        ),
        (
            "burstable over node",
            json!({"memory": "16Gi"}),
            json!({}),
            res(2, 100_000, 0, 0, 3),
        ),
        (
            "burstable tiny memory",
            json!({"memory": "1"}),
            json!({}),
            res(2, 100_000, 0, 0, 999),
        ),
        (
            "memory limit in G",
            json!({"cpu": "1"}),
            json!({"memory": "1.5G"}),
            res(1024, 100_000, 0, 1_500_000_000, 826),
        ),
    ];
    for (what, req, lim, want) in rows {
        let p = pod_one(resources_of(req, lim), json!({}));
        assert_eq!(map_app(&p).unwrap().resources, Some(want), "{what}");
    }
    let no_capacity = NodeContext {
        memory_capacity: 0,
        ..ctx()
    };
    let p = pod_one(resources_of(json!({"memory": "1Gi"}), json!({})), json!({}));
    let got = container_config(&no_capacity, &p, app(&p), &at(0, 0, "")).unwrap();
    assert_eq!(got.resources.unwrap().oom_score_adj, 999);
    let critical = pod_one(
        json!({}),
        json!({"priorityClassName": "system-node-critical"}),
    );
    assert_eq!(
        map_app(&critical).unwrap().resources.unwrap().oom_score_adj,
        -997
    );
    // --restrict-oom-score-adj: scores below crilet's own are raised to it,
    // higher ones are kept.
    let best_effort = pod_one(json!({}), json!({}));
    for (floor, pod, want) in [
        (0, &critical, 0),
        (-500, &critical, -500),
        (0, &best_effort, 1000),
    ] {
        let restricted = NodeContext {
            oom_score_adj_floor: Some(floor),
            ..ctx()
        };
        let got = container_config(&restricted, pod, app(pod), &at(0, 0, "")).unwrap();
        assert_eq!(got.resources.unwrap().oom_score_adj, want, "floor {floor}");
    }

    for (req, lim, field) in [
        (
            json!({"cpu": "lots"}),
            json!({}),
            "spec.containers{app}.resources.requests.cpu",
        ),
        (
            json!({}),
            json!({"memory": "12XB"}),
            "spec.containers{app}.resources.limits.memory",
        ),
        (
            json!({"memory": "-1Gi"}),
            json!({}),
            "spec.containers{app}.resources.requests.memory",
        ),
        (
            json!({}),
            json!({"cpu": "1e30"}),
            "spec.containers{app}.resources.limits.cpu",
        ),
    ] {
        let p = pod_one(resources_of(req, lim), json!({}));
        assert_eq!(field_of(&map_app(&p).unwrap_err()), field);
        // The sandbox refuses it too: QoS and the cgroup path depend on it.
        assert_eq!(field_of(&sandbox_config(&ctx(), &p, 0).unwrap_err()), field);
    }
    let init = pod(
        json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "x"}}}]}),
    );
    let err = sandbox_config(&ctx(), &init, 0).unwrap_err();
    assert_eq!(
        field_of(&err),
        "spec.initContainers{i}.resources.limits.cpu"
    );
}

#[test]
fn container_security_context() {
    use NamespaceMode::*;
    let masked = strings(&DEFAULT_MASKED_PATHS);
    let readonly = strings(&DEFAULT_READONLY_PATHS);
    let base = ContainerSecurity {
        namespace_options: NamespaceOptions {
            network: Pod,
            pid: Container,
            ipc: Pod,
            target_id: String::new(),
        },
        masked_paths: masked.clone(),
        readonly_paths: readonly.clone(),
        // No profile anywhere: Unconfined, sent explicitly.
        seccomp: Some(SecurityProfile::Unconfined),
        ..Default::default()
    };
    let rows = [
        (json!({}), json!({}), base.clone()),
        (
            json!({"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false}),
            json!({}),
            ContainerSecurity {
                capabilities_add: strings(&["NET_ADMIN"]),
                capabilities_drop: strings(&["ALL"]),
                readonly_rootfs: true,
                no_new_privs: true,
                ..base.clone()
            },
        ),
        (
            json!({"allowPrivilegeEscalation": true}),
            json!({}),
            base.clone(),
        ),
        (
            json!({"privileged": true}),
            json!({}),
            // The lists are sent for a privileged container too.
            ContainerSecurity {
                privileged: true,
                ..base.clone()
            },
        ),
        (
            json!({"procMount": "Unmasked"}),
            json!({}),
            ContainerSecurity {
                masked_paths: vec![],
                readonly_paths: vec![],
                ..base.clone()
            },
        ),
        (
            json!({}),
            json!({"runAsUser": 1000, "runAsGroup": 100, "supplementalGroups": [5], "fsGroup": 7}),
            ContainerSecurity {
                run_as_user: Some(1000),
                run_as_group: Some(100),
                supplemental_groups: vec![7, 5],
                ..base.clone()
            },
        ),
        (
            json!({"runAsUser": 0, "runAsGroup": 0}),
            json!({"runAsUser": 1000, "runAsGroup": 100}),
            ContainerSecurity {
                run_as_user: Some(0),
                run_as_group: Some(0),
                ..base.clone()
            },
        ),
        (
            json!({"runAsNonRoot": true, "runAsUser": 1}),
            json!({}),
            ContainerSecurity {
                run_as_user: Some(1),
                ..base.clone()
            },
        ),
        (
            json!({}),
            json!({"seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "Unconfined"}}),
            ContainerSecurity {
                seccomp: Some(SecurityProfile::RuntimeDefault),
                apparmor: Some(SecurityProfile::Unconfined),
                ..base.clone()
            },
        ),
        (
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}, "appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-nginx"}}),
            json!({"seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "RuntimeDefault"}}),
            ContainerSecurity {
                seccomp: Some(SecurityProfile::Localhost(
                    "/var/lib/crilet/seccomp/p.json".into(),
                )),
                apparmor: Some(SecurityProfile::Localhost("k8s-nginx".into())),
                ..base.clone()
            },
        ),
    ];
    for (csc, psc, want) in rows {
        let p = pod_one(
            json!({"securityContext": csc}),
            json!({"securityContext": psc}),
        );
        assert_eq!(map_app(&p).unwrap().security, Some(want), "{csc} / {psc}");
    }
    let host = pod_one(
        json!({}),
        json!({"hostNetwork": true, "hostPID": true, "shareProcessNamespace": true}),
    );
    let ns = map_app(&host).unwrap().security.unwrap().namespace_options;
    assert_eq!((ns.network, ns.pid, ns.ipc), (Node, Node, Pod));
    let shared = pod_one(json!({}), json!({"shareProcessNamespace": true}));
    assert_eq!(
        map_app(&shared)
            .unwrap()
            .security
            .unwrap()
            .namespace_options
            .pid,
        Pod
    );

    let errors = [
        (
            json!({"runAsUser": 0}),
            json!({"runAsNonRoot": true}),
            "spec.containers{app}.securityContext.runAsUser",
        ),
        (
            json!({"runAsNonRoot": true}),
            json!({"runAsUser": 0}),
            "spec.containers{app}.securityContext.runAsUser",
        ),
        (
            json!({"seccompProfile": {"type": "Localhost"}}),
            json!({}),
            "spec.containers{app}.securityContext.seccompProfile.localhostProfile",
        ),
        (
            json!({"appArmorProfile": {"type": "Maybe"}}),
            json!({}),
            "spec.containers{app}.securityContext.appArmorProfile.type",
        ),
        (
            json!({}),
            json!({"appArmorProfile": {"type": "Localhost"}}),
            "spec.securityContext.appArmorProfile.localhostProfile",
        ),
    ];
    for (csc, psc, field) in errors {
        let p = pod_one(
            json!({"securityContext": csc}),
            json!({"securityContext": psc}),
        );
        assert_eq!(field_of(&map_app(&p).unwrap_err()), field, "{csc} / {psc}");
    }
}

#[test]
fn container_identity_labels_and_flags() {
    let rows = [
        (
            json!({}),
            json!({}),
            json!({}),
            "/dev/termination-log",
            "File",
            None,
            None,
        ),
        (
            json!({"terminationMessagePath": "/tmp/msg", "terminationMessagePolicy": "FallbackToLogsOnError", "stdin": true, "stdinOnce": true, "tty": true}),
            json!({"terminationGracePeriodSeconds": 10}),
            json!({"deletionGracePeriodSeconds": 4}),
            "/tmp/msg",
            "FallbackToLogsOnError",
            Some(10),
            Some(4),
        ),
    ];
    for (container, spec_extra, meta, path, policy, grace, deletion) in rows {
        let mut c = json!({"name": "app", "image": "busybox:1.36"});
        for (k, v) in container.as_object().unwrap() {
            c[k] = v.clone();
        }
        let mut s = json!({"containers": [c]});
        for (k, v) in spec_extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        let p = pod_with(meta, s);
        let got = container_config(&ctx(), &p, app(&p), &at(7, 2, "")).unwrap();
        assert_eq!(
            got.metadata,
            ContainerMetadata {
                name: "app".into(),
                attempt: 2
            }
        );
        assert_eq!(got.image, "busybox:1.36");
        assert_eq!(got.log_path, "app/7.log");
        let flag = |k: &str| container[k] == true;
        assert_eq!(
            (got.stdin, got.stdin_once, got.tty),
            (flag("stdin"), flag("stdinOnce"), flag("tty"))
        );
        let back = ContainerLabels::from_labels(&got.labels, &got.annotations).unwrap();
        let want = ContainerLabels {
            pod_name: "web-node-1".into(),
            pod_namespace: "default".into(),
            pod_uid: UID.into(),
            container_name: "app".into(),
            hash: container_hash(app(&p)),
            restart_count: 7,
            termination_message_path: path.into(),
            termination_message_policy: policy.into(),
            termination_grace_period: grace,
            deletion_grace_period: deletion,
        };
        assert_eq!(back, want);
        assert_eq!(
            got.labels.len(),
            4,
            "only the identity labels: {:?}",
            got.labels
        );
    }
}

/// A realistic static pod: host-network busybox with env, an emptyDir,
/// a read-only hostPath, a hostPort and burstable resources.
#[test]
fn exact_output_for_host_network_busybox() {
    let p: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "hello-node-1",
                "namespace": "default",
                "uid": UID,
                "labels": {"app": "hello"},
                "annotations": {"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": UID}
            },
            "spec": {
                "hostNetwork": true,
                "nodeName": "node-1",
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 5,
                "containers": [{
                    "name": "hello",
                    "image": "docker.io/library/busybox:latest",
                    "command": ["sh", "-c", "echo $(GREETING) from $(NODE); sleep 3600"],
                    "env": [
                        {"name": "GREETING", "value": "hi"},
                        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
                    ],
                    "ports": [{"containerPort": 8080, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "host-etc", "mountPath": "/host/etc", "readOnly": true}
                    ]
                }],
                "volumes": [
                    {"name": "data", "emptyDir": {}},
                    {"name": "host-etc", "hostPath": {"path": "/etc", "type": "Directory"}}
                ]
            }
        }))
        .unwrap();
    let map = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let log_dir = format!("/var/log/pods/default_hello-node-1_{UID}");

    let sandbox = sandbox_config(&ctx(), &p, 0).unwrap();
    let want_sandbox = PodSandboxConfig {
        metadata: PodSandboxMetadata {
            name: "hello-node-1".into(),
            uid: UID.into(),
            namespace: "default".into(),
            attempt: 0,
        },
        hostname: String::new(),
        log_directory: log_dir.clone(),
        dns_config: Some(ctx().host_dns),
        port_mappings: vec![PortMapping {
            protocol: Protocol::Tcp,
            container_port: 8080,
            host_port: 8080,
            host_ip: String::new(),
        }],
        labels: map(&[
            ("app", "hello"),
            (POD_NAME_LABEL, "hello-node-1"),
            (POD_NAMESPACE_LABEL, "default"),
            (POD_UID_LABEL, UID),
        ]),
        annotations: map(&[
            ("kubernetes.io/config.source", "file"),
            ("kubernetes.io/config.hash", UID),
        ]),
        cgroup_parent: format!("/kubepods/burstable/pod{UID}"),
        security: SandboxSecurity {
            namespace_options: NamespaceOptions {
                network: NamespaceMode::Node,
                pid: NamespaceMode::Container,
                ipc: NamespaceMode::Pod,
                target_id: String::new(),
            },
            seccomp: Some(SecurityProfile::RuntimeDefault),
            ..Default::default()
        },
        sysctls: HashMap::new(),
        runtime_handler: String::new(),
        resources: Some(LinuxContainerResources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 102,
            memory_limit_in_bytes: 128 << 20,
            ..Default::default()
        }),
        overhead: Some(LinuxContainerResources::default()),
    };
    assert_eq!(sandbox, want_sandbox);

    // A host-network pod: its containers get the managed hosts file, and
    // the image by its ID.
    let hosts = etc_hosts_file(&ctx(), UID);
    let image_id = "sha256:14035b6f41faf2b8ad1ad2998f0801cfc5876250df972d5d1c2a4ac3a5412a2d";
    let start = ContainerStart {
        image_ref: image_id,
        etc_hosts: Some(&hosts),
        ..at(0, 0, "")
    };
    let container = container_config(&ctx(), &p, &spec(&p).containers[0], &start).unwrap();
    let hash = container_hash(&spec(&p).containers[0]);
    // The kubelet's hash of this name and image (FNV-32a, name and image
    // only), so either agent keeps the other's container.
    assert_eq!(format!("{hash:x}"), "eaa9d5b4");
    // Pinned: what crilet wrote before; a container carrying it is kept, and
    // a change here restarts every container an older crilet started.
    let legacy = legacy_container_hash(&spec(&p).containers[0]);
    assert_eq!(format!("{legacy:x}"), "27e56ae684b0a7c2");
    let want_container = ContainerConfig {
        metadata: ContainerMetadata {
            name: "hello".into(),
            attempt: 0,
        },
        image: image_id.into(),
        user_specified_image: "docker.io/library/busybox:latest".into(),
        command: strings(&["sh", "-c", "echo hi from node-1; sleep 3600"]),
        args: vec![],
        working_dir: String::new(),
        envs: vec![
            ("GREETING".into(), "hi".into()),
            ("NODE".into(), "node-1".into()),
        ],
        mounts: vec![
            Mount {
                container_path: "/data".into(),
                host_path: format!(
                    "/var/lib/crilet/pods/{UID}/volumes/kubernetes.io~empty-dir/data"
                ),
                ..Default::default()
            },
            Mount {
                container_path: "/host/etc".into(),
                host_path: "/etc".into(),
                readonly: true,
                ..Default::default()
            },
            Mount {
                container_path: "/etc/hosts".into(),
                host_path: format!("/var/lib/crilet/pods/{UID}/etc-hosts"),
                ..Default::default()
            },
            Mount {
                container_path: "/dev/termination-log".into(),
                host_path: format!("/var/lib/crilet/pods/{UID}/containers/hello/0"),
                ..Default::default()
            },
        ],
        labels: map(&[
            (POD_NAME_LABEL, "hello-node-1"),
            (POD_NAMESPACE_LABEL, "default"),
            (POD_UID_LABEL, UID),
            (CONTAINER_NAME_LABEL, "hello"),
        ]),
        annotations: map(&[
            (CONTAINER_HASH_ANNOTATION, &format!("{hash:x}")),
            (CONTAINER_RESTART_COUNT_ANNOTATION, "0"),
            (TERMINATION_MESSAGE_PATH_ANNOTATION, "/dev/termination-log"),
            (TERMINATION_MESSAGE_POLICY_ANNOTATION, "File"),
            (POD_TERMINATION_GRACE_PERIOD_ANNOTATION, "5"),
            (
                CONTAINER_PORTS_ANNOTATION,
                r#"[{"hostPort":8080,"containerPort":8080}]"#,
            ),
        ]),
        log_path: "hello/0.log".into(),
        stdin: false,
        stdin_once: false,
        tty: false,
        resources: Some(LinuxContainerResources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 102,
            memory_limit_in_bytes: 128 << 20,
            oom_score_adj: 993,
            cpuset_cpus: String::new(),
            cpuset_mems: String::new(),
            hugepage_limits: vec![],
            unified: Default::default(),
            memory_swap_limit_in_bytes: 0,
        }),
        security: Some(ContainerSecurity {
            namespace_options: want_sandbox.security.namespace_options.clone(),
            masked_paths: strings(&DEFAULT_MASKED_PATHS),
            readonly_paths: strings(&DEFAULT_READONLY_PATHS),
            seccomp: Some(SecurityProfile::Unconfined),
            ..Default::default()
        }),
    };
    assert_eq!(container, want_container);
    assert!(
        !container
            .annotations
            .contains_key(POD_DELETION_GRACE_PERIOD_ANNOTATION)
    );
}

fn hashed_container() -> impl Strategy<Value = (String, Vec<String>)> {
    (
        "[a-z0-9./:-]{1,30}",
        proptest::collection::vec(".{0,12}", 0..4),
    )
}

proptest! {
    #[test]
    fn container_hashes_are_deterministic_and_sensitive(
        (image, command) in hashed_container(),
        (other_image, other_command) in hashed_container(),
    ) {
        let make = |image: &str, command: &[String]| Container {
            name: "app".into(),
            image: Some(image.into()),
            command: Some(command.to_vec()),
            ..Default::default()
        };
        let c = make(&image, &command);
        prop_assert_eq!(container_hash(&c), container_hash(&c.clone()));
        prop_assert_eq!(legacy_container_hash(&c), legacy_container_hash(&c.clone()));
        if other_image != image {
            prop_assert_ne!(container_hash(&c), container_hash(&make(&other_image, &command)));
        }
        // The kubelet's hash covers the name and image only; the legacy
        // one, the whole spec.
        prop_assert_eq!(container_hash(&c), container_hash(&make(&image, &other_command)));
        if other_command != command {
            prop_assert_ne!(
                legacy_container_hash(&c),
                legacy_container_hash(&make(&image, &other_command))
            );
        }
    }

    #[test]
    fn expansion_never_panics_and_keeps_plain_text(
        input in "[a-z$()]{0,24}",
        value in "[a-z]{0,4}",
    ) {
        let out = expand(&input, &[("a".into(), value)]);
        if !input.contains('$') {
            prop_assert_eq!(out, input);
        }
    }
}

#[test]
fn subpath_binds_name_the_source_in_its_volume_and_the_target_by_mount_index() {
    let volumes = json!([
        {"name": "host", "hostPath": {"path": "/srv/data"}},
        {"name": "scratch", "emptyDir": {}},
    ]);
    let env = json!([{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
    let mounts = json!([
        {"name": "scratch", "mountPath": "/tmp"},
        {"name": "host", "mountPath": "/d", "subPathExpr": "logs/$(POD)"},
        {"name": "scratch", "mountPath": "/s", "subPath": "x"},
    ]);
    let p = pod_one(
        json!({"volumeMounts": mounts, "env": env}),
        json!({"volumes": volumes}),
    );
    let container = &p.spec.as_ref().unwrap().containers[0];
    let start = ContainerStart {
        restart_count: 0,
        attempt: 0,
        pod_ip: "",
        image_ref: "",
        image_user: None,
        etc_hosts: None,
        service_env: &[],
    };
    let binds = subpath_binds(&ctx(), &p, container, &start).unwrap();
    let pods = format!("/var/lib/crilet/pods/{UID}");
    assert_eq!(
        binds,
        [
            SubPathBind {
                volume_path: "/srv/data".into(),
                sub_path: "logs/web-node-1".into(),
                target: format!("{pods}/volume-subpaths/host/app/1").into(),
            },
            SubPathBind {
                volume_path: format!("{pods}/volumes/kubernetes.io~empty-dir/scratch").into(),
                sub_path: "x".into(),
                target: format!("{pods}/volume-subpaths/scratch/app/2").into(),
            },
        ]
    );
}

#[test]
fn recursive_read_only_follows_the_runtime_s_support_as_the_kubelet_resolves_it() {
    let volumes = json!({"volumes": [{"name": "host", "hostPath": {"path": "/srv"}}]});
    let with = |mode: &str| {
        pod_one(
            json!({"volumeMounts": [{"name": "host", "mountPath": "/h", "readOnly": true, "recursiveReadOnly": mode}]}),
            volumes.clone(),
        )
    };
    let supported = NodeContext {
        recursive_read_only_mounts: true,
        ..ctx()
    };
    let map =
        |node: &NodeContext, p: &Pod| container_config(node, p, app(p), &at(0, 0, "10.88.0.5"));
    let rro = |node: &NodeContext, mode: &str| {
        map(node, &with(mode)).map(|c| c.mounts[0].recursive_read_only)
    };
    assert_eq!(rro(&supported, "IfPossible"), Ok(true));
    assert_eq!(rro(&ctx(), "IfPossible"), Ok(false));
    assert_eq!(rro(&supported, "Enabled"), Ok(true));
    assert_eq!(rro(&supported, "Disabled"), Ok(false));
    let err = rro(&ctx(), "Enabled").unwrap_err();
    assert!(
        err.to_string().contains("not supported by the runtime"),
        "{err}"
    );
}
