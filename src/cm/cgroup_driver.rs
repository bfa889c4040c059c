//! The start-up check that crilet and the runtime use the same cgroup
//! driver, as the kubelet checks it against CRI `RuntimeConfig`.
//!
//! Invariant: [`check_cgroup_driver`] is pure; only [`DriverCheck::log`]
//! writes (a log line), and the caller decides to stop on a mismatch.

use crate::cri::{CgroupDriver, RuntimeError};

/// A runtime whose driver differs from crilet's: pods would get cgroups
/// the runtime cannot place (the kubelet refuses to start, too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the runtime uses the {runtime} cgroup driver but crilet is set to {ours} \
     (--cgroup-driver / cgroupDriver): they must match"
)]
pub struct DriverMismatch {
    pub runtime: CgroupDriver,
    pub ours: CgroupDriver,
}

/// What the runtime's answer means when it does not contradict crilet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverCheck {
    /// The runtime reports crilet's driver.
    Matches(CgroupDriver),
    /// The runtime does not report its driver (containerd 1.6 does not
    /// implement RuntimeConfig): crilet trusts `--cgroup-driver`.
    Unreported(CgroupDriver),
    /// RuntimeConfig failed for another reason (the runtime went away, a
    /// deadline): crilet goes on with `--cgroup-driver` as in the
    /// unreported case rather than stop on a question it could not ask.
    Failed { ours: CgroupDriver, error: String },
}

/// Compares the runtime's answer to RuntimeConfig (`Ok(None)`: not
/// reported) with crilet's driver. Only a reported, different driver is an
/// error; any other failure of the call is [`DriverCheck::Failed`], to be
/// logged as a warning before going on.
pub fn check_cgroup_driver(
    ours: CgroupDriver,
    answer: Result<Option<CgroupDriver>, RuntimeError>,
) -> Result<DriverCheck, DriverMismatch> {
    match answer {
        Ok(Some(runtime)) if runtime == ours => Ok(DriverCheck::Matches(ours)),
        Ok(Some(runtime)) => Err(DriverMismatch { runtime, ours }),
        Ok(None) => Ok(DriverCheck::Unreported(ours)),
        Err(e) => Ok(DriverCheck::Failed {
            ours,
            error: e.to_string(),
        }),
    }
}

impl DriverCheck {
    /// One line: debug when the drivers match, info when the runtime does
    /// not tell, a warning when the call failed.
    pub fn log(&self) {
        match self {
            DriverCheck::Matches(d) => {
                tracing::debug!(driver = %d, "runtime cgroup driver matches")
            }
            DriverCheck::Unreported(d) => tracing::info!(
                driver = %d,
                "the runtime does not report its cgroup driver; crilet trusts --cgroup-driver"
            ),
            DriverCheck::Failed { ours, error } => tracing::warn!(
                driver = %ours,
                %error,
                "could not ask the runtime for its cgroup driver; crilet trusts --cgroup-driver"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CgroupDriver::{Cgroupfs, Systemd};

    fn rpc_error(status: tonic::Status) -> RuntimeError {
        let (endpoint, op) = ("unix:///run/crio.sock".into(), "RuntimeConfig");
        RuntimeError::Rpc {
            endpoint,
            op,
            status,
        }
    }

    #[test]
    fn same_driver_matches_and_an_unreported_one_is_trusted() {
        for d in [Cgroupfs, Systemd] {
            assert_eq!(
                check_cgroup_driver(d, Ok(Some(d))),
                Ok(DriverCheck::Matches(d))
            );
            assert_eq!(
                check_cgroup_driver(d, Ok(None)),
                Ok(DriverCheck::Unreported(d))
            );
        }
    }

    #[test]
    fn a_different_driver_stops_with_both_named() {
        let err = check_cgroup_driver(Cgroupfs, Ok(Some(Systemd))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the runtime uses the systemd cgroup driver but crilet is set to cgroupfs \
             (--cgroup-driver / cgroupDriver): they must match"
        );
        let err = check_cgroup_driver(Systemd, Ok(Some(Cgroupfs))).unwrap_err();
        assert!(err.to_string().starts_with(
            "the runtime uses the cgroupfs cgroup driver but crilet is set to systemd"
        ));
    }

    #[test]
    fn other_failures_go_on_with_the_flag() {
        let answer = Err(rpc_error(tonic::Status::unavailable("connection refused")));
        let check = check_cgroup_driver(Systemd, answer).unwrap();
        let DriverCheck::Failed { ours, error } = check else {
            panic!("{check:?}");
        };
        assert_eq!(ours, Systemd);
        assert!(
            error.contains("RuntimeConfig") && error.contains("connection refused"),
            "{error}"
        );
    }
}
