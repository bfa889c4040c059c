//! The API status of a pod, generated from what the runtime reports, as the
//! kubelet generates it (`generateAPIPodStatus`, `getPhase`, the condition
//! generators and `ComputePodQOS`).
//!
//! Invariant: pure. No I/O and no clock: the caller passes `now` and the
//! last status it generated, so the same inputs always give the same status.
//! Every timestamp produced is truncated to whole seconds, the precision the
//! API server stores, so a status compares equal to its round trip. Each
//! terminated message (the runtime's, then the container's own, which the
//! worker read) is capped as the status manager's normalizeStatus caps it.
//!
//! Probes arrive as their latest results ([`StatusInput::probes`], kept by
//! the prober's driver); `started` and `ready` follow the kubelet's rule in
//! [`container_readiness`]. A container without probes is started and ready
//! exactly when it runs.
//!
//! Sidecars (init containers with `restartPolicy: Always`) are reported as
//! the kubelet reports them: `started` and `ready` from their probes, like
//! app containers; they count for the pod's Initialized condition once
//! started and for Ready and ContainersReady like app containers; the pod
//! phase ignores one that terminated (a Never or OnFailure pod whose app
//! containers are done is Succeeded or Failed whatever its sidecars did).
//!
//! Not supported yet: readiness gates, and pod-level resources in the QoS
//! class.

use std::cmp::Reverse;
use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerState as K8sContainerState, ContainerStateRunning,
    ContainerStateTerminated, ContainerStateWaiting, ContainerStatus as K8sContainerStatus, HostIP,
    Pod, PodCondition, PodIP, PodStatus, VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::labels::{CONTAINER_RESTART_COUNT_ANNOTATION, ContainerLabels};
use super::mapping::{qos_class, reported_pod_ip};
use super::phase::{any_app_started, find, spec_of};
use super::plan::RestartPolicy;
use super::termination::{cap_message, message_cap};
use crate::cri::types::{ContainerState, ContainerStatus};
use crate::pod::is_restartable_init_container;
use crate::prober::{ContainerProbeResults, container_readiness};

pub use super::phase::{FAILED, PENDING, RUNNING, SUCCEEDED, pod_phase};

pub const CONTAINER_CREATING: &str = "ContainerCreating";
pub const POD_INITIALIZING: &str = "PodInitializing";

pub const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
pub const INITIALIZED: &str = "Initialized";
pub const READY: &str = "Ready";
pub const CONTAINERS_READY: &str = "ContainersReady";
pub const POD_SCHEDULED: &str = "PodScheduled";

/// Why a container is not running, as the worker saw it (shown as Waiting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingReason {
    pub reason: String,
    pub message: String,
}

/// Everything the status of one pod is made of.
#[derive(Debug, Clone, Copy)]
pub struct StatusInput<'a> {
    /// The worker's own copy of the pod; its spec drives the container lists.
    pub pod: &'a Pod,
    pub sandbox_ready: bool,
    /// Empty for host-network pods: their podIP is `host_ip`.
    pub pod_ip: &'a str,
    pub host_ip: &'a str,
    /// Every container of this pod the runtime has (any sandbox, any attempt).
    pub containers: &'a [ContainerStatus],
    /// Why a container that is not running is not, by container name.
    pub waiting: &'a HashMap<String, WaitingReason>,
    /// The latest readiness and startup probe results, by container name.
    /// A container without an entry has no probes (empty map: no probes).
    pub probes: &'a HashMap<String, ContainerProbeResults>,
    /// Termination messages the worker read for exited containers, by
    /// container ID (see `termination`); shown after the runtime's own
    /// message in `state.terminated.message` and later in lastState.
    pub messages: &'a HashMap<String, String>,
    /// When the worker first saw the pod.
    pub start_time: Timestamp,
    /// Container IDs are reported as `<runtime_name>://<id>`.
    pub runtime_name: &'a str,
    /// The last status generated, to keep lastTransitionTime stable.
    pub previous: Option<&'a PodStatus>,
    pub now: Timestamp,
}

