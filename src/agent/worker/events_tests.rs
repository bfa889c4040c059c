//! The events a pod worker records, against the fake runtime: what a
//! crash-looping container, a pull and a failing pull leave in a recording
//! [`FakeRecorder`], on which object and with which messages.

use super::tests::{fake, only_container, pod};
use super::*;
use crate::cri::FakeRuntime;
use crate::events::recorder::{EventType, FakeRecorder};
use crate::prober::handlers::fake::FakeHandlers;

/// A worker recording into the returned fake.
fn worker(rt: Arc<FakeRuntime>, root: &std::path::Path) -> (Worker, Arc<FakeRecorder>) {
    worker_with(rt, root, Arc::new(FakeHandlers::new()))
}

/// [`worker`] with hooks and probes answered by `handlers`.
fn worker_with(
    rt: Arc<FakeRuntime>,
    root: &std::path::Path,
    handlers: Arc<FakeHandlers>,
) -> (Worker, Arc<FakeRecorder>) {
    let events = Arc::new(FakeRecorder::new());
    let (done, _) = mpsc::unbounded_channel();
    let started = jiff::Timestamp::now();
    let mut ctx = super::tests::test_context(rt, root, handlers, done, started);
    ctx.events = events.clone();
    let w = Worker::new(
        Arc::new(ctx),
        Arc::new(Notify::new()),
        CancellationToken::new(),
        CancellationToken::new(),
    );
    (w, events)
}

fn crash_looping() -> Pod {
    let policy = serde_json::json!({"imagePullPolicy": "IfNotPresent"});
    let mut p = pod(policy, serde_json::json!([]));
    p.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    p
}

/// (type, reason, message) of everything recorded, and every object must
/// be container `app` of pod web/u1; the MissingClusterDNS pair each new
/// sandbox of this ClusterFirst pod records is left out (its own test is
/// below).
fn recorded(events: &FakeRecorder) -> Vec<(EventType, &'static str, String)> {
    let mut all = events.events();
    all.retain(|(_, e)| e.reason != "MissingClusterDNS");
    for (object, _) in &all {
        let at = (
            object.kind.as_str(),
            object.name.as_str(),
            object.uid.as_str(),
        );
        assert_eq!(at, ("Pod", "web", "u1"));
        assert_eq!(object.field_path, "spec.containers{app}");
    }
    all.into_iter()
        .map(|(_, e)| (e.type_, e.reason, e.message))
        .collect()
}

#[tokio::test]
async fn a_crash_looping_container_records_starts_then_back_off() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let (mut w, events) = worker(rt.clone(), root.path());
    let pod = crash_looping();

    w.sync(&Arc::new(pod.clone())).await.unwrap();
    // It exits: the first restart is at once, the next waits (10 s).
    for _ in 0..2 {
        rt.set_now(now_nanos());
        rt.exit_container(&only_running(&rt).await, 1);
        w.sync(&Arc::new(pod.clone())).await.unwrap();
    }
    w.sync(&Arc::new(pod.clone())).await.unwrap(); // still in back-off

    let present = r#"Container image "busybox" already present on machine"#;
    let start = [
        (EventType::Normal, "Pulled", present.to_string()),
        (
            EventType::Normal,
            "Created",
            "Created container: app".into(),
        ),
        (EventType::Normal, "Started", "Started container app".into()),
    ];
    let back_off = (
        EventType::Warning,
        "BackOff",
        "Back-off restarting failed container app in pod web_default(u1)".to_string(),
    );
    let mut want = [start.clone(), start].concat();
    want.extend([back_off.clone(), back_off]);
    assert_eq!(recorded(&events), want);
}

/// The running container of the pod (the latest instance).
async fn only_running(rt: &FakeRuntime) -> String {
    let running = crate::cri::ContainerFilter {
        state: Some(ContainerState::Running),
        ..Default::default()
    };
    let list = rt.list_containers(&running).await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    list[0].id.clone()
}

