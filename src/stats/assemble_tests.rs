use super::*;
use crate::cri::{ContainerMetadata, CpuUsage, MemoryUsage, PodSandboxMetadata};

const SEC: i64 = 1_000_000_000;

fn sandbox(id: &str, uid: &str, state: PodSandboxState, created_at: i64) -> PodSandbox {
    let l = PodSandboxLabels {
        pod_name: "web-n1".into(),
        pod_namespace: "default".into(),
        pod_uid: uid.into(),
        pod_labels: Default::default(),
        pod_annotations: Default::default(),
    };
    PodSandbox {
        id: id.into(),
        metadata: PodSandboxMetadata::default(),
        state,
        created_at,
        labels: l.to_labels(),
        annotations: l.to_annotations(),
        runtime_handler: String::new(),
    }
}

fn container(id: &str, sandbox: &str, name: &str, state: ContainerState) -> Container {
    let l = ContainerLabels {
        pod_name: "web-n1".into(),
        pod_namespace: "default".into(),
        pod_uid: "u1".into(),
        container_name: name.into(),
        hash: 1,
        restart_count: 0,
        termination_message_path: "/dev/termination-log".into(),
        termination_message_policy: "File".into(),
        termination_grace_period: None,
        deletion_grace_period: None,
    };
    Container {
        id: id.into(),
        pod_sandbox_id: sandbox.into(),
        metadata: ContainerMetadata {
            name: name.into(),
            attempt: 0,
        },
        image: "busybox".into(),
        image_ref: "sha256:1".into(),
        state,
        created_at: 5 * SEC,
        labels: l.to_labels(),
        annotations: l.to_annotations(),
    }
}

fn cstats(id: &str, ts: i64, cpu_ns: u64, ws: u64) -> cri::ContainerStats {
    cri::ContainerStats {
        id: id.into(),
        cpu: Some(CpuUsage {
            timestamp: ts,
            usage_core_nano_seconds: Some(cpu_ns),
            // What the runtime derived for other clients: must be ignored.
            usage_nano_cores: Some(777),
        }),
        memory: Some(MemoryUsage {
            timestamp: ts,
            working_set_bytes: Some(ws),
            usage_bytes: Some(ws + 100),
            ..Default::default()
        }),
        writable_layer: Some(FilesystemUsage {
            timestamp: ts,
            mountpoint: "/var/lib/containerd".into(),
            used_bytes: Some(8192),
            inodes_used: Some(3),
        }),
        ..Default::default()
    }
}

fn capacity() -> FsCapacity {
    FsCapacity {
        capacity_bytes: 100 << 30,
        available_bytes: 60 << 30,
        inodes: 1_000_000,
        inodes_free: 900_000,
    }
}

/// One pod (sandbox s1, containers c1 running and c0 exited) at time `t`,
/// with cumulative CPU `cpu` for the container and twice that for the pod.
fn round(t: i64, cpu: u64, with_sandbox_stats: bool) -> RawRound {
    RawRound {
        time: Time(t),
        node: NodeReadings {
            node_name: "n1".into(),
            start_time: Time(SEC),
            cpu_usage_core_nano_seconds: Some(cpu * 10),
            memory_total_bytes: Some(1000),
            memory_free_bytes: Some(300),
            memory_inactive_file_bytes: Some(200),
            root_fs: Some(capacity()),
            ..Default::default()
        },
        sandboxes: vec![
            sandbox("s0", "u1", PodSandboxState::NotReady, SEC),
            sandbox("s1", "u1", PodSandboxState::Ready, 2 * SEC),
        ],
        containers: vec![
            container("c0", "s0", "app", ContainerState::Exited),
            container("c1", "s1", "app", ContainerState::Running),
        ],
        sandbox_stats: with_sandbox_stats.then(|| {
            vec![cri::PodSandboxStats {
                id: "s1".into(),
                cpu: Some(CpuUsage {
                    timestamp: t,
                    usage_core_nano_seconds: Some(cpu * 2),
                    usage_nano_cores: None,
                }),
                memory: Some(MemoryUsage {
                    timestamp: t,
                    working_set_bytes: Some(4096),
                    ..Default::default()
                }),
                process_count: Some(2),
                ..Default::default()
            }]
        }),
        container_stats: vec![cstats("c1", t, cpu, 2048)],
        log_usage: [("c1".to_owned(), (4096, 2))].into(),
        log_fs: Some(capacity()),
        image_fs_usage: Some(FilesystemUsage {
            timestamp: t,
            mountpoint: "/var/lib/containerd".into(),
            used_bytes: Some(5 << 20),
            inodes_used: Some(40),
        }),
        image_fs: Some(capacity()),
    }
}

