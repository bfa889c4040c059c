//! The Node driver on the fake client, in paused time: one create with the
//! status, then one Lease PUT per pass and a status PATCH only on a change
//! or when the report period is due.

use super::*;
use crate::events::recorder::FakeRecorder;
use crate::kubeapi::fake::FakeMirrorClient;
use crate::nodestatus::eviction::{Observed, Signal, default_eviction_hard, parse_thresholds};

pub(crate) fn policy() -> NodeStatusPolicy {
    NodeStatusPolicy {
        eviction_hard: parse_thresholds(&default_eviction_hard()).unwrap(),
        transition_period: Duration::from_secs(3600),
        max_images: 50,
        update_frequency: Duration::from_secs(10),
        report_frequency: Duration::from_secs(300),
    }
}

fn facts() -> NodeFacts {
    let capacity = NodeResources::from_machine(2, 4 << 30, 110);
    NodeFacts {
        name: "node-a".into(),
        ip: "192.0.2.1".into(),
        runtime_version: "containerd://1".into(),
        system: NodeSystem::default(),
        kubelet_port: 10250,
        allocatable: capacity.clone(),
        capacity,
        register_with_taints: vec![k8s_openapi::api::core::v1::Taint {
            key: "crilet.dev/static-pods-only".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }],
        runtime_handlers: vec![],
    }
}

fn healthy() -> Observation {
    let o = |available, capacity| {
        Some(Observed {
            available,
            capacity,
        })
    };
    Observation {
        memory: o(3 << 30, 4 << 30),
        nodefs: o(50, 100),
        nodefs_inodes: o(50, 100),
        imagefs: o(50, 100),
        imagefs_inodes: o(50, 100),
        ..Default::default()
    }
}

