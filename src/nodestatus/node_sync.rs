//! The Node's driver: registers the Node, then computes its status every
//! `nodeStatusUpdateFrequency` (10 s) and renews its Lease as often, the
//! kubelet's split of the two:
//! - the status is PATCHed only when it changed (`nodeStatusHasChanged`:
//!   anything but heartbeat times) or `nodeStatusReportFrequency` (5 m) has
//!   passed since it was last written;
//! - the Lease is one PUT of the copy the last renewal returned; it is read
//!   again only when that copy is stale or a renewal failed.
//!
//! - the Node itself is watched (a 7.5-minute watch, as the kubelet's node
//!   informer), so a Node deleted behind crilet's back is registered again
//!   at once without reading it every pass.
//!
//! So an idle node costs the API server a request per 10 s, one per 5
//! minutes and two per 7.5 minutes (about 0.108 a second), as the kubelet's
//! does, instead of a GET and a write of each
//! every 10 s.
//!
//! The runtime's health is read each pass too (RuntimeStatus, with a
//! deadline of its own): a runtime that has not answered for 30 s, or says
//! it or its network is not ready, makes the Node NotReady, as the
//! kubelet's `runtimeState` does (`runtime_state`).
//!
//! Invariants: it never touches the runtime but to list images and read
//! its status; a failed
//! request is retried after 2 s, and reads the Node and Lease again before
//! the next write, so a deleted Node is registered again; a pressure
//! condition goes True only from a met hard threshold (see `pressure`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ContainerImage, Node, NodeCondition, NodeStatus, Taint};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::allocatable::NodeResources;
use super::eviction::{Observation, Threshold};
use super::node::NodeRef;
use super::node::{
    NodeStatusInputs, NodeSystem, new_node, node_images, node_lease, node_status, pressure_of,
    status_has_changed,
};
use super::pressure::PressureTracker;
use super::runtime_state::{RUNTIME_STATUS_DEADLINE, RuntimeState, aggregate};
use crate::cri::Runtime;
use crate::events::kubelet_events;
use crate::events::recorder::{EventObject, EventRecorder};
use crate::kubeapi::client::{MirrorClient, MirrorError, NodeEvent};

/// How often the runtime's image list is read for `status.images` (the
/// kubelet's image manager refreshes its cached list every 30 s).
pub const IMAGE_LIST_PERIOD: Duration = Duration::from_secs(30);
/// The wait after a failed pass.
pub const RETRY_DELAY: Duration = Duration::from_secs(2);

/// What the node reports of itself, fixed for the agent's life.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    pub name: String,
    pub ip: String,
    pub runtime_version: String,
    pub system: NodeSystem,
    /// The kubelet server's port (`--port`); 0: none.
    pub kubelet_port: u16,
    pub capacity: NodeResources,
    pub allocatable: NodeResources,
    /// The taints the Node is created with (`--register-with-taints`).
    pub register_with_taints: Vec<Taint>,
    /// The runtime's handlers and their features (`status.runtimeHandlers`).
    pub runtime_handlers: Vec<crate::cri::RuntimeHandler>,
}

/// How the status is computed and written.
#[derive(Debug, Clone)]
pub struct NodeStatusPolicy {
    pub eviction_hard: Vec<Threshold>,
    pub transition_period: Duration,
    /// -1: every image.
    pub max_images: i32,
    pub update_frequency: Duration,
    pub report_frequency: Duration,
}

/// What the loop reads each pass, besides the facts.
pub struct NodeInputs {
    /// The stats collector's latest node observation.
    pub observation: watch::Receiver<Option<Observation>>,
    /// Where `status.images` and the runtime's health come from (`None`:
    /// no images reported, and the runtime taken as healthy).
    pub runtime: Option<Arc<dyn Runtime>>,
}

/// The loop's memory between passes.
#[derive(Default)]
struct State {
    /// The Node as the server last returned it.
    node: Option<Node>,
    /// The status last written, and when.
    written: Option<(NodeStatus, Instant)>,
    lease: Option<Lease>,
    tracker: PressureTracker,
    images: Vec<ContainerImage>,
    images_listed: Option<Instant>,
    images_failing: bool,
    runtime: RuntimeState,
    /// The errors that made the node NotReady last pass, to log changes.
    not_ready: Vec<String>,
}

