//! The host side of the log layout: the two directories made at start, and
//! the container log symlinks of `--container-logs-dir` that log shippers
//! (Fluent Bit, Vector, Promtail, rsyslog) tail: made right after a
//! container starts, removed with the container, and the dead ones swept
//! by the container GC, as the kubelet does (`startContainer`,
//! `removeContainerLog`, `evictPodLogsDirectories`).
//!
//! Two additions to the kubelet's rules, both for containers started by a
//! crilet with other log directories (an upgrade from a crilet that kept
//! logs under `<root-dir>/logs`, or a changed flag): the runtime's
//! ContainerStatus `log_path` is where such a container writes, so a link
//! is made to it when the path CreateContainer was given does not exist,
//! and at start every container that has no link gets one
//! ([`link_existing`]). A dead link whose container the runtime cannot
//! look up for another reason than NotFound is kept for the next sweep
//! (the kubelet removes it): a running container's log is missing for a
//! moment during each rotation, and its link is never made again.
//!
//! Invariant: a link is only made to a file that exists, and only removed
//! once its container is gone or has exited, or when it is the
//! container's own link and the container is being removed.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::layout::{LogDirs, container_id_of_symlink, container_log_file, legacy_log_symlink};
use crate::cri::{ContainerFilter, ContainerState, ContainerStatus, Runtime, RuntimeError};
use crate::pod::{CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL};

/// The kubelet makes the pod logs directory so (readable by root and its
/// group only: container output can hold secrets).
const POD_LOGS_DIR_MODE: u32 = 0o750;
/// ... and the symlinks' directory so, for shippers that run as another
/// user and read what the pods' own modes allow.
const CONTAINER_LOGS_DIR_MODE: u32 = 0o755;
/// A pod's and a container's log directories (the kubelet's, before
/// RunPodSandbox and CreateContainer).
pub const POD_LOG_DIR_MODE: u32 = 0o755;

#[derive(Debug, thiserror::Error)]
pub enum SymlinkError {
    #[error("creating the {what} {dir}: {source}")]
    Dir {
        what: &'static str,
        dir: PathBuf,
        source: io::Error,
    },
    #[error("container {container}: linking {link} to its log {log}: {source}")]
    Create {
        container: String,
        link: PathBuf,
        log: PathBuf,
        source: io::Error,
    },
    #[error("container {container}: removing its log symlink {link}: {source}")]
    Remove {
        container: String,
        link: PathBuf,
        source: io::Error,
    },
    #[error("container {container}: ContainerStatus: {source}")]
    Status {
        container: String,
        source: RuntimeError,
    },
}

/// Makes `dir` and its missing parents with `mode` (as Go's `MkdirAll`:
/// an existing directory keeps its mode).
pub fn make_dir(dir: &Path, mode: u32) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
}

/// Makes both directories at start, with the kubelet's modes. The pod logs
/// directory must be there (an error stops the start, as the kubelet's);
/// a symlinks directory that cannot be made is only warned about.
pub fn setup_dirs(dirs: &LogDirs) -> Result<(), SymlinkError> {
    make_dir(&dirs.pod_logs_dir, POD_LOGS_DIR_MODE).map_err(|source| SymlinkError::Dir {
        what: "pod logs directory (--pod-logs-dir)",
        dir: dirs.pod_logs_dir.clone(),
        source,
    })?;
    if let Err(e) = make_dir(&dirs.container_logs_dir, CONTAINER_LOGS_DIR_MODE) {
        tracing::warn!(dir = %dirs.container_logs_dir.display(), error = %e, "cannot create the container log symlinks directory (--container-logs-dir); containers get no symlinks");
    }
    Ok(())
}

/// The link of the container `status` describes, from its labels; `None`
/// for a container without them (not made by a kubelet or crilet).
pub fn link_of(
    container_logs_dir: &Path,
    status_labels: &crate::cri::Labels,
    id: &str,
) -> Option<PathBuf> {
    let label = |k: &str| status_labels.get(k).map(String::as_str);
    Some(legacy_log_symlink(
        container_logs_dir,
        label(POD_NAME_LABEL)?,
        label(POD_NAMESPACE_LABEL)?,
        label(CONTAINER_NAME_LABEL)?,
        id,
    ))
}

/// Links a container that has just started: `link` points at `log` (the
/// sandbox's log directory joined with the container's log path, as
/// CreateContainer was given them), or, when that file does not exist, at
/// the runtime's own path for it (a runtime that keeps the directory a
/// sandbox was run with, for a sandbox run with another pod logs
/// directory). Nothing is made when neither exists. Returns the link made.
pub async fn link_started_container(
    rt: &dyn Runtime,
    link: &Path,
    log: PathBuf,
    id: &str,
    pod_logs_dir: &Path,
) -> Result<Option<PathBuf>, SymlinkError> {
    let log = match exists(&log) {
        true => log,
        false => {
            let status = rt
                .container_status(id)
                .await
                .map_err(|source| SymlinkError::Status {
                    container: id.to_owned(),
                    source,
                })?;
            match container_log_file(&status, pod_logs_dir).filter(|l| exists(l)) {
                Some(l) => l,
                None => return Ok(None),
            }
        }
    };
    symlink(id, &log, link)
}