#[test]
fn usage_nano_cores_is_the_rate_between_two_readings() {
    // Half a core: 0.5 s of CPU over 1 s.
    assert_eq!(
        usage_nano_cores(Some((0, 0)), (SEC, 500_000_000)),
        Some(500_000_000)
    );
    // Two cores over 2 s.
    assert_eq!(
        usage_nano_cores(Some((SEC, 1)), (3 * SEC, 4 * SEC as u64 + 1)),
        Some(2_000_000_000)
    );
    assert_eq!(usage_nano_cores(None, (SEC, 5)), None);
    assert_eq!(
        usage_nano_cores(Some((SEC, 5)), (SEC, 9)),
        None,
        "no time passed"
    );
    assert_eq!(
        usage_nano_cores(Some((0, 9)), (SEC, 5)),
        None,
        "counter reset"
    );
    // No overflow for large counters.
    assert_eq!(
        usage_nano_cores(Some((0, u64::MAX - SEC as u64)), (SEC, u64::MAX)),
        Some(SEC as u64)
    );
}

#[test]
fn the_first_sample_has_no_rates_and_the_second_has_our_own() {
    let first = assemble(&round(10 * SEC, 1_000_000_000, true), None);
    let pod = &first.pods["u1"];
    assert_eq!(pod.cpu.as_ref().unwrap().usage_nano_cores, None);
    assert_eq!(
        pod.containers[0].cpu.as_ref().unwrap().usage_nano_cores,
        None
    );
    assert_eq!(first.node.cpu.as_ref().unwrap().usage_nano_cores, None);

    // 10 s later the container used 2.5 more CPU seconds: 0.25 cores.
    let second = assemble(&round(20 * SEC, 3_500_000_000, true), Some(&first));
    let pod = &second.pods["u1"];
    assert_eq!(
        pod.containers[0].cpu.as_ref().unwrap().usage_nano_cores,
        Some(250_000_000)
    );
    assert_eq!(
        pod.cpu.as_ref().unwrap().usage_nano_cores,
        Some(500_000_000)
    );
    assert_eq!(
        second.node.cpu.as_ref().unwrap().usage_nano_cores,
        Some(2_500_000_000)
    );
}

#[test]
fn pods_are_keyed_by_static_uid_with_their_ready_sandbox_and_running_containers() {
    let s = assemble(&round(10 * SEC, 1, true), None);
    assert_eq!(s.pods.keys().collect::<Vec<_>>(), ["u1"]);
    let pod = &s.pods["u1"];
    assert_eq!(
        pod.pod_ref,
        PodReference {
            name: "web-n1".into(),
            namespace: "default".into(),
            uid: "u1".into()
        }
    );
    assert_eq!(
        pod.start_time,
        Time(2 * SEC),
        "the ready sandbox's creation"
    );
    assert_eq!(
        pod.containers.len(),
        1,
        "the exited container of the old sandbox is left out"
    );
    let c = &pod.containers[0];
    assert_eq!((c.name.as_str(), c.container_id.as_str()), ("app", "c1"));
    assert_eq!(c.memory.as_ref().unwrap().working_set_bytes, Some(2048));
    assert_eq!(pod.memory.as_ref().unwrap().working_set_bytes, Some(4096));
    assert_eq!(pod.process_stats.as_ref().unwrap().process_count, Some(2));
    let rootfs = c.rootfs.as_ref().unwrap();
    assert_eq!(rootfs.used_bytes, Some(8192));
    assert_eq!(rootfs.capacity_bytes, Some(100 << 30));
    assert_eq!(rootfs.inodes_free, Some(900_000));
    let logs = c.logs.as_ref().unwrap();
    assert_eq!((logs.used_bytes, logs.inodes_used), (Some(4096), Some(2)));
    let eph = pod.ephemeral_storage.as_ref().unwrap();
    assert_eq!(eph.used_bytes, Some(8192 + 4096));
    assert_eq!(eph.inodes_used, Some(5));
    assert_eq!(
        s.container_states,
        [("exited".to_owned(), 1), ("running".to_owned(), 1)].into()
    );
}

