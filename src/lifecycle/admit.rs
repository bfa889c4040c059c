//! Admission of the pods the API server binds to this node. crilet runs
//! static pods only, so every other pod bound here (one created with
//! `spec.nodeName`, or one that tolerates the node's taints) is rejected as
//! the kubelet rejects a pod that fails admission: its status becomes phase
//! `Failed`, reason [`REJECT_REASON`], message `Pod was rejected: ...`. It
//! is never run: the pod manager only ever sees static and mirror pods.
//!
//! Invariant: pure. A pod is rejected at most once: not while its write is
//! known done or waiting for a retry (the driver says which), and never once
//! the API server shows it in a terminal phase, so a restarted crilet does
//! not write it again. Mirror pods are left alone; a pod being deleted is
//! not rejected but deleted at once ([`pods_to_finish`]), so none is left
//! Terminating for ever.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::events::recorder::EventObject;
use crate::pod::{full_name, is_mirror_pod, name, namespace, uid};

/// The status reason of a rejected pod (CamelCase, as the kubelet's
/// admission reasons), and of its Warning Event.
pub const REJECT_REASON: &str = "NodeRunsStaticPodsOnly";
/// Why, as the Event says it; the status message is
/// `Pod was rejected: <this>`, as the kubelet words a rejection.
pub const REJECT_MESSAGE: &str =
    "the node runs static pods only (crilet); pods from the API server are not run here";

/// One pod to reject: where it is and the status to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `<name>_<namespace>`, for the log.
    pub full_name: String,
    pub status: PodStatus,
    /// The pod, as its Warning Event regards it.
    pub object: EventObject,
}

/// The pods among `pods` (all those bound to the node) to reject now.
/// `written`: UIDs whose rejection the API server took; `waiting`: UIDs
/// whose write failed and is not due again yet.
pub fn pods_to_reject<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    written: &BTreeSet<String>,
    waiting: &BTreeSet<String>,
    now: jiff::Timestamp,
) -> Vec<Rejection> {
    pods.into_iter()
        .filter(|p| is_open(p, written, waiting))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !is_terminal(p))
        .map(|p| Rejection {
            namespace: namespace(p).to_string(),
            name: name(p).to_string(),
            uid: uid(p).to_string(),
            full_name: full_name(p),
            status: rejected_status(p, now),
            object: EventObject::pod(p),
        })
        .collect()
}

/// One pod to finish deleting: an API pod deleted (gracefully) before
/// crilet rejected it. The API server waits for the node to finish a bound
/// pod; crilet never ran it, so there is nothing to stop and it deletes it
/// at once (grace 0, uid precondition), as the kubelet's status manager
/// deletes a pod whose containers are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub full_name: String,
}

/// The pods among `pods` being deleted that crilet must finish; `done` and
/// `waiting` as for [`pods_to_reject`].
pub fn pods_to_finish<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    done: &BTreeSet<String>,
    waiting: &BTreeSet<String>,
) -> Vec<Finish> {
    pods.into_iter()
        .filter(|p| is_open(p, done, waiting))
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .map(|p| Finish {
            namespace: namespace(p).to_string(),
            name: name(p).to_string(),
            uid: uid(p).to_string(),
            full_name: full_name(p),
        })
        .collect()
}

/// An API pod (not a mirror pod, with a UID) neither `done` nor `waiting`
/// for a retry.
fn is_open(p: &Pod, done: &BTreeSet<String>, waiting: &BTreeSet<String>) -> bool {
    !is_mirror_pod(p) && !uid(p).is_empty() && !done.contains(uid(p)) && !waiting.contains(uid(p))
}

/// Succeeded or Failed: whatever says so (an earlier crilet, a kubelet
/// before it, an eviction), the pod will not run again and is not
/// rewritten.
fn is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Failed" | "Succeeded"))
}

/// True when the API server shows the pod rejected by crilet.
pub fn is_rejected(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    is_terminal(pod) && status.and_then(|s| s.reason.as_deref()) == Some(REJECT_REASON)
}

/// The status a rejection writes: phase, reason and message, and a start
/// time as the kubelet's status manager gives every status it writes (the
/// pod's own if it has one). The QoS class is left out, so the API server
/// keeps the one it set; conditions are left to the server's merge.
pub fn rejected_status(pod: &Pod, now: jiff::Timestamp) -> PodStatus {
    let start = pod.status.as_ref().and_then(|s| s.start_time.clone());
    PodStatus {
        phase: Some("Failed".into()),
        reason: Some(REJECT_REASON.into()),
        message: Some(format!("Pod was rejected: {REJECT_MESSAGE}")),
        start_time: Some(start.unwrap_or(Time(now))),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "admit_tests.rs"]
mod tests;
