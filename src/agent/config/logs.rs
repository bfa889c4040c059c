//! Container log rotation settings: `--container-log-max-size`,
//! `--container-log-max-files`, `--container-log-monitor-interval` and
//! `--container-log-max-workers`, or the KubeletConfiguration fields
//! `containerLogMaxSize`, `containerLogMaxFiles`,
//! `containerLogMonitorInterval` and `containerLogMaxWorkers`, with the
//! kubelet's defaults (10Mi, 5, 10s, 1) and checks (more than one file, at
//! least one worker, an interval of at least 3s, a size that is a whole
//! number of bytes). A negative size turns rotation off.
//!
//! Invariant: flag over file over default, and every value is checked
//! wherever it came from; an error names the flag, or the file and the
//! field, that gave the bad value.

use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, ConfigFile, RunArgs, file_duration};
use crate::kuberuntime::mapping::quantity;
use crate::logs::rotation::RotatePolicy;
use crate::units::parse_duration;

pub const DEFAULT_CONTAINER_LOG_MAX_SIZE: &str = "10Mi";
pub const DEFAULT_CONTAINER_LOG_MAX_FILES: i32 = 5;
pub const DEFAULT_CONTAINER_LOG_MONITOR_INTERVAL: Duration = Duration::from_secs(10);
pub const DEFAULT_CONTAINER_LOG_MAX_WORKERS: i32 = 1;
/// The kubelet refuses a shorter `containerLogMonitorInterval`.
pub const MIN_CONTAINER_LOG_MONITOR_INTERVAL: Duration = Duration::from_secs(3);

/// The rotation flags of `crilet run` (names as the kubelet's).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ContainerLogArgs {
    /// Rotate a running container's log once it reaches this size (a
    /// quantity such as 10Mi; default 10Mi). A negative size turns rotation
    /// off.
    #[arg(long, allow_hyphen_values = true, value_name = "QUANTITY")]
    pub container_log_max_size: Option<String>,
    /// At most this many log files per container, the current one included
    /// (default 5; must be more than 1).
    #[arg(long, allow_negative_numbers = true)]
    pub container_log_max_files: Option<i32>,
    /// How often container logs are checked for rotation (Go duration,
    /// default 10s, at least 3s).
    #[arg(long, value_parser = parse_duration)]
    pub container_log_monitor_interval: Option<Duration>,
    /// How many containers' logs are rotated at once (default 1).
    #[arg(long, allow_negative_numbers = true)]
    pub container_log_max_workers: Option<i32>,
}

/// The rotation fields of a KubeletConfiguration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerLogFile {
    pub container_log_max_size: Option<String>,
    pub container_log_max_files: Option<i32>,
    pub container_log_monitor_interval: Option<String>,
    pub container_log_max_workers: Option<i32>,
}

/// Resolved rotation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLogSettings {
    /// Bytes; `None` when a negative size turned rotation off.
    pub max_size: Option<u64>,
    pub max_files: u32,
    pub monitor_interval: Duration,
    pub max_workers: usize,
}

impl ContainerLogSettings {
    /// The policy the rotation driver follows; `None` when rotation is off.
    pub fn rotation(&self) -> Option<RotatePolicy> {
        self.max_size.map(|max_size| RotatePolicy {
            max_size,
            max_files: self.max_files,
        })
    }

    /// The rotation driver over `runtime`; `None` when rotation is off.
    pub fn rotation_task(
        &self,
        runtime: std::sync::Arc<dyn crate::cri::Runtime>,
        pod_logs_dir: &std::path::Path,
    ) -> Option<crate::logs::container_log_manager::LogRotation> {
        Some(crate::logs::container_log_manager::LogRotation {
            runtime,
            policy: self.rotation()?,
            monitor_interval: self.monitor_interval,
            max_workers: self.max_workers,
            pod_logs_dir: pod_logs_dir.to_path_buf(),
            now: jiff::Timestamp::now,
            log_files: Default::default(),
        })
    }
}

/// Where a value came from, to name it in an error.
pub(super) enum Origin<'a> {
    Flag(&'static str),
    File { path: &'a str, field: &'static str },
    Default,
}

impl Origin<'_> {
    pub(super) fn error(&self, value: &str, problem: &str) -> ConfigError {
        match self {
            Origin::Flag(flag) => ConfigError::Flag {
                message: format!("{flag} {value}: {problem}"),
            },
            Origin::File { path, field } => ConfigError::File {
                path: path.to_string(),
                message: format!("{field}: {value}: {problem}"),
            },
            Origin::Default => ConfigError::Flag {
                message: format!("the default {value}: {problem}"),
            },
        }
    }
}

/// Flag over file over default.
pub(super) fn pick<'a, T>(
    flag: Option<T>,
    flag_name: &'static str,
    file: Option<T>,
    path: &'a str,
    field: &'static str,
    default: T,
) -> (T, Origin<'a>) {
    match (flag, file) {
        (Some(v), _) => (v, Origin::Flag(flag_name)),
        (None, Some(v)) => (v, Origin::File { path, field }),
        (None, None) => (default, Origin::Default),
    }
}

/// Flags over file over defaults, each value checked as the kubelet checks it.
pub(super) fn resolve_container_logs(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<ContainerLogSettings, ConfigError> {
    let (a, f) = (&args.container_logs, &file.container_logs);
    let (size, at) = pick(
        a.container_log_max_size.clone(),
        "--container-log-max-size",
        f.container_log_max_size.clone(),
        origin,
        "containerLogMaxSize",
        DEFAULT_CONTAINER_LOG_MAX_SIZE.to_string(),
    );
    let bytes = quantity::parse(&size)
        .map_err(|e| at.error(&size, &format!("not a quantity ({e})")))?
        .exact_value()
        .ok_or_else(|| at.error(&size, "not a whole number of bytes that fits an int64"))?;

    let (max_files, at) = pick(
        a.container_log_max_files,
        "--container-log-max-files",
        f.container_log_max_files,
        origin,
        "containerLogMaxFiles",
        DEFAULT_CONTAINER_LOG_MAX_FILES,
    );
    if max_files <= 1 {
        return Err(at.error(&max_files.to_string(), "must be greater than 1"));
    }

    let file_interval = file_duration(
        origin,
        "containerLogMonitorInterval",
        f.container_log_monitor_interval.as_deref(),
    )?;
    let (interval, at) = pick(
        a.container_log_monitor_interval,
        "--container-log-monitor-interval",
        file_interval,
        origin,
        "containerLogMonitorInterval",
        DEFAULT_CONTAINER_LOG_MONITOR_INTERVAL,
    );
    if interval < MIN_CONTAINER_LOG_MONITOR_INTERVAL {
        return Err(at.error(
            &format!("{interval:?}"),
            "must be a duration of at least 3s",
        ));
    }

    let (workers, at) = pick(
        a.container_log_max_workers,
        "--container-log-max-workers",
        f.container_log_max_workers,
        origin,
        "containerLogMaxWorkers",
        DEFAULT_CONTAINER_LOG_MAX_WORKERS,
    );
    if workers < 1 {
        return Err(at.error(&workers.to_string(), "must be at least 1"));
    }

    Ok(ContainerLogSettings {
        // Negative: off. Non-negative fits a u64.
        max_size: u64::try_from(bytes).ok(),
        max_files: max_files as u32,
        monitor_interval: interval,
        max_workers: workers as usize,
    })
}

#[cfg(test)]
#[path = "logs_tests.rs"]
mod tests;
