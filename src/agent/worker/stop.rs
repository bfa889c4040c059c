//! Stopping a pod: containers with the grace period (sidecars after the
//! app containers, last to first), then sandboxes, then removal of its
//! runtime objects (each container with its log files), cgroup, directories
//! and status. Part of the pod worker.
//!
//! Invariants: the pod is reported terminated (its mirror pod may go, a
//! pod of its full name may start) once every container and sandbox of it
//! is stopped, as the kubelet's pod worker reports it, so a removal the
//! runtime holds delays no one; the worker ends only once a fresh
//! observation finds none of its runtime objects left.

use super::*;
use crate::agent::orphan_dirs::legacy_pod_logs_dir;
use crate::cm::cgroup::remove_pod_cgroup;
use crate::kuberuntime::termination_order::termination_prereqs;
use crate::logs::container_log_manager::clean_container_logs;
use crate::logs::layout::pod_log_dir_name;
use hooks::{begin_kill, stop_container};

impl Worker {
    /// Removes an old sandbox of a pod that lives on (a new sandbox
    /// replaced it): each of its containers with its log files and
    /// symlink first, as the kubelet's GC removes containers before their
    /// sandbox. The pod's log directory stays, so a container removed with
    /// its sandbox alone would leave a link that is never dead.
    pub(super) async fn remove_old_sandbox(
        &self,
        full_name: &str,
        id: &str,
    ) -> Result<(), RuntimeError> {
        let rt = self.ctx.runtime.clone();
        let of_sandbox = crate::cri::ContainerFilter {
            pod_sandbox_id: Some(id.to_string()),
            ..Default::default()
        };
        let ids = rt.list_containers(&of_sandbox).await?.into_iter();
        remove_containers(&self.ctx, full_name, ids.map(|c| c.id).collect()).await?;
        rt.remove_pod_sandbox(id).await
    }

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
        // Everything is stopped: the pod is terminated. The kubelet leaves
        // the removal to its garbage collector; crilet removes at once, but
        // nothing waits for that.
        tracing::info!(
            pod = full_name,
            uid,
            "pod stopped; removing its runtime objects"
        );
        let _ = self.ctx.done.send(WorkerDone::Terminated {
            uid: uid.to_string(),
        });
        // Each container's log files and symlink first. A pod whose spec is
        // gone (removed while crilet was down) has no log directory to
        // remove below, so its files go here.
        let ids = obs.containers.iter().map(|c| c.id.clone()).collect();
        remove_containers(&self.ctx, full_name, ids).await?;
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

/// How long a pod's removal waits for its containers' RemoveContainer
/// before it removes their sandbox, which removes what is left of them
/// (CRI: RemovePodSandbox removes the sandbox's containers). A runtime may
/// hold a removal for minutes (CRI-O 1.32 behind a shared-PID pod's
/// StopPodSandbox, docs/runtimes.md); the held call goes on by itself.
pub(crate) const CONTAINER_REMOVAL_WAIT: Duration = Duration::from_secs(5);

/// Removes containers, all at once (the kubelet's container deletor has
/// workers too), each with its log files and symlink first. Returns the
/// first failure among those answered within [`CONTAINER_REMOVAL_WAIT`];
/// the calls still unanswered then are left to finish on their own.
async fn remove_containers(
    ctx: &Arc<WorkerContext>,
    full_name: &str,
    ids: Vec<String>,
) -> Result<(), RuntimeError> {
    let mut set = tokio::task::JoinSet::new();
    for id in ids {
        let (ctx, full_name) = (ctx.clone(), full_name.to_owned());
        set.spawn(async move {
            let result = remove_container_and_logs(&ctx, &full_name, &id).await;
            if let Err(e) = &result {
                tracing::debug!(pod = full_name, container = %id, error = %e, "RemoveContainer failed");
            }
            result
        });
    }
    match tokio::time::timeout(CONTAINER_REMOVAL_WAIT, first_error(&mut set)).await {
        Ok(Some(e)) => Err(e),
        Ok(None) => Ok(()),
        Err(_) => {
            tracing::warn!(
                pod = full_name,
                waited = ?CONTAINER_REMOVAL_WAIT,
                left = set.len(),
                "the runtime has not answered RemoveContainer; removing the sandbox, which removes its containers"
            );
            set.detach_all();
            Ok(())
        }
    }
}

/// Removes a container, its log files and its symlink first (a failure
/// there is logged and does not keep the container).
async fn remove_container_and_logs(
    ctx: &WorkerContext,
    full_name: &str,
    id: &str,
) -> Result<(), RuntimeError> {
    let rt = ctx.runtime.as_ref();
    if let Err(e) = clean_container_logs(rt, &ctx.node.log_dirs, id).await {
        tracing::warn!(pod = full_name, container = %id, error = %e, "could not remove the container's logs");
    }
    rt.remove_container(id).await
}

/// Stops running containers (each after its preStop hook, with the grace
/// period), then every ready sandbox. Every kill begins at once (event and
/// preStop); with sidecars, each StopContainer then waits for its turn
/// (`termination_order`): app containers first, then the sidecars from the
/// last to the first, each wait taken out of that container's grace period.
pub(super) async fn kill_all(
    ctx: Arc<WorkerContext>,
    pod: Option<&Pod>,
    pod_ip: &str,
    obs: &Observation,
    grace: i64,
) -> Result<(), RuntimeError> {
    let running: Vec<_> = obs
        .containers
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Running | ContainerState::Created))
        .collect();
    let names: Vec<&str> = running.iter().map(|c| c.metadata.name.as_str()).collect();
    // An orphan (no spec) has no order: its containers stop at once, as
    // the kubelet stops them.
    let prereqs = pod
        .filter(|p| pod::has_restartable_init_container(p))
        .map(|p| termination_prereqs(p, &names))
        .unwrap_or_default();
    // One token per container name, cancelled once it has stopped.
    let stopped: HashMap<&str, CancellationToken> = names
        .iter()
        .map(|n| (*n, CancellationToken::new()))
        .collect();
    let pod = pod.map(|p| Arc::new(p.clone()));
    let mut set = tokio::task::JoinSet::new();
    for c in running {
        let (ctx, pod, pod_ip) = (ctx.clone(), pod.clone(), pod_ip.to_owned());
        let (id, name) = (c.id.clone(), c.metadata.name.clone());
        let wait_for: Vec<CancellationToken> = prereqs
            .get(&name)
            .into_iter()
            .flatten()
            .filter_map(|n| stopped.get(n.as_str()).cloned())
            .collect();
        let done = stopped[name.as_str()].clone();
        // Each container with its own preStop, all at once (the kubelet's
        // killContainersWithSyncResult).
        set.spawn(async move {
            let grace = begin_kill(&ctx, pod.as_deref(), &pod_ip, &id, &name, None, grace).await;
            let grace = grace - wait_for_turn(&wait_for, grace).await;
            let result = stop_container(&ctx, &id, grace).await;
            // The kubelet lets the containers that wait on a failed stop
            // wait out their grace period; nothing is gained by that, so
            // they go on at once (the stop is retried with the whole kill).
            done.cancel();
            // A container already gone is stopped.
            result.or_else(|e| if e.is_not_found() { Ok(()) } else { Err(e) })
        });
    }
    if let Some(e) = first_error(&mut set).await {
        return Err(e);
    }
    for s in obs
        .sandboxes
        .iter()
        .filter(|s| s.state == PodSandboxState::Ready)
    {
        ctx.stop_pod_sandbox(&s.id).await?;
    }
    Ok(())
}

