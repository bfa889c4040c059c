//! The worker's host-file steps against the fake runtime and a temporary
//! root dir: hostPath checks before the sandbox, termination-message files
//! before each container and their messages in the status.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::cri::{ContainerFilter, DnsConfig, FakeRuntime};
use crate::pod::defaults::apply_api_defaults;
use crate::prober::clock::TokioClock;
use crate::prober::handlers::fake::FakeHandlers;
use k8s_openapi::api::core::v1::{ContainerState as K8sState, ContainerStateTerminated};

fn worker(rt: Arc<FakeRuntime>, root: &Path) -> Worker {
    worker_with(rt, root, Arc::new(FakeHandlers::new()))
}

/// A worker whose probes and hooks answer from `handlers`. Probes follow
/// tokio's clock (paused tests move them) and start without jitter.
pub(super) fn worker_with(
    rt: Arc<FakeRuntime>,
    root: &Path,
    handlers: Arc<FakeHandlers>,
) -> Worker {
    let (done, _) = mpsc::unbounded_channel();
    let started = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
    let ctx = test_context(rt, root, handlers, done, started);
    Worker::new(
        Arc::new(ctx),
        Arc::new(Notify::new()),
        CancellationToken::new(),
        CancellationToken::new(),
    )
}

/// The context every worker test runs in: the fake runtime, a node under
/// `root`, and probes and hooks answered by `handlers` on tokio's clock.
pub(crate) fn test_context(
    rt: Arc<FakeRuntime>,
    root: &Path,
    handlers: Arc<FakeHandlers>,
    done: mpsc::UnboundedSender<WorkerDone>,
    agent_started: jiff::Timestamp,
) -> WorkerContext {
    WorkerContext {
        runtime: rt,
        runtime_name: "fake".into(),
        node: NodeContext {
            node_name: "node-1".into(),
            root_dir: root.to_path_buf(),
            log_dirs: crate::logs::layout::LogDirs {
                pod_logs_dir: root.join("pod-logs"),
                container_logs_dir: root.join("containers"),
            },
            cgroup_root: "/".into(),
            cgroup_driver: crate::cri::CgroupDriver::Cgroupfs,
            host_dns: DnsConfig::default(),
            host_ip: "10.0.0.1".into(),
            memory_capacity: 1 << 30,
            oom_score_adj_floor: None,
            ..Default::default()
        },
        statuses: StatusCache::default(),
        status_changed: watch::channel(()).0,
        cgroup_fs: root.join("cgroup"),
        done,
        sandbox_stops: Default::default(),
        pod_starts: Default::default(),
        prober: Arc::new(ProberContext {
            runner: handlers.clone(),
            recorder: None,
            agent_started,
            node_ip: "10.0.0.1".into(),
            clock: Arc::new(TokioClock::new(jiff::Timestamp::now())),
            events: Arc::new(crate::events::recorder::NoopRecorder),
        }),
        hooks: handlers,
        image_pulls: Default::default(),
        events: Arc::new(crate::events::recorder::NoopRecorder),
        services: ServiceLister::standalone(),
        runtime_classes: crate::kubeapi::runtime_class::RuntimeClassLookup::standalone(),
    }
}

pub(super) fn pod(container: serde_json::Value, volumes: serde_json::Value) -> Pod {
    let mut c = serde_json::json!({"name": "app", "image": "busybox", "imagePullPolicy": "Never"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"restartPolicy": "Never", "containers": [c], "volumes": volumes}
    }))
    .unwrap();
    apply_api_defaults(&mut pod);
    pod
}

pub(super) fn fake() -> Arc<FakeRuntime> {
    let rt = Arc::new(FakeRuntime::new());
    rt.add_image("busybox", 1);
    rt
}

pub(super) async fn only_container(rt: &FakeRuntime) -> String {
    let list = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    list[0].id.clone()
}

pub(super) fn app_state(w: &Worker) -> K8sState {
    let status = w.previous.as_ref().unwrap();
    let app = &status.container_statuses.as_ref().unwrap()[0];
    app.state.clone().unwrap()
}

fn terminated(w: &Worker) -> ContainerStateTerminated {
    app_state(w).terminated.expect("terminated")
}