/// Whether `path` may exist: only NotFound says it does not (the kubelet
/// links on any other stat error too).
fn exists(path: &Path) -> bool {
    !matches!(std::fs::metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound)
}

fn symlink(id: &str, log: &Path, link: &Path) -> Result<Option<PathBuf>, SymlinkError> {
    std::os::unix::fs::symlink(log, link).map_err(|source| SymlinkError::Create {
        container: id.to_owned(),
        link: link.to_path_buf(),
        log: log.to_path_buf(),
        source,
    })?;
    Ok(Some(link.to_path_buf()))
}

/// Removes the link of a container being removed (with its log files);
/// one already gone is fine. Returns the link removed.
pub fn remove_link(
    container_logs_dir: &Path,
    status: &ContainerStatus,
    id: &str,
) -> Result<Option<PathBuf>, SymlinkError> {
    let Some(link) = link_of(container_logs_dir, &status.labels, id) else {
        return Ok(None);
    };
    match std::fs::remove_file(&link) {
        Ok(()) => Ok(Some(link)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SymlinkError::Remove {
            container: id.to_owned(),
            link,
            source,
        }),
    }
}

/// The container GC's sweep of `*.log` links whose file is gone: removed
/// when the name holds no container ID, or the runtime does not know the
/// container, or it has exited; kept while it runs (its log is renamed
/// for a moment at each rotation) or cannot be looked up. Returns the
/// links removed.
pub async fn remove_dead(rt: &dyn Runtime, container_logs_dir: &Path) -> Vec<PathBuf> {
    let dir = container_logs_dir.to_path_buf();
    let dead = match tokio::task::spawn_blocking(move || dead_links(&dir)).await {
        Ok(Ok(d)) => d,
        Ok(Err(e)) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Ok(Err(e)) => {
            tracing::warn!(dir = %container_logs_dir.display(), error = %e, "cannot list the container log symlinks");
            return Vec::new();
        }
        Err(_) => return Vec::new(),
    };
    let mut removed = Vec::new();
    for (link, id) in dead {
        if let Some(id) = id {
            match rt.container_status(&id).await {
                Ok(s) if s.state != ContainerState::Exited => continue,
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    tracing::debug!(link = %link.display(), error = %e, "keeping a dead container log symlink whose container cannot be looked up");
                    continue;
                }
            }
        }
        match std::fs::remove_file(&link) {
            Ok(()) => removed.push(link),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(link = %link.display(), error = %e, "cannot remove a dead container log symlink")
            }
        }
    }
    removed
}

/// The `*.log` entries of `dir` that lead to no file, each with the
/// container ID its name holds.
fn dead_links(dir: &Path) -> io::Result<Vec<(PathBuf, Option<String>)>> {
    let mut dead = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !name.ends_with(".log") || exists(&entry.path()) {
            continue;
        }
        let id = container_id_of_symlink(&name).map(str::to_owned);
        dead.push((entry.path(), id));
    }
    dead.sort();
    Ok(dead)
}

/// Links every running or exited kubelet-labelled container that has no
/// link yet to the file the runtime says it writes, once at start: the
/// containers a crilet with other log directories started. Returns the
/// links made.
pub async fn link_existing(rt: &dyn Runtime, dirs: &LogDirs) -> Vec<PathBuf> {
    let containers = match rt.list_containers(&ContainerFilter::default()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list containers to link their logs");
            return Vec::new();
        }
    };
    let mut made = Vec::new();
    for c in containers
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Running | ContainerState::Exited))
    {
        let Some(link) = link_of(&dirs.container_logs_dir, &c.labels, &c.id) else {
            continue;
        };
        if std::fs::symlink_metadata(&link).is_ok() {
            continue;
        }
        let log = match rt.container_status(&c.id).await {
            Ok(s) => container_log_file(&s, &dirs.pod_logs_dir),
            Err(e) => {
                tracing::debug!(container = %c.id, error = %e, "cannot link a container's log");
                continue;
            }
        };
        let Some(log) = log.filter(|l| exists(l)) else {
            continue;
        };
        match symlink(&c.id, &log, &link) {
            Ok(Some(l)) => made.push(l),
            Ok(None) => {}
            // The worker linked a container it had just started.
            Err(SymlinkError::Create { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => tracing::warn!(error = %e, "cannot link a container's log"),
        }
    }
    if !made.is_empty() {
        tracing::info!(
            links = made.len(),
            dir = %dirs.container_logs_dir.display(),
            "linked the logs of containers started before"
        );
    }
    made
}

#[cfg(test)]
#[path = "symlinks_tests.rs"]
mod tests;
