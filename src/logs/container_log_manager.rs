//! The container log rotation driver (the kubelet's container log manager)
//! and the removal of a container's log files and symlink with the
//! container (its `Clean`, and the kubelet's `removeContainerLog`).
//!
//! Every monitor interval it lists the runtime's running containers and
//! checks each one's log, at most `max_workers` at a time: ContainerStatus
//! gives the log path (once per container: the path is fixed when the
//! container is created, so it is kept while the container runs, where the
//! kubelet asks at every check), the file is stat'ed, its directory listed
//! when the log is due, `logs::rotation::plan` decides, and the steps are done here
//! with real files (gzip through `flate2`) and ReopenContainerLog. A failed
//! check logs why, naming the container and the file, and is simply
//! tried again at the next interval; each rotation logs one info line.
//!
//! Rotated names carry the UTC time, where the kubelet uses local time:
//! the plan takes the oldest by name, and local time runs backwards at a
//! daylight-saving change or a time-zone change, so the newest file would
//! be removed as the oldest.
//!
//! Invariant: file I/O runs on the blocking pool; the current log is
//! renamed only right before ReopenContainerLog and renamed back when
//! that fails, so the runtime never has a log it cannot write.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::layout::{LogDirs, container_log_file};
use crate::cri::{ContainerFilter, ContainerState, Runtime, RuntimeError};
use crate::logs::rotation::{
    COMPRESS_SUFFIX, Decision, RotatePolicy, Step, TIMESTAMP_FORMAT, TMP_SUFFIX, clean_targets,
    due, plan,
};

#[derive(Debug, thiserror::Error)]
pub enum LogRotationError {
    #[error("container {container}: ContainerStatus: {source}")]
    Status {
        container: String,
        source: RuntimeError,
    },
    #[error("container {container}: {op} {path}: {source}")]
    Io {
        container: String,
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("container {container}: log {log} is missing and ReopenContainerLog failed: {source}")]
    ReopenMissing {
        container: String,
        log: PathBuf,
        source: RuntimeError,
    },
    #[error(
        "container {container}: ReopenContainerLog failed after {log} was renamed to {rotated} ({source}); {}",
        match rename_back { None => "renamed it back".to_string(), Some(e) => format!("renaming it back failed too: {e}") }
    )]
    Reopen {
        container: String,
        log: PathBuf,
        rotated: PathBuf,
        source: RuntimeError,
        rename_back: Option<io::Error>,
    },
    #[error("{0}")]
    Symlink(Box<super::symlinks::SymlinkError>),
}

/// What one check did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The runtime names no log file for the container.
    NoLog,
    /// Smaller than the max size.
    Kept,
    /// The log was missing; the runtime reopened it.
    Reopened,
    /// `log` is now `rotated`; the runtime writes a new `log`.
    Rotated {
        log: PathBuf,
        rotated: PathBuf,
        size: u64,
    },
    /// This second's rotated name is taken; rotated at a later check.
    Waited { log: PathBuf, taken: String },
}

/// The rotation driver's settings and runtime.
#[derive(Clone)]
pub struct LogRotation {
    pub runtime: Arc<dyn Runtime>,
    pub policy: RotatePolicy,
    pub monitor_interval: Duration,
    pub max_workers: usize,
    /// `--pod-logs-dir`, for a relative log path.
    pub pod_logs_dir: PathBuf,
    /// The clock that names rotated files.
    pub now: fn() -> jiff::Timestamp,
    /// The log file of each running container checked so far.
    pub log_files: LogFiles,
}

/// The log file ContainerStatus named for each container checked, `None`
/// for a container with none, by container ID; shared by the clones of
/// one driver. Entries go when their container no longer runs.
#[derive(Clone, Default)]
pub struct LogFiles(Arc<Mutex<HashMap<String, Option<PathBuf>>>>);

impl LogFiles {
    fn get(&self, id: &str) -> Option<Option<PathBuf>> {
        self.lock().get(id).cloned()
    }

    fn insert(&self, id: &str, log: Option<PathBuf>) {
        self.lock().insert(id.to_string(), log);
    }