#[test]
fn without_sandbox_stats_pod_usage_is_the_sum_of_its_containers() {
    let first = assemble(&round(10 * SEC, 1_000_000_000, false), None);
    let second = assemble(&round(20 * SEC, 3_500_000_000, false), Some(&first));
    let pod = &second.pods["u1"];
    assert_eq!(
        pod.cpu.as_ref().unwrap().usage_core_nano_seconds,
        Some(3_500_000_000)
    );
    assert_eq!(
        pod.cpu.as_ref().unwrap().usage_nano_cores,
        Some(250_000_000)
    );
    assert_eq!(pod.memory.as_ref().unwrap().working_set_bytes, Some(2048));
    assert_eq!(pod.memory.as_ref().unwrap().usage_bytes, Some(2148));
    assert!(pod.process_stats.is_none());
}

/// CRI-O's PodSandboxStats: there, but with some of CPU, memory, network
/// and the process count missing. Each missing one is the sum of the
/// containers' (CPU, memory) or absent (network, processes), each present
/// one the sandbox's own.
#[test]
fn sandbox_stats_without_cpu_or_memory_fall_back_field_by_field() {
    let with = |cpu: bool, memory: bool, network: bool, processes: bool, t: i64, c: u64| {
        let mut r = round(t, c, true);
        let stats = &mut r.sandbox_stats.as_mut().unwrap()[0];
        if !cpu {
            stats.cpu = None;
        }
        if !memory {
            stats.memory = None;
        }
        stats.network = network.then(|| cri::NetworkUsage {
            timestamp: t,
            default_interface: Some(cri::InterfaceUsage {
                name: "eth0".into(),
                rx_bytes: Some(7),
                ..Default::default()
            }),
            ..Default::default()
        });
        if !processes {
            stats.process_count = None;
        }
        r
    };
    // (cpu, memory, network, processes) in the PodSandboxStats →
    // (pod cpu seconds, working set, network, processes) in the sample.
    type Given = (bool, bool, bool, bool);
    type Wanted = (u64, u64, bool, Option<u64>);
    let rows: [(Given, Wanted); 5] = [
        (
            (true, true, true, true),
            (7_000_000_000, 4096, true, Some(2)),
        ),
        (
            (false, false, false, false),
            (3_500_000_000, 2048, false, None),
        ),
        (
            (false, true, true, true),
            (3_500_000_000, 4096, true, Some(2)),
        ),
        (
            (true, false, true, true),
            (7_000_000_000, 2048, true, Some(2)),
        ),
        (
            (true, true, false, false),
            (7_000_000_000, 4096, false, None),
        ),
    ];
    for ((cpu, memory, network, processes), (seconds, working_set, has_net, count)) in rows {
        let first = assemble(
            &with(cpu, memory, network, processes, 10 * SEC, 1_000_000_000),
            None,
        );
        let second = assemble(
            &with(cpu, memory, network, processes, 20 * SEC, 3_500_000_000),
            Some(&first),
        );
        let what = format!("cpu {cpu}, memory {memory}, network {network}, processes {processes}");
        let pod = &second.pods["u1"];
        let pod_cpu = pod
            .cpu
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no pod cpu"));
        assert_eq!(pod_cpu.usage_core_nano_seconds, Some(seconds), "{what}");
        assert!(pod_cpu.usage_nano_cores.is_some(), "{what}: a rate");
        let pod_memory = pod
            .memory
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no pod memory"));
        assert_eq!(pod_memory.working_set_bytes, Some(working_set), "{what}");
        assert_eq!(pod.network.is_some(), has_net, "{what}");
        assert_eq!(
            pod.process_stats.as_ref().and_then(|p| p.process_count),
            count,
            "{what}"
        );
    }
}

