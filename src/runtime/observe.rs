//! Reading what the runtime has for a pod (or for every pod), recovered
//! from the kubelet labels on sandboxes and containers.
//!
//! Invariant: read-only. Objects whose labels do not parse are reported and
//! left alone: they may belong to another agent's pods.

use std::collections::{BTreeMap, HashMap};

use super::labels::{ContainerLabels, POD_UID_LABEL};
use super::plan::{ObservedContainer, ObservedPod, ObservedSandbox};
use super::{
    ContainerFilter, ContainerState, ContainerStatus, PodSandbox, PodSandboxFilter, Result, Runtime,
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
    /// The plan's view: states, attempts, hashes, exit codes.
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
        }
    }
}

fn by_uid(uid: &str) -> super::Labels {
    super::Labels::from([(POD_UID_LABEL.to_string(), uid.to_string())])
}

/// Reads the runtime objects of the pod with `uid`.
pub async fn observe_pod(rt: &dyn Runtime, uid: &str) -> Result<Observation> {
    let sandboxes = rt
        .list_pod_sandbox(&PodSandboxFilter {
            label_selector: by_uid(uid),
            ..Default::default()
        })
        .await?;
    let listed = rt
        .list_containers(&ContainerFilter {
            label_selector: by_uid(uid),
            ..Default::default()
        })
        .await?;
    // Keep the newest two of each name; older ones only matter to GC.
    let mut by_name: BTreeMap<String, Vec<&super::Container>> = BTreeMap::new();
    for c in &listed {
        by_name.entry(c.metadata.name.clone()).or_default().push(c);
    }
    let mut obs = Observation {
        sandboxes,
        ..Default::default()
    };
    for (_, mut list) in by_name {
        list.sort_by_key(|c| std::cmp::Reverse((c.metadata.attempt, c.created_at)));
        for c in list.into_iter().take(2) {
            let labels = match ContainerLabels::from_labels(&c.labels, &c.annotations) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(container = %c.id, pod_uid = uid, error = %e, "container with unreadable kubelet labels; ignoring it");
                    continue;
                }
            };
            let status = match rt.container_status(&c.id).await {
                Ok(s) => s,
                // Removed between the list and now: it no longer matters.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            obs.sandbox_of
                .insert(c.id.clone(), c.pod_sandbox_id.clone());
            obs.labels.insert(c.id.clone(), labels);
            obs.containers.push(status);
        }
    }
    Ok(obs)
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

/// Lists all sandboxes and containers once and groups them by pod UID.
pub async fn observe_all(rt: &dyn Runtime) -> Result<BTreeMap<String, RuntimePodSummary>> {
    let sandboxes = rt.list_pod_sandbox(&PodSandboxFilter::default()).await?;
    let containers = rt.list_containers(&ContainerFilter::default()).await?;
    let mut parts: BTreeMap<String, (Vec<String>, bool, String, Option<String>)> = BTreeMap::new();
    for s in &sandboxes {
        let Some(uid) = s.labels.get(POD_UID_LABEL) else {
            continue;
        };
        let e = parts.entry(uid.clone()).or_default();
        e.0.push(format!("s:{}:{:?}", s.id, s.state));
        e.1 |= s.state == super::PodSandboxState::Ready;
        e.2 = format!("{}_{}", s.metadata.name, s.metadata.namespace);
        if let Some(source) = s.annotations.get(crate::pod::CONFIG_SOURCE_ANNOTATION) {
            e.3 = Some(source.clone());
        }
    }
    for c in &containers {
        let Some(uid) = c.labels.get(POD_UID_LABEL) else {
            continue;
        };
        let e = parts.entry(uid.clone()).or_default();
        e.0.push(format!("c:{}:{:?}", c.id, c.state));
        e.1 |= matches!(c.state, ContainerState::Running | ContainerState::Created);
    }
    Ok(parts
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
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::labels::PodSandboxLabels;
    use crate::runtime::*;

    fn sandbox(uid: &str) -> PodSandboxConfig {
        let l = PodSandboxLabels {
            pod_name: "p".into(),
            pod_namespace: "default".into(),
            pod_uid: uid.into(),
            pod_labels: Default::default(),
            pod_annotations: Default::default(),
        };
        PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: "p".into(),
                uid: uid.into(),
                namespace: "default".into(),
                attempt: 0,
            },
            labels: l.to_labels(),
            annotations: l.to_annotations(),
            ..Default::default()
        }
    }

    fn container(uid: &str, name: &str, attempt: u32) -> ContainerConfig {
        let l = ContainerLabels {
            pod_name: "p".into(),
            pod_namespace: "default".into(),
            pod_uid: uid.into(),
            container_name: name.into(),
            hash: 7,
            restart_count: attempt,
            termination_message_path: "/dev/termination-log".into(),
            termination_message_policy: "File".into(),
            termination_grace_period: None,
            deletion_grace_period: None,
        };
        ContainerConfig {
            metadata: ContainerMetadata {
                name: name.into(),
                attempt,
            },
            image: "busybox".into(),
            labels: l.to_labels(),
            annotations: l.to_annotations(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn observes_one_pod_keeping_the_newest_two_per_name() {
        let rt = FakeRuntime::new();
        rt.add_image("busybox", 1);
        let sb = sandbox("u1");
        let id = rt.run_pod_sandbox(&sb).await.unwrap();
        for attempt in 0..3 {
            let c = rt
                .create_container(&id, &container("u1", "a", attempt), &sb)
                .await
                .unwrap();
            rt.start_container(&c).await.unwrap();
            rt.exit_container(&c, 1);
        }
        // Another pod's objects are not included.
        let mut other = sandbox("u2");
        other
            .annotations
            .insert(crate::pod::CONFIG_SOURCE_ANNOTATION.into(), "http".into());
        rt.run_pod_sandbox(&other).await.unwrap();

        let obs = observe_pod(&rt, "u1").await.unwrap();
        assert_eq!(obs.sandboxes.len(), 1);
        let attempts: Vec<u32> = obs.containers.iter().map(|c| c.metadata.attempt).collect();
        assert_eq!(attempts, [2, 1]);
        let plan_input = obs.to_plan_input();
        assert_eq!(plan_input.containers[0].sandbox_id, id);
        assert_eq!(plan_input.containers[0].hash, 7);
        assert_eq!(plan_input.containers[0].restart_count, 2);
        assert_eq!(plan_input.containers[0].exit_code, 1);

        let all = observe_all(&rt).await.unwrap();
        assert_eq!(all.len(), 2);
        assert!(all["u1"].active);
        assert_eq!(all["u1"].full_name, "p_default");
        // The source a pod came from, for the deletion gate of the relist.
        assert_eq!(all["u1"].source, None);
        assert_eq!(all["u2"].source.as_deref(), Some("http"));
        let before = all["u1"].fingerprint.clone();
        rt.stop_pod_sandbox(&id).await.unwrap();
        let all = observe_all(&rt).await.unwrap();
        assert_ne!(all["u1"].fingerprint, before);
        assert!(!all["u1"].active);
    }
}