    /// Keeps the entries of `running` only.
    fn retain(&self, running: &[String]) {
        let running: std::collections::HashSet<&str> = running.iter().map(|s| s.as_str()).collect();
        self.lock().retain(|id, _| running.contains(id.as_str()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<PathBuf>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl LogRotation {
    /// Checks every interval (the first right away) until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        tracing::info!(
            max_size = self.policy.max_size,
            max_files = self.policy.max_files,
            interval = ?self.monitor_interval,
            workers = self.max_workers,
            "container log rotation on"
        );
        let mut tick = tokio::time::interval(self.monitor_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => { self.check_all().await; }
            }
        }
    }

    /// One pass over the running containers, `max_workers` at a time; logs
    /// each rotation and each failure. Returns the outcomes by container.
    pub async fn check_all(&self) -> Vec<(String, Result<Outcome, LogRotationError>)> {
        let running = ContainerFilter {
            state: Some(ContainerState::Running),
            ..Default::default()
        };
        let containers = match self.runtime.list_containers(&running).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "container log rotation: cannot list containers; retrying at the next check");
                return Vec::new();
            }
        };
        // Only running containers write; a stopped one keeps its last log.
        let ids: Vec<String> = containers
            .into_iter()
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| c.id)
            .collect();
        self.log_files.retain(&ids);
        futures::stream::iter(ids)
            .map(|id| async move {
                let result = self.check(&id).await;
                report(&id, &result);
                (id, result)
            })
            .buffer_unordered(self.max_workers.max(1))
            .collect()
            .await
    }

    /// Checks one container's log and rotates it if due.
    pub async fn check(&self, id: &str) -> Result<Outcome, LogRotationError> {
        let Some(log) = self.log_file(id).await? else {
            return Ok(Outcome::NoLog);
        };
        let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str()))
        else {
            return Ok(Outcome::NoLog);
        };
        let (dir, name) = (dir.to_path_buf(), name.to_string());
        let policy = self.policy;
        let (size, listing) = blocking({
            let (dir, log) = (dir.clone(), log.clone());
            move || -> Result<_, (&'static str, PathBuf, io::Error)> {
                let size = match std::fs::metadata(&log) {
                    Ok(m) => Some(m.len()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => return Err(("stat", log, e)),
                };
                // Only a rotation reads the siblings (the kubelet's
                // rotateLogs too: a log under the size is only stat'ed); a
                // missing log (or directory) is only reopened.
                let listing = match size {
                    Some(size) if due(size, policy) => {
                        list_dir(&dir).map_err(|e| ("list", dir, e))?
                    }
                    _ => Vec::new(),
                };
                Ok((size, listing))
            }
        })
        .await
        .map_err(|(op, path, e)| io_error(id, op, &path, e))?;
        let timestamp = (self.now)().strftime(TIMESTAMP_FORMAT).to_string();
        match plan(&name, size, &listing, self.policy, &timestamp) {
            Decision::Keep => Ok(Outcome::Kept),
            Decision::Wait { taken } => Ok(Outcome::Waited { log, taken }),
            Decision::Reopen => match self.runtime.reopen_container_log(id).await {
                Ok(()) => Ok(Outcome::Reopened),
                Err(source) => Err(LogRotationError::ReopenMissing {
                    container: id.to_string(),
                    log,
                    source,
                }),
            },
            Decision::Rotate(steps) => {
                self.rotate(id, &dir, log, size.unwrap_or_default(), steps)
                    .await
            }
        }
    }

    /// The container's log file: ContainerStatus's the first time, kept
    /// after.
    async fn log_file(&self, id: &str) -> Result<Option<PathBuf>, LogRotationError> {
        if let Some(log) = self.log_files.get(id) {
            return Ok(log);
        }
        let status = (self.runtime.container_status(id).await).map_err(|source| {
            LogRotationError::Status {
                container: id.to_string(),
                source,
            }
        })?;
        let log = container_log_file(&status, &self.pod_logs_dir);
        self.log_files.insert(id, log.clone());
        Ok(log)
    }

    async fn rotate(
        &self,
        id: &str,
        dir: &Path,
        log: PathBuf,
        size: u64,
        steps: Vec<Step>,
    ) -> Result<Outcome, LogRotationError> {
        let mut rotated = None;
        for step in steps {
            match step {
                Step::Remove(n) => {
                    let path = dir.join(n);
                    blocking({
                        let path = path.clone();
                        move || remove_file(&path)
                    })
                    .await
                    .map_err(|source| io_error(id, "remove", &path, source))?;
                }
                Step::Compress(n) => {
                    let path = dir.join(n);
                    blocking({
                        let path = path.clone();
                        move || compress(&path)
                    })
                    .await
                    .map_err(|source| io_error(id, "compress", &path, source))?;
                }
                Step::Rename { from, to } => {
                    let (from, to) = (dir.join(from), dir.join(to));
                    blocking({
                        let (from, to) = (from.clone(), to.clone());
                        move || std::fs::rename(&from, &to)
                    })
                    .await
                    .map_err(|source| io_error(id, "rename", &from, source))?;
                    rotated = Some(to);
                }
                Step::Reopen => {
                    let Err(source) = self.runtime.reopen_container_log(id).await else {
                        continue;
                    };
                    let Some(rotated) = rotated.take() else {
                        // The plan always renames before it reopens.
                        return Err(LogRotationError::ReopenMissing {
                            container: id.to_string(),
                            log,
                            source,
                        });
                    };
                    // Rename back so that the next check tries again.
                    let rename_back = blocking({
                        let (rotated, log) = (rotated.clone(), log.clone());
                        move || std::fs::rename(&rotated, &log)
                    })
                    .await
                    .err();
                    return Err(LogRotationError::Reopen {
                        container: id.to_string(),
                        log,
                        rotated,
                        source,
                        rename_back,
                    });
                }
            }
        }
        Ok(match rotated {
            Some(rotated) => Outcome::Rotated { log, rotated, size },
            None => Outcome::Kept,
        })
    }
}