/// The status of the pod. `initContainerStatuses` is only set when the spec
/// has init containers, in spec order; `containerStatuses` are sorted by
/// name.
pub fn pod_status(input: &StatusInput) -> PodStatus {
    let (inits, apps, policy) = spec_of(input.pod);
    let init: Vec<_> = inits
        .iter()
        .map(|c| container_status(input, c, Role::of_init(c), policy))
        .collect();
    let app: Vec<_> = apps
        .iter()
        .map(|c| container_status(input, c, Role::App, policy))
        .collect();
    let phase = pod_phase(input.pod, &init, &app);

    let pod_ip = reported_pod_ip(input.pod, input.pod_ip, input.host_ip);
    // A sandbox that is no longer ready (a finished pod's) has no IP to
    // report; the IP it had stays in the status, as the kubelet keeps it.
    let previous_ip = input.previous.and_then(|p| p.pod_ip.as_deref());
    let pod_ip = match (pod_ip, previous_ip) {
        ("", Some(ip)) if !input.sandbox_ready => ip,
        (ip, _) => ip,
    };
    let non_empty = |ip: &str| (!ip.is_empty()).then(|| ip.to_string());
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions(input, &init, &app, phase)),
        host_ip: non_empty(input.host_ip),
        host_ips: non_empty(input.host_ip).map(|ip| vec![HostIP { ip }]),
        pod_ip: non_empty(pod_ip),
        pod_ips: non_empty(pod_ip).map(|ip| vec![PodIP { ip }]),
        start_time: Some(Time(seconds(input.start_time))),
        qos_class: Some(qos_class(input.pod).as_str().to_string()),
        init_container_statuses: (!inits.is_empty()).then_some(init),
        container_statuses: Some(by_name(app)),
        ..PodStatus::default()
    }
}

/// The status of a pod admission refused, as the kubelet leaves it (its
/// `rejectPod`, then the status manager's `TerminatePod`): phase Failed
/// with `reason` and `Pod was rejected: <message>`, no pod IP, every
/// container terminated as ContainerStatusUnknown (exit code 137, never
/// started), and the Ready conditions' reason PodFailed. `input` holds no
/// runtime containers and no ready sandbox: the pod never ran.
pub fn rejected_pod_status(input: &StatusInput, reason: &str, message: &str) -> PodStatus {
    let mut status = pod_status(input);
    let unknown = K8sContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some("ContainerStatusUnknown".into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let lists = [
        &mut status.init_container_statuses,
        &mut status.container_statuses,
    ];
    for s in lists.into_iter().flatten().flatten() {
        s.state = Some(unknown.clone());
        (s.ready, s.started) = (false, Some(false));
    }
    let init = status.init_container_statuses.clone().unwrap_or_default();
    let app = status.container_statuses.clone().unwrap_or_default();
    status.conditions = Some(conditions(input, &init, &app, FAILED));
    status.phase = Some(FAILED.into());
    status.reason = Some(reason.into());
    status.message = Some(format!("Pod was rejected: {message}"));
    (status.pod_ip, status.pod_ips) = (None, None);
    status
}

/// The app containers' statuses sorted by name, as the kubelet lists them
/// (its `SortedContainerStatuses`); init containers keep spec order.
fn by_name(mut statuses: Vec<K8sContainerStatus>) -> Vec<K8sContainerStatus> {
    statuses.sort_by(|a, b| a.name.cmp(&b.name));
    statuses
}

/// What a spec container is to the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    App,
    /// An init container that runs to completion.
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
}

impl Role {
    fn of_init(c: &Container) -> Role {
        if is_restartable_init_container(c) {
            Role::Sidecar
        } else {
            Role::Init
        }
    }
}