#[tokio::test]
async fn termination_message_file_is_made_mounted_and_read_once() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let pod = pod(serde_json::json!({}), serde_json::json!([]));

    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let id = only_container(&rt).await;
    let file = root.path().join("pods/u1/containers/app/0");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666);
    let status = rt.container_status(&id).await.unwrap();
    let mount = status
        .mounts
        .iter()
        .find(|m| m.container_path == "/dev/termination-log");
    assert_eq!(mount.map(|m| Path::new(&m.host_path)), Some(file.as_path()));
    assert!(!mount.unwrap().readonly);

    // The container writes its message and exits.
    std::fs::write(&file, "migrations failed").unwrap();
    rt.exit_container(&id, 1);
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(terminated(&w).message.as_deref(), Some("migrations failed"));
    // Read once: later changes to the file do not show.
    std::fs::write(&file, "something else").unwrap();
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(terminated(&w).message.as_deref(), Some("migrations failed"));
}

#[tokio::test]
async fn fallback_to_logs_on_error_reads_the_log_tail() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let policy = serde_json::json!({"terminationMessagePolicy": "FallbackToLogsOnError"});
    let pod = pod(policy, serde_json::json!([]));

    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let id = only_container(&rt).await;
    // The fake reports the mapping's relative log path, under the pod's log dir.
    let log = root.path().join("pod-logs/default_web_u1/app/0.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(
        &log,
        "2024-05-01T10:00:00.1Z stdout F starting\n\
         2024-05-01T10:00:00.2Z stderr P fatal: \n\
         2024-05-01T10:00:00.3Z stderr F no config\n",
    )
    .unwrap();
    rt.exit_container(&id, 2);
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(
        terminated(&w).message.as_deref(),
        Some("starting\nfatal: no config\n")
    );
}

#[tokio::test]
async fn failed_host_path_check_keeps_the_pod_pending_until_it_passes() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let conf = root.path().join("etc/kubernetes/scheduler.conf");
    let volumes = serde_json::json!([{
        "name": "kubeconfig",
        "hostPath": {"path": conf, "type": "FileOrCreate"}
    }]);
    let mount = serde_json::json!({"volumeMounts": [{"name": "kubeconfig", "mountPath": "/etc/kubernetes/scheduler.conf", "readOnly": true}]});
    let pod = pod(mount, volumes);

    let err = w.sync(&Arc::new(pod.clone())).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("MountVolume.SetUp failed for volume \"kubeconfig\""),
        "{err}"
    );
    assert!(
        !rt.ops().contains(&"RunPodSandbox"),
        "no sandbox before the volumes"
    );
    let status = w.previous.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let waiting = app_state(&w).waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    let message = waiting.message.unwrap();
    assert!(
        message.contains(&format!("open {}", conf.display())),
        "{message}"
    );

    // The parent appears (kubeadm wrote /etc/kubernetes): the retry passes,
    // makes the file, and the message goes.
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert!(conf.is_file());
    assert!(rt.ops().contains(&"RunPodSandbox"));
    assert!(app_state(&w).running.is_some());
}

