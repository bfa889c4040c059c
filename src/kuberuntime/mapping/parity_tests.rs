//! What the kubelet v1.32.13 sent containerd 1.6 for the same manifests
//! (`crictl inspect -o json | jq .info.config`, and the containers' `env`),
//! as tables: each expected value below was read from the real kubelet's
//! requests on the lab's node (2 cores, allocatable memory 25275973632,
//! ephemeral-storage 270553174016, hugepages 2MB and 1GB, cgroup v1 with
//! memsw). See docs/running.md, "What crilet sends the runtime".

use serde_json::{Value, json};

use super::*;
use crate::cri::types::HugepageLimit;
use crate::kuberuntime::labels::CONTAINER_PORTS_ANNOTATION;

const UID: &str = "521acb93b236328c5fa7ff5c8893197a";
const IMAGE_ID: &str = "sha256:14035b6f41faf2b8ad1ad2998f0801cfc5876250df972d5d1c2a4ac3a5412a2d";

/// The lab node the kubelet ran on.
fn lab() -> NodeContext {
    NodeContext {
        node_name: "node-1".into(),
        root_dir: "/var/lib/crilet".into(),
        cgroup_root: "/".into(),
        host_ip: "10.153.0.1".into(),
        memory_capacity: 25_000 << 20,
        hugepage_sizes: vec!["2MB".into(), "1GB".into()],
        cgroups: NodeCgroups {
            v2: false,
            swap_controller: true,
        },
        allocatable: NodeAllocatable {
            cpu_millicores: 2000,
            memory_bytes: 25_275_973_632,
            ephemeral_storage_bytes: Some(270_553_174_016),
            pods: 110,
        },
        ..Default::default()
    }
}

fn resource_ref(name: &str, selector: Value) -> Value {
    json!({"name": name, "valueFrom": {"resourceFieldRef": selector}})
}

fn field_ref(name: &str, path: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}})
}

/// The oracle's pod-network pod (`web`), defaulted as a manifest is.
fn web() -> Pod {
    let busybox = "docker.io/library/busybox:latest";
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-node-1", "namespace": "default", "uid": UID},
        "spec": {
            "initContainers": [{
                "name": "init", "image": busybox,
                "resources": {"requests": {"cpu": "300m", "memory": "64Mi"},
                              "limits": {"cpu": "2", "memory": "300Mi"}}
            }],
            "containers": [{
                "name": "app", "image": busybox,
                "ports": [
                    {"containerPort": 8080, "name": "http"},
                    {"containerPort": 8080, "protocol": "UDP"},
                    {"containerPort": 9090, "hostPort": 19090, "hostIP": "127.0.0.1"},
                    {"containerPort": 9091},
                    {"containerPort": 9091},
                    {"containerPort": 9093, "hostIP": "::1"}
                ],
                "env": [
                    field_ref("POD_IP", "status.podIP"),
                    field_ref("POD_IPS", "status.podIPs"),
                    field_ref("HOST_IP", "status.hostIP"),
                    field_ref("HOST_IPS", "status.hostIPs"),
                    field_ref("NODE", "spec.nodeName"),
                    resource_ref("LIM_CPU", json!({"resource": "limits.cpu"})),
                    resource_ref("LIM_CPU_M", json!({"resource": "limits.cpu", "divisor": "1m"})),
                    resource_ref("LIM_MEM", json!({"resource": "limits.memory"})),
                    resource_ref("LIM_MEM_MI", json!({"resource": "limits.memory", "divisor": "1Mi"})),
                    resource_ref("LIM_MEM_G", json!({"resource": "limits.memory", "divisor": "1G"})),
                    resource_ref("REQ_CPU", json!({"resource": "requests.cpu"})),
                    resource_ref("REQ_CPU_M", json!({"resource": "requests.cpu", "divisor": "1m"})),
                    resource_ref("REQ_MEM", json!({"resource": "requests.memory", "divisor": "1Ki"})),
                    resource_ref("LIM_EPH", json!({"resource": "limits.ephemeral-storage"})),
                    resource_ref("REQ_EPH", json!({"resource": "requests.ephemeral-storage"})),
                    resource_ref("LIM_HP", json!({"resource": "limits.hugepages-2Mi"})),
                    resource_ref("OTHER_LIM_CPU", json!({"containerName": "other", "resource": "limits.cpu", "divisor": "1m"})),
                    resource_ref("OTHER_LIM_MEM", json!({"containerName": "other", "resource": "limits.memory"})),
                    resource_ref("OTHER_REQ_CPU", json!({"containerName": "other", "resource": "requests.cpu", "divisor": "1m"})),
                    resource_ref("INIT_LIM_CPU", json!({"containerName": "init", "resource": "limits.cpu", "divisor": "1m"})),
                    resource_ref("INIT_LIM_EPH", json!({"containerName": "init", "resource": "limits.ephemeral-storage"}))
                ],
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                              "limits": {"cpu": "500m", "memory": "128Mi"}}
            }, {
                "name": "other", "image": busybox,
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [
                    resource_ref("LIM_CPU", json!({"resource": "limits.cpu"})),
                    resource_ref("LIM_MEM", json!({"resource": "limits.memory"})),
                    resource_ref("REQ_MEM", json!({"resource": "requests.memory"}))
                ],
                "resources": {"requests": {"cpu": "100m"}}
            }]
        }
    }))
    .unwrap();
    crate::pod::defaults::apply_api_defaults(&mut pod);
    pod
}

