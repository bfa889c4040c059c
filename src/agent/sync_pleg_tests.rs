//! The sync loop's PLEG against the fake runtime, in paused time: an event
//! wakes its pod's worker at once; without events (Unimplemented) crilet
//! relists every second and says so once; a broken stream falls back,
//! resubscribes with back-off and relists at once; a missed event is found
//! by the safety-net relist and logged; a burst loses nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::super::RESYNC_PERIOD;
use super::super::worker::tests::test_context;
use super::*;
use crate::config::file::{FILE_SOURCE_NAME, SourceSet};
use crate::config::merge::{PodConfig, SourcePod};
use crate::cri::{Container, ContainerFilter, ContainerState, FakeRuntime, Runtime};
use crate::pleg::container_events;
use crate::pleg::decisions::{EVENTED_RELIST_PERIOD, MISSED_EVENT_GRACE};
use crate::pod::Pod;
use crate::pod::view::AgentView;
use crate::prober::handlers::fake::FakeHandlers;
use crate::units::test_logs::Logs;

struct Harness {
    rt: Arc<FakeRuntime>,
    logs: Logs,
    _log_guard: tracing::subscriber::DefaultGuard,
    _root: tempfile::TempDir,
    sets: mpsc::Sender<SourceSet>,
    cancel: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn pod() -> Pod {
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"restartPolicy": "Always", "containers": [
            {"name": "app", "image": "busybox", "imagePullPolicy": "Never"}
        ]}
    }))
    .unwrap();
    crate::pod::defaults::apply_api_defaults(&mut pod);
    pod
}

/// A sync loop over `rt` running one pod (restartPolicy Always), with
/// container events when `events`.
async fn start(rt: Arc<FakeRuntime>, events: bool) -> Harness {
    start_with(rt, events, pod()).await
}

/// [`start`] with another pod.
async fn start_with(rt: Arc<FakeRuntime>, events: bool, pod: Pod) -> Harness {
    start_in(rt, events, pod, tempfile::tempdir().unwrap()).await
}

/// [`start_with`] on the root directory `root`.
async fn start_in(
    rt: Arc<FakeRuntime>,
    events: bool,
    pod: Pod,
    root: tempfile::TempDir,
) -> Harness {
    let (logs, log_guard) = Logs::capture("info");
    rt.add_image("busybox", 1);
    let handlers = Arc::new(FakeHandlers::new());
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(test_context(
        rt.clone(),
        root.path(),
        handlers,
        done_tx,
        jiff::Timestamp::now(),
    ));
    let cancel = CancellationToken::new();
    let events =
        events.then(|| container_events::spawn(rt.clone(), Default::default(), cancel.clone()));
    let (view_tx, _) = watch::channel(Arc::new(AgentView::default()));
    let sync = SyncLoop::new(
        PodConfig::new([FILE_SOURCE_NAME]),
        ctx,
        events,
        cancel.clone(),
        view_tx,
    );
    let (sets_tx, sets_rx) = mpsc::channel(4);
    let (_, mirrors_rx) = mpsc::channel(1);
    tokio::spawn(sync.run(sets_rx, done_rx, mirrors_rx));
    let set = SourceSet {
        source: FILE_SOURCE_NAME,
        pods: vec![SourcePod::new("web.yaml", pod)],
    };
    sets_tx.send(set).await.unwrap();
    Harness {
        rt,
        logs,
        _log_guard: log_guard,
        _root: root,
        sets: sets_tx,
        cancel,
    }
}

impl Harness {
    async fn containers(&self) -> Vec<Container> {
        let mut list = self
            .rt
            .list_containers(&ContainerFilter::default())
            .await
            .unwrap();
        list.sort_by_key(|c| c.metadata.attempt);
        list
    }

    /// The running container's id and attempt.
    async fn running(&self) -> Option<(String, u32)> {
        (self.containers().await.into_iter())
            .find(|c| c.state == ContainerState::Running)
            .map(|c| (c.id, c.metadata.attempt))
    }

