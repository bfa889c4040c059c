//! What the runtime has for a pod (or for every pod), recovered from the
//! kubelet labels on sandboxes and containers: the pure half of reading
//! it. `kuberuntime::observe_driver` makes the list and status calls.
//!
//! Invariant: read-only. Objects whose labels do not parse are reported and
//! left alone: they may belong to another agent's pods.

use std::collections::{BTreeMap, HashMap};

use super::labels::{ContainerLabels, POD_UID_LABEL};
use super::plan::{ObservedContainer, ObservedPod, ObservedSandbox};
use crate::cri::{
    BriefKeys, Container, ContainerBrief, ContainerState, ContainerStatus, Labels, PodSandbox,
    PodSandboxState, SandboxBrief,
};

/// Everything the worker needs of one pod's runtime objects.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub sandboxes: Vec<PodSandbox>,
    /// Full statuses of the containers that matter: the newest two of each
    /// name (the current one and the one before, for lastState).
    pub containers: Vec<ContainerStatus>,
    /// The parsed labels of each container in `containers`, by id.
    pub labels: HashMap<String, ContainerLabels>,
    /// Which sandbox each container belongs to, by container id.
    pub sandbox_of: HashMap<String, String>,
}

impl Observation {
    /// The plan's view: states, attempts, hashes, exit codes. No container
    /// has passed a startup probe here: the prober knows that, and the
    /// caller adds it.
    pub fn to_plan_input(&self) -> ObservedPod {
        ObservedPod {
            sandboxes: self
                .sandboxes
                .iter()
                .map(|s| ObservedSandbox {
                    id: s.id.clone(),
                    attempt: s.metadata.attempt,
                    state: s.state,
                    created_at: s.created_at,
                })
                .collect(),
            containers: self
                .containers
                .iter()
                .filter_map(|c| {
                    let labels = self.labels.get(&c.id)?;
                    Some(ObservedContainer {
                        id: c.id.clone(),
                        sandbox_id: self.sandbox_of.get(&c.id).cloned().unwrap_or_default(),
                        name: c.metadata.name.clone(),
                        attempt: c.metadata.attempt,
                        state: c.state,
                        hash: labels.hash,
                        restart_count: labels.restart_count,
                        exit_code: c.exit_code,
                        created_at: c.created_at,
                        finished_at: c.finished_at,
                    })
                })
                .collect(),
            startup_succeeded: Default::default(),
        }
    }
}

/// The label selector of one pod's sandboxes and containers.
pub fn by_uid(uid: &str) -> Labels {
    Labels::from([(POD_UID_LABEL.to_string(), uid.to_string())])
}

/// The containers of pod `uid` that matter, with their parsed labels: the
/// newest two of each name (older ones only matter to GC). Containers with
/// unreadable kubelet labels are reported and left out.
pub fn newest_two<'a>(listed: &'a [Container], uid: &str) -> Vec<(&'a Container, ContainerLabels)> {
    let mut by_name: BTreeMap<String, Vec<&Container>> = BTreeMap::new();
    for c in listed {
        by_name.entry(c.metadata.name.clone()).or_default().push(c);
    }
    let mut out = Vec::new();
    for (_, mut list) in by_name {
        list.sort_by_key(|c| std::cmp::Reverse((c.metadata.attempt, c.created_at)));
        for c in list.into_iter().take(2) {
            match ContainerLabels::from_labels(&c.labels, &c.annotations) {
                Ok(l) => out.push((c, l)),
                Err(e) => {
                    tracing::warn!(container = %c.id, pod_uid = uid, error = %e, "container with unreadable kubelet labels; ignoring it");
                }
            }
        }
    }
    out
}

/// A cheap summary of every kubelet-labelled pod on the runtime, by UID:
/// its fingerprint (from the list calls only) and whether anything runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimePodSummary {
    pub fingerprint: String,
    pub active: bool,
    pub full_name: String,
    /// The `kubernetes.io/config.source` its sandbox carries, if any.
    pub source: Option<String>,
}

/// What a relist reads of each sandbox and container besides its ID and
/// state: the pod UID label, and the sandbox's config source.
pub const RELIST_KEYS: BriefKeys = BriefKeys {
    label: POD_UID_LABEL,
    annotation: crate::pod::CONFIG_SOURCE_ANNOTATION,
};

/// Groups every sandbox and container (in brief, with [`RELIST_KEYS`]) by
/// pod UID.
pub fn summarize(
    sandboxes: &[SandboxBrief],
    containers: &[ContainerBrief],
) -> BTreeMap<String, RuntimePodSummary> {
    let mut parts: BTreeMap<String, (Vec<String>, bool, String, Option<String>)> = BTreeMap::new();
    for s in sandboxes {
        let Some(uid) = &s.label else {
            continue;
        };
        let e = parts.entry(uid.clone()).or_default();
        e.0.push(format!("s:{}:{:?}", s.id, s.state));
        e.1 |= s.state == PodSandboxState::Ready;
        e.2 = format!("{}_{}", s.name, s.namespace);
        if let Some(source) = &s.annotation {
            e.3 = Some(source.clone());
        }
    }
    for c in containers {
        let Some(uid) = &c.label else {
            continue;
        };
        let e = parts.entry(uid.clone()).or_default();
        e.0.push(format!("c:{}:{:?}", c.id, c.state));
        e.1 |= matches!(c.state, ContainerState::Running | ContainerState::Created);
    }
    parts
        .into_iter()
        .map(|(uid, (mut p, active, full_name, source))| {
            p.sort();
            (
                uid,
                RuntimePodSummary {
                    fingerprint: p.join(","),
                    active,
                    full_name,
                    source,
                },
            )
        })
        .collect()
}
