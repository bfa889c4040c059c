use super::*;
use crate::cri::types::{ContainerMetadata, NamespaceMode, PodSandboxMetadata};

const KUBELET_UID: &str = "0c5e1aa2b6b0c3f4d1e2f3a4b5c6d7e8";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn mount(container: &str, host: &str) -> Mount {
    Mount {
        container_path: container.into(),
        host_path: host.into(),
        ..Default::default()
    }
}

fn expected() -> ExpectedPod {
    let mut sandbox = PodSandboxConfig {
        labels: labels(&[("app", "etcd"), (POD_UID_LABEL, KUBELET_UID)]),
        annotations: labels(&[
            (CONFIG_HASH_ANNOTATION, KUBELET_UID),
            (CONFIG_SEEN_ANNOTATION, "2026-12-06T10:00:00.000000001Z"),
            ("kubernetes.io/config.source", "file"),
        ]),
        ..Default::default()
    };
    sandbox.security.namespace_options.network = NamespaceMode::Node;
    let container = ContainerConfig {
        metadata: ContainerMetadata {
            name: "etcd".into(),
            attempt: 0,
        },
        command: vec!["etcd".into()],
        args: vec!["--data-dir=/var/lib/etcd".into()],
        envs: vec![("A".into(), "1".into())],
        labels: labels(&[("io.kubernetes.container.name", "etcd")]),
        annotations: labels(&[
            ("io.kubernetes.container.hash", "85580d84"),
            (CONTAINER_RESTART_COUNT_ANNOTATION, "0"),
            (TERMINATION_MESSAGE_PATH_ANNOTATION, "/dev/termination-log"),
        ]),
        mounts: vec![
            mount("/var/lib/etcd", "/var/lib/etcd"),
            mount(
                "/dev/termination-log",
                "/var/lib/kubelet/pods/u/containers/etcd/0",
            ),
        ],
        ..Default::default()
    };
    ExpectedPod {
        sandbox,
        containers: vec![container],
    }
}

/// What the runtime reports for the kubelet's run of the same manifest.
fn found() -> FoundPod {
    let want = expected();
    let mut annotations = want.sandbox.annotations.clone();
    annotations.insert(CONFIG_SEEN_ANNOTATION.into(), "another time".into());
    let sandbox = PodSandboxStatus {
        id: "sandbox".into(),
        metadata: PodSandboxMetadata::default(),
        state: PodSandboxState::Ready,
        created_at: 1,
        ip: String::new(),
        additional_ips: vec![],
        namespace_options: want.sandbox.security.namespace_options.clone(),
        labels: want.sandbox.labels.clone(),
        annotations,
        runtime_handler: String::new(),
    };
    let c = &want.containers[0];
    let mut status = ContainerStatus {
        id: "c1".into(),
        metadata: c.metadata.clone(),
        state: ContainerState::Running,
        labels: c.labels.clone(),
        annotations: c.annotations.clone(),
        mounts: vec![
            mount(
                "/dev/termination-log",
                "/var/lib/kubelet/pods/u/containers/etcd/3bbfc86c",
            ),
            mount("/var/lib/etcd", "/var/lib/etcd"),
        ],
        ..Default::default()
    };
    status
        .labels
        .insert("io.cri-containerd.kind".into(), "container".into());
    status
        .annotations
        .insert(CONTAINER_RESTART_COUNT_ANNOTATION.into(), "2".into());
    let process = (
        vec!["etcd".into(), "--data-dir=/var/lib/etcd".into()],
        vec![
            "PATH=/bin".into(),
            "A=1".into(),
            "KUBERNETES_PORT=tcp://10.96.0.1:443".into(),
        ],
    );
    FoundPod {
        sandbox,
        containers: vec![FoundContainer {
            status,
            process: Some(process),
        }],
    }
}

#[test]
fn the_kubelets_run_of_the_same_manifest_is_kept() {
    assert_eq!(judge(&expected(), &found()), Verdict::Keep);
    // CRI-O's label on a sandbox, naming its infra container.
    let mut f = found();
    (f.sandbox.labels).insert("io.kubernetes.container.name".into(), "POD".into());
    assert_eq!(judge(&expected(), &f), Verdict::Keep);
    // Without the OCI process (a runtime that does not report it), too.
    let mut f = found();
    f.containers[0].process = None;
    assert_eq!(judge(&expected(), &f), Verdict::Keep);
}

