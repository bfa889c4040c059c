//! The `Runtime` trait against real containerd: every RPC of our CRI subset.

use std::path::Path;
use std::time::Duration;

use crilet::cm::cgroup::{CGROUP_ROOT, pod_cgroup_dirs, remove_pod_cgroup};
use crilet::cri::*;
use crilet::kuberuntime::labels::{self, ContainerLabels, PodSandboxLabels};

use crate::support::*;

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn version_and_status() {
    let rt = runtime();
    let v = rt.version().await.unwrap();
    assert_eq!(v.runtime_name, runtime_kind().runtime_name());
    assert_eq!(v.runtime_api_version, "v1");
    assert!(!v.runtime_version.is_empty());
    let s = rt.status().await.unwrap();
    assert_eq!(s.condition(RUNTIME_READY), Some(true), "{s:?}");
    assert_eq!(s.condition(NETWORK_READY), Some(true), "{s:?}");
}

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn images_list_status_fs_info() {
    let rt = runtime();
    let images = rt.list_images().await.unwrap();
    for want in [BUSYBOX, PAUSE] {
        let img = images
            .iter()
            .find(|i| i.repo_tags.iter().any(|t| t == want))
            .unwrap_or_else(|| panic!("{want} not in {images:?}"));
        // The lab's images have the same IDs on every runtime; containerd
        // writes them with the algorithm, CRI-O without.
        let hex = bare_id(&img.id);
        assert_eq!(img.id, runtime_kind().image_id(hex), "{img:?}");
        assert!(img.size > 500_000, "{img:?}");
    }
    let bb = rt
        .image_status(BUSYBOX)
        .await
        .unwrap()
        .expect("busybox present");
    assert!(bb.repo_tags.iter().any(|t| t == BUSYBOX));
    // By ID too.
    let by_id = rt.image_status(&bb.id).await.unwrap().expect("by id");
    assert_eq!(by_id.id, bb.id);
    assert_eq!(
        rt.image_status("docker.io/library/nothing-here:0")
            .await
            .unwrap(),
        None
    );

    // containerd refreshes usage every stats_collect_period: a fresh one says 0.
    let first = eventually(Duration::from_secs(20), || async {
        let fs = rt.image_fs_info().await.unwrap();
        let first = fs
            .image_filesystems
            .into_iter()
            .next()
            .expect("one image filesystem");
        (first.used_bytes.unwrap_or(0) > 0).then_some(first)
    })
    .await
    .expect("ImageFsInfo used_bytes stays 0");
    assert!(Path::new(&first.mountpoint).is_dir(), "{first:?}");
    assert!(first.inodes_used.unwrap_or(0) > 0, "{first:?}");
}

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn pull_then_remove_an_image() {
    let rt = runtime();
    // Start from a runtime that does not have it (an earlier run may have left it).
    rt.remove_image(PULLTEST).await.unwrap();
    assert_eq!(rt.image_status(PULLTEST).await.unwrap(), None);

    let image_ref = rt.pull_image(PULLTEST, None, None).await.unwrap();
    let img = rt.image_status(PULLTEST).await.unwrap().expect("pulled");
    // PullImage answers the image ID on containerd, a repo digest on CRI-O.
    match runtime_kind() {
        RuntimeKind::Crio => {
            assert!(img.repo_digests.contains(&image_ref), "{image_ref} {img:?}")
        }
        _ => assert_eq!(img.id, image_ref),
    }
    let id = img.id.clone();
    assert!(rt.list_images().await.unwrap().iter().any(|i| i.id == id));

    rt.remove_image(PULLTEST).await.unwrap();
    assert_eq!(rt.image_status(PULLTEST).await.unwrap(), None);
    assert!(!rt.list_images().await.unwrap().iter().any(|i| i.id == id));
    // CRI: removing what is not there succeeds.
    rt.remove_image(PULLTEST).await.unwrap();
}

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn pull_of_an_unknown_image_names_it() {
    let rt = runtime();
    let err = rt
        .pull_image("127.0.0.1:5000/crilet/absent:1", None, None)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("PullImage"), "{text}");
    assert!(text.contains("crilet/absent"), "{text}");
}

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn host_network_pod_lifecycle() {
    pod_lifecycle(true).await;
}

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn pod_network_pod_lifecycle() {
    pod_lifecycle(false).await;
}