fn container<'a>(pod: &'a Pod, name: &str) -> &'a Container {
    all_containers(pod).find(|c| c.name == name).unwrap()
}

fn map(ctx: &NodeContext, pod: &Pod, name: &str, pod_ip: &str) -> ContainerConfig {
    let start = ContainerStart {
        pod_ip,
        image_ref: IMAGE_ID,
        ..Default::default()
    };
    container_config(ctx, pod, container(pod, name), &start).unwrap()
}

fn hugepages(limits: &[(&str, u64)]) -> Vec<HugepageLimit> {
    (limits.iter())
        .map(|(size, limit)| HugepageLimit {
            page_size: size.to_string(),
            limit: *limit,
        })
        .collect()
}

#[test]
fn the_image_is_the_resolved_id_with_the_spec_name_beside_it() {
    let got = map(&lab(), &web(), "app", "10.153.0.3");
    assert_eq!(got.image, IMAGE_ID);
    assert_eq!(got.user_specified_image, "docker.io/library/busybox:latest");
    // Without a resolved reference the spec's name is all there is.
    let p = web();
    let plain = container_config(&lab(), &p, container(&p, "app"), &ContainerStart::default());
    assert_eq!(plain.unwrap().image, "docker.io/library/busybox:latest");
}

#[test]
fn container_resources_as_the_kubelet_sent_them() {
    let res = |shares, quota, memory, swap| LinuxContainerResources {
        cpu_period: 100_000,
        cpu_quota: quota,
        cpu_shares: shares,
        memory_limit_in_bytes: memory,
        memory_swap_limit_in_bytes: swap,
        hugepage_limits: hugepages(&[("2MB", 0), ("1GB", 0)]),
        ..Default::default()
    };
    let rows = [
        ("app", res(256, 50_000, 134_217_728, 134_217_728)),
        ("other", res(102, 0, 0, 0)),
        ("init", res(307, 200_000, 314_572_800, 314_572_800)),
    ];
    let p = web();
    for (name, want) in rows {
        let mut got = map(&lab(), &p, name, "10.153.0.3").resources.unwrap();
        got.oom_score_adj = 0; // the QoS rules have their own tests
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn hugepage_limits_follow_the_node_and_the_container() {
    let one = |limits: Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "h", "uid": UID},
            "spec": {"containers": [{"name": "app", "resources": {"limits": limits}}]}
        }))
        .unwrap()
    };
    let rows = [
        (json!({}), vec![("2MB", 0), ("1GB", 0)]),
        (
            json!({"hugepages-2Mi": "4Mi"}),
            vec![("2MB", 4 << 20), ("1GB", 0)],
        ),
        (
            json!({"hugepages-1Gi": "2Gi"}),
            vec![("2MB", 0), ("1GB", 2 << 30)],
        ),
        // A size the node lacks, and one that names no page size: dropped.
        (
            json!({"hugepages-64Ki": "1Mi", "hugepages-x": "1"}),
            vec![("2MB", 0), ("1GB", 0)],
        ),
    ];
    for (limits, want) in rows {
        let p = one(limits.clone());
        let got = map(&lab(), &p, "app", "").resources.unwrap();
        assert_eq!(got.hugepage_limits, hugepages(&want), "{limits}");
    }
    let none = NodeContext {
        hugepage_sizes: vec![],
        ..lab()
    };
    let p = one(json!({"hugepages-2Mi": "4Mi"}));
    assert!(
        map(&none, &p, "app", "")
            .resources
            .unwrap()
            .hugepage_limits
            .is_empty()
    );
    let bad = one(json!({"hugepages-2Mi": "lots"}));
    let err = container_config(
        &lab(),
        &bad,
        container(&bad, "app"),
        &ContainerStart::default(),
    );
    let err = err.unwrap_err().to_string();
    assert!(
        err.contains("spec.containers{app}.resources.limits.hugepages-2Mi") && err.contains("lots"),
        "{err}"
    );
}

