//! The mirror pod driver: registers the Node and keeps its Lease, watches
//! the pods bound to the node, creates and deletes mirror pods as `decide`
//! says, and writes each static pod's status to its mirror. Every other pod
//! bound to the node goes to the admission loop, which rejects it.
//!
//! Invariants: it never touches the runtime, so an API server that errors,
//! hangs or is down can never stop or restart a static pod; it reads the
//! agent's state through snapshots and hands the mirror pods it sees to the
//! sync loop, which alone writes the pod manager.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::decide::{DeleteReason, MirrorAction, MirrorInputs, decide, mirror_pod_for};
use super::status_patch::status_patch;
use crate::events::recorder::EventRecorder;
use crate::kubeapi::call_count::{CallCount, START_YIELD};
use crate::kubeapi::client::{MirrorClient, MirrorError, PodEvent};
use crate::lifecycle::admission::admission_loop;
use crate::nodestatus::node_sync::{NodeFacts, NodeInputs, NodeStatusPolicy, node_loop};
use crate::pod::view::{AgentView, StatusCache};
use crate::pod::{self, manager::PodManager};

pub use crate::kubeapi::retry::RESYNC_PERIOD;
use crate::kubeapi::retry::retry_delay;
use crate::nodestatus::node::NodeRef;

pub struct MirrorManager {
    pub client: Arc<dyn MirrorClient>,
    pub node_name: String,
    /// What the Node reports of itself (its name is `node_name`).
    pub node: NodeFacts,
    pub status_policy: NodeStatusPolicy,
    pub node_inputs: NodeInputs,
    /// Where the Node's events and pod rejections are recorded.
    pub events: Arc<dyn EventRecorder>,
    pub view: watch::Receiver<Arc<AgentView>>,
    pub statuses: StatusCache,
    /// Changes whenever a static pod's status changes.
    pub status_changed: watch::Receiver<()>,
    /// The mirror pods bound to this node, for the pod manager.
    pub mirrors_tx: mpsc::Sender<Vec<Arc<Pod>>>,
    /// The pod starts in flight: a pass waits for them (at most
    /// [`START_YIELD`]), so its writes do not take the CPU a start needs.
    pub pod_starts: CallCount,
}

impl MirrorManager {
    pub async fn run(mut self, cancel: CancellationToken) {
        let (node_tx, node_rx) = watch::channel::<Option<NodeRef>>(None);
        let (seen_tx, seen_rx) = watch::channel::<BTreeMap<String, Arc<Pod>>>(BTreeMap::new());
        let facts = NodeFacts {
            name: self.node_name.clone(),
            ..self.node.clone()
        };
        let inputs = NodeInputs {
            observation: self.node_inputs.observation.clone(),
            runtime: self.node_inputs.runtime.take(),
        };
        tokio::spawn(node_loop(
            self.client.clone(),
            facts,
            self.status_policy.clone(),
            inputs,
            self.events.clone(),
            node_tx,
            cancel.clone(),
        ));
        tokio::spawn(watch_loop(
            self.client.clone(),
            self.events.clone(),
            self.node_name.clone(),
            seen_tx,
            self.mirrors_tx.clone(),
            cancel.clone(),
        ));
        reconcile_loop(self, node_rx, seen_rx, cancel).await;
    }
}

/// Follows the pods bound to this node; passes the mirror pods on, and
/// every other pod to the admission loop it starts, which rejects them.
async fn watch_loop(
    client: Arc<dyn MirrorClient>,
    events: Arc<dyn EventRecorder>,
    node: String,
    seen_tx: watch::Sender<BTreeMap<String, Arc<Pod>>>,
    mirrors_tx: mpsc::Sender<Vec<Arc<Pod>>>,
    cancel: CancellationToken,
) {
    let mut stream = client.watch_pods(&node);
    // One copy of each pod, shared by the reconcile loop, the admission
    // loop and the pod manager.
    let mut pods: BTreeMap<String, Arc<Pod>> = BTreeMap::new();
    // Its own task: a slow rejection write never holds up mirror pods.
    let (api_pods_tx, api_pods_rx) = watch::channel(BTreeMap::new());
    let admission = admission_loop(client.clone(), events, api_pods_rx, cancel.clone());
    tokio::spawn(admission);
    let mut failing = false;
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = stream.next() => e,
        };
        let Some(event) = event else {
            stream = client.watch_pods(&node);
            continue;
        };
        match event {
            Ok(PodEvent::Restarted(list)) => {
                failing = false;
                pods = list
                    .into_iter()
                    .map(|p| (pod::uid(&p).to_string(), Arc::new(p)))
                    .collect();
            }
            // A watch that resumed after an error goes on without a new
            // list: any event shows it works again.
            Ok(PodEvent::Applied(p)) => {
                failing = false;
                pods.insert(pod::uid(&p).to_string(), Arc::new(p));
            }
            Ok(PodEvent::Deleted(p)) => {
                failing = false;
                pods.remove(pod::uid(&p));
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(node = %node, error = %e, "pod watch failed; it resumes on its own");
                }
                failing = true;
                continue;
            }
        }
        let (mirrors, api_pods): (BTreeMap<_, _>, BTreeMap<_, _>) = (pods.iter())
            .map(|(uid, p)| (uid.clone(), p.clone()))
            .partition(|(_, p)| pod::is_mirror_pod(p));
        api_pods_tx.send_replace(api_pods);
        let _ = mirrors_tx.send(mirrors.values().cloned().collect()).await;
        seen_tx.send_replace(mirrors);
    }
}

