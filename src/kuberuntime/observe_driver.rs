//! Reading what the runtime has for a pod (or for every pod): the list and
//! status calls, around the pure grouping of `kuberuntime::observe`.
//!
//! Invariant: read-only; it never changes the runtime.

use std::collections::BTreeMap;

use crate::cri::{ContainerFilter, PodSandboxFilter, Result, Runtime};
use crate::kuberuntime::observe::{
    Observation, RELIST_KEYS, RuntimePodSummary, by_uid, newest_two, summarize,
};
use crate::pleg::decisions::RelistSnapshot;

/// Reads the runtime objects of the pod with `uid`.
pub async fn observe_pod(rt: &dyn Runtime, uid: &str) -> Result<Observation> {
    // Neither list depends on the other: asked at once, they cost one
    // round trip on every sync instead of two.
    let sandbox_filter = PodSandboxFilter {
        label_selector: by_uid(uid),
        ..Default::default()
    };
    let container_filter = ContainerFilter {
        label_selector: by_uid(uid),
        ..Default::default()
    };
    let (sandboxes, listed) = tokio::try_join!(
        rt.list_pod_sandbox(&sandbox_filter),
        rt.list_containers(&container_filter)
    )?;
    let mut obs = Observation {
        sandboxes,
        ..Default::default()
    };
    for (c, labels) in newest_two(&listed, uid) {
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
    Ok(obs)
}

/// Lists all sandboxes and containers once (the relist): grouped by pod
/// UID, and as the PLEG's snapshot of which object is whose.
pub async fn observe_all(
    rt: &dyn Runtime,
) -> Result<(BTreeMap<String, RuntimePodSummary>, RelistSnapshot)> {
    let (sandboxes, containers) = rt.list_briefs(RELIST_KEYS).await?;
    Ok((
        summarize(&sandboxes, &containers),
        RelistSnapshot::new(&sandboxes, &containers),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::*;
    use crate::kuberuntime::labels::ContainerLabels;
    use crate::kuberuntime::labels::PodSandboxLabels;

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

        let (all, snapshot) = observe_all(&rt).await.unwrap();
        assert_eq!(snapshot.uid_of(&id), Some("u1"));
        assert_eq!(all.len(), 2);
        assert!(all["u1"].active);
        assert_eq!(all["u1"].full_name, "p_default");
        // The source a pod came from, for the deletion gate of the relist.
        assert_eq!(all["u1"].source, None);
        assert_eq!(all["u2"].source.as_deref(), Some("http"));
        let before = all["u1"].fingerprint.clone();
        rt.stop_pod_sandbox(&id).await.unwrap();
        let (all, _) = observe_all(&rt).await.unwrap();
        assert_ne!(all["u1"].fingerprint, before);
        assert!(!all["u1"].active);
    }
}