struct Running {
    client: Arc<FakeMirrorClient>,
    recorder: Arc<FakeRecorder>,
    observation: watch::Sender<Option<Observation>>,
    node_rx: watch::Receiver<Option<NodeRef>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Starts the loop and waits until it registered, then 1 ms more, so each
/// [`tick`] after lands just past one of its passes.
async fn started() -> Running {
    let mut r = start();
    r.node_rx.changed().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    r
}

fn start() -> Running {
    start_on(Arc::new(FakeMirrorClient::new()))
}

fn start_on(client: Arc<FakeMirrorClient>) -> Running {
    start_with(client, None)
}

fn start_with(client: Arc<FakeMirrorClient>, runtime: Option<Arc<dyn Runtime>>) -> Running {
    let recorder = Arc::new(FakeRecorder::new());
    let (observation, rx) = watch::channel(Some(healthy()));
    let (node_tx, node_rx) = watch::channel(None);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(node_loop(
        client.clone(),
        facts(),
        policy(),
        NodeInputs {
            observation: rx,
            runtime,
        },
        recorder.clone() as Arc<dyn EventRecorder>,
        node_tx,
        cancel.clone(),
    ));
    Running {
        client,
        recorder,
        observation,
        node_rx,
        cancel,
        task,
    }
}

/// The calls made from call `from` on.
fn calls_since(client: &FakeMirrorClient, from: usize) -> Vec<String> {
    client.calls()[from..].to_vec()
}

async fn tick() {
    tokio::time::sleep(Duration::from_secs(10)).await;
}

#[tokio::test(start_paused = true)]
async fn registers_with_its_status_then_renews_the_lease_and_writes_only_when_due() {
    let r = started().await;
    let node = r.node_rx.borrow().clone().unwrap();
    assert_eq!(
        calls_since(&r.client, 0),
        [
            "get_node node-a",
            "create_node node-a",
            "renew_lease node-a"
        ],
        "one create, with the status in it"
    );
    // (This read is the fourth call.)
    let registered = r.client.get_node("node-a").await.unwrap().unwrap();
    assert_eq!(Some(node.uid), registered.metadata.uid);
    let taints = registered.spec.and_then(|s| s.taints).unwrap_or_default();
    assert_eq!(
        taints[0].key, "crilet.dev/static-pods-only",
        "created with its taints"
    );
    let status = registered.status.expect("registered with a status");
    assert_eq!(status.addresses.unwrap()[0].address, "192.0.2.1");
    let endpoint = status.daemon_endpoints.and_then(|d| d.kubelet_endpoint);
    assert_eq!(endpoint.map(|e| e.port), Some(10250));
    let capacity = status.capacity.unwrap();
    assert_eq!(capacity["cpu"].0, "2");
    assert_eq!(capacity["memory"].0, "4Gi");
    assert_eq!(capacity["pods"].0, "110");
    let types: Vec<String> = (status.conditions.unwrap().into_iter())
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect();
    assert_eq!(
        types,
        [
            "MemoryPressure=False",
            "DiskPressure=False",
            "PIDPressure=False",
            "Ready=True"
        ]
    );
    assert_eq!(
        r.recorder.reasons(),
        [
            "Starting",
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID",
        ],
        "the kubelet's node events at registration (no NodeReady: the first Ready condition \
         is appended without one)"
    );
    // Idle: one cached Lease PUT per pass, nothing else, until the report
    // period (5 m) is due.
    let seen = r.client.calls().len();
    for _ in 0..29 {
        tick().await;
    }
    let idle = calls_since(&r.client, seen);
    assert_eq!(idle.len(), 29, "{idle:?}");
    assert!(
        idle.iter().all(|c| c == "renew_lease_cached node-a"),
        "{idle:?}"
    );
    tick().await;
    let due = calls_since(&r.client, seen + 29);
    assert_eq!(
        due,
        ["patch_node_status node-a", "renew_lease_cached node-a"],
        "the unchanged status once per report period"
    );
    r.cancel.cancel();
    r.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_met_threshold_is_written_at_the_next_pass_and_transitions_once() {
    let r = started().await;
    let seen = r.client.calls().len();
    let mut full = healthy();
    full.nodefs = Some(Observed {
        available: 5,
        capacity: 100,
    });
    r.observation.send_replace(Some(full));
    tick().await;
    assert_eq!(
        calls_since(&r.client, seen),
        ["patch_node_status node-a", "renew_lease_cached node-a"]
    );
    let node = r.client.get_node("node-a").await.unwrap().unwrap();
    let conditions = node.status.unwrap().conditions.unwrap();
    let disk = conditions
        .iter()
        .find(|c| c.type_ == "DiskPressure")
        .unwrap();
    assert_eq!(disk.status, "True");
    assert_eq!(disk.reason.as_deref(), Some("KubeletHasDiskPressure"));
    assert_eq!(r.recorder.reasons().last(), Some(&"NodeHasDiskPressure"));
    let events = r.recorder.reasons().len();
    let since = disk.last_transition_time.clone();
    // Still full, and then clear within the transition period: True stays,
    // unchanged, so nothing more is written.
    let seen = r.client.calls().len();
    tick().await;
    r.observation.send_replace(Some(healthy()));
    tick().await;
    let calls = calls_since(&r.client, seen);
    assert!(
        calls.iter().all(|c| c.starts_with("renew_lease")),
        "{calls:?}"
    );
    let node = r.client.get_node("node-a").await.unwrap().unwrap();
    let conditions = node.status.unwrap().conditions.unwrap();
    let disk = conditions
        .iter()
        .find(|c| c.type_ == "DiskPressure")
        .unwrap();
    assert_eq!(
        (disk.status.as_str(), &disk.last_transition_time),
        ("True", &since)
    );
    assert_eq!(r.recorder.reasons().len(), events, "no change, no event");
    r.cancel.cancel();
    r.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failed_renewal_reads_the_node_and_lease_again() {
    let r = started().await;
    r.client.fail_next("renew_lease_cached");
    let seen = r.client.calls().len();
    tick().await;
    tokio::time::sleep(RETRY_DELAY).await;
    assert_eq!(
        calls_since(&r.client, seen),
        [
            "renew_lease_cached node-a",
            "get_node node-a",
            "renew_lease node-a"
        ],
        "no status write: it did not change"
    );
    r.cancel.cancel();
    r.task.await.unwrap();
}

#[test]
fn unknown_readings_raise_no_pressure() {
    let mut tracker = PressureTracker::default();
    let now = jiff::Timestamp::from_second(1000).unwrap();
    let p = policy();
    let none = tracker.synchronize(
        &p.eviction_hard,
        &Observation::default(),
        now,
        p.transition_period,
    );
    assert!(none.is_empty());
    assert!(
        p.eviction_hard
            .iter()
            .any(|t| t.signal == Signal::NodeFsAvailable)
    );
}

#[test]
fn the_node_is_gone_when_deleted_missing_from_a_relist_or_replaced() {
    let node = |uid: &str| Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            uid: Some(uid.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let cases = [
        (Some("a"), NodeEvent::Deleted(node("a")), true),
        (Some("a"), NodeEvent::Deleted(node("b")), false),
        (Some("a"), NodeEvent::Applied(node("a")), false),
        (Some("a"), NodeEvent::Applied(node("b")), true),
        (Some("a"), NodeEvent::Restarted(vec![]), true),
        (Some("a"), NodeEvent::Restarted(vec![node("a")]), false),
        (Some("a"), NodeEvent::Restarted(vec![node("b")]), true),
        (None, NodeEvent::Deleted(node("a")), false),
        (None, NodeEvent::Restarted(vec![]), false),
    ];
    for (known, event, gone) in cases {
        assert_eq!(node_gone(known, &event), gone, "{known:?} {event:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_deleted_node_is_registered_again_at_once() {
    let client = Arc::new(FakeMirrorClient::new());
    let events = client.node_events();
    let mut r = start_on(client.clone());
    r.node_rx.changed().await.unwrap();
    let first = r.node_rx.borrow().clone().unwrap();
    let gone = client.get_node("node-a").await.unwrap().unwrap();
    client.delete_node("node-a");
    let seen = client.calls().len();
    events.send(NodeEvent::Deleted(gone)).unwrap();
    r.node_rx.changed().await.unwrap();
    let second = r.node_rx.borrow().clone().unwrap();
    assert_ne!(first.uid, second.uid, "a new Node");
    assert_eq!(
        calls_since(&client, seen),
        [
            "get_node node-a",
            "create_node node-a",
            "renew_lease node-a"
        ]
    );
    r.cancel.cancel();
    r.task.await.unwrap();
}

#[test]
fn node_events_name_each_new_or_changed_condition() {
    let c = |type_: &str, status: &str| NodeCondition {
        type_: type_.into(),
        status: status.into(),
        ..Default::default()
    };
    let fresh = [
        c("MemoryPressure", "False"),
        c("DiskPressure", "False"),
        c("PIDPressure", "False"),
        c("Ready", "True"),
    ];
    assert_eq!(
        condition_events(&[], &fresh),
        [
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID",
        ]
    );
    assert!(condition_events(&fresh, &fresh).is_empty());
    let pressed = [
        c("MemoryPressure", "True"),
        c("DiskPressure", "True"),
        c("PIDPressure", "True"),
        c("Ready", "False"),
    ];
    assert_eq!(
        condition_events(&fresh, &pressed),
        [
            "NodeHasInsufficientMemory",
            "NodeHasDiskPressure",
            "NodeHasInsufficientPID",
            "NodeNotReady"
        ]
    );
    assert!(condition_events(&fresh, &[c("Other", "True")]).is_empty());
    // Ready back to True after NotReady is an event again.
    assert_eq!(condition_events(&pressed, &fresh)[3], "NodeReady");
}

async fn ready_of(client: &FakeMirrorClient) -> NodeCondition {
    let node = client.get_node("node-a").await.unwrap().expect("the node");
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "Ready").unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_runtime_that_stops_answering_makes_the_node_not_ready_until_it_answers_again() {
    let runtime = Arc::new(crate::cri::FakeRuntime::new());
    let mut r = start_with(
        Arc::new(FakeMirrorClient::new()),
        Some(runtime.clone() as Arc<dyn Runtime>),
    );
    r.node_rx.changed().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(ready_of(&r.client).await.status, "True", "registered Ready");
    // Down for ten passes (100 s): each pass's RuntimeStatus fails.
    for _ in 0..10 {
        runtime.fail_next("Status", tonic::Status::unavailable("connection refused"));
    }
    tick().await;
    tick().await;
    assert_eq!(
        ready_of(&r.client).await.status,
        "True",
        "20 s without an answer is not down yet (the kubelet's threshold is 30 s)"
    );
    tick().await;
    let ready = ready_of(&r.client).await;
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_deref(),
            ready.message.as_deref()
        ),
        (
            "False",
            Some("KubeletNotReady"),
            Some("container runtime is down")
        )
    );
    assert_eq!(r.recorder.reasons().last().copied(), Some("NodeNotReady"));
    let went_down = ready.last_transition_time.clone();
    tick().await;
    assert_eq!(
        ready_of(&r.client).await.last_transition_time,
        went_down,
        "still down: the transition time stays"
    );
    for _ in 0..7 {
        tick().await;
    }
    let ready = ready_of(&r.client).await;
    assert_eq!(ready.status, "True", "it answers again: {ready:?}");
    assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
    assert_eq!(r.recorder.reasons().last().copied(), Some("NodeReady"));
    r.cancel.cancel();
    r.task.await.unwrap();
}