/// One info line per rotation, one warning per failure.
fn report(id: &str, result: &Result<Outcome, LogRotationError>) {
    match result {
        Ok(Outcome::Rotated { log, rotated, size }) => tracing::info!(
            container = id,
            log = %log.display(),
            rotated = %rotated.display(),
            size,
            "container log rotated"
        ),
        Ok(Outcome::Waited { log, taken }) => tracing::info!(
            container = id,
            log = %log.display(),
            taken,
            "container log due for rotation, but this second's name is taken; rotating at the next check"
        ),
        Ok(Outcome::Reopened) => {
            tracing::info!(
                container = id,
                "container log was missing; the runtime reopened it"
            )
        }
        Ok(Outcome::NoLog | Outcome::Kept) => {}
        Err(e) => tracing::warn!(
            error = %e,
            "container log rotation failed; retrying at the next check"
        ),
    }
}

fn io_error(id: &str, op: &'static str, path: &Path, source: io::Error) -> LogRotationError {
    LogRotationError::Io {
        container: id.to_string(),
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Removes the container's log and its rotated files (the kubelet's
/// `Clean`: every file named `<log>*`), then its symlink in the container
/// logs directory (named from its labels and ID), before the container
/// itself is removed. A container the runtime no longer knows has nothing
/// to clean (its link, if any, is left to the dead-link sweep). Returns
/// the files and the link removed.
pub async fn clean_container_logs(
    rt: &dyn Runtime,
    dirs: &LogDirs,
    id: &str,
) -> Result<Vec<PathBuf>, LogRotationError> {
    let status = match rt.container_status(id).await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(source) => {
            return Err(LogRotationError::Status {
                container: id.to_string(),
                source,
            });
        }
    };
    let mut removed = match container_log_file(&status, &dirs.pod_logs_dir) {
        Some(log) => remove_log_files(id, log).await?,
        None => Vec::new(),
    };
    let link = super::symlinks::remove_link(&dirs.container_logs_dir, &status, id)
        .map_err(|e| LogRotationError::Symlink(Box::new(e)))?;
    removed.extend(link);
    Ok(removed)
}

/// Removes `log` and every `<log>*` beside it.
async fn remove_log_files(id: &str, log: PathBuf) -> Result<Vec<PathBuf>, LogRotationError> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(Vec::new());
    };
    let (dir, name) = (dir.to_path_buf(), name.to_string());
    blocking(move || {
        let listing = match list_dir(&dir) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(("list", dir, e)),
        };
        let mut removed = Vec::new();
        for n in clean_targets(&name, &listing) {
            let path = dir.join(n);
            remove_file(&path).map_err(|e| ("remove", path.clone(), e))?;
            removed.push(path);
        }
        Ok(removed)
    })
    .await
    .map_err(|(op, path, source)| LogRotationError::Io {
        container: id.to_string(),
        op,
        path,
        source,
    })
}

/// Runs blocking file I/O off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The names in `dir` (not recursive); names that are not UTF-8 are skipped.
fn list_dir(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        if let Ok(n) = entry?.file_name().into_string() {
            names.push(n);
        }
    }
    Ok(names)
}

/// Removes a file; one already gone is fine.
fn remove_file(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// gzip `x` into `x.tmp`, rename it to `x.gz`, remove `x`. The `.tmp` is
/// removed on failure (or left for the next rotation's clean-up).
pub fn compress(path: &Path) -> io::Result<()> {
    use std::io::Write;
    let with = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let (tmp, out) = (with(TMP_SUFFIX), with(COMPRESS_SUFFIX));
    let mut input = std::fs::File::open(path)?;
    let permissions = input.metadata()?.permissions();
    let written = (|| {
        let file = std::fs::File::create(&tmp)?;
        file.set_permissions(permissions)?;
        let mut gz =
            flate2::write::GzEncoder::new(io::BufWriter::new(file), flate2::Compression::default());
        io::copy(&mut input, &mut gz)?;
        gz.finish()?.flush()?;
        std::fs::rename(&tmp, &out)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    remove_file(path)
}

#[cfg(test)]
#[path = "container_log_manager_tests.rs"]
mod tests;