/// Runs a pod with one busybox container through every sandbox, container,
/// exec and stats call, then removes it and checks nothing is left.
async fn pod_lifecycle(host_network: bool) {
    let rt = runtime();
    let pod = PodFixture::new(
        if host_network { "hostnet" } else { "podnet" },
        host_network,
    );
    let uid = pod.labels.pod_uid.clone();
    let by_uid = Labels::from([(labels::POD_UID_LABEL.to_string(), uid.clone())]);

    // --- sandbox
    let sb = rt.run_pod_sandbox(&pod.config).await.unwrap();
    let status = rt.pod_sandbox_status(&sb).await.unwrap();
    assert_eq!(status.state, PodSandboxState::Ready);
    assert_eq!(status.metadata, pod.config.metadata);
    let expect_net = if host_network {
        NamespaceMode::Node
    } else {
        NamespaceMode::Pod
    };
    assert_eq!(status.namespace_options.network, expect_net);
    assert_eq!(status.namespace_options.pid, NamespaceMode::Container);
    if host_network {
        assert_eq!(status.ip, "", "host-network pods have no pod IP");
    } else {
        assert_in_pod_cidr(&status.ip);
    }
    assert_eq!(
        PodSandboxLabels::from_labels(&status.labels, &status.annotations).unwrap(),
        pod.labels
    );
    let listed = rt
        .list_pod_sandbox(&PodSandboxFilter {
            label_selector: by_uid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, sb);
    let ready_only = rt
        .list_pod_sandbox(&PodSandboxFilter {
            id: Some(sb.clone()),
            state: Some(PodSandboxState::Ready),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ready_only.len(), 1);
    assert!(
        !pod_cgroup_dirs(Path::new(CGROUP_ROOT), pod.cgroup_parent()).is_empty(),
        "cgroup_parent {} was not created",
        pod.cgroup_parent()
    );

    // --- container
    let (clabels, cconfig) = pod.container(
        "main",
        "echo hello-from-crilet; echo to-stderr >&2; exec sleep 3600",
    );
    let ctr = rt
        .create_container(&sb, &cconfig, &pod.config)
        .await
        .unwrap();
    let created = rt.container_status(&ctr).await.unwrap();
    assert_eq!(created.state, ContainerState::Created);
    rt.start_container(&ctr).await.unwrap();
    let st = rt.container_status(&ctr).await.unwrap();
    assert_eq!(st.state, ContainerState::Running);
    assert_eq!(st.metadata, cconfig.metadata);
    // containerd resolves the image to its ID, CRI-O to a repo digest.
    match runtime_kind() {
        RuntimeKind::Crio => assert!(st.image_ref.contains("@sha256:"), "{st:?}"),
        _ => assert!(st.image_ref.starts_with("sha256:"), "{st:?}"),
    }
    assert_eq!(st.log_path, pod.log_file("main").to_string_lossy());
    assert_eq!(
        ContainerLabels::from_labels(&st.labels, &st.annotations).unwrap(),
        clabels
    );
    let listed = rt
        .list_containers(&ContainerFilter {
            pod_sandbox_id: Some(sb.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, ctr);
    assert_eq!(listed[0].state, ContainerState::Running);
    assert_eq!(
        ContainerLabels::from_labels(&listed[0].labels, &listed[0].annotations).unwrap(),
        clabels
    );
    let running = rt
        .list_containers(&ContainerFilter {
            state: Some(ContainerState::Running),
            label_selector: by_uid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(running.len(), 1);

    // --- the relist's lists in brief read what the whole lists say
    let keys = crilet::kuberuntime::observe::RELIST_KEYS;
    let (sandboxes, containers) = rt.list_briefs(keys).await.unwrap();
    let ours = |label: &Option<String>| label.as_deref() == Some(uid.as_str());
    let sandboxes: Vec<_> = sandboxes.into_iter().filter(|s| ours(&s.label)).collect();
    let containers: Vec<_> = containers.into_iter().filter(|c| ours(&c.label)).collect();
    let whole = rt
        .list_pod_sandbox(&PodSandboxFilter::default())
        .await
        .unwrap();
    let whole: Vec<_> = (whole.iter().map(|s| SandboxBrief::of(s, keys)))
        .filter(|s| ours(&s.label))
        .collect();
    assert_eq!(sandboxes, whole);
    assert_eq!(sandboxes[0].id, sb);
    assert_eq!(sandboxes[0].state, PodSandboxState::Ready);
    assert_eq!(sandboxes[0].name, pod.config.metadata.name);
    assert_eq!(sandboxes[0].namespace, pod.config.metadata.namespace);
    let whole = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    let whole: Vec<_> = (whole.iter().map(|c| ContainerBrief::of(c, keys)))
        .filter(|c| ours(&c.label))
        .collect();
    assert_eq!(containers, whole);
    assert_eq!(
        (containers[0].id.as_str(), containers[0].state),
        (ctr.as_str(), ContainerState::Running)
    );

    // --- log file, in the CRI format "<RFC3339Nano> <stream> <P|F> <text>"
    let log_path = pod.log_file("main");
    let log = eventually(Duration::from_secs(10), || {
        let p = log_path.clone();
        async move {
            let text = std::fs::read_to_string(&p).ok()?;
            (text.contains("hello-from-crilet") && text.contains("to-stderr")).then_some(text)
        }
    })
    .await
    .unwrap_or_else(|| panic!("log {} never got the output", log_path.display()));
    let line = log
        .lines()
        .find(|l| l.contains("hello-from-crilet"))
        .unwrap();
    let fields: Vec<&str> = line.splitn(4, ' ').collect();
    assert_eq!(fields[1..], ["stdout", "F", "hello-from-crilet"], "{line}");
    assert!(
        log.lines().any(|l| l.contains(" stderr F to-stderr")),
        "{log}"
    );

    // --- exec
    let out = rt
        .exec_sync(
            &ctr,
            &[
                "sh".into(),
                "-c".into(),
                "echo $CRILET_TEST; hostname; exit 3".into(),
            ],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 3);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("1"), "{stdout}");
    let hostname = lines.next().unwrap_or_default();
    if host_network {
        let node = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(
            hostname,
            node.trim(),
            "host-network pods see the node's name"
        );
    } else {
        assert_eq!(hostname, pod.labels.pod_name);
    }

    // --- stats (containerd refreshes them in the background; allow a few tries)
    let cstats = eventually(Duration::from_secs(15), || async {
        let s = rt.container_stats(&ctr).await.ok()?;
        let ws = s.memory.as_ref()?.working_set_bytes?;
        (ws > 0).then_some(s)
    })
    .await
    .expect("container memory working set stays 0");
    assert_eq!(cstats.id, ctr);
    assert_eq!(cstats.metadata.name, "main");
    assert!(
        cstats
            .cpu
            .as_ref()
            .and_then(|c| c.usage_core_nano_seconds)
            .is_some()
    );
    let listed_stats = rt
        .list_container_stats(&ContainerStatsFilter {
            pod_sandbox_id: Some(sb.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed_stats.len(), 1, "{listed_stats:?}");
    assert_eq!(listed_stats[0].id, ctr);
    let by_label = rt
        .list_container_stats(&ContainerStatsFilter {
            label_selector: by_uid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_label.len(), 1);

    let pstats = rt.pod_sandbox_stats(&sb).await.unwrap();
    assert_eq!(pstats.id, sb);
    assert_eq!(pstats.metadata, pod.config.metadata);
    // CRI-O with the cgroupfs manager leaves pod-level CPU and memory null
    // (crilet's stats then sum the containers: see stats.rs).
    let pod_level = runtime_kind() != RuntimeKind::Crio;
    assert_eq!(pstats.cpu.is_some(), pod_level, "{pstats:?}");
    assert_eq!(pstats.memory.is_some(), pod_level, "{pstats:?}");
    assert!(
        pstats.containers.iter().any(|c| c.id == ctr),
        "sandbox stats lack the container: {pstats:?}"
    );
    let listed_pstats = rt
        .list_pod_sandbox_stats(&PodSandboxStatsFilter {
            id: Some(sb.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed_pstats.len(), 1);
    let by_label = rt
        .list_pod_sandbox_stats(&PodSandboxStatsFilter {
            label_selector: by_uid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_label.len(), 1);
    assert_eq!(by_label[0].id, sb);

    // --- stop and remove the container (sleep ignores nothing; 1 s grace)
    rt.stop_container(&ctr, Duration::from_secs(1))
        .await
        .unwrap();
    let st = rt.container_status(&ctr).await.unwrap();
    assert_eq!(st.state, ContainerState::Exited);
    assert!(
        st.finished_at >= st.started_at && st.finished_at > 0,
        "{st:?}"
    );
    assert_ne!(st.exit_code, 0, "a stopped sleep does not exit 0: {st:?}");
    rt.remove_container(&ctr).await.unwrap();
    assert!(rt.container_status(&ctr).await.unwrap_err().is_not_found());
    rt.remove_container(&ctr).await.unwrap(); // unknown id: OK, as CRI says

    // --- stop and remove the sandbox, then the cgroup the agent owns
    rt.stop_pod_sandbox(&sb).await.unwrap();
    let st = rt.pod_sandbox_status(&sb).await.unwrap();
    assert_eq!(st.state, PodSandboxState::NotReady);
    rt.remove_pod_sandbox(&sb).await.unwrap();
    assert!(rt.pod_sandbox_status(&sb).await.unwrap_err().is_not_found());
    rt.remove_pod_sandbox(&sb).await.unwrap();

    remove_pod_cgroup(Path::new(CGROUP_ROOT), pod.cgroup_parent()).unwrap();
    assert_nothing_left(&rt, &uid, pod.cgroup_parent()).await;
}

async fn assert_nothing_left(rt: &CriRuntime, uid: &str, cgroup_parent: &str) {
    let by_uid = Labels::from([(labels::POD_UID_LABEL.to_string(), uid.to_string())]);
    let sandboxes = rt
        .list_pod_sandbox(&PodSandboxFilter {
            label_selector: by_uid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(sandboxes.is_empty(), "sandboxes left: {sandboxes:?}");
    let containers = rt
        .list_containers(&ContainerFilter {
            label_selector: by_uid,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(containers.is_empty(), "containers left: {containers:?}");
    let dirs = pod_cgroup_dirs(Path::new(CGROUP_ROOT), cgroup_parent);
    assert!(dirs.is_empty(), "cgroup directories left: {dirs:?}");
}

#[tokio::test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
async fn runtime_errors_are_typed() {
    let rt = runtime();
    assert!(
        rt.container_status("no-such-container")
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        rt.pod_sandbox_status("no-such-sandbox")
            .await
            .unwrap_err()
            .is_not_found()
    );
    let err = rt.start_container("no-such-container").await.unwrap_err();
    assert!(err.to_string().contains("StartContainer"), "{err}");

    // A name is reserved per attempt: containerd refuses the same metadata
    // twice, CRI-O answers the sandbox it already has. Either way there is
    // one sandbox. A container of a missing image fails naming the image.
    let pod = PodFixture::new("reserved", true);
    let sb = rt.run_pod_sandbox(&pod.config).await.unwrap();
    let again = rt.run_pod_sandbox(&pod.config).await;
    match runtime_kind() {
        RuntimeKind::Crio => assert_eq!(again.as_ref().ok(), Some(&sb)),
        _ => assert!(
            again.is_err(),
            "second RunPodSandbox with the same attempt: {again:?}"
        ),
    }
    let (_, mut cfg) = pod.container("c", "true");
    cfg.image = "docker.io/library/not-imported:9".into();
    let err = rt
        .create_container(&sb, &cfg, &pod.config)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not-imported"), "{err}");
    rt.stop_pod_sandbox(&sb).await.unwrap();
    rt.remove_pod_sandbox(&sb).await.unwrap();
    remove_pod_cgroup(Path::new(CGROUP_ROOT), pod.cgroup_parent()).unwrap();
    assert_nothing_left(&rt, &pod.labels.pod_uid, pod.cgroup_parent()).await;
}

/// The pod IP lies in the harness's pod CIDR (CRILET_TEST_POD_CIDR, default
/// the harness default 10.88.0.0/16).
fn assert_in_pod_cidr(ip: &str) {
    let cidr = std::env::var("CRILET_TEST_POD_CIDR").unwrap_or_else(|_| "10.88.0.0/16".into());
    let (net, bits) = cidr.split_once('/').expect("CIDR a.b.c.d/n");
    let net: std::net::Ipv4Addr = net.parse().unwrap();
    let bits: u32 = bits.parse().unwrap();
    let addr: std::net::Ipv4Addr = ip.parse().unwrap_or_else(|_| panic!("pod IP {ip:?}"));
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    assert_eq!(
        u32::from(addr) & mask,
        u32::from(net) & mask,
        "pod IP {ip} outside {cidr}"
    );
}