/// The status of one spec container. The current container is the newest
/// runtime container of that name (highest attempt, then newest); the one
/// before it supplies lastState. `started` and `ready` come from the probe
/// results ([`container_readiness`]), except that an init container that
/// runs to completion is ready once it terminated with exit code 0 (the
/// kubelet's rule; a sidecar is ready as an app container is).
fn container_status(
    input: &StatusInput,
    spec: &Container,
    role: Role,
    policy: RestartPolicy,
) -> K8sContainerStatus {
    let mut runs: Vec<&ContainerStatus> = input
        .containers
        .iter()
        .filter(|c| c.metadata.name == spec.name)
        .collect();
    runs.sort_by_key(|c| Reverse((c.metadata.attempt, c.created_at)));
    let current = runs.first().copied();
    let cid = |c: &ContainerStatus| format!("{}://{}", input.runtime_name, c.id);
    let cap = message_cap(input.pod);
    let state_of = |c: &ContainerStatus| {
        let message = terminated_message(c, input.messages.get(&c.id), cap);
        runtime_state(c, cid(c), message)
    };

    let mut state = match current {
        Some(c) => state_of(c),
        // The kubelet's default: every container of a pod with init
        // containers waits in PodInitializing until it exists.
        None if !spec_of(input.pod).0.is_empty() => waiting(POD_INITIALIZING, None),
        None => waiting(CONTAINER_CREATING, None),
    };
    let mut last_state = runs
        .get(1)
        .filter(|p| p.state == ContainerState::Exited)
        .map(|p| state_of(p));

    // A reason from the worker applies only to a container that will be
    // (re)started; a stale entry must not hide a running or finished one.
    if let Some(w) = input.waiting.get(&spec.name) {
        let applies = match current {
            None => true,
            Some(c) => match c.state {
                ContainerState::Running => false,
                ContainerState::Created | ContainerState::Unknown => true,
                ContainerState::Exited => will_restart(policy, role != Role::App, c.exit_code),
            },
        };
        if applies {
            let old = std::mem::replace(&mut state, waiting(&w.reason, Some(&w.message)));
            if old.terminated.is_some() {
                last_state = Some(old);
            }
        }
    }

    let running = state.running.is_some();
    let current_id = current.map(|c| c.id.as_str()).unwrap_or_default();
    let probed = container_readiness(running, current_id, input.probes.get(&spec.name));
    let ready = match role {
        Role::Init => state.terminated.as_ref().is_some_and(|t| t.exit_code == 0),
        Role::App | Role::Sidecar => probed.ready,
    };
    K8sContainerStatus {
        name: spec.name.clone(),
        // The runtime's image and reference once a container exists, as
        // the kubelet reports them: the name it was created from while that
        // name still points at its image (containerd then names another tag
        // of it, or its ID), the spec's name before.
        image: (current.map(|c| c.image.clone()).filter(|i| !i.is_empty()))
            .or_else(|| spec.image.clone())
            .unwrap_or_default(),
        image_id: current.map(|c| c.image_ref.clone()).unwrap_or_default(),
        container_id: current.map(cid),
        restart_count: current.map_or(0, restart_count),
        ready,
        started: Some(probed.started),
        state: Some(state),
        last_state,
        volume_mounts: volume_mount_statuses(spec, current.map_or(&[][..], |c| &c.mounts)),
        ..K8sContainerStatus::default()
    }
}

/// The container's `volumeMounts` as the kubelet v1.32 reports them (with
/// its default RecursiveReadOnlyMounts gate on): from the spec, since the
/// CRI knows no volume names, whether or not the container exists yet;
/// `readOnly` only when true; `recursiveReadOnly` on read-only mounts only,
/// Enabled where the runtime reports the container's mount at that path
/// recursively read-only (`mounts`, the current container's), else
/// Disabled. None for a container without mounts.
fn volume_mount_statuses(
    spec: &Container,
    mounts: &[crate::cri::types::Mount],
) -> Option<Vec<VolumeMountStatus>> {
    let specs = spec.volume_mounts.as_deref().filter(|m| !m.is_empty())?;
    let status = |m: &k8s_openapi::api::core::v1::VolumeMount| {
        let read_only = m.read_only == Some(true);
        let recursive = (mounts.iter())
            .find(|r| r.container_path == m.mount_path)
            .is_some_and(|r| r.recursive_read_only);
        let mode = match recursive {
            true => RECURSIVE_READ_ONLY_ENABLED,
            false => RECURSIVE_READ_ONLY_DISABLED,
        };
        VolumeMountStatus {
            name: m.name.clone(),
            mount_path: m.mount_path.clone(),
            read_only: read_only.then_some(true),
            recursive_read_only: read_only.then(|| mode.to_string()),
        }
    };
    Some(specs.iter().map(status).collect())
}

