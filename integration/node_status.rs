//! The Node crilet registers, on the real kube-apiserver: its capacity,
//! allocatable (with reservations), conditions and nodeInfo, each compared
//! with what the machine says through other tools (getconf, /proc, stat
//! -f, uname, os-release), its images; and DiskPressure on a small
//! loop-mounted root dir filled past the nodefs threshold and emptied
//! again.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};

use crate::agent::*;
use crate::kube::Lab;
use crate::mirror::start_on;
use crate::support::eventually;

const LIMIT: Duration = Duration::from_secs(60);

fn sh(script: &str) -> String {
    let out = Command::new("sh").args(["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A quantity of the Node's status in whole units (millicores for cpu).
fn amount(node: &Node, list: &str, resource: &str) -> i64 {
    let status = node.status.as_ref().unwrap();
    let map = match list {
        "capacity" => status.capacity.as_ref(),
        _ => status.allocatable.as_ref(),
    };
    let q = &map.unwrap_or_else(|| panic!("no {list}"))[resource].0;
    let q = crilet::units::quantity::parse(q).unwrap();
    if resource == "cpu" {
        q.milli_value().unwrap()
    } else {
        q.value().unwrap()
    }
}

fn condition<'a>(node: &'a Node, type_: &str) -> &'a NodeCondition {
    (node.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition: {:?}", node.status))
}

async fn node_where(lab: &Lab, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node {
    let found = eventually(LIMIT, || async {
        lab.node(name).await.filter(|n| check(n))
    })
    .await;
    match found {
        Some(n) => n,
        None => panic!(
            "node {name}: {what} within {LIMIT:?}: {:?}",
            lab.node(name).await.map(|n| n.status)
        ),
    }
}

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

#[tokio::test]
#[ignore = "needs a runtime (CRILET_AGENT_TEST_ENDPOINT) and the real API server"]
async fn capacity_allocatable_conditions_and_node_info_are_the_machines() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-16").await;
    let agent = start_on(
        &node,
        &[
            "--kube-reserved=cpu=100m,memory=100Mi".into(),
            "--system-reserved=memory=50Mi,ephemeral-storage=1Gi".into(),
            "--max-pods=42".into(),
        ],
    );
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    let n = node_where(&lab, &node.name, "a capacity", |n| {
        n.status.as_ref().is_some_and(|s| s.capacity.is_some())
    })
    .await;

    // Capacity, read independently.
    let cores: i64 = sh("getconf _NPROCESSORS_ONLN").parse().unwrap();
    assert_eq!(amount(&n, "capacity", "cpu"), cores * 1000);
    let mem_kib: i64 = sh("awk '/^MemTotal:/ {print $2}' /proc/meminfo")
        .parse()
        .unwrap();
    assert_eq!(amount(&n, "capacity", "memory"), mem_kib * 1024);
    let cap = n.status.as_ref().unwrap().capacity.as_ref().unwrap();
    assert_eq!(
        cap["memory"].0,
        format!("{mem_kib}Ki"),
        "printed as the kubelet"
    );
    assert_eq!(cap["pods"].0, "42");
    let root = agent.root.path().display().to_string();
    let fs_bytes: i64 = sh(&format!(
        "set -- $(stat -f -c '%b %S' {root}); echo $(($1 * $2))"
    ))
    .parse()
    .unwrap();
    assert_eq!(amount(&n, "capacity", "ephemeral-storage"), fs_bytes);
    let hugepages: i64 = sh(
        "for d in /sys/kernel/mm/hugepages/hugepages-*kB; do [ -d \"$d\" ] || continue; \
         k=${d##*hugepages-}; k=${k%kB}; echo $(( k * 1024 * $(cat $d/nr_hugepages) )); \
         done | awk '{s += $1} END {print s + 0}'",
    )
    .parse()
    .unwrap();

    // Allocatable: capacity less both reservations and the hard eviction
    // thresholds (memory.available<100Mi, nodefs.available<10%), memory
    // also less the hugepages.
    assert_eq!(amount(&n, "allocatable", "cpu"), cores * 1000 - 100);
    assert_eq!(
        amount(&n, "allocatable", "memory"),
        mem_kib * 1024 - 100 * MI - 50 * MI - 100 * MI - hugepages
    );
    let ten_percent = (fs_bytes as f64 * f64::from(0.1f32)) as i64;
    assert_eq!(
        amount(&n, "allocatable", "ephemeral-storage"),
        (fs_bytes - GI - ten_percent).max(0)
    );
    assert_eq!(amount(&n, "allocatable", "pods"), 42);

    // Conditions: the three pressures, then Ready.
    let types: Vec<&str> = (n.status.as_ref().unwrap().conditions.iter().flatten())
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    assert_eq!(condition(&n, "Ready").status, "True");
    // (DiskPressure is left alone: a shared disk may well be past
    // imagefs.available<15%, as it was here, and then True is right.)
    assert_eq!(condition(&n, "MemoryPressure").status, "False");
    assert_eq!(
        condition(&n, "PIDPressure").reason.as_deref(),
        Some("KubeletHasSufficientPID")
    );

    // nodeInfo, read independently.
    let info = n.status.as_ref().unwrap().node_info.clone().unwrap();
    assert_eq!(info.kernel_version, sh("uname -r"));
    assert_eq!(
        info.os_image,
        sh(". /etc/os-release; echo \"$PRETTY_NAME\"")
    );
    assert_eq!(info.boot_id, sh("cat /proc/sys/kernel/random/boot_id"));
    if Path::new("/etc/machine-id").exists() {
        assert_eq!(info.machine_id, sh("cat /etc/machine-id"));
    }
    assert_eq!(info.operating_system, "linux");
    assert_eq!(info.architecture, crilet::nodestatus::node::kube_arch());
    assert_eq!(
        info.kubelet_version,
        crilet::nodestatus::node::kubelet_version()
    );
    assert!(
        info.kubelet_version.starts_with("v1.32.0+crilet."),
        "{info:?}"
    );
    // Deprecated, set as kubelet v1.32 sets it: its own version.
    assert_eq!(info.kube_proxy_version, info.kubelet_version);
    // cadvisor's system UUID: DMI's, else (a VM without it) the machine id.
    let dmi = "/sys/class/dmi/id/product_uuid";
    let uuid = if Path::new(dmi).exists() {
        sh(&format!("cat {dmi}"))
    } else {
        sh("cat /etc/machine-id")
    };
    assert_eq!(info.system_uuid, uuid);
    // `<name>://<generic version>`: numbers only (containerd://1.6.20 for
    // Debian's 1.6.20~ds1), as the kubelet parses the runtime's version.
    let runtime = info.container_runtime_version;
    let (name, version) = runtime.split_once("://").unwrap_or_default();
    assert!(matches!(name, "containerd" | "cri-o"), "{runtime}");
    let numbers: Vec<&str> = version.split('.').collect();
    assert!(
        numbers.len() >= 2 && numbers.iter().all(|n| n.parse::<u64>().is_ok()),
        "{runtime}"
    );

    // Labels and annotations of the kubelet's registration.
    let meta = &n.metadata;
    let labels = meta.labels.clone().unwrap_or_default();
    let arch = crilet::nodestatus::node::kube_arch().to_string();
    for (key, want) in [
        ("kubernetes.io/hostname", node.name.clone()),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", arch.clone()),
        ("beta.kubernetes.io/os", "linux".into()),
        ("beta.kubernetes.io/arch", arch),
    ] {
        assert_eq!(labels.get(key), Some(&want), "{key}: {labels:?}");
    }
    let annotations = meta.annotations.clone().unwrap_or_default();
    let cmad = "volumes.kubernetes.io/controller-managed-attach-detach";
    assert_eq!(
        annotations.get(cmad).map(String::as_str),
        Some("true"),
        "{annotations:?}"
    );

    // The kubelet's node events, on the Node (its name as its uid). No
    // NodeReady: like the kubelet's, a new Node's first Ready condition is
    // appended without an event; only a later change of it has one.
    let reasons = eventually(LIMIT, || async {
        let events = lab.events_of("default", &node.name).await;
        let reasons: Vec<String> = events.into_iter().filter_map(|e| e.reason).collect();
        (reasons.iter().any(|r| r == "Starting")
            && reasons.iter().any(|r| r == "NodeHasSufficientPID"))
        .then_some(reasons)
    })
    .await;
    let reasons = reasons.unwrap_or_else(|| {
        panic!(
            "no Starting and NodeHasSufficientPID events:\n{}",
            agent.logs()
        )
    });
    for want in ["NodeHasSufficientMemory", "NodeHasNoDiskPressure"] {
        assert!(reasons.iter().any(|r| r == want), "{want}: {reasons:?}");
    }
    assert!(!reasons.iter().any(|r| r == "NodeReady"), "{reasons:?}");

    // Images: the pod's busybox among them, largest first.
    let n = node_where(&lab, &node.name, "busybox in status.images", |n| {
        (n.status.as_ref().and_then(|s| s.images.as_ref())).is_some_and(|is| {
            is.iter()
                .flat_map(|i| i.names.iter().flatten())
                .any(|x| x.contains("busybox"))
        })
    })
    .await;
    let images = n.status.unwrap().images.unwrap();
    assert!(images.len() <= 50);
    let sizes: Vec<i64> = images.iter().map(|i| i.size_bytes.unwrap_or(0)).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    drop(agent);
}

/// A loop-mounted ext4 on `dir`, unmounted (and its image removed) on drop.
struct LoopFs {
    dir: std::path::PathBuf,
    image: tempfile::NamedTempFile,
}

impl LoopFs {
    fn mount(dir: &Path, mib: u64) -> LoopFs {
        let image = tempfile::NamedTempFile::new().unwrap();
        image.as_file().set_len(mib << 20).unwrap();
        let img = image.path().display();
        sh(&format!("mkfs.ext4 -q -F -m 0 {img}"));
        sh(&format!("mount -o loop {img} {}", dir.display()));
        LoopFs {
            dir: dir.to_owned(),
            image,
        }
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = &self.image;
    }
}

#[tokio::test]
#[ignore = "needs a runtime (CRILET_AGENT_TEST_ENDPOINT), the real API server and root (mount)"]
async fn disk_pressure_goes_true_on_a_full_root_dir_and_back_to_false() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-17").await;
    let mut args = node.kubeconfig_args();
    // Only the nodefs threshold: the runtime's image filesystem is the
    // machine's disk, which may be past imagefs.available<15% already.
    args.extend(
        [
            "--eviction-hard=nodefs.available<10%",
            "--eviction-pressure-transition-period=1s",
            "--stats-period=1s",
            "--node-status-update-frequency=1s",
        ]
        .map(String::from),
    );
    let mut agent = AgentProcess::prepare_on(&node.name, &args);
    let fs = LoopFs::mount(agent.root.path(), 64);
    agent.spawn();
    let n = node_where(&lab, &node.name, "DiskPressure False", |n| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "DiskPressure" && c.status == "False")
            })
    })
    .await;
    let fs_bytes = amount(&n, "capacity", "ephemeral-storage");
    assert!(
        fs_bytes < 64 * MI && fs_bytes > 32 * MI,
        "the loop fs: {fs_bytes}"
    );
    let calm_since = condition(&n, "DiskPressure").last_transition_time.clone();

    // Fill it to 5 % free: past nodefs.available<10%.
    let avail: i64 = sh(&format!(
        "set -- $(stat -f -c '%a %S' {}); echo $(($1 * $2))",
        fs.dir.display()
    ))
    .parse()
    .unwrap();
    let fill = fs.dir.join("fill");
    let keep = fs_bytes / 20;
    sh(&format!("fallocate -l {} {}", avail - keep, fill.display()));
    let n = node_where(&lab, &node.name, "DiskPressure True", |n| {
        condition(n, "DiskPressure").status == "True"
    })
    .await;
    let c = condition(&n, "DiskPressure");
    assert_eq!(c.reason.as_deref(), Some("KubeletHasDiskPressure"));
    let pressure_event = eventually(LIMIT, || async {
        let events = lab.events_of("default", &node.name).await;
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("NodeHasDiskPressure"))
    })
    .await;
    assert!(pressure_event.is_some(), "no NodeHasDiskPressure event");
    assert_eq!(c.message.as_deref(), Some("kubelet has disk pressure"));
    assert_ne!(c.last_transition_time, calm_since, "it moved");
    let pressed_since = c.last_transition_time.clone();
    // Memory and PIDs are not affected.
    assert_eq!(condition(&n, "MemoryPressure").status, "False");

    // Emptied: False again once the (1 s) transition period has passed.
    std::fs::remove_file(&fill).unwrap();
    let n = node_where(&lab, &node.name, "DiskPressure False again", |n| {
        condition(n, "DiskPressure").status == "False"
    })
    .await;
    let c = condition(&n, "DiskPressure");
    assert_eq!(c.reason.as_deref(), Some("KubeletHasNoDiskPressure"));
    assert_ne!(c.last_transition_time, pressed_since);
    agent.terminate();
    drop(fs);
}

