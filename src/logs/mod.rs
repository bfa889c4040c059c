//! Container log files for readers (the kubelet server's `/containerLogs`,
//! `crilet logs` over the agent socket): [`locate`] finds the file a
//! request means, [`stream`] sends it decoded, from the end when asked for
//! the last lines, and keeps following it across rotations.
//!
//! Invariant: readers never write. A follower reads the file it opened to
//! its end before it moves to the file that replaced it at the same path,
//! so a rotation loses and repeats no complete line.

mod choose;
pub mod container_log_manager;
mod cri_log;
mod decode;
mod follow;
pub mod layout;
mod options;
pub mod rotation;
pub mod symlinks;
mod tail;

pub use choose::{ChooseError, DEFAULT_CONTAINER_ANNOTATION, choose_container, default_container};
pub use cri_log::{CriLogLine, ends_logical_line, parse_cri_line};
pub use decode::{LogDecoder, TIMESTAMP_FORMAT};
pub use options::{LogOptions, LogOptionsError};
pub use tail::TailScanner;

use std::path::{Path, PathBuf};

use crate::cri::Runtime;
use crate::pod::lookup::{LookupError, PodRef, resolve};
use crate::pod::view::{AgentView, StatusCache};
use layout::pod_log_dir_under;

pub use follow::{LogsError, POLL_INTERVAL, stream};

/// The log file of one container instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTarget {
    pub pod_uid: String,
    pub pod_full_name: String,
    pub container: String,
    /// Bare runtime ID (no `containerd://`).
    pub container_id: String,
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    /// No such pod or container (an HTTP 404, gRPC NOT_FOUND).
    #[error("{0}")]
    NotFound(String),
    /// The request cannot be answered as asked: no container named where
    /// one is needed, a container that has no log yet (400,
    /// INVALID_ARGUMENT).
    #[error("{0}")]
    BadRequest(String),
}

/// Finds the log file of `container` (None: the pod's default container)
/// of the pod `pod` names, or of its previous instance, where the runtime
/// says the container writes it (ContainerStatus). `pod_logs_dir` is
/// `--pod-logs-dir`, for runtimes that report a path relative to the pod's
/// log directory.
pub async fn locate(
    view: &AgentView,
    statuses: &StatusCache,
    runtime: &dyn Runtime,
    pod_logs_dir: &Path,
    pod: &PodRef,
    container: Option<&str>,
    previous: bool,
) -> Result<LogTarget, LocateError> {
    let resolved = resolve(&view.manager, pod).map_err(|e| match e {
        LookupError::NotFound(_) => LocateError::NotFound(e.to_string()),
        LookupError::Invalid(_) => LocateError::BadRequest(e.to_string()),
    })?;
    let container = match container {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => default_container(&resolved.pod).map_err(choose_error)?,
    };
    let status = statuses
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&resolved.static_uid)
        .cloned();
    let id = choose_container(&resolved.pod, status.as_deref(), &container, previous)
        .map_err(choose_error)?;
    let reported = runtime
        .container_status(&id)
        .await
        .map_err(|e| {
            LocateError::BadRequest(format!(
                "container {container:?} of pod {}: {e}",
                resolved.full_name
            ))
        })?
        .log_path;
    if reported.is_empty() {
        return Err(LocateError::BadRequest(format!(
            "container {container:?} of pod {} has no log file (the runtime reports none)",
            resolved.full_name
        )));
    }
    let path = Path::new(&reported);
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        pod_log_dir_under(pod_logs_dir, &resolved.pod).join(path)
    };
    Ok(LogTarget {
        pod_uid: resolved.static_uid,
        pod_full_name: resolved.full_name,
        container,
        container_id: id,
        path,
    })
}

fn choose_error(e: ChooseError) -> LocateError {
    match e {
        ChooseError::NotFound { .. } => LocateError::NotFound(e.to_string()),
        ChooseError::NoLog(_) => LocateError::BadRequest(e.to_string()),
    }
}

#[cfg(test)]
#[path = "logs_tests.rs"]
mod tests;