/// Gets or creates the Node, then keeps its status and lease fresh.
pub async fn node_loop(
    client: Arc<dyn MirrorClient>,
    facts: NodeFacts,
    policy: NodeStatusPolicy,
    mut inputs: NodeInputs,
    events: Arc<dyn EventRecorder>,
    node_tx: watch::Sender<Option<NodeRef>>,
    cancel: CancellationToken,
) {
    let node_ref = EventObject::node(&facts.name);
    events.event(&node_ref, kubelet_events::starting());
    let mut state = State::default();
    // The last error logged: a new kind of failure is logged, a repeat is not.
    let mut failing: Option<String> = None;
    // Started once the Node is known: before, there is nothing to follow
    // (and credentials that cannot read it would be refused twice).
    let mut node_events: Option<futures::stream::BoxStream<'static, _>> = None;
    let mut watch_failing = false;
    loop {
        refresh_images(&mut state, &inputs, policy.max_images).await;
        check_runtime(&mut state, &inputs).await;
        let under_pressure = {
            let now = jiff::Timestamp::now();
            let observed = *inputs.observation.borrow_and_update();
            match observed {
                Some(o) => state.tracker.synchronize(
                    &policy.eviction_hard,
                    &o,
                    now,
                    policy.transition_period,
                ),
                None => state.tracker.under_pressure(now, policy.transition_period),
            }
        };
        let before = written_conditions(&state);
        let result = pass(&*client, &facts, &policy, &under_pressure, &mut state).await;
        for reason in condition_events(&before, &written_conditions(&state)) {
            events.event(&node_ref, kubelet_events::node_status(&facts.name, reason));
        }
        let wait = match result {
            Ok(node) => {
                if node_events.is_none() {
                    node_events = Some(client.watch_node(&facts.name));
                }
                if failing.take().is_some() {
                    tracing::info!(node = %facts.name, "API server answers again");
                }
                node_tx.send_if_modified(|cur| {
                    let changed = cur.as_ref() != Some(&node);
                    *cur = Some(node);
                    changed
                });
                policy.update_frequency
            }
            Err(e) => {
                // Read both again before the next write.
                state.node = None;
                state.lease = None;
                let text = e.to_string();
                if failing.as_ref() != Some(&text) {
                    tracing::error!(node = %facts.name, error = %text, "cannot register or update the node; retrying");
                }
                failing = Some(text);
                RETRY_DELAY
            }
        };
        // Until the next pass, follow the Node: one deleted (or replaced)
        // behind crilet's back is registered again at once.
        let next_pass = Instant::now() + wait;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(next_pass) => break,
                event = next_event(&mut node_events) => match event {
                    None => node_events = Some(client.watch_node(&facts.name)),
                    Some(Err(e)) => {
                        if !watch_failing {
                            tracing::warn!(node = %facts.name, error = %e, "the watch of the Node failed; it resumes on its own");
                        }
                        watch_failing = true;
                    }
                    Some(Ok(event)) => {
                        watch_failing = false;
                        let known = state.node.as_ref().and_then(|n| n.metadata.uid.as_deref());
                        if node_gone(known, &event) {
                            tracing::warn!(node = %facts.name, "the Node was deleted; registering it again");
                            state.node = None;
                            state.written = None;
                            state.lease = None;
                            break;
                        }
                    }
                },
            }
        }
    }
}

/// The conditions of the status last written (or, before the first write,
/// of the Node as read).
fn written_conditions(state: &State) -> Vec<NodeCondition> {
    match &state.written {
        Some((status, _)) => status.conditions.clone().unwrap_or_default(),
        None => (state.node.as_ref())
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default(),
    }
}

/// The kubelet's node events for a status write, in the conditions' order:
/// `NodeHasDiskPressure` / `NodeHasSufficientMemory` and so on for a
/// pressure condition that is new or changed status (its setters start a
/// missing one from Unknown), but `NodeReady` / `NodeNotReady` only when a
/// Ready condition the Node already had changes status: a new Node's first
/// Ready condition is appended without an event (nodestatus/setters.go,
/// ReadyCondition).
pub fn condition_events(before: &[NodeCondition], after: &[NodeCondition]) -> Vec<&'static str> {
    after
        .iter()
        .filter(|c| {
            let old = before.iter().find(|b| b.type_ == c.type_);
            match old {
                Some(b) => b.status != c.status,
                None => c.type_ != "Ready",
            }
        })
        .filter_map(|c| {
            let on = c.status == "True";
            Some(match (c.type_.as_str(), on) {
                ("Ready", true) => "NodeReady",
                ("Ready", false) => "NodeNotReady",
                ("MemoryPressure", true) => "NodeHasInsufficientMemory",
                ("MemoryPressure", false) => "NodeHasSufficientMemory",
                ("DiskPressure", true) => "NodeHasDiskPressure",
                ("DiskPressure", false) => "NodeHasNoDiskPressure",
                ("PIDPressure", true) => "NodeHasInsufficientPID",
                ("PIDPressure", false) => "NodeHasSufficientPID",
                _ => return None,
            })
        })
        .collect()
}