/// Brings the agent tests' runtime back up when dropped, so a failed
/// assertion does not leave it down for the tests after.
struct RuntimeBackUp;

impl Drop for RuntimeBackUp {
    fn drop(&mut self) {
        agent_runtime_ctl("up");
    }
}

#[tokio::test]
#[ignore = "needs a runtime (CRILET_AGENT_TEST_ENDPOINT) and the real API server"]
async fn the_node_goes_not_ready_while_its_runtime_is_down_and_ready_again() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-16").await;
    let mut agent = start_on(&node, &["--node-status-update-frequency=1s".into()]);
    let n = node_where(&lab, &node.name, "Ready True", |n| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;
    let ready_since = condition(&n, "Ready").last_transition_time.clone();

    // The runtime's daemon stopped (its pods keep running): after the
    // kubelet's 30 s without an answer, NotReady, worded as the kubelet's.
    let back_up = RuntimeBackUp;
    agent_runtime_ctl("stop");
    let n = node_where(&lab, &node.name, "Ready False", |n| {
        condition(n, "Ready").status == "False"
    })
    .await;
    let c = condition(&n, "Ready");
    assert_eq!(c.reason.as_deref(), Some("KubeletNotReady"));
    assert_eq!(c.message.as_deref(), Some("container runtime is down"));
    assert_ne!(c.last_transition_time, ready_since, "it moved");
    let event = eventually(LIMIT, || async {
        let events = lab.events_of("default", &node.name).await;
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("NodeNotReady"))
    })
    .await;
    assert!(event.is_some(), "no NodeNotReady event");

    // Up again: Ready at the next pass.
    drop(back_up);
    let n = node_where(&lab, &node.name, "Ready True again", |n| {
        condition(n, "Ready").status == "True"
    })
    .await;
    let c = condition(&n, "Ready");
    assert_eq!(c.reason.as_deref(), Some("KubeletReady"));
    agent.terminate();
}
