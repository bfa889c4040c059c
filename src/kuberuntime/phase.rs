//! The pod phase, as the kubelet's `getPhase` (`pkg/kubelet/kubelet_pods.go`)
//! computes it for a static pod, sidecars included, and the spec and
//! status lookups the status generator shares with it.
//!
//! Invariant: pure; the phase depends only on the spec and the container
//! statuses it is given, matched by name.

use k8s_openapi::api::core::v1::{
    Container, ContainerState as K8sContainerState, ContainerStatus as K8sContainerStatus, Pod,
};

use super::plan::RestartPolicy;
use crate::pod::is_restartable_init_container;

pub const PENDING: &str = "Pending";
pub const RUNNING: &str = "Running";
pub const SUCCEEDED: &str = "Succeeded";
pub const FAILED: &str = "Failed";

/// The init containers, app containers and restart policy of the spec.
pub(super) fn spec_of(pod: &Pod) -> (&[Container], &[Container], RestartPolicy) {
    let spec = pod.spec.as_ref();
    (
        spec.and_then(|s| s.init_containers.as_deref())
            .unwrap_or_default(),
        spec.map(|s| s.containers.as_slice()).unwrap_or_default(),
        RestartPolicy::parse(spec.and_then(|s| s.restart_policy.as_deref())),
    )
}

pub(super) fn find<'a>(
    statuses: &'a [K8sContainerStatus],
    name: &str,
) -> Option<&'a K8sContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// Whether any app container of the spec has run (running or terminated).
pub(super) fn any_app_started(pod: &Pod, app: &[K8sContainerStatus]) -> bool {
    let started = |s: &K8sContainerState| s.running.is_some() || s.terminated.is_some();
    let apps = spec_of(pod).1.iter().filter_map(|c| find(app, &c.name));
    apps.into_iter()
        .any(|s| s.state.as_ref().is_some_and(started))
}

/// A container status as `getPhase` reads it.
enum Seen {
    Running,
    Terminated(i32),
    /// Waiting after a termination (with that exit code): being restarted.
    Restarting(i32),
    Waiting,
    /// No status, or a status without a state.
    Unknown,
}

fn seen(s: Option<&K8sContainerStatus>) -> Seen {
    let Some(st) = s.and_then(|s| s.state.as_ref()) else {
        return Seen::Unknown;
    };
    let last = s.and_then(|s| s.last_state.as_ref()?.terminated.as_ref());
    match (&st.running, &st.terminated, &st.waiting, last) {
        (Some(_), _, _, _) => Seen::Running,
        (_, Some(t), _, _) => Seen::Terminated(t.exit_code),
        (_, _, Some(_), Some(t)) => Seen::Restarting(t.exit_code),
        (_, _, Some(_), None) => Seen::Waiting,
        _ => Seen::Unknown,
    }
}

/// The pod phase, as the kubelet's `getPhase` computes it for a static pod.
/// Statuses are matched to spec containers by name; a spec container with no
/// status is "unknown".
///
/// Init containers that run to completion, each classified as: *pending*
/// (no status, running, waiting with no lastState, or anything else),
/// *failed* (terminated with a non-zero code, or waiting after such a
/// termination), or done. Sidecars count with the app containers: one that
/// runs is *running* (and, as in the kubelet, which reads `started` before
/// the prober sets it, *pending* initialization too); one that terminated,
/// or waits after a termination, counts for nothing; one waiting with no
/// lastState is *waiting* and pending, one without a state *unknown* and
/// pending. App containers are counted as *running*, *stopped* (terminated,
/// or waiting with a terminated lastState, i.e. restarting), of which
/// *succeeded* are terminated with code 0, *waiting* (waiting with no
/// lastState) and *unknown*. The first matching row decides:
///
/// | # | condition                                                  | phase     |
/// |---|------------------------------------------------------------|-----------|
/// | 1 | failed init > 0 and restartPolicy Never                    | Failed    |
/// | 2 | pending init > 0 and no app container running/terminated   | Pending   |
/// | 3 | waiting > 0                                                | Pending   |
/// | 4 | running > 0 and unknown = 0                                | Running   |
/// | 5 | running = 0, stopped > 0, unknown = 0, policy Always       | Running   |
/// | 6 | ... as 5, policy not Always, stopped = succeeded           | Succeeded |
/// | 7 | ... as 5, policy Never, some failure                       | Failed    |
/// | 8 | ... as 5, policy OnFailure, some failure (restarting)      | Running   |
/// | 9 | anything else (no status at all, running with unknown)     | Pending   |
pub fn pod_phase(
    pod: &Pod,
    init: &[K8sContainerStatus],
    app: &[K8sContainerStatus],
) -> &'static str {
    let (inits, apps, policy) = spec_of(pod);
    let (mut pending_init, mut failed_init) = (0, 0);
    let (mut running, mut stopped, mut succeeded, mut waiting, mut unknown) = (0, 0, 0, 0, 0);
    for c in inits {
        let status = find(init, &c.name);
        if is_restartable_init_container(c) {
            match (status, seen(status)) {
                (None, _) => unknown += 1,
                (_, Seen::Running) => {
                    pending_init += 1;
                    running += 1;
                }
                (_, Seen::Terminated(_) | Seen::Restarting(_)) => {}
                (_, Seen::Waiting) => {
                    pending_init += 1;
                    waiting += 1;
                }
                (_, Seen::Unknown) => {
                    pending_init += 1;
                    unknown += 1;
                }
            }
            continue;
        }
        match seen(status) {
            Seen::Terminated(code) | Seen::Restarting(code) => {
                failed_init += usize::from(code != 0)
            }
            _ => pending_init += 1,
        }
    }
    for c in apps {
        match seen(find(app, &c.name)) {
            Seen::Running => running += 1,
            Seen::Terminated(code) => {
                stopped += 1;
                succeeded += usize::from(code == 0);
            }
            Seen::Restarting(_) => stopped += 1,
            Seen::Waiting => waiting += 1,
            Seen::Unknown => unknown += 1,
        }
    }

    if failed_init > 0 && policy == RestartPolicy::Never {
        return FAILED;
    }
    if (pending_init > 0 && !any_app_started(pod, app)) || waiting > 0 {
        return PENDING;
    }
    if running > 0 && unknown == 0 {
        return RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        return match policy {
            RestartPolicy::Always => RUNNING,
            _ if stopped == succeeded => SUCCEEDED,
            RestartPolicy::Never => FAILED,
            RestartPolicy::OnFailure => RUNNING,
        };
    }
    PENDING
}
