//! The status write of a mirror pod, as the kubelet's status manager makes
//! it (`syncPod`: `mergePodStatus`, then `PatchPodStatus`): the static
//! pod's status, keeping the mirror's conditions that the kubelet does not
//! own, sent as the two-way strategic merge patch from the mirror's status
//! to that one. So whatever crilet no longer sets goes away on the API
//! server too: a Ready condition's `reason` and `message` once the pod is
//! ready, a container's earlier state, a pod-level message.
//!
//! Invariant: pure. Both statuses are compared and diffed as the API server
//! stores them (empty values dropped, times in whole seconds), so a status
//! equal to the mirror's gives no patch, and applying the patch to the
//! mirror's status gives the merged status. The patch names the mirror's
//! `uid`, as the kubelet's does (the server refuses it for another pod),
//! and its `resourceVersion`: the old status is the copy crilet last saw,
//! not one read just before the write as the kubelet reads it, so the
//! server refuses the patch (409) if the mirror changed since, and the
//! driver reads it again.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use serde_json::{Map, Value, json};

use crate::kubeapi::strategic_merge::{pod_merge_key, two_way};

/// The condition types the kubelet owns (`PodConditionsByKubelet`, with
/// `PodReadyToStartContainers`, on by default since 1.29): the static
/// pod's status decides them. Any other condition on the mirror (a
/// readiness gate's, `DisruptionTarget`) was written by someone else and
/// is kept.
pub const KUBELET_CONDITIONS: [&str; 5] = [
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// `mergePodStatus`: `new` with the conditions of `old` that the kubelet
/// does not own first, then its own.
pub fn merge_pod_status(old: Option<&PodStatus>, new: &PodStatus) -> PodStatus {
    let owned = |c: &&PodCondition| KUBELET_CONDITIONS.contains(&c.type_.as_str());
    let foreign = (old
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter())
    .filter(|c| !owned(c));
    let ours = new.conditions.iter().flatten().filter(owned);
    let conditions: Vec<PodCondition> = foreign.chain(ours).cloned().collect();
    PodStatus {
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..new.clone()
    }
}

/// A status as the API server stores it, as JSON: see [`normalise`].
pub fn stored_json(status: &PodStatus) -> Value {
    // PodStatus always serialises; an error would be a k8s-openapi bug,
    // and an empty status then only costs a write.
    normalise(serde_json::to_value(status).unwrap_or_else(|_| json!({})))
}

/// The patch that writes `status` to `mirror`, or None when the mirror
/// already shows it (a mirror without any status always gets one).
pub fn status_patch(mirror: &Pod, status: &PodStatus) -> Option<Value> {
    let merged = merge_pod_status(mirror.status.as_ref(), status);
    let old = mirror.status.as_ref().map(stored_json);
    let new = stored_json(&merged);
    let mut patch = match &old {
        Some(old) if *old == new => return None,
        Some(old) => two_way(
            &json!({ "status": old }),
            &json!({ "status": new }),
            pod_merge_key,
        ),
        None => json!({ "status": new }),
    };
    let mut metadata = Map::new();
    let meta = &mirror.metadata;
    if let Some(uid) = &meta.uid {
        metadata.insert("uid".into(), Value::from(uid.as_str()));
    }
    if let Some(version) = &meta.resource_version {
        metadata.insert("resourceVersion".into(), Value::from(version.as_str()));
    }
    if !metadata.is_empty() {
        patch["metadata"] = Value::Object(metadata);
    }
    Some(patch)
}

/// Drops empty values from objects, recursively: nulls, empty strings,
/// lists and objects, which the API server omits (Go's `omitempty`) and the
/// kubelet's semantic equality ignores. Array elements are kept in place
/// (their position matters) but normalised themselves.
pub fn normalise(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, normalise(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(normalise).collect()),
        other => other,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
#[path = "status_patch_tests.rs"]
mod tests;