#[test]
fn node_memory_and_filesystems_follow_the_kubelet() {
    let s = assemble(&round(10 * SEC, 1, true), None);
    let m = s.node.memory.as_ref().unwrap();
    // usage = total - free; working set = usage - inactive file.
    assert_eq!(m.usage_bytes, Some(700));
    assert_eq!(m.working_set_bytes, Some(500));
    assert_eq!(m.available_bytes, Some(500));
    let fs = s.node.fs.as_ref().unwrap();
    assert_eq!(fs.used_bytes, Some(40 << 30));
    assert_eq!(fs.inodes_used, Some(100_000));
    let image_fs = s.node.runtime.as_ref().unwrap().image_fs.as_ref().unwrap();
    assert_eq!(
        image_fs.used_bytes,
        Some(5 << 20),
        "ImageFsInfo's usage, not statvfs's"
    );
    assert_eq!(image_fs.capacity_bytes, Some(100 << 30));
    assert_eq!(image_fs.inodes_used, Some(40));
}

#[test]
fn unlabelled_sandboxes_and_containers_are_not_crilets() {
    let mut raw = round(10 * SEC, 1, true);
    for sb in &mut raw.sandboxes {
        sb.labels.clear();
    }
    for c in &mut raw.containers {
        c.annotations.clear();
    }
    let s = assemble(&raw, None);
    assert!(s.pods.is_empty());
    assert!(s.container_states.is_empty());
}

#[test]
fn a_restarted_container_starts_without_a_rate() {
    let first = assemble(&round(10 * SEC, 5_000_000_000, true), None);
    let mut raw = round(20 * SEC, 1_000_000, true);
    raw.containers[1].id = "c2".into();
    raw.container_stats[0].id = "c2".into();
    raw.log_usage = [("c2".to_owned(), (1, 1))].into();
    let second = assemble(&raw, Some(&first));
    let c = &second.pods["u1"].containers[0];
    assert_eq!(c.container_id, "c2");
    assert_eq!(c.cpu.as_ref().unwrap().usage_nano_cores, None);
    // The pod's counter went backwards too: no rate rather than a wrong one.
    assert_eq!(
        second.pods["u1"].cpu.as_ref().unwrap().usage_nano_cores,
        None
    );
}

#[test]
fn summary_json_uses_the_kubelets_field_names() {
    let first = assemble(&round(10 * SEC, 1_000_000_000, true), None);
    let second = assemble(&round(20 * SEC, 3_500_000_000, true), Some(&first));
    let v = serde_json::to_value(crate::stats::reply::summary(&second, false)).unwrap();
    assert_eq!(v["node"]["nodeName"], "n1");
    assert_eq!(v["node"]["startTime"], "1970-01-01T00:00:01Z");
    assert_eq!(v["node"]["runtime"]["imageFs"]["usedBytes"], 5 << 20);
    let pod = &v["pods"][0];
    assert_eq!(
        pod["podRef"],
        serde_json::json!({"name": "web-n1", "namespace": "default", "uid": "u1"})
    );
    assert_eq!(pod["cpu"]["usageNanoCores"], 500_000_000);
    assert_eq!(pod["containers"][0]["memory"]["workingSetBytes"], 2048);
    assert_eq!(pod["containers"][0]["rootfs"]["usedBytes"], 8192);
    assert_eq!(pod["containers"][0]["logs"]["usedBytes"], 4096);
    assert_eq!(pod["ephemeral-storage"]["usedBytes"], 8192 + 4096);
    assert_eq!(pod["process_stats"], serde_json::Value::Null);
    assert_eq!(pod["processStats"]["processCount"], 2);
    assert!(pod["containers"][0].get("containerId").is_none());

    let v = serde_json::to_value(crate::stats::reply::summary(&second, true)).unwrap();
    assert!(v["node"].get("fs").is_none() && v["node"].get("runtime").is_none());
    let pod = &v["pods"][0];
    assert!(pod.get("ephemeral-storage").is_none() && pod.get("processStats").is_none());
    assert!(pod["containers"][0].get("rootfs").is_none());
    assert_eq!(pod["containers"][0]["cpu"]["usageNanoCores"], 250_000_000);
}