#[test]
fn hugepage_unit_sizes_as_the_kubelet_names_them() {
    let rows: [(i64, Option<&str>); 6] = [
        (2 << 20, Some("2MB")),
        (1 << 30, Some("1GB")),
        (64 << 10, Some("64KB")),
        (512, Some("512B")),
        (3000, None),
        (16 << 30, Some("16GB")),
    ];
    for (bytes, want) in rows {
        assert_eq!(hugepage_unit_size(bytes).as_deref(), want, "{bytes}");
    }
}

#[test]
fn swap_follows_the_node_cgroups() {
    let p = web();
    let rows = [
        (false, false, 0, None),
        (false, true, 134_217_728, None),
        (true, false, 0, None),
        (true, true, 0, Some("0")),
    ];
    for (v2, swap_controller, want_swap, want_swap_max) in rows {
        let ctx = NodeContext {
            cgroups: NodeCgroups {
                v2,
                swap_controller,
            },
            ..lab()
        };
        let got = map(&ctx, &p, "app", "").resources.unwrap();
        let what = format!("v2 {v2}, swap controller {swap_controller}");
        assert_eq!(got.memory_swap_limit_in_bytes, want_swap, "{what}");
        assert_eq!(
            got.unified.get("memory.swap.max").map(String::as_str),
            want_swap_max,
            "{what}"
        );
        // cgroup v2 kills the whole container on OOM.
        let group = got.unified.get("memory.oom.group").map(String::as_str);
        assert_eq!(group, v2.then_some("1"), "{what}");
    }
}

