//! Mirror pod decisions: given the static pods the agent runs and the mirror
//! pods the API server holds for this node, what to create and what to delete.
//!
//! Invariant: pure. No I/O, no clock, no async; the driver performs the
//! actions through the `MirrorClient` and calls [`decide`] again on the next
//! change, so every rule here must reach a fixed point: once its actions are
//! applied, `decide` on the result returns nothing.
//!
//! The rules are the kubelet's (`syncPod` and `deleteOrphanedMirrorPods`),
//! plus one it lacks: a mirror not controlled by our Node is replaced, since
//! the NodeRestriction admission plugin ties a node's mirror pods to its Node.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::status_patch::status_patch;
use crate::nodestatus::node::NodeRef;
use crate::pod::view::UnseenSources;
use crate::pod::{
    CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION, Pod, annotation,
    full_name, is_mirror_pod, name, namespace, uid,
};

/// What to do on the API server for one full name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorAction {
    /// Create the mirror of the static pod with this UID.
    Create {
        static_uid: String,
        full_name: String,
    },
    /// Delete this mirror (grace 0, precondition: its UID) and, when
    /// `recreate_for` is set, create the mirror of the static pod with that
    /// UID once the delete is done.
    Delete {
        namespace: String,
        name: String,
        mirror_uid: String,
        reason: DeleteReason,
        recreate_for: Option<String>,
    },
}

impl MirrorAction {
    /// The `<name>_<namespace>` the action concerns.
    pub fn full_name(&self) -> String {
        match self {
            MirrorAction::Create { full_name, .. } => full_name.clone(),
            MirrorAction::Delete {
                namespace, name, ..
            } => format!("{name}_{namespace}"),
        }
    }
}

/// Why a mirror is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Someone deleted it gracefully; the API server keeps a pod bound to a
    /// node until that node deletes it with grace 0.
    BeingDeleted,
    /// Its `config.mirror` is not the static pod's current hash.
    Outdated,
    /// Its static pod is gone and has finished terminating.
    Orphaned,
    /// It has no controller reference to this Node: someone else made it.
    NotOwnedByNode,
}

/// Everything [`decide`] looks at.
pub struct MirrorInputs<'a, P: Borrow<Pod> = Pod> {
    /// Static pods the agent should run (from the sources).
    pub static_pods: &'a [P],
    /// Pods the API server has bound to this node (from the watch). Pods
    /// without a `config.mirror` annotation are not mirrors and are never
    /// touched.
    pub mirror_pods: &'a [P],
    /// Full names of static pods still terminating: their mirror stays as it
    /// is until they are done.
    pub terminating: &'a HashSet<String>,
    /// Sources that have not reported yet: an orphaned mirror of one of
    /// them (by its `config.source`) is not deleted.
    pub unseen_sources: &'a UnseenSources,
    /// `None` until the Node exists: then nothing is created.
    pub node: Option<&'a NodeRef>,
}

/// The hash a static pod's mirror must carry: its `config.hash`, or its UID
/// when a pod somehow lacks the annotation (the hash is the UID anyway).
fn static_hash(pod: &Pod) -> &str {
    annotation(pod, CONFIG_HASH_ANNOTATION).unwrap_or_else(|| uid(pod))
}

/// The hash a mirror pod carries (its `config.mirror` annotation), if any.
pub fn mirror_hash(mirror: &Pod) -> Option<&str> {
    annotation(mirror, CONFIG_MIRROR_ANNOTATION)
}

fn owner_reference(node: &NodeRef) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.name.clone(),
        uid: node.uid.clone(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// True when `mirror` carries the controller reference [`mirror_pod_for`]
/// writes for `node`. The UID counts: a Node deleted and recreated under the
/// same name is another Node, and the garbage collector would remove mirrors
/// owned by the old one anyway.
fn controlled_by(mirror: &Pod, node: &NodeRef) -> bool {
    let want = owner_reference(node);
    mirror.metadata.owner_references.iter().flatten().any(|r| {
        r.api_version == want.api_version
            && r.kind == want.kind
            && r.name == want.name
            && r.uid == want.uid
            && r.controller == Some(true)
    })
}

/// The mirror of `static_pod` as it is sent to the API server: name,
/// namespace, labels, annotations (plus `config.mirror` = the static pod's
/// hash) and spec, owned by `node`. Every other metadata field is left unset
/// on purpose: server-owned fields (uid, resourceVersion, timestamps,
/// generation, managedFields, selfLink) are the server's to fill, and copied
/// finalizers or owners would keep a grace-0 delete from completing or tie
/// the mirror to something other than the Node. Status is written later,
/// through the status subresource.
pub fn mirror_pod_for(static_pod: &Pod, node: &NodeRef) -> Pod {
    let mut annotations = static_pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        CONFIG_MIRROR_ANNOTATION.to_owned(),
        static_hash(static_pod).to_owned(),
    );
    Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: static_pod.metadata.namespace.clone(),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(node)]),
            ..ObjectMeta::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    }
}