    /// Unfiltered ListPodSandbox calls so far: the relists.
    fn relists(&self) -> usize {
        (self.rt.calls().iter())
            .filter(|c| c.op == "ListPodSandbox" && c.arg.is_empty())
            .count()
    }

    fn subscribe_calls(&self) -> usize {
        (self.rt.ops().into_iter())
            .filter(|op| *op == "GetContainerEvents")
            .count()
    }
}

/// Lets every task run, moving the paused clock by `d`.
async fn run_for(d: Duration) {
    tokio::time::sleep(d).await;
}

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn an_event_wakes_the_pods_worker_at_once() {
    let rt = Arc::new(FakeRuntime::new());
    rt.serve_container_events();
    let h = start(rt, true).await;
    run_for(S).await;
    let (id, attempt) = h.running().await.expect("the pod runs");
    assert_eq!(attempt, 0);
    assert_eq!(
        h.logs
            .count("subscribed to the runtime's container events; relisting now"),
        1,
        "{}",
        h.logs.text()
    );
    let relists = h.relists();

    h.rt.exit_container(&id, 1);
    run_for(10 * MS).await;
    let (_, attempt) = h.running().await.expect("restarted by the event");
    assert_eq!(attempt, 1);
    assert_eq!(h.relists(), relists, "no relist was needed");

    // While events flow the relist is a safety net, not a poll.
    run_for(EVENTED_RELIST_PERIOD - 10 * S).await;
    assert_eq!(h.relists(), relists);
    run_for(20 * S).await;
    assert_eq!(h.relists(), relists + 1);
    assert!(!h.logs.text().contains("missed"), "{}", h.logs.text());
}

#[tokio::test(start_paused = true)]
async fn without_events_crilet_relists_every_second_and_says_so_once() {
    // The fake answers Unimplemented, as containerd 1.6.
    let h = start(Arc::new(FakeRuntime::new()), true).await;
    run_for(1500 * MS).await;
    let (id, _) = h.running().await.expect("the pod runs");
    let fallback = "the runtime does not serve GetContainerEvents; crilet falls back to relist";
    assert_eq!(h.logs.count(fallback), 1, "{}", h.logs.text());

    // An exit waits for the next relist (within a second).
    h.rt.exit_container(&id, 1);
    run_for(10 * MS).await;
    assert_eq!(h.running().await, None, "no event, no relist yet");
    run_for(S).await;
    assert_eq!(h.running().await.map(|r| r.1), Some(1));

    let relists = h.relists();
    run_for(10 * S).await;
    assert!(
        (9..=11).contains(&(h.relists() - relists)),
        "relists every second"
    );
    // The runtime is asked again every 5 minutes; nothing more is said.
    run_for(11 * 60 * S).await;
    assert_eq!(h.subscribe_calls(), 3);
    assert_eq!(h.logs.count(fallback), 1, "{}", h.logs.text());
}