const RECURSIVE_READ_ONLY_ENABLED: &str = "Enabled";
const RECURSIVE_READ_ONLY_DISABLED: &str = "Disabled";

/// Whether the status shows this exited container as waiting to start
/// again (the kubelet's `ShouldContainerBeRestarted`, by the pod's policy;
/// an init container that succeeded is done). The kubelet asks the same of
/// a sidecar, so one that exited under restartPolicy Never, or exited 0,
/// shows as terminated while it waits out its back-off.
fn will_restart(policy: RestartPolicy, is_init: bool, exit_code: i32) -> bool {
    match policy {
        RestartPolicy::Always => !is_init || exit_code != 0,
        RestartPolicy::OnFailure => exit_code != 0,
        RestartPolicy::Never => false,
    }
}

/// From the restartCount annotation; when the labels cannot be read, the
/// attempt number (the count of attempts before this one).
fn restart_count(c: &ContainerStatus) -> i32 {
    let count = ContainerLabels::from_labels(&c.labels, &c.annotations)
        .map(|l| l.restart_count)
        .ok()
        .or_else(|| {
            c.annotations
                .get(CONTAINER_RESTART_COUNT_ANNOTATION)?
                .parse()
                .ok()
        })
        .unwrap_or(c.metadata.attempt);
    i32::try_from(count).unwrap_or(i32::MAX)
}

/// The runtime's message, then the container's own termination message, as
/// `"<runtime>: <own>"` when both are there; at most `cap` bytes.
fn terminated_message(c: &ContainerStatus, own: Option<&String>, cap: usize) -> Option<String> {
    let own = own.filter(|m| !m.is_empty());
    let message = match (c.message.as_str(), own) {
        ("", None) => return None,
        (runtime, None) => runtime.to_string(),
        ("", Some(own)) => own.clone(),
        (runtime, Some(own)) => format!("{runtime}: {own}"),
    };
    Some(cap_message(&message, cap).to_string())
}

fn runtime_state(
    c: &ContainerStatus,
    container_id: String,
    message: Option<String>,
) -> K8sContainerState {
    match c.state {
        ContainerState::Running => K8sContainerState {
            running: Some(ContainerStateRunning {
                started_at: time(c.started_at),
            }),
            ..K8sContainerState::default()
        },
        ContainerState::Created => waiting(CONTAINER_CREATING, None),
        ContainerState::Exited => {
            let reason = match (c.reason.as_str(), c.exit_code) {
                ("", 0) => "Completed",
                ("", _) => "Error",
                (given, _) => given,
            };
            K8sContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: c.exit_code,
                    reason: Some(reason.to_string()),
                    message,
                    started_at: time(c.started_at),
                    finished_at: time(c.finished_at),
                    container_id: Some(container_id),
                    signal: None,
                }),
                ..K8sContainerState::default()
            }
        }
        // The kubelet collapses an unknown state to a bare Waiting.
        ContainerState::Unknown => K8sContainerState {
            waiting: Some(ContainerStateWaiting::default()),
            ..K8sContainerState::default()
        },
    }
}

fn waiting(reason: &str, message: Option<&str>) -> K8sContainerState {
    K8sContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: (!reason.is_empty()).then(|| reason.to_string()),
            message: message.filter(|m| !m.is_empty()).map(str::to_string),
        }),
        ..K8sContainerState::default()
    }
}