async fn reconcile_loop(
    m: MirrorManager,
    mut node_rx: watch::Receiver<Option<NodeRef>>,
    mut seen_rx: watch::Receiver<BTreeMap<String, Arc<Pod>>>,
    cancel: CancellationToken,
) {
    let mut view_rx = m.view.clone();
    let mut status_rx = m.status_changed.clone();
    let mut last_error: Option<String> = None;
    let mut failures = 0u32;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = m.pod_starts.settled(START_YIELD) => {}
        }
        let node = node_rx.borrow_and_update().clone();
        let mirrors: Vec<Arc<Pod>> = seen_rx.borrow_and_update().values().cloned().collect();
        let view = view_rx.borrow_and_update().clone();
        let ok = reconcile_once(&m, node.as_ref(), &mirrors, &view).await;
        let wait = match ok {
            Ok(()) => {
                failures = 0;
                if last_error.take().is_some() {
                    tracing::info!("mirror pods reconciled again");
                }
                RESYNC_PERIOD
            }
            Err(e) => {
                failures += 1;
                let text = e.to_string();
                if last_error.as_ref() != Some(&text) {
                    tracing::warn!(error = %text, "mirror pod reconcile failed; retrying");
                }
                last_error = Some(text);
                retry_delay(failures)
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = node_rx.changed() => {}
            _ = seen_rx.changed() => {}
            _ = view_rx.changed() => {}
            _ = status_rx.changed() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn reconcile_once(
    m: &MirrorManager,
    node: Option<&NodeRef>,
    mirrors: &[Arc<Pod>],
    view: &AgentView,
) -> Result<(), MirrorError> {
    let statics = view.manager.get_pods();
    let actions = decide(&MirrorInputs {
        static_pods: &statics,
        mirror_pods: mirrors,
        terminating: &view.terminating,
        unseen_sources: &view.unseen_sources,
        node,
    });
    let mut first_err = None;
    for action in actions {
        let r = act(m, node, &statics, &action).await;
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    // Status: each static pod's own status onto its mirror.
    let statuses = m.statuses.read().unwrap_or_else(|e| e.into_inner()).clone();
    for s in &statics {
        // Only the static pod's current mirror: not one being replaced.
        let Some(mirror) = mirrors.iter().find(|mp| {
            PodManager::is_mirror_pod_of(mp, s) && mp.metadata.deletion_timestamp.is_none()
        }) else {
            continue; // no mirror yet: written once it has one
        };
        let Some(status) = statuses.get(pod::uid(s)) else {
            continue;
        };
        if let Err(e) = write_status(m.client.as_ref(), mirror, status).await {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Writes `status` to `mirror` as the patch from the watch's copy of it.
/// If that copy is stale (409: the mirror changed since, often by our own
/// write the watch has not shown yet; 422: the name is another pod's now),
/// the pod is read again and the patch made once more from what is stored;
/// a mirror gone or replaced meanwhile is left to the next pass, which the
/// watch's news starts.
async fn write_status(
    client: &dyn MirrorClient,
    mirror: &Pod,
    status: &PodStatus,
) -> Result<(), MirrorError> {
    let (namespace, name) = (pod::namespace(mirror), pod::name(mirror));
    let Some(patch) = status_patch(mirror, status) else {
        return Ok(());
    };
    match client.patch_pod_status(namespace, name, &patch).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(404) => Ok(()),
        Err(e) if matches!(e.code(), Some(409 | 422)) => {
            let fresh = client.get_pod(namespace, name).await?;
            let fresh = fresh.filter(|p| pod::uid(p) == pod::uid(mirror));
            match fresh.as_ref().and_then(|p| status_patch(p, status)) {
                Some(patch) => client
                    .patch_pod_status(namespace, name, &patch)
                    .await
                    .map(drop),
                None => Ok(()),
            }
        }
        Err(e) => Err(e),
    }
}

async fn act(
    m: &MirrorManager,
    node: Option<&NodeRef>,
    statics: &[Arc<Pod>],
    action: &MirrorAction,
) -> Result<(), MirrorError> {
    let create = |static_uid: &str| -> Option<Pod> {
        let node = node?;
        statics
            .iter()
            .find(|p| pod::uid(p) == static_uid)
            .map(|p| mirror_pod_for(p, node))
    };
    match action {
        MirrorAction::Create {
            static_uid,
            full_name,
        } => {
            let Some(mirror) = create(static_uid) else {
                return Ok(());
            };
            tracing::info!(pod = %full_name, "creating mirror pod");
            match m.client.create_pod(&mirror).await {
                // Someone (an earlier us) made it already: the watch shows
                // it, and the next pass checks its hash.
                Err(e) if e.code() == Some(409) => Ok(()),
                other => other.map(|_| ()),
            }
        }
        MirrorAction::Delete {
            namespace,
            name,
            mirror_uid,
            reason,
            recreate_for,
        } => {
            tracing::info!(pod = %format!("{name}_{namespace}"), ?reason, "deleting mirror pod");
            m.client.delete_pod(namespace, name, mirror_uid).await?;
            if *reason == DeleteReason::Orphaned {
                return Ok(());
            }
            if let Some(mirror) = recreate_for.as_deref().and_then(create) {
                tracing::info!(pod = %format!("{name}_{namespace}"), "recreating mirror pod");
                match m.client.create_pod(&mirror).await {
                    Err(e) if e.code() == Some(409) => Ok(()),
                    other => other.map(|_| ()),
                }?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