#[tokio::test(start_paused = true)]
async fn events_off_relist_every_second_and_never_subscribe() {
    let rt = Arc::new(FakeRuntime::new());
    rt.serve_container_events();
    let h = start(rt, false).await;
    run_for(10500 * MS).await;
    assert!((10..=12).contains(&h.relists()), "{}", h.relists());
    assert_eq!(h.subscribe_calls(), 0);
    assert_eq!(
        h.logs
            .count("not following the runtime's container events: relisting the runtime"),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn a_broken_stream_falls_back_then_resubscribes_and_relists_at_once() {
    let rt = Arc::new(FakeRuntime::new());
    rt.serve_container_events();
    let h = start(rt, true).await;
    run_for(S).await;
    let (id, _) = h.running().await.expect("the pod runs");

    // The runtime restarts: the stream breaks and the next two attempts
    // find it still down.
    let down = || tonic::Status::unavailable("connection refused");
    h.rt.fail_next("GetContainerEvents", down());
    h.rt.fail_next("GetContainerEvents", down());
    let before = h.relists();
    let broken_at = tokio::time::Instant::now();
    h.rt.break_container_events(tonic::Status::unavailable("connection reset"));
    run_for(10 * MS).await;
    let broke = "the container event stream broke; crilet falls back to relist";
    assert_eq!(h.logs.count(broke), 1, "{}", h.logs.text());
    assert_eq!(h.relists(), before + 1, "a relist at once");

    // Meanwhile the 1 s relist stands in: an exit is caught within a second.
    h.rt.exit_container(&id, 1);
    run_for(1100 * MS).await;
    assert_eq!(h.running().await.map(|r| r.1), Some(1));

    // Attempts after 1 s and 2 s fail, the one 4 s later holds.
    while h.rt.container_event_subscribers() == 0 {
        let waited = broken_at.elapsed();
        assert!(waited < 10 * S, "no resubscription: {}", h.logs.text());
        run_for(10 * MS).await;
    }
    let waited = broken_at.elapsed();
    assert_eq!(h.subscribe_calls(), 4);
    assert!(
        (6 * S..8 * S).contains(&waited),
        "back-off 1+2+4 s: {waited:?}"
    );
    let at_subscribe = h.relists();
    run_for(200 * MS).await;
    assert_eq!(
        h.relists(),
        at_subscribe + 1,
        "one relist right after subscribing again"
    );
    let again = "subscribed to container events again; relisting now";
    assert_eq!(h.logs.count(again), 1, "{}", h.logs.text());
    // The outage was said once, however many attempts failed.
    assert_eq!(h.logs.count(broke), 1);
    assert_eq!(h.logs.count("cannot subscribe"), 0);
    // Back to the safety net.
    run_for(60 * S).await;
    assert_eq!(h.relists(), at_subscribe + 1);
}

#[tokio::test(start_paused = true)]
async fn a_missed_event_is_found_by_the_safety_net_relist_and_logged() {
    let rt = Arc::new(FakeRuntime::new());
    rt.serve_container_events();
    let h = start(rt, true).await;
    run_for(S).await;
    let (id, _) = h.running().await.expect("the pod runs");

    // The runtime loses the exit's event.
    h.rt.mute_container_events(true);
    h.rt.exit_container(&id, 1);
    h.rt.mute_container_events(false);
    run_for(10 * S).await;
    assert_eq!(h.running().await, None, "nothing told crilet");
    // The worker's resync (every 60 s) restarts it; the new container's
    // events arrive.
    run_for(RESYNC_PERIOD).await;
    assert_eq!(h.running().await.map(|r| r.1), Some(1));
    assert_eq!(h.logs.count("missed container event"), 0);

    // The safety-net relist sees the exit no event announced.
    run_for(EVENTED_RELIST_PERIOD - RESYNC_PERIOD - 10 * S + MISSED_EVENT_GRACE + S).await;
    let text = h.logs.text();
    let missed: Vec<&str> = (text.lines())
        .filter(|l| l.contains("missed container event"))
        .collect();
    assert_eq!(missed.len(), 1, "{text}");
    for want in [id.as_str(), "pod_uid=u1", "was=Some(Running)", "now=Exited"] {
        assert!(missed[0].contains(want), "{want}: {}", missed[0]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_events_loses_nothing_and_relists_nothing() {
    let rt = Arc::new(FakeRuntime::new());
    rt.serve_container_events();
    let h = start(rt, true).await;
    run_for(S).await;
    let (id, _) = h.running().await.expect("the pod runs");
    let before = h.relists();
    // Thousands of events at once, far more than any stream buffer: the
    // queue keeps one per container, and the newest (the exit) wakes the
    // pod's worker, which restarts the container.
    for _ in 0..5000 {
        h.rt.exit_container(&id, 1);
    }
    run_for(10 * MS).await;
    let log = h.logs.text();
    assert!(!log.contains("lost events"), "{log}");
    assert_eq!(h.relists(), before, "a burst needs no relist: {log}");
    let (new_id, running) = h.running().await.expect("restarted");
    assert_ne!(new_id, id, "the exit woke the worker: {log}");
    assert_eq!(running, 1);
}

#[tokio::test(start_paused = true)]
async fn the_relist_sweeps_directories_of_pods_nothing_knows() {
    // Left by a crilet killed before it removed them: a pod directory and a
    // log directory of a pod that is gone from the sources and the runtime;
    // and one in the pod logs directory of crilets before --pod-logs-dir.
    let rt = Arc::new(FakeRuntime::new());
    let h = start(rt, false).await;
    let root = h._root.path().to_path_buf();
    for dir in [
        "pods/gone/containers/app",
        "pod-logs/default_old-n1_gone/app",
        "logs/default_older-n1_gone/app",
        "cgroup/memory/kubepods/besteffort/podgone",
        "cgroup/memory/kubepods/besteffort/podu1",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    run_for(3 * S).await;
    assert!(h.running().await.is_some(), "the pod runs");
    assert!(!root.join("pods/gone").exists(), "{}", h.logs.text());
    assert!(!root.join("pod-logs/default_old-n1_gone").exists());
    assert!(
        !root.join("logs").exists(),
        "the old pod logs directory went once empty"
    );
    assert!(
        !root
            .join("cgroup/memory/kubepods/besteffort/podgone")
            .exists()
    );
    // The running pod's own directories and cgroup stay.
    assert!(root.join("pods/u1").exists());
    assert!(
        root.join("cgroup/memory/kubepods/besteffort/podu1")
            .exists()
    );
    let own_logs = std::fs::read_dir(root.join("pod-logs")).unwrap();
    let own_logs: Vec<_> = own_logs.map(|e| e.unwrap().file_name()).collect();
    assert_eq!(own_logs, ["default_web_u1"]);
    assert_eq!(h.logs.count("removed the directory or cgroup of a pod"), 5);
}

#[tokio::test(start_paused = true)]
async fn after_a_restart_the_new_version_of_a_pod_waits_for_the_old_one() {
    // The sync loop's first relist and first source set race (select!
    // picks at random); ten restarts make that race go both ways.
    for _ in 0..10 {
        restart_with_an_edited_manifest().await;
    }
}

/// crilet was killed while it replaced web (u1) by its edited version: u1
/// still runs when the next crilet reads the manifest (u2).
async fn restart_with_an_edited_manifest() {
    let rt = Arc::new(FakeRuntime::new());
    let first = start(rt.clone(), false).await;
    run_for(3 * S).await;
    drop(first); // leaves the pod running, as a kill would
    let mut edited = pod();
    edited.metadata.uid = Some("u2".into());
    let h = start_with(rt.clone(), false, edited).await;
    let ready = |uid: &'static str| {
        let rt = rt.clone();
        async move {
            let sandboxes = rt.list_pod_sandbox(&Default::default()).await.unwrap();
            (sandboxes.iter())
                .filter(|s| s.state == crate::cri::PodSandboxState::Ready)
                .filter(|s| s.metadata.uid == uid)
                .count()
        }
    };
    for _ in 0..50 {
        run_for(100 * MS).await;
        assert!(
            ready("u1").await + ready("u2").await <= 1,
            "two ready pods of one name\n{}",
            h.logs.text()
        );
    }
    assert_eq!(
        (ready("u1").await, ready("u2").await),
        (0, 1),
        "{}",
        h.logs.text()
    );
    assert_eq!(h.logs.count("a previous pod of this name still runs"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_pod_the_kubelet_runs_as_the_manifest_says_is_taken_over_not_restarted() {
    use crate::kuberuntime::takeover::AdoptedUids;
    use crate::kuberuntime::takeover_driver::tests::kubelet_ran;
    let rt = Arc::new(FakeRuntime::new());
    rt.add_image("busybox", 1);
    let root = tempfile::tempdir().unwrap();
    let mut manifest = pod();
    manifest.metadata.annotations = Some(std::collections::BTreeMap::from([
        (
            "kubernetes.io/config.source".to_string(),
            "file".to_string(),
        ),
        ("kubernetes.io/config.hash".to_string(), "u1".to_string()),
    ]));
    // What the kubelet left running for it: the same configs under its
    // own UID, the termination-message file named as the kubelet names it.
    let (done_tx, _) = mpsc::unbounded_channel();
    let ctx = test_context(
        rt.clone(),
        root.path(),
        Arc::new(FakeHandlers::new()),
        done_tx,
        jiff::Timestamp::now(),
    );
    let (_, id) = kubelet_ran(&rt, &ctx.node, &manifest, "k1").await;
    let calls_before = rt.ops().len();

    let h = start_in(rt.clone(), false, manifest, root).await;
    run_for(3 * S).await;
    let log = h.logs.text();
    assert_eq!(
        h.logs.count("taking over the pod the kubelet runs"),
        1,
        "{log}"
    );
    let made: Vec<_> = (rt.ops().into_iter().skip(calls_before))
        .filter(|op| {
            [
                "RunPodSandbox",
                "CreateContainer",
                "StopContainer",
                "StopPodSandbox",
            ]
            .contains(op)
        })
        .collect();
    assert!(
        made.is_empty(),
        "nothing started or stopped: {made:?}\n{log}"
    );
    assert_eq!(h.running().await.map(|(i, _)| i), Some(id));
    let table =
        std::fs::read_to_string(h._root.path().join(super::super::adopt::ADOPTED_UIDS_FILE))
            .unwrap();
    assert_eq!(
        serde_json::from_str::<AdoptedUids>(&table).unwrap().0["u1"],
        "k1"
    );
}

/// The runtime holds the old pod's RemoveContainer (CRI-O 1.32 can, for
/// minutes): the edited manifest's pod starts once the old one is
/// stopped, as under the kubelet, and the old sandbox is removed after
/// the removal wait all the same.
#[tokio::test(start_paused = true)]
async fn a_held_removal_keeps_neither_the_next_pod_of_the_name_nor_the_old_sandbox() {
    use super::super::worker::CONTAINER_REMOVAL_WAIT;
    let rt = Arc::new(FakeRuntime::new());
    let h = start(rt.clone(), false).await;
    run_for(3 * S).await;
    let (old_container, _) = h.running().await.expect("web runs");
    let release = rt.hold("RemoveContainer");
    let mut edited = pod();
    edited.metadata.uid = Some("u2".into());
    let set = SourceSet {
        source: FILE_SOURCE_NAME,
        pods: vec![SourcePod::new("web.yaml", edited)],
    };
    h.sets.send(set).await.unwrap();
    let sandboxes = |uid: &'static str| {
        let rt = rt.clone();
        async move {
            let all = rt.list_pod_sandbox(&Default::default()).await.unwrap();
            (all.into_iter())
                .filter(|s| s.metadata.uid == uid)
                .map(|s| s.state)
                .collect::<Vec<_>>()
        }
    };
    run_for(CONTAINER_REMOVAL_WAIT / 2).await;
    use crate::cri::PodSandboxState::{NotReady, Ready};
    assert_eq!(sandboxes("u2").await, [Ready], "{}", h.logs.text());
    assert_eq!(sandboxes("u1").await, [NotReady], "{}", h.logs.text());
    let held = |c: &&crate::cri::fake::Call| c.op == "RemoveContainer" && c.arg == old_container;
    assert_eq!(rt.calls().iter().filter(held).count(), 1);
    run_for(CONTAINER_REMOVAL_WAIT).await;
    assert_eq!(sandboxes("u1").await, [], "{}", h.logs.text());
    assert_eq!(
        h.logs.count("the runtime has not answered RemoveContainer"),
        1
    );
    release.cancel();
    run_for(S).await;
    assert_eq!(sandboxes("u2").await, [Ready], "{}", h.logs.text());
    assert!(
        h.logs.count("pod terminated and removed") >= 1,
        "{}",
        h.logs.text()
    );
}
