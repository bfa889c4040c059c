//! Stopping a pod: containers with the grace period, then sandboxes, then
//! removal of its runtime objects (each container with its log files),
//! cgroup, directories and status. Part of the pod worker.
//!
//! Invariant: a pod counts as terminated only once a fresh observation
//! finds none of its runtime objects left.

use super::*;
use crate::agent::orphan_dirs::legacy_pod_logs_dir;
use crate::cm::cgroup::remove_pod_cgroup;
use crate::logs::container_log_manager::clean_container_logs;
use crate::logs::layout::pod_log_dir_name;

impl Worker {
    pub(super) async fn terminate(
        &mut self,
        uid: &str,
        full_name: &str,
        pod: Option<&Pod>,
    ) -> Result<(), RuntimeError> {
        // No probe may kill or restart what is being stopped.
        self.prober = None;
        let rt = self.ctx.runtime.clone();
        let obs = observe_pod(rt.as_ref(), uid).await?;
        let grace = match pod {
            Some(p) => mapping::termination_grace_period(p),
            None => obs
                .labels
                .values()
                .find_map(|l| l.termination_grace_period)
                .unwrap_or(30),
        };
        tracing::info!(pod = full_name, uid, grace, "terminating pod");
        kill_all(self.ctx.clone(), pod, &self.pod_ip, &obs, grace).await?;
        // Everything is stopped: remove it (containers go with their
        // sandbox), each container's log files and symlink first. A pod whose spec is
        // gone (removed while crilet was down) has no log directory to
        // remove below, so its files go here.
        for c in &obs.containers {
            let dirs = &self.ctx.node.log_dirs;
            if let Err(e) = clean_container_logs(rt.as_ref(), dirs, &c.id).await {
                tracing::warn!(pod = full_name, container = %c.id, error = %e, "could not remove the container's logs");
            }
            rt.remove_container(&c.id).await?;
        }
        for s in &obs.sandboxes {
            rt.remove_pod_sandbox(&s.id).await?;
        }
        // Containers created after the observation would be missed: look again.
        let left = observe_pod(rt.as_ref(), uid).await?;
        if !left.sandboxes.is_empty() || !left.containers.is_empty() {
            return Err(RuntimeError::Refused {
                op: "RemovePodSandbox",
                message: format!("pod {full_name} still has runtime objects; retrying"),
            });
        }
        for parent in mapping::cgroup_parent_candidates(&self.ctx.node, uid) {
            if let Err(e) = remove_pod_cgroup(&self.ctx.cgroup_fs, &parent) {
                tracing::warn!(pod = full_name, error = %e, "could not remove the pod cgroup");
            }
        }
        remove_dirs(&self.ctx.node, uid, pod);
        self.ctx
            .statuses
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        tracing::info!(pod = full_name, uid, "pod terminated and removed");
        Ok(())
    }
}

/// Stops running containers (in parallel, each after its preStop hook, with
/// the grace period), then
/// every ready sandbox.
pub(super) async fn kill_all(
    ctx: Arc<WorkerContext>,
    pod: Option<&Pod>,
    pod_ip: &str,
    obs: &Observation,
    grace: i64,
) -> Result<(), RuntimeError> {
    let rt = ctx.runtime.clone();
    let pod = pod.map(|p| Arc::new(p.clone()));
    let mut set = tokio::task::JoinSet::new();
    for c in obs
        .containers
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Running | ContainerState::Created))
    {
        let (ctx, pod, pod_ip) = (ctx.clone(), pod.clone(), pod_ip.to_owned());
        let (id, name) = (c.id.clone(), c.metadata.name.clone());
        // Each container with its own preStop, all at once (the kubelet's
        // killContainersWithSyncResult).
        set.spawn(async move {
            kill_container(&ctx, pod.as_deref(), &pod_ip, &id, &name, None, grace).await
        });
    }
    let mut first_err = None;
    while let Some(r) = set.join_next().await {
        if let Ok(Err(e)) = r {
            if !e.is_not_found() {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    for s in obs
        .sandboxes
        .iter()
        .filter(|s| s.state == PodSandboxState::Ready)
    {
        rt.stop_pod_sandbox(&s.id).await?;
    }
    Ok(())
}

/// Removes the pod's directory under the root dir (emptyDirs and
/// termination-message files) and, when the spec is known, its logs (their
/// directory is named after the pod, not only its UID), also those a crilet
/// from before `--pod-logs-dir` started under `<root>/logs`, and that
/// directory once empty.
pub(super) fn remove_dirs(node: &NodeContext, uid: &str, pod: Option<&Pod>) {
    // A UID that is not one plain name must never widen the removal to
    // `pods/` itself or beyond it.
    let plain = matches!(
        std::path::Path::new(uid).components().collect::<Vec<_>>()[..],
        [std::path::Component::Normal(_)]
    );
    let pod_dir = plain.then(|| node.root_dir.join("pods").join(uid));
    let log_dir = pod.map(|p| mapping::pod_log_dir(node, p));
    let legacy = legacy_pod_logs_dir(node);
    let legacy_log_dir = pod.zip(legacy.as_ref()).map(|(p, dir)| {
        dir.join(pod_log_dir_name(
            pod::namespace(p),
            pod::name(p),
            pod::uid(p),
        ))
    });
    for dir in pod_dir.into_iter().chain(log_dir).chain(legacy_log_dir) {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove pod directory");
            }
        }
    }
    // Fails while another pod of before the upgrade still logs there.
    if let Some(dir) = legacy {
        let _ = std::fs::remove_dir(dir);
    }
}
