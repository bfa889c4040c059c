//! Runtime settings: the CRI endpoint, the deadline of each CRI call, how
//! many mutating calls run at once, the cgroup root pods are put under and
//! the cgroup driver. Invariant: each is
//! flag over file over default, so each always resolves to a value.

use std::time::Duration;

use super::{ConfigError, ConfigFile, RunArgs, file_duration};
use crate::cri::{CgroupDriver, DEFAULT_ENDPOINT};

pub const DEFAULT_RUNTIME_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// `--max-parallel-runtime-mutations` by default. The raw CRI sequence for
/// 50 pods finished soonest at width 7 on containerd 1.6 and 6 on
/// containerd 2.1 (widths 5-9 within a few percent); crilet with this bound
/// started 50 pods in 2810 ms, against 3155 ms unbounded and 3065 ms with 3
/// (containerd 1.6, one run; docs/footprint.md).
pub const DEFAULT_MAX_PARALLEL_RUNTIME_MUTATIONS: usize = 6;

/// The resolved runtime fields of `Settings`.
pub(super) struct RuntimeSettings {
    pub container_runtime_endpoint: String,
    pub runtime_request_timeout: Duration,
    pub max_parallel_runtime_mutations: usize,
    pub cgroup_root: String,
    pub cgroup_driver: CgroupDriver,
}

/// Flags over file over defaults; a bad `runtimeRequestTimeout` or
/// `cgroupDriver` names the file and the field.
pub(super) fn resolve_runtime(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<RuntimeSettings, ConfigError> {
    let request_timeout = file_duration(
        origin,
        "runtimeRequestTimeout",
        file.runtime_request_timeout.as_deref(),
    )?;
    let file_driver = (file.cgroup_driver.as_deref())
        .map(str::parse::<CgroupDriver>)
        .transpose()
        .map_err(|e| ConfigError::File {
            path: origin.to_string(),
            message: format!("cgroupDriver: {e}"),
        })?;
    Ok(RuntimeSettings {
        container_runtime_endpoint: args
            .container_runtime_endpoint
            .clone()
            .or_else(|| file.container_runtime_endpoint.clone())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()),
        runtime_request_timeout: args
            .runtime_request_timeout
            .or(request_timeout)
            .unwrap_or(DEFAULT_RUNTIME_REQUEST_TIMEOUT),
        max_parallel_runtime_mutations: args
            .max_parallel_runtime_mutations
            .or(file.max_parallel_runtime_mutations)
            .unwrap_or(DEFAULT_MAX_PARALLEL_RUNTIME_MUTATIONS),
        cgroup_root: args
            .cgroup_root
            .clone()
            .or_else(|| file.cgroup_root.clone())
            .unwrap_or_else(|| "/".to_string()),
        cgroup_driver: args.cgroup_driver.or(file_driver).unwrap_or_default(),
    })
}