/// Why the existing `mirror` of `pod` must be replaced, if it must. The order
/// is the order of the checks: a mirror being deleted is reported as such
/// whatever else is wrong with it.
fn replace_reason(pod: &Pod, mirror: &Pod, node: Option<&NodeRef>) -> Option<DeleteReason> {
    if mirror.metadata.deletion_timestamp.is_some() {
        Some(DeleteReason::BeingDeleted)
    } else if mirror_hash(mirror) != Some(static_hash(pod)) {
        Some(DeleteReason::Outdated)
    } else if node.is_some_and(|node| !controlled_by(mirror, node)) {
        Some(DeleteReason::NotOwnedByNode)
    } else {
        None
    }
}

fn delete(mirror: &Pod, reason: DeleteReason, recreate_for: Option<String>) -> MirrorAction {
    MirrorAction::Delete {
        namespace: namespace(mirror).to_owned(),
        name: name(mirror).to_owned(),
        mirror_uid: uid(mirror).to_owned(),
        reason,
        recreate_for,
    }
}

/// Indexes pods by full name; the first pod of a full name wins. The sources'
/// merge rejects duplicate static pods and the API server allows one pod per
/// name and namespace, so later duplicates are never expected.
fn by_full_name<'p>(pods: impl Iterator<Item = &'p Pod>) -> BTreeMap<String, &'p Pod> {
    let mut index = BTreeMap::new();
    for pod in pods {
        index.entry(full_name(pod)).or_insert(pod);
    }
    index
}

/// The actions that bring the API server's mirror pods in line with the
/// static pods, sorted by full name (a delete before a create of the same
/// name; a replacement is one `Delete` with `recreate_for`, so in practice a
/// name gets at most one action).
///
/// - A full name in `terminating` gets no action at all: an orphan's mirror
///   outlives its static pod until it has terminated, and a static pod edited
///   in place (new UID, same full name) starts, and has its mirror replaced,
///   only once the previous version has terminated.
/// - A static pod without a mirror gets `Create`, when the Node is known and
///   no other pod (one without `config.mirror`) holds the name: creating over
///   it could only fail with AlreadyExists.
/// - A mirror being deleted, outdated or not controlled by the Node is
///   deleted and recreated; without a Node it is only deleted (no recreate),
///   and its control is not checked.
/// - A mirror without a static pod is deleted once its source (all sources
///   when it names none) has been seen.
pub fn decide<P: Borrow<Pod>>(input: &MirrorInputs<P>) -> Vec<MirrorAction> {
    let statics = by_full_name(input.static_pods.iter().map(Borrow::borrow));
    let taken = by_full_name(input.mirror_pods.iter().map(Borrow::borrow));
    let mut actions = Vec::new();
    for (full, pod) in &statics {
        if input.terminating.contains(full) {
            continue;
        }
        let recreate = input.node.map(|_| uid(pod).to_owned());
        match taken.get(full) {
            None if input.node.is_some() => actions.push(MirrorAction::Create {
                static_uid: uid(pod).to_owned(),
                full_name: full.clone(),
            }),
            Some(mirror) if is_mirror_pod(mirror) => {
                if let Some(reason) = replace_reason(pod, mirror, input.node) {
                    actions.push(delete(mirror, reason, recreate));
                }
            }
            // No Node yet, or an API pod holds the name.
            _ => {}
        }
    }
    let orphans = taken.iter().filter(|(full, mirror)| {
        is_mirror_pod(mirror)
            && !statics.contains_key(*full)
            && !input.terminating.contains(*full)
            && input
                .unseen_sources
                .allows_deletion(annotation(mirror, CONFIG_SOURCE_ANNOTATION))
    });
    for (_, mirror) in orphans {
        actions.push(delete(mirror, DeleteReason::Orphaned, None));
    }
    sort_actions(&mut actions);
    actions
}

/// By full name, a delete before a create of the same name.
fn sort_actions(actions: &mut [MirrorAction]) {
    actions.sort_by_cached_key(|a| (a.full_name(), matches!(a, MirrorAction::Create { .. })));
}

/// Whether a status write is needed: the mirror's status differs from the
/// static pod's generated status, as the API server stores both (see
/// `status_patch`: empty values are what the server omits, and the
/// conditions the kubelet does not own are the mirror's), so a generated
/// `Some(vec![])` does not differ from the server's copy forever. A mirror
/// without any status always needs a write.
pub fn status_differs(mirror: &Pod, status: &PodStatus) -> bool {
    status_patch(mirror, status).is_some()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