#[test]
fn a_difference_replaces_the_pod_and_is_named() {
    type Edit = fn(&mut ExpectedPod, &mut FoundPod);
    let cases: [(Edit, &str); 10] = [
        (
            |_, f| f.sandbox.state = PodSandboxState::NotReady,
            "its sandbox is not ready",
        ),
        (
            |e, _| {
                e.sandbox.labels.insert("app".into(), "etcd2".into());
            },
            r#"sandbox label app: "etcd" on the node, "etcd2" in the manifest"#,
        ),
        (
            |e, _| {
                e.sandbox.annotations.insert("note".into(), "x".into());
            },
            r#"sandbox annotation note: absent on the node, "x" in the manifest"#,
        ),
        (
            |e, _| e.sandbox.security.namespace_options.network = NamespaceMode::Pod,
            "sandbox namespaces",
        ),
        (
            |e, _| e.containers[0].metadata.name = "other".into(),
            "container etcd is not in the manifest",
        ),
        (
            |e, _| {
                (e.containers[0].annotations)
                    .insert("io.kubernetes.container.hash".into(), "1".into());
            },
            r#"container etcd: annotation io.kubernetes.container.hash: "85580d84" on the node, "1" in the manifest"#,
        ),
        (
            |e, _| e.containers[0].mounts.push(mount("/data", "/srv")),
            r#"container etcd: mounts: on the node only [], in the manifest only [/data from "/srv"]"#,
        ),
        (
            |e, _| e.containers[0].envs[0].1 = "2".into(),
            r#"container etcd: env A: "1" on the node, "2" in the manifest"#,
        ),
        (
            |e, _| e.containers[0].envs.push(("B".into(), "x".into())),
            r#"container etcd: env B: absent on the node, "x" in the manifest"#,
        ),
        (
            |e, _| e.containers[0].args[0] = "--data-dir=/srv".into(),
            r#"container etcd: command: ["etcd", "--data-dir=/var/lib/etcd"] on the node, ["etcd", "--data-dir=/srv"] in the manifest"#,
        ),
    ];
    for (edit, want) in cases {
        let (mut e, mut f) = (expected(), found());
        edit(&mut e, &mut f);
        match judge(&e, &f) {
            Verdict::Replace(why) => assert!(why.starts_with(want), "{why}\nwanted {want}"),
            Verdict::Keep => panic!("kept, wanted {want}"),
        }
    }
}

#[test]
fn without_a_command_the_args_end_the_process() {
    let (mut e, mut f) = (expected(), found());
    e.containers[0].command.clear();
    f.containers[0].process.as_mut().unwrap().0 =
        vec!["/entrypoint.sh".into(), "--data-dir=/var/lib/etcd".into()];
    assert_eq!(judge(&e, &f), Verdict::Keep);
    e.containers[0].args.clear();
    assert_eq!(judge(&e, &f), Verdict::Keep, "the image's own cmd");
}

#[test]
fn the_newest_instance_of_a_container_is_judged_and_a_missing_one_is_no_difference() {
    let (e, mut f) = (expected(), found());
    let mut old = f.containers[0].clone();
    old.status.metadata.attempt = 0;
    old.status.state = ContainerState::Exited;
    (old.process.as_mut().unwrap().0)[0] = "old".into();
    f.containers[0].status.metadata.attempt = 1;
    f.containers.insert(0, old);
    assert_eq!(judge(&e, &f), Verdict::Keep);
    f.containers.clear();
    assert_eq!(judge(&e, &f), Verdict::Keep);
}

#[test]
fn only_the_kubelets_termination_files_say_the_kubelet_started_a_pod() {
    let mut f = found();
    assert!(started_by_kubelet(&f));
    for crilet in ["0", "12", "1234567"] {
        let m = &mut f.containers[0].status.mounts[0];
        m.host_path = format!("/var/lib/kubelet/pods/u/containers/etcd/{crilet}");
        assert!(!started_by_kubelet(&f), "{crilet}");
    }
    f.containers.clear();
    assert!(!started_by_kubelet(&f), "no container, no evidence");
}

#[test]
fn adopted_uids_rename_a_static_pod_while_its_manifest_is_unchanged() {
    let table = AdoptedUids(BTreeMap::from([("crilet".into(), KUBELET_UID.into())]));
    let mut pod = Pod::default();
    pod.metadata.uid = Some("crilet".into());
    pod.metadata.annotations = Some(BTreeMap::from([(
        CONFIG_HASH_ANNOTATION.into(),
        "crilet".into(),
    )]));
    assert!(table.apply(&mut pod));
    assert_eq!(pod.metadata.uid.as_deref(), Some(KUBELET_UID));
    assert_eq!(
        pod.metadata.annotations.as_ref().unwrap()[CONFIG_HASH_ANNOTATION],
        KUBELET_UID
    );
    let mut edited = Pod::default();
    edited.metadata.uid = Some("crilet-edited".into());
    assert!(!table.apply(&mut edited));
    assert_eq!(edited.metadata.uid.as_deref(), Some("crilet-edited"));
}