/// Waits for every task of `set`; returns the first failure among them.
async fn first_error(
    set: &mut tokio::task::JoinSet<Result<(), RuntimeError>>,
) -> Option<RuntimeError> {
    let mut first = None;
    while let Some(r) = set.join_next().await {
        if let Ok(Err(e)) = r {
            first.get_or_insert(e);
        }
    }
    first
}

/// Waits until every container of `wait_for` has stopped, at most `grace`
/// seconds; returns the whole seconds waited (the kubelet truncates too).
async fn wait_for_turn(wait_for: &[CancellationToken], grace: i64) -> i64 {
    if grace <= 0 || wait_for.is_empty() {
        return 0;
    }
    let started = tokio::time::Instant::now();
    let all = all_stopped(wait_for);
    let _ = tokio::time::timeout(Duration::from_secs(grace as u64), all).await;
    started.elapsed().as_secs() as i64
}

/// Resolves once every token is cancelled.
async fn all_stopped(tokens: &[CancellationToken]) {
    for t in tokens {
        t.cancelled().await;
    }
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
    // The pod directory holds its subPath binds: unmounted first, or kept.
    for dir in pod_dir.into_iter().chain(log_dir).chain(legacy_log_dir) {
        if let Err(e) = crate::volume::subpath::remove_pod_dir(&dir) {
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