#[test]
fn sandbox_resources_sum_the_pod_as_the_kubelet_sums_it() {
    let got = sandbox_config(&lab(), &web(), 0).unwrap();
    let want = LinuxContainerResources {
        cpu_period: 100_000,
        cpu_quota: 200_000,
        cpu_shares: 358,
        memory_limit_in_bytes: 314_572_800,
        ..Default::default()
    };
    assert_eq!(got.resources, Some(want));
    assert_eq!(got.overhead, Some(LinuxContainerResources::default()));

    let pod_of = |spec: Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "s", "uid": UID}, "spec": spec}))
            .unwrap()
    };
    let r = |cpu: &str, mem: &str| json!({"requests": {"cpu": cpu}, "limits": {"cpu": cpu, "memory": mem}});
    let sandbox = |spec: Value| {
        sandbox_config(&lab(), &pod_of(spec), 0)
            .unwrap()
            .resources
            .unwrap()
    };
    // (what, spec, shares, quota, memory)
    let rows = [
        ("nothing", json!({"containers": [{"name": "a"}]}), 2, 0, 0),
        (
            "apps add up",
            json!({"containers": [{"name": "a", "resources": r("1", "1Gi")}, {"name": "b", "resources": r("500m", "1Gi")}]}),
            1536,
            150_000,
            2 << 30,
        ),
        (
            "an init container larger than the apps",
            json!({"initContainers": [{"name": "i", "resources": r("3", "4Gi")}],
                   "containers": [{"name": "a", "resources": r("1", "1Gi")}]}),
            3072,
            300_000,
            4 << 30,
        ),
        (
            "a sidecar adds to the apps and to the init containers after it",
            json!({"initContainers": [{"name": "s", "restartPolicy": "Always", "resources": r("1", "1Gi")},
                                      {"name": "i", "resources": r("2", "2Gi")}],
                   "containers": [{"name": "a", "resources": r("500m", "512Mi")}]}),
            3072,
            300_000,
            3 << 30,
        ),
        (
            "a limit without a request gives the shares",
            json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "250m"}}}]}),
            256,
            25_000,
            0,
        ),
    ];
    for (what, spec, shares, quota, memory) in rows {
        let got = sandbox(spec);
        let want = (shares, quota, memory, 100_000);
        assert_eq!(
            (
                got.cpu_shares,
                got.cpu_quota,
                got.memory_limit_in_bytes,
                got.cpu_period
            ),
            want,
            "{what}"
        );
    }
    // Measured with a sidecar: its 100m and 100Mi count with the apps and
    // with the init container after it (1 cpu, 200Mi), and a container
    // that requests cpu "0" still counts as requesting cpu.
    let edge = json!({
        "initContainers": [
            {"name": "side", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "100m", "memory": "10Mi"}, "limits": {"cpu": "1", "memory": "100Mi"}}},
            {"name": "init", "resources": {"requests": {"cpu": "1", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "200Mi"}}}
        ],
        "containers": [
            {"name": "zero", "resources": {"requests": {"cpu": "0"}, "limits": {"cpu": "1"}}},
            {"name": "nonroot"}
        ]
    });
    let got = sandbox(edge.clone());
    assert_eq!(
        (got.cpu_shares, got.cpu_quota, got.memory_limit_in_bytes),
        (1126, 200_000, 314_572_800)
    );
    let zero_pod = pod_of(edge);
    let zero = map(&lab(), &zero_pod, "zero", "").resources.unwrap();
    assert_eq!((zero.cpu_shares, zero.cpu_quota), (2, 100_000));
    let with_overhead = pod_of(json!({"overhead": {"cpu": "250m", "memory": "120Mi"},
                                      "containers": [{"name": "a"}]}));
    let overhead = sandbox_config(&lab(), &with_overhead, 0)
        .unwrap()
        .overhead
        .unwrap();
    assert_eq!(
        (
            overhead.cpu_shares,
            overhead.cpu_quota,
            overhead.memory_limit_in_bytes
        ),
        (256, 25_000, 120 << 20)
    );
    let bad = pod_of(json!({"overhead": {"cpu": "much"}, "containers": [{"name": "a"}]}));
    let err = sandbox_config(&lab(), &bad, 0).unwrap_err();
    assert!(err.to_string().contains("spec.overhead.cpu"), "{err}");
}

#[test]
fn port_mappings_and_the_ports_annotation_as_the_kubelet_sent_them() {
    let got = sandbox_config(&lab(), &web(), 0).unwrap().port_mappings;
    let m = |protocol, container_port, host_port, host_ip: &str| PortMapping {
        protocol,
        container_port,
        host_port,
        host_ip: host_ip.into(),
    };
    let want = vec![
        m(Protocol::Tcp, 8080, 0, ""),
        m(Protocol::Udp, 8080, 0, ""),
        m(Protocol::Tcp, 9090, 19090, "127.0.0.1"),
        // The second, identical 9091 is dropped.
        m(Protocol::Tcp, 9091, 0, ""),
        m(Protocol::Tcp, 9093, 0, "::1"),
        // Another container's port of the same number stays.
        m(Protocol::Tcp, 8080, 0, ""),
    ];
    assert_eq!(got, want);
    let annotation = |name| {
        let p = web();
        map(&lab(), &p, name, "")
            .annotations
            .get(CONTAINER_PORTS_ANNOTATION)
            .cloned()
    };
    assert_eq!(
        annotation("app").as_deref(),
        Some(concat!(
            r#"[{"name":"http","containerPort":8080,"protocol":"TCP"},"#,
            r#"{"containerPort":8080,"protocol":"UDP"},"#,
            r#"{"hostPort":19090,"containerPort":9090,"protocol":"TCP","hostIP":"127.0.0.1"},"#,
            r#"{"containerPort":9091,"protocol":"TCP"},{"containerPort":9091,"protocol":"TCP"},"#,
            r#"{"containerPort":9093,"protocol":"TCP","hostIP":"::1"}]"#
        ))
    );
    assert_eq!(annotation("init"), None, "no ports, no annotation");
}

