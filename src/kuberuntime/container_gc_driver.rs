//! The dead-container GC driver: every minute it lists the runtime's
//! containers, asks `kuberuntime::container_gc::select` which exited ones
//! are surplus, and removes them with their log files (the log, its
//! rotated siblings and its symlink, `clean_container_logs`); then it
//! sweeps the dead container log symlinks, as the kubelet's container GC
//! does (`logs::symlinks::remove_dead`).
//!
//! Invariant: it reads the agent's view only through snapshots, after
//! listing, so a container it lists belongs to a pod that view knows. A
//! container whose logs could not be removed stays for the next
//! collection, as the kubelet's: once it is gone, so is its log path.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cri::{ContainerFilter, Runtime};
use crate::kuberuntime::container_gc::select;
use crate::logs::container_log_manager::clean_container_logs;
use crate::logs::layout::LogDirs;
use crate::logs::symlinks::remove_dead;
use crate::pod::view::AgentView;

/// How often dead containers are collected.
pub const CONTAINER_GC_PERIOD: Duration = Duration::from_secs(60);

/// One collection: list, select against the newest agent view, remove
/// (logs first; `dirs` are `--pod-logs-dir`, for a relative log path, and
/// `--container-logs-dir`), then sweep the dead links. Returns how many
/// containers were removed.
pub async fn collect(
    rt: &dyn Runtime,
    view: &watch::Receiver<Arc<AgentView>>,
    dirs: &LogDirs,
) -> usize {
    // List first, then read the view: a container listed here was created
    // for a pod the view (as new or newer) knows, unless it was removed.
    let containers = match rt.list_containers(&ContainerFilter::default()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "dead-container GC: cannot list containers");
            return 0;
        }
    };
    let view = view.borrow().clone();
    let live = |uid: &str| view.manager.get_pod_by_uid(uid).is_some();
    let dead = select(
        &containers,
        // Containers name no source: wait until every source has reported.
        view.unseen_sources
            .allows_deletion(None)
            .then_some(&live as &dyn Fn(&str) -> bool),
    );
    let mut removed = 0;
    for d in &dead {
        if let Err(e) = clean_container_logs(rt, dirs, &d.id).await {
            tracing::warn!(container = %d.id, error = %e, "could not remove the dead container's logs; keeping it for the next collection");
            continue;
        }
        match rt.remove_container(&d.id).await {
            Ok(()) => {
                removed += 1;
                tracing::info!(container = %d.id, pod_uid = %d.pod_uid, name = %d.name, attempt = d.attempt, reason = ?d.reason, "dead container removed");
            }
            Err(e) => {
                tracing::warn!(container = %d.id, error = %e, "could not remove dead container; skipping it")
            }
        }
    }
    for link in remove_dead(rt, &dirs.container_logs_dir).await {
        tracing::info!(link = %link.display(), "dead container log symlink removed");
    }
    removed
}

/// Collects every `period` until `cancel`.
pub async fn run(
    rt: Arc<dyn Runtime>,
    view: watch::Receiver<Arc<AgentView>>,
    period: Duration,
    dirs: LogDirs,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => { collect(rt.as_ref(), &view, &dirs).await; }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::ContainerState::Exited;
    use crate::kuberuntime::container_gc::tests::c;

    #[tokio::test]
    async fn collect_removes_through_the_runtime_and_reads_the_view() {
        use crate::cri::{ContainerConfig, FakeRuntime, PodSandboxConfig};
        let rt = FakeRuntime::new();
        let logs = tempfile::tempdir().unwrap();
        let dirs = LogDirs {
            pod_logs_dir: logs.path().to_path_buf(),
            container_logs_dir: logs.path().join("containers"),
        };
        std::fs::create_dir_all(&dirs.container_logs_dir).unwrap();
        let log = |attempt: u32| logs.path().join(format!("a/{attempt}.log"));
        std::fs::create_dir_all(logs.path().join("a")).unwrap();
        rt.add_image("busybox", 1);
        let sb = PodSandboxConfig::default();
        let sid = rt.run_pod_sandbox(&sb).await.unwrap();
        let mut ids = Vec::new();
        for attempt in 0..4 {
            let proto = c("u", "a", attempt, Exited);
            let mut labels = proto.labels.clone();
            labels.insert(crate::pod::POD_NAME_LABEL.into(), "web".into());
            labels.insert(crate::pod::POD_NAMESPACE_LABEL.into(), "default".into());
            let cfg = ContainerConfig {
                metadata: proto.metadata.clone(),
                image: "busybox".into(),
                labels,
                log_path: log(attempt).display().to_string(),
                ..Default::default()
            };
            std::fs::write(log(attempt), "x").unwrap();
            std::fs::write(log(attempt).with_extension("log.20260101-120000.gz"), "x").unwrap();
            let id = rt.create_container(&sid, &cfg, &sb).await.unwrap();
            rt.start_container(&id).await.unwrap();
            rt.exit_container(&id, 1);
            let link = dirs
                .container_logs_dir
                .join(format!("web_default_a-{id}.log"));
            std::os::unix::fs::symlink(log(attempt), link).unwrap();
            ids.push(id);
        }
        // The link of a container removed while crilet was down.
        let dead = dirs.container_logs_dir.join("web_default_a-0123456789.log");
        std::os::unix::fs::symlink(logs.path().join("gone.log"), &dead).unwrap();
        let links = || {
            let mut v: Vec<String> = std::fs::read_dir(&dirs.container_logs_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        };
        let (tx, rx) = watch::channel(Arc::new(AgentView {
            unseen_sources: crate::pod::view::UnseenSources::new(["file"]),
            ..AgentView::default()
        }));
        // Sources not all seen: only the surplus goes (attempts 0 and 1).
        assert_eq!(collect(&rt, &rx, &dirs).await, 2);
        let removed: Vec<String> = rt
            .calls()
            .into_iter()
            .filter(|c| c.op == "RemoveContainer")
            .map(|c| c.arg)
            .collect();
        assert_eq!(removed, ids[..2]);
        // Their log files went with them (the log and the rotated one).
        let mut left: Vec<String> = std::fs::read_dir(logs.path().join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "2.log",
                "2.log.20260101-120000.gz",
                "3.log",
                "3.log.20260101-120000.gz"
            ]
        );
        // Their links too, and the dead link of the unknown container.
        let kept: Vec<String> = (ids[2..].iter())
            .map(|id| format!("web_default_a-{id}.log"))
            .collect();
        assert_eq!(links(), kept);
        // Logs that cannot be removed (the runtime cannot say where they
        // are) keep the container for the next collection.
        tx.send_replace(Arc::new(AgentView::default()));
        rt.fail_next("ContainerStatus", tonic::Status::unavailable("down"));
        assert_eq!(collect(&rt, &rx, &dirs).await, 1);
        assert!(log(2).exists(), "attempt 2 was kept with its logs");
        // Every source seen and no pod wants "u": the rest goes too.
        assert_eq!(collect(&rt, &rx, &dirs).await, 1);
        assert!(!log(2).exists() && !log(3).exists());
        assert!(links().is_empty());
        assert!(
            rt.list_containers(&ContainerFilter::default())
                .await
                .unwrap()
                .is_empty()
        );
    }
}