#[test]
fn remove_dirs_takes_the_pod_dir_even_without_a_spec_and_nothing_wider() {
    let root = tempfile::tempdir().unwrap();
    let node = worker(fake(), root.path()).ctx.node.clone();
    let made = |rel: &str| {
        let dir = root.path().join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    let orphan = made("pods/u1/containers/app");
    let other = made("pods/u2/containers/app");
    let logs = made("pod-logs/default_web_u2/app");
    // An orphan (no spec): its pod dir goes, termination files with it.
    stop::remove_dirs(&node, "u1", None);
    assert!(!orphan.parent().unwrap().parent().unwrap().exists());
    assert!(other.exists());
    // UIDs that are not one plain name remove nothing.
    for uid in ["", ".", "..", "u2/..", "/"] {
        stop::remove_dirs(&node, uid, None);
        assert!(other.exists(), "{uid:?}");
    }
    // With the spec, the logs go too, also those in the old place, and
    // the old place itself once empty.
    let old = made("logs/default_web_u2/app");
    let older = made("logs/default_other_u3/app");
    let mut web = pod(serde_json::json!({}), serde_json::json!([]));
    web.metadata.uid = Some("u2".into());
    stop::remove_dirs(&node, "u2", Some(&web));
    assert!(!root.path().join("pods/u2").exists());
    assert!(!logs.parent().unwrap().exists());
    assert!(!old.parent().unwrap().exists());
    assert!(older.exists(), "another pod's");
    assert!(root.path().join("pods").exists());
    assert!(root.path().join("pod-logs").exists());
    std::fs::remove_dir_all(older.parent().unwrap()).unwrap();
    stop::remove_dirs(&node, "u2", Some(&web));
    assert!(!root.path().join("logs").exists(), "the old place, empty");
}

#[tokio::test]
async fn the_container_log_directory_is_made_before_the_container() {
    // CRI-O does not make it; containerd does.
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let pod = pod(serde_json::json!({}), serde_json::json!([]));
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let id = only_container(&rt).await;
    let status = rt.container_status(&id).await.unwrap();
    assert_eq!(status.log_path, "app/0.log");
    assert!(root.path().join("pod-logs/default_web_u1/app").is_dir());
}

#[tokio::test]
async fn terminating_without_the_spec_removes_each_containers_log_files() {
    // A pod removed while crilet was down: no spec, so no log directory
    // to remove; the container's log and its rotated files go with it.
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    w.sync(&Arc::new(pod(serde_json::json!({}), serde_json::json!([]))))
        .await
        .unwrap();
    let dir = root.path().join("pod-logs/default_web_u1/app");
    for f in [
        "0.log",
        "0.log.20260101-120000.gz",
        "0.log.20260101-120001",
        "1.log",
    ] {
        std::fs::write(dir.join(f), "x").unwrap();
    }
    w.terminate("u1", "web_default", None).await.unwrap();
    assert!(
        rt.list_containers(&ContainerFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        left,
        ["1.log"],
        "another attempt's log is not this container's"
    );
}

/// The log of web's first `app` container, as the runtime writes it (the
/// fake does not; there before the start), and the container logs directory.
fn first_log_and_link_dir(root: &Path) -> PathBuf {
    let log = root.join("pod-logs/default_web_u1/app/0.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "").unwrap();
    std::fs::create_dir_all(root.join("containers")).unwrap();
    log
}

/// The container logs directory's link of web's `app` container `id`.
fn app_link(root: &Path, id: &str) -> PathBuf {
    root.join(format!("containers/web_default_app-{id}.log"))
}

#[tokio::test]
async fn a_started_container_is_linked_and_the_link_goes_with_it() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let log = first_log_and_link_dir(root.path());
    w.sync(&Arc::new(pod(serde_json::json!({}), serde_json::json!([]))))
        .await
        .unwrap();
    let id = only_container(&rt).await;
    let link = app_link(root.path(), &id);
    assert_eq!(std::fs::read_link(&link).unwrap(), log);
    w.terminate("u1", "web_default", None).await.unwrap();
    assert!(std::fs::symlink_metadata(&link).is_err(), "the link went");
    // A link that cannot be made (its directory is gone) does not keep the
    // container from running.
    std::fs::remove_dir(root.path().join("containers")).unwrap();
    let mut w = worker(rt.clone(), root.path());
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "").unwrap();
    w.sync(&Arc::new(pod(serde_json::json!({}), serde_json::json!([]))))
        .await
        .unwrap();
    assert!(app_state(&w).running.is_some());
}

#[tokio::test]
async fn containers_are_created_from_the_image_id() {
    // The kubelet runs the image ImageStatus resolved, so a tag moved
    // later does not change what a restart runs.
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let pod = pod(serde_json::json!({}), serde_json::json!([]));
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let list = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].image, "sha256:busybox");
    assert_eq!(list[0].image_ref, "sha256:busybox");
}

#[tokio::test]
async fn an_app_container_that_cannot_be_created_holds_back_none_of_the_others() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let mut pod = pod(serde_json::json!({"name": "first"}), serde_json::json!([]));
    let mut second = pod.spec.as_ref().unwrap().containers[0].clone();
    second.name = "second".into();
    pod.spec.as_mut().unwrap().containers.push(second);
    rt.fail_next(
        "CreateContainer",
        tonic::Status::unknown("error gathering device information"),
    );

    // The pass reports the failure, and still starts the other container.
    assert!(w.sync(&Arc::new(pod.clone())).await.is_err());
    let list = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    let names: Vec<&str> = list.iter().map(|c| c.metadata.name.as_str()).collect();
    assert_eq!(names, ["second"]);
}