/// A CRI timestamp (ns since the epoch); zero means "never".
fn time(nanos: i64) -> Option<Time> {
    if nanos <= 0 {
        return None;
    }
    Timestamp::from_second(nanos / 1_000_000_000).ok().map(Time)
}

fn seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// The kubelet-owned conditions, in this order, each keeping its previous
/// lastTransitionTime while its status is unchanged (else `now`):
/// - PodReadyToStartContainers: the sandbox is ready.
/// - Initialized: every init container is done (one that runs to completion
///   terminated with code 0, a sidecar started), or there are none, or an
///   app container has already run (init containers rerunning in a new
///   sandbox, or a sidecar restarting, do not un-initialize a pod); reason
///   PodCompleted in phase Succeeded, else ContainersNotInitialized with
///   "containers with incomplete status: [a b]" when False.
/// - Ready and ContainersReady: every sidecar and app container is ready
///   (running and, per its probes, started and ready); reason PodCompleted
///   (False) in phase Succeeded, PodFailed in phase Failed (the kubelet's
///   status/generate.go), else ContainersNotReady with
///   "containers with unready status: [a b]" (sidecars first, each list in
///   spec order); Ready mirrors ContainersReady (no readiness gates).
/// - PodScheduled: always True (a static pod is bound to this node).
fn conditions(
    input: &StatusInput,
    init: &[K8sContainerStatus],
    app: &[K8sContainerStatus],
    phase: &str,
) -> Vec<PodCondition> {
    let inits = spec_of(input.pod).0;
    let list = |names: Vec<&str>| (!names.is_empty()).then(|| format!("[{}]", names.join(" ")));
    let status_of = |c: &Container| find(init, &c.name);
    let incomplete = inits.iter().filter(|c| {
        let s = status_of(c);
        if is_restartable_init_container(c) {
            s.is_none_or(|s| s.started != Some(true))
        } else {
            s.is_none_or(|s| !s.ready)
        }
    });
    let incomplete = list(incomplete.map(|c| c.name.as_str()).collect());
    let initialized = match incomplete {
        _ if phase == SUCCEEDED => cond(INITIALIZED, true, Some("PodCompleted"), None),
        Some(list) if !any_app_started(input.pod, app) => {
            let message = format!("containers with incomplete status: {list}");
            cond(
                INITIALIZED,
                false,
                Some("ContainersNotInitialized"),
                Some(message),
            )
        }
        _ => cond(INITIALIZED, true, None, None),
    };
    let sidecars = inits
        .iter()
        .filter(|c| is_restartable_init_container(c))
        .filter_map(status_of);
    let unready = sidecars.chain(app).filter(|s| !s.ready);
    let unready = list(unready.map(|s| s.name.as_str()).collect());
    let ready = |kind| match &unready {
        _ if phase == SUCCEEDED => cond(kind, false, Some("PodCompleted"), None),
        _ if phase == FAILED => cond(kind, false, Some("PodFailed"), None),
        None => cond(kind, true, None, None),
        Some(list) => {
            let message = format!("containers with unready status: {list}");
            cond(kind, false, Some("ContainersNotReady"), Some(message))
        }
    };

    let mut out = vec![
        cond(
            POD_READY_TO_START_CONTAINERS,
            input.sandbox_ready,
            None,
            None,
        ),
        initialized,
        ready(READY),
        ready(CONTAINERS_READY),
        cond(POD_SCHEDULED, true, None, None),
    ];
    let before = input
        .previous
        .and_then(|p| p.conditions.as_deref())
        .unwrap_or_default();
    for c in &mut out {
        let kept = before
            .iter()
            .find(|b| b.type_ == c.type_ && b.status == c.status);
        c.last_transition_time = kept
            .and_then(|b| b.last_transition_time.clone())
            .or_else(|| Some(Time(seconds(input.now))));
    }
    out
}

fn cond(kind: &str, status: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: kind.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..PodCondition::default()
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "status_sidecar_tests.rs"]
mod sidecar_tests;