#[tokio::test]
async fn a_pull_records_pulling_then_pulled_with_the_size() {
    let root = tempfile::tempdir().unwrap();
    let rt = Arc::new(FakeRuntime::new()); // no image yet
    let (mut w, events) = worker(rt.clone(), root.path());
    w.sync(&Arc::new(crash_looping())).await.unwrap();
    only_container(&rt).await;
    let got = recorded(&events);
    let reasons: Vec<_> = got.iter().map(|(_, r, _)| *r).collect();
    assert_eq!(reasons, ["Pulling", "Pulled", "Created", "Started"]);
    assert_eq!(got[0].2, r#"Pulling image "busybox""#);
    let pulled = &got[1].2;
    assert!(
        pulled.starts_with(r#"Successfully pulled image "busybox" in "#)
            && pulled.ends_with(" including waiting). Image size: 1048576 bytes."),
        "{pulled}"
    );
}

#[tokio::test]
async fn a_failed_pull_records_the_error_then_the_back_off() {
    let root = tempfile::tempdir().unwrap();
    let rt = Arc::new(FakeRuntime::new());
    let (mut w, events) = worker(rt.clone(), root.path());
    let pod = crash_looping();
    rt.fail_next("PullImage", tonic::Status::not_found("manifest unknown"));
    assert!(w.sync(&Arc::new(pod.clone())).await.is_err());
    assert!(w.sync(&Arc::new(pod.clone())).await.is_err()); // within the pull back-off
    let got = recorded(&events);
    let seen: Vec<_> = got.iter().map(|(t, r, m)| (*t, *r, m.as_str())).collect();
    let failed_pull = &got[1].2;
    assert!(
        failed_pull.starts_with(r#"Failed to pull image "busybox": "#)
            && failed_pull.contains("manifest unknown"),
        "{failed_pull}"
    );
    let want = [
        (EventType::Normal, "Pulling", r#"Pulling image "busybox""#),
        (EventType::Warning, "Failed", failed_pull.as_str()),
        (EventType::Warning, "Failed", "Error: ErrImagePull"),
        (
            EventType::Normal,
            "BackOff",
            r#"Back-off pulling image "busybox""#,
        ),
        (EventType::Warning, "Failed", "Error: ImagePullBackOff"),
    ];
    assert_eq!(seen, want);
}

#[tokio::test]
async fn stopping_a_running_container_records_killing() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let (mut w, events) = worker(rt.clone(), root.path());
    let pod = crash_looping();
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    w.terminate("u1", "web_default", Some(&pod)).await.unwrap();
    let got = recorded(&events);
    let last = got.last().unwrap();
    assert_eq!(
        (last.0, last.1, last.2.as_str()),
        (EventType::Normal, "Killing", "Stopping container app")
    );
}

#[tokio::test(start_paused = true)]
async fn failed_hooks_record_their_reasons_without_their_errors() {
    let root = tempfile::tempdir().unwrap();
    let handlers = Arc::new(FakeHandlers::new());
    handlers.push_hook(Err("post: exit 1 (secret=hunter2)".into()));
    handlers.push_hook(Err("pre: exit 1".into()));
    let lifecycle = serde_json::json!({"lifecycle": {
        "postStart": {"exec": {"command": ["post"]}},
        "preStop": {"exec": {"command": ["pre"]}},
    }});
    let (mut w, events) = worker_with(fake(), root.path(), handlers);
    w.sync(&Arc::new(pod(lifecycle, serde_json::json!([]))))
        .await
        .unwrap();
    let got = recorded(&events);
    let seen: Vec<_> = got.iter().map(|(t, r, m)| (*t, *r, m.as_str())).collect();
    let present = r#"Container image "busybox" already present on machine"#;
    let want = [
        (EventType::Normal, "Pulled", present),
        (EventType::Normal, "Created", "Created container: app"),
        (EventType::Normal, "Started", "Started container app"),
        (
            EventType::Warning,
            "FailedPostStartHook",
            "PostStartHook failed",
        ),
        (EventType::Normal, "Killing", "FailedPostStartHook"),
        (
            EventType::Warning,
            "FailedPreStopHook",
            "PreStopHook failed",
        ),
    ];
    assert_eq!(seen, want);
}

#[tokio::test]
async fn a_failed_mount_and_a_failed_sandbox_are_recorded_on_the_pod() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let (mut w, events) = worker(rt.clone(), root.path());
    let missing = root.path().join("no/such/dir");
    let volumes = serde_json::json!([{
        "name": "data",
        "hostPath": {"path": missing, "type": "Directory"}
    }]);
    let mount = serde_json::json!({"volumeMounts": [{"name": "data", "mountPath": "/data"}]});
    assert!(w.sync(&Arc::new(pod(mount, volumes))).await.is_err());
    let plain = pod(serde_json::json!({}), serde_json::json!([]));
    rt.fail_next(
        "RunPodSandbox",
        tonic::Status::unknown("cni plugin not initialized"),
    );
    assert!(w.sync(&Arc::new(plain.clone())).await.is_err());
    let mut got = events.events();
    got.retain(|(_, e)| e.reason != "MissingClusterDNS");
    assert_eq!(got.len(), 2, "{got:#?}");
    for (object, _) in &got {
        assert_eq!((object.name.as_str(), object.uid.as_str()), ("web", "u1"));
        assert_eq!(object.field_path, "", "on the pod, not a container");
    }
    let (mount, sandbox) = (&got[0].1, &got[1].1);
    assert_eq!(
        (mount.type_, mount.reason),
        (EventType::Warning, "FailedMount")
    );
    assert!(
        mount
            .message
            .starts_with(r#"MountVolume.SetUp failed for volume "data""#),
        "{}",
        mount.message
    );
    assert_eq!(sandbox.reason, "FailedCreatePodSandBox");
    assert!(
        sandbox
            .message
            .starts_with("Failed to create pod sandbox: ")
            && sandbox.message.contains("cni plugin not initialized"),
        "{}",
        sandbox.message
    );
}

#[tokio::test]
async fn a_cluster_first_pod_records_missing_cluster_dns_on_the_node_and_the_pod() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let (mut w, events) = worker(rt.clone(), root.path());
    w.sync(&Arc::new(crash_looping())).await.unwrap();
    let dns: Vec<_> = (events.events().into_iter())
        .filter(|(_, e)| e.reason == "MissingClusterDNS")
        .map(|(o, e)| (o.kind, o.name, o.field_path, e.type_, e.message))
        .collect();
    let node_message = "kubelet does not have ClusterDNS IP configured and cannot create Pod \
                        using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
    assert_eq!(
        dns,
        [
            (
                "Node".into(),
                w.ctx.node.node_name.clone(),
                String::new(),
                EventType::Warning,
                node_message.to_string()
            ),
            (
                "Pod".into(),
                "web".into(),
                String::new(),
                EventType::Warning,
                format!("pod: \"web_default(u1)\". {node_message}")
            ),
        ]
    );

    // A host-network ClusterFirst pod, or dnsPolicy Default, records none.
    for (host_network, policy) in [(true, "ClusterFirst"), (false, "Default")] {
        let rt = fake();
        let (mut w, events) = worker(rt.clone(), root.path());
        let mut pod = crash_looping();
        let spec = pod.spec.as_mut().unwrap();
        spec.host_network = Some(host_network);
        spec.dns_policy = Some(policy.into());
        w.sync(&Arc::new(pod.clone())).await.unwrap();
        assert!(
            !events
                .events()
                .iter()
                .any(|(_, e)| e.reason == "MissingClusterDNS")
        );
    }
}