#[test]
fn masked_paths_and_seccomp_as_the_kubelet_sent_them() {
    let got = map(&lab(), &web(), "app", "").security.unwrap();
    let masked = [
        "/proc/asound",
        "/proc/acpi",
        "/proc/interrupts",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/proc/scsi",
        "/sys/firmware",
        "/sys/devices/virtual/powercap",
    ];
    assert_eq!(got.masked_paths, masked);
    let readonly = [
        "/proc/bus",
        "/proc/fs",
        "/proc/irq",
        "/proc/sys",
        "/proc/sysrq-trigger",
    ];
    assert_eq!(got.readonly_paths, readonly);
    assert_eq!(got.seccomp, Some(SecurityProfile::Unconfined));
    let sandbox = sandbox_config(&lab(), &web(), 0).unwrap().security;
    assert_eq!(sandbox.seccomp, Some(SecurityProfile::RuntimeDefault));
}

#[test]
fn env_values_as_the_kubelet_computed_them() {
    let p = web();
    let envs = |name| map(&lab(), &p, name, "10.153.0.3").envs;
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        envs("app"),
        pairs(&[
            ("POD_IP", "10.153.0.3"),
            ("POD_IPS", "10.153.0.3"),
            ("HOST_IP", "10.153.0.1"),
            ("HOST_IPS", "10.153.0.1"),
            ("NODE", "node-1"),
            ("LIM_CPU", "1"),
            ("LIM_CPU_M", "500"),
            ("LIM_MEM", "134217728"),
            ("LIM_MEM_MI", "128"),
            ("LIM_MEM_G", "1"),
            ("REQ_CPU", "1"),
            ("REQ_CPU_M", "250"),
            ("REQ_MEM", "65536"),
            ("LIM_EPH", "270553174016"),
            ("REQ_EPH", "0"),
            ("LIM_HP", "0"),
            ("OTHER_LIM_CPU", "2000"),
            ("OTHER_LIM_MEM", "25275973632"),
            ("OTHER_REQ_CPU", "100"),
            ("INIT_LIM_CPU", "2000"),
            ("INIT_LIM_EPH", "0"),
        ])
    );
    assert_eq!(
        envs("other"),
        pairs(&[
            ("LIM_CPU", "2"),
            ("LIM_MEM", "25275973632"),
            ("REQ_MEM", "0")
        ])
    );
}

#[test]
fn pod_ip_in_env_is_the_reported_pod_ip() {
    let pod_of = |host_network: bool| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "uid": UID},
            "spec": {"hostNetwork": host_network, "containers": [{"name": "app",
                "env": [field_ref("IP", "status.podIP"), field_ref("IPS", "status.podIPs")]}]}
        }))
        .unwrap()
    };
    // (host network, the sandbox's IP, what env and status say)
    let rows = [
        (true, "", "10.153.0.1"),
        (false, "10.153.0.7", "10.153.0.7"),
        (false, "", ""),
        (true, "10.9.9.9", "10.9.9.9"),
    ];
    for (host_network, sandbox_ip, want) in rows {
        let p = pod_of(host_network);
        let envs = map(&lab(), &p, "app", sandbox_ip).envs;
        let values: Vec<&str> = envs.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(
            values,
            [want, want],
            "host network {host_network}, ip {sandbox_ip:?}"
        );
        assert_eq!(reported_pod_ip(&p, sandbox_ip, "10.153.0.1"), want);
    }
}