#[tokio::test]
async fn the_sandbox_runs_with_the_runtime_class_handler_and_a_missing_class_holds_it_back() {
    use crate::kubeapi::fake::FakeMirrorClient;
    use crate::kubeapi::runtime_class::RuntimeClassLookup;
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let api = Arc::new(FakeMirrorClient::new());
    api.add_runtime_class("sandboxed", "runc-restrict-oom");
    let (done, _) = mpsc::unbounded_channel();
    let handlers = Arc::new(FakeHandlers::new());
    let mut ctx = test_context(
        rt.clone(),
        root.path(),
        handlers,
        done,
        jiff::Timestamp::now(),
    );
    ctx.runtime_classes = RuntimeClassLookup::new(api.clone());
    let ctx = Arc::new(ctx);
    let new_worker = || {
        let (n, c) = (Arc::new(Notify::new()), CancellationToken::new());
        Worker::new(ctx.clone(), n, c, CancellationToken::new())
    };

    let mut missing = pod(serde_json::json!({}), serde_json::json!([]));
    missing.spec.as_mut().unwrap().runtime_class_name = Some("parity-missing".into());
    let err = new_worker()
        .sync(&Arc::new(missing.clone()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("runtimeclass.node.k8s.io \"parity-missing\" not found"),
        "{err}"
    );
    let sandboxes = rt.list_pod_sandbox(&Default::default()).await.unwrap();
    assert!(sandboxes.is_empty(), "{sandboxes:?}");

    let mut classed = missing.clone();
    classed.spec.as_mut().unwrap().runtime_class_name = Some("sandboxed".into());
    new_worker().sync(&Arc::new(classed.clone())).await.unwrap();
    let sandboxes = rt.list_pod_sandbox(&Default::default()).await.unwrap();
    let handlers: Vec<&str> = sandboxes
        .iter()
        .map(|s| s.runtime_handler.as_str())
        .collect();
    assert_eq!(handlers, ["runc-restrict-oom"]);
}

#[tokio::test]
async fn an_old_sandbox_goes_with_its_containers_logs_and_links() {
    // The soak found links left behind: a pod that lives on (same UID)
    // got a new sandbox, and the old one was removed with its containers
    // but not their logs, so their links never went dead.
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let log = first_log_and_link_dir(root.path());
    let spec = || {
        let mut p = pod(serde_json::json!({}), serde_json::json!([]));
        p.spec.as_mut().unwrap().restart_policy = Some("Always".into());
        p
    };
    w.sync(&Arc::new(spec())).await.unwrap();
    let old = only_container(&rt).await;
    let link = app_link(root.path(), &old);
    assert!(std::fs::symlink_metadata(&link).is_ok(), "linked");
    let sandboxes = rt
        .list_pod_sandbox(&crate::cri::PodSandboxFilter::default())
        .await
        .unwrap();
    rt.stop_pod_sandbox(&sandboxes[0].id).await.unwrap();
    rt.exit_container(&old, 0);
    // A new sandbox, then the old one removed.
    w.sync(&Arc::new(spec())).await.unwrap();
    w.sync(&Arc::new(spec())).await.unwrap();
    let left = rt
        .list_pod_sandbox(&crate::cri::PodSandboxFilter::default())
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "{left:?} {:?}", rt.ops());
    assert_ne!(left[0].id, sandboxes[0].id, "{:?}", rt.ops());
    let containers = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    assert!(containers.iter().all(|c| c.id != old), "{containers:?}");
    assert!(
        std::fs::symlink_metadata(&link).is_err(),
        "the old link went"
    );
    assert!(!log.exists(), "the old container's log went");
}

/// The size of a future returned by a four-argument async fn.
fn future_size<A, B, C, D, F: std::future::Future>(_: impl Fn(A, B, C, D) -> F) -> usize {
    std::mem::size_of::<F>()
}

#[test]
fn a_waiting_worker_does_not_hold_a_sync_in_its_task() {
    // A pod worker waits between syncs for as long as its pod lives; its
    // sync and termination are boxed while they run, so the task is not
    // sized by their awaits (8.8 KiB before, about 2.2 KiB now).
    let size = future_size(Worker::run);
    assert!(size <= 3072, "a pod worker's future is {size} bytes");
}