/// The next event of the node watch; never, while there is none.
async fn next_event(
    events: &mut Option<futures::stream::BoxStream<'static, Result<NodeEvent, MirrorError>>>,
) -> Option<Result<NodeEvent, MirrorError>> {
    match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// Whether a watch event says the Node crilet knows (uid `known`) is gone:
/// deleted, missing from a relist, or replaced by another of its name.
pub fn node_gone(known: Option<&str>, event: &NodeEvent) -> bool {
    let Some(known) = known else {
        return false;
    };
    let uid = |n: &Node| n.metadata.uid.clone().unwrap_or_default();
    match event {
        NodeEvent::Deleted(n) => uid(n) == known,
        NodeEvent::Applied(n) => uid(n) != known,
        NodeEvent::Restarted(list) => !list.iter().any(|n| uid(n) == known),
    }
}

/// Lists the runtime's images when the cached list is older than
/// [`IMAGE_LIST_PERIOD`]; a failure keeps the old list, logged once.
async fn refresh_images(state: &mut State, inputs: &NodeInputs, max_images: i32) {
    let Some(runtime) = &inputs.runtime else {
        return;
    };
    if state
        .images_listed
        .is_some_and(|at| at.elapsed() < IMAGE_LIST_PERIOD)
    {
        return;
    }
    state.images_listed = Some(Instant::now());
    match runtime.list_images().await {
        Ok(images) => {
            state.images = node_images(&images, max_images);
            state.images_failing = false;
        }
        Err(e) => {
            if !state.images_failing {
                tracing::warn!(error = %e, "cannot list images for the node's status; keeping the last list");
            }
            state.images_failing = true;
        }
    }
}

/// Reads the runtime's status into `state.runtime` (a call that fails or
/// outlasts [`RUNTIME_STATUS_DEADLINE`] changes nothing: its last answer
/// ages) and logs when the reasons the node is NotReady change. Without a
/// runtime the node is taken as Ready.
async fn check_runtime(state: &mut State, inputs: &NodeInputs) {
    let Some(runtime) = &inputs.runtime else {
        return;
    };
    let answer = tokio::time::timeout(RUNTIME_STATUS_DEADLINE, runtime.status()).await;
    let now = Instant::now().into_std();
    if let Ok(Ok(status)) = answer {
        state.runtime.observe(&status, now);
    }
    let errors = state.runtime.errors(now);
    if errors != state.not_ready {
        match aggregate(&errors) {
            Some(why) => tracing::warn!(reason = %why, "the node is NotReady"),
            None => tracing::info!("the container runtime answers and is ready; the node is Ready"),
        }
    }
    state.not_ready = errors;
}

/// One pass: register or read the Node if needed, write its status if it
/// changed or is due, renew the Lease.
async fn pass(
    client: &dyn MirrorClient,
    facts: &NodeFacts,
    policy: &NodeStatusPolicy,
    under_pressure: &BTreeSet<super::pressure::PressureCondition>,
    state: &mut State,
) -> Result<NodeRef, MirrorError> {
    let name = &facts.name;
    let now = jiff::Timestamp::now();
    let inputs = NodeStatusInputs {
        name,
        ip: &facts.ip,
        runtime_version: &facts.runtime_version,
        system: &facts.system,
        kubelet_port: facts.kubelet_port,
        capacity: &facts.capacity,
        allocatable: &facts.allocatable,
        images: state.images.clone(),
        under_pressure,
        runtime_handlers: &facts.runtime_handlers,
        not_ready: &state.not_ready,
    };
    if state.node.is_none() {
        match client.get_node(name).await? {
            Some(node) => state.node = Some(node),
            None => {
                // As the kubelet registers: the status goes with the create,
                // so the Node never exists without its addresses and
                // conditions.
                tracing::info!(node = %name, "registering the node");
                let status = node_status(&inputs, &[], now);
                let node = new_node(name, status.clone(), &facts.register_with_taints);
                let created = client.create_node(&node).await?;
                state.written = Some((status, Instant::now()));
                state.node = Some(created);
            }
        }
    }
    let previous: Vec<NodeCondition> = match &state.written {
        Some((status, _)) => status.conditions.clone().unwrap_or_default(),
        None => (state.node.as_ref())
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default(),
    };
    let status = node_status(&inputs, &previous, now);
    let due = match &state.written {
        None => true,
        Some((written, at)) => {
            status_has_changed(written, &status) || at.elapsed() >= policy.report_frequency
        }
    };
    if due {
        let before = state.written.as_ref().map(|(s, _)| pressure_of(s));
        let node = client.patch_node_status(name, &status).await?;
        let after = pressure_of(&status);
        if before.is_some_and(|b| b != after) {
            tracing::info!(node = %name, pressure = ?after, "the node's pressure conditions changed");
        }
        state.written = Some((status, Instant::now()));
        state.node = Some(node);
    }
    let uid = (state.node.as_ref())
        .and_then(|n| n.metadata.uid.clone())
        .unwrap_or_default();
    let lease = node_lease(name, &uid, now);
    state.lease = Some(client.renew_lease(&lease, state.lease.as_ref()).await?);
    Ok(NodeRef {
        name: name.clone(),
        uid,
    })
}

#[cfg(test)]
#[path = "node_sync_tests.rs"]
pub(crate) mod tests;
