//! The pod plan: given what a pod should be and what the runtime has for
//! it, the next CRI actions. This is the kubelet's "compute pod actions"
//! (`computePodActions`, and `computeInitContainerActions` for the init
//! containers, sidecars included).
//!
//! Invariant: pure. The worker observes the runtime, calls `plan`, runs the
//! actions, and observes again; nothing here remembers anything between
//! calls except what the caller passes in (`BackOff`, and which containers
//! passed their startup probe).
//!
//! Sidecars (init containers with `restartPolicy: Always`) start in their
//! place among the init containers, but the next one does not wait for them
//! to exit, only for them to be *started*: running, and past their startup
//! probe if they have one (a postStart hook has run by then: the worker runs
//! it inside the start). They are restarted, with crash back-off, whenever
//! they exit, whatever the pod's restartPolicy, but they never keep a pod
//! alive: once no app container runs or will run, the pod is killed.

use std::collections::BTreeSet;

use super::backoff::BackOff;
use crate::cri::types::{ContainerState, PodSandboxState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// The spec's value; anything but the three known values is Always, the
    /// API default (validation refuses unknown values before this point).
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        }
    }
}

/// One container as the pod spec wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredContainer {
    pub name: String,
    /// The spec hash (`io.kubernetes.container.hash`), the kubelet's.
    pub hash: u64,
    /// The hash crilet wrote before it took the kubelet's: a container
    /// carrying it is the same container too (an upgrade restarts nothing).
    pub legacy_hash: u64,
    /// An init container with `restartPolicy: Always`: a sidecar.
    pub restartable: bool,
    /// It has a startup probe: a sidecar counts as started only once the
    /// probe succeeded for the running instance.
    pub startup_probe: bool,
}

impl DesiredContainer {
    /// A container without probes; a sidecar when `restartable`.
    pub fn new(name: impl Into<String>, hash: u64, restartable: bool) -> Self {
        DesiredContainer {
            name: name.into(),
            hash,
            legacy_hash: hash,
            restartable,
            startup_probe: false,
        }
    }

    /// A running instance with this hash runs this spec.
    pub fn same_spec(&self, observed_hash: u64) -> bool {
        observed_hash == self.hash || observed_hash == self.legacy_hash
    }
}

/// What the plan needs of the pod spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredPod {
    pub restart_policy: RestartPolicy,
    pub init_containers: Vec<DesiredContainer>,
    pub containers: Vec<DesiredContainer>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedSandbox {
    pub id: String,
    pub attempt: u32,
    pub state: PodSandboxState,
    pub created_at: i64,
}

/// A container of the pod, recovered from the runtime's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedContainer {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub state: ContainerState,
    pub hash: u64,
    pub restart_count: u32,
    pub exit_code: i32,
    pub created_at: i64,
    pub finished_at: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedPod {
    pub sandboxes: Vec<ObservedSandbox>,
    pub containers: Vec<ObservedContainer>,
    /// IDs of the containers whose startup probe has succeeded (the
    /// prober's results; a container without a startup probe is not here).
    pub startup_succeeded: BTreeSet<String>,
}

impl ObservedPod {
    /// The newest sandbox (highest attempt, then newest).
    pub fn latest_sandbox(&self) -> Option<&ObservedSandbox> {
        self.sandboxes
            .iter()
            .max_by_key(|s| (s.attempt, s.created_at))
    }

    /// The newest container called `name` in sandbox `sandbox_id`.
    pub fn latest_in(&self, sandbox_id: &str, name: &str) -> Option<&ObservedContainer> {
        self.containers
            .iter()
            .filter(|c| c.sandbox_id == sandbox_id && c.name == name)
            .max_by_key(|c| (c.attempt, c.created_at))
    }

    /// The newest container called `name` in any sandbox.
    pub fn latest_any(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers
            .iter()
            .filter(|c| c.name == name)
            .max_by_key(|c| (c.attempt, c.created_at))
    }

    fn anything_running(&self) -> bool {
        self.sandboxes
            .iter()
            .any(|s| s.state == PodSandboxState::Ready)
            || self
                .containers
                .iter()
                .any(|c| matches!(c.state, ContainerState::Running | ContainerState::Created))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// An init container that runs to completion.
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
    App,
}

impl ContainerKind {
    fn of_init(c: &DesiredContainer) -> Self {
        if c.restartable {
            ContainerKind::Sidecar
        } else {
            ContainerKind::Init
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop every container (with the grace period) and every sandbox.
    KillPod { reason: String },
    /// Run a new sandbox with this attempt number.
    CreateSandbox { attempt: u32 },
    /// Pull (per policy), create and start a container. `restart` is true
    /// when it replaces one that died: the worker then advances the back-off.
    StartContainer {
        kind: ContainerKind,
        name: String,
        attempt: u32,
        restart_count: u32,
        restart: bool,
    },
    /// Stop one container (its spec changed, or it must not run).
    KillContainer {
        id: String,
        name: String,
        reason: String,
    },
    /// Remove a sandbox that is neither the current one nor running.
    RemoveSandbox { id: String },
}

/// The `KillContainer` reason of a container whose spec changed (its
/// `Killing` event says so).
pub const SPEC_CHANGED: &str = "container spec changed";
/// The same for a running sidecar (the kubelet words its event apart).
pub const SIDECAR_SPEC_CHANGED: &str = "sidecar spec changed";
/// The `KillContainer` reason of a container created but never started.
pub const NEVER_STARTED: &str = "created but never started";

/// A container held back by the crash back-off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub name: String,
    pub until: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Containers in CrashLoopBackOff, and when each may start.
    pub waiting: Vec<Waiting>,
}

impl Plan {
    /// When the worker should look again without being woken.
    pub fn next_wake(&self) -> Option<i64> {
        self.waiting.iter().map(|w| w.until).min()
    }

    /// Whether the plan starts something: runs a sandbox or starts a
    /// container (a pass the API writers yield to, `kubeapi::call_count`).
    pub fn starts(&self) -> bool {
        (self.actions.iter()).any(|a| {
            matches!(
                a,
                Action::CreateSandbox { .. } | Action::StartContainer { .. }
            )
        })
    }
}

/// Where a container goes next, given the policy and how it ended.
fn should_restart(policy: RestartPolicy, exit_code: i32) -> bool {
    match policy {
        RestartPolicy::Always => true,
        RestartPolicy::OnFailure => exit_code != 0,
        RestartPolicy::Never => false,
    }
}

/// Attempt and restart count for the next container called `name`:
/// names are reserved per attempt across sandboxes, and the restart count
/// carries on from the last container of that name.
fn next_numbers(observed: &ObservedPod, name: &str) -> (u32, u32, bool) {
    match observed.latest_any(name) {
        Some(c) => (c.attempt + 1, c.restart_count + 1, true),
        None => (0, 0, false),
    }
}

fn start(observed: &ObservedPod, kind: ContainerKind, name: &str) -> Action {
    let (attempt, restart_count, restart) = next_numbers(observed, name);
    Action::StartContainer {
        kind,
        name: name.to_string(),
        attempt,
        restart_count,
        restart,
    }
}

/// The next actions for a pod that should run.
pub fn plan(desired: &DesiredPod, observed: &ObservedPod, backoff: &BackOff, now: i64) -> Plan {
    let mut out = Plan::default();
    let latest = observed.latest_sandbox();
    // Old sandboxes that stopped are only clutter (and hold reserved names).
    for s in &observed.sandboxes {
        if Some(s.id.as_str()) != latest.map(|l| l.id.as_str()) && s.state != PodSandboxState::Ready
        {
            out.actions.push(Action::RemoveSandbox { id: s.id.clone() });
        }
    }

    let Some(sandbox) = latest.filter(|s| s.state == PodSandboxState::Ready) else {
        plan_new_sandbox(desired, observed, latest.map(|s| s.attempt + 1), &mut out);
        return out;
    };
    let ctx = Ctx {
        desired,
        observed,
        sandbox: &sandbox.id,
        backoff,
        now,
    };

    // Init containers (sidecars included); app containers only once the
    // pod is initialized.
    if !plan_init_containers(&ctx, &mut out) {
        return out;
    }

    // App containers.
    let mut keep = 0;
    let mut app_starts = 0;
    for want in &desired.containers {
        match observed.latest_in(&sandbox.id, &want.name) {
            None => {
                app_starts += 1;
                out.actions
                    .push(start(observed, ContainerKind::App, &want.name));
            }
            Some(c) if c.state == ContainerState::Running && want.same_spec(c.hash) => keep += 1,
            Some(c) if matches!(c.state, ContainerState::Running | ContainerState::Created) => {
                let reason = if !want.same_spec(c.hash) {
                    SPEC_CHANGED
                } else {
                    NEVER_STARTED
                };
                out.actions.push(kill(c, reason));
                app_starts += 1;
                out.actions
                    .push(start(observed, ContainerKind::App, &want.name));
            }
            Some(c) => {
                if !should_restart(desired.restart_policy, c.exit_code) {
                    continue;
                }
                match backoff.blocked_until(&want.name, c.finished_at, now) {
                    Some(until) => {
                        keep += 1; // it will start later: the pod stays up
                        out.waiting.push(Waiting {
                            name: want.name.clone(),
                            until,
                        });
                    }
                    None => {
                        app_starts += 1;
                        out.actions
                            .push(start(observed, ContainerKind::App, &want.name));
                    }
                }
            }
        }
    }
    // Containers the spec no longer has are stopped.
    for c in &observed.containers {
        let wanted = desired.containers.iter().any(|d| d.name == c.name)
            || desired.init_containers.iter().any(|d| d.name == c.name);
        if !wanted && c.state == ContainerState::Running {
            out.actions.push(kill(c, "not in the pod spec"));
        }
    }
    if keep == 0 && app_starts == 0 {
        // Sidecars do not keep a pod alive: none is restarted, none waits,
        // and killing the pod stops them (after the app containers).
        out.actions
            .retain(|a| matches!(a, Action::RemoveSandbox { .. }));
        out.waiting.clear();
        out.actions.push(Action::KillPod {
            reason: "all containers have terminated and none will restart".into(),
        });
    }
    out
}

/// What one planning pass reads.
struct Ctx<'a> {
    desired: &'a DesiredPod,
    observed: &'a ObservedPod,
    /// The ready sandbox the containers run in.
    sandbox: &'a str,
    backoff: &'a BackOff,
    now: i64,
}

/// The init containers' actions (the kubelet's computeInitContainerActions):
/// the next init container once the one before it is done (a regular one
/// exited 0, a sidecar started), every sidecar that exited restarted, a
/// failed regular one retried (or the pod killed under restartPolicy
/// Never). True when the pod is initialized: its app containers may start.
///
/// The init containers are read from the last to the first, as the kubelet
/// reads them: finished ones may have been removed, so the furthest one with
/// a container says how far initialization got, and every one before it
/// counts as done (only its sidecars are kept running). An app container in
/// the current sandbox means the pod was initialized before. Unlike the
/// kubelet, which cannot tell an exited app container of an older sandbox
/// from one of the current sandbox and so counts only running and created
/// ones, an exited one counts too: the app containers then restart (or the
/// pod ends) without waiting for the last sidecar to start again.
fn plan_init_containers(ctx: &Ctx, out: &mut Plan) -> bool {
    let inits = &ctx.desired.init_containers;
    let Some(last) = inits.len().checked_sub(1) else {
        return true;
    };
    let latest = |name: &str| ctx.observed.latest_in(ctx.sandbox, name);
    let mut initialized = ctx
        .desired
        .containers
        .iter()
        .any(|c| latest(&c.name).is_some());
    let mut reached = initialized;
    let mut kills = Vec::new();
    let mut starts = Vec::new();
    for (i, init) in inits.iter().enumerate().rev() {
        let Some(c) = latest(&init.name) else {
            if reached && init.restartable {
                starts.push(i);
            }
            continue;
        };
        if reached && !init.restartable {
            continue;
        }
        match c.state {
            ContainerState::Created => {
                kills.push(kill(c, NEVER_STARTED));
                starts.push(i);
            }
            ContainerState::Running if !init.restartable => {} // still working
            ContainerState::Running => {
                let started = !init.startup_probe || ctx.observed.startup_succeeded.contains(&c.id);
                if started {
                    if i == last {
                        initialized = true;
                    } else if !reached {
                        starts.push(i + 1);
                    }
                    if !init.same_spec(c.hash) {
                        kills.push(kill(c, SIDECAR_SPEC_CHANGED));
                        starts.push(i);
                    }
                }
                // Not started yet: the next one waits (a failed startup
                // probe has the worker kill it; it then restarts as exited).
            }
            ContainerState::Exited if init.restartable => starts.push(i),
            ContainerState::Exited if c.exit_code != 0 => {
                if ctx.desired.restart_policy == RestartPolicy::Never {
                    out.actions.push(Action::KillPod {
                        reason: format!("init container {} failed", init.name),
                    });
                    return false;
                }
                starts.push(i);
            }
            ContainerState::Exited => {
                if i == last {
                    initialized = true;
                } else {
                    starts.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                if !init.restartable && ctx.desired.restart_policy == RestartPolicy::Never {
                    out.actions.push(Action::KillPod {
                        reason: format!("init container {} is in an unknown state", init.name),
                    });
                    return false;
                }
                kills.push(kill(c, "unknown state"));
                starts.push(i);
            }
        }
        reached = true;
    }
    if !reached {
        starts.push(0);
    }
    out.actions.extend(kills);
    // Found last to first; started in spec order.
    for &i in starts.iter().rev() {
        start_init(ctx, &inits[i], out);
    }
    initialized
}

/// Starts init container `init` unless the crash back-off holds it.
fn start_init(ctx: &Ctx, init: &DesiredContainer, out: &mut Plan) {
    let exited = ctx
        .observed
        .latest_in(ctx.sandbox, &init.name)
        .filter(|c| c.state == ContainerState::Exited);
    let blocked = exited.and_then(|c| {
        ctx.backoff
            .blocked_until(&init.name, c.finished_at, ctx.now)
    });
    match blocked {
        Some(until) => out.waiting.push(Waiting {
            name: init.name.clone(),
            until,
        }),
        None => out.actions.push(start(
            ctx.observed,
            ContainerKind::of_init(init),
            &init.name,
        )),
    }
}

fn kill(c: &ObservedContainer, reason: &str) -> Action {
    Action::KillContainer {
        id: c.id.clone(),
        name: c.name.clone(),
        reason: reason.into(),
    }
}

/// No ready sandbox: make one, unless the policy says the pod is finished.
fn plan_new_sandbox(
    desired: &DesiredPod,
    observed: &ObservedPod,
    next_attempt: Option<u32>,
    out: &mut Plan,
) {
    let ran_before = next_attempt.is_some() && !observed.containers.is_empty();
    if ran_before && desired.restart_policy == RestartPolicy::Never {
        if observed.anything_running() {
            out.actions.push(Action::KillPod {
                reason: "sandbox is gone and restartPolicy is Never".into(),
            });
        }
        return;
    }
    // With OnFailure, containers that succeeded are not run again.
    let to_start: Vec<&DesiredContainer> = desired
        .containers
        .iter()
        .filter(|c| match observed.latest_any(&c.name) {
            Some(prev) if prev.state == ContainerState::Exited => {
                should_restart(desired.restart_policy, prev.exit_code)
            }
            _ => true,
        })
        .collect();
    if ran_before && to_start.is_empty() {
        if observed.anything_running() {
            out.actions.push(Action::KillPod {
                reason: "all containers have completed".into(),
            });
        }
        return;
    }
    if observed.anything_running() {
        out.actions.push(Action::KillPod {
            reason: "sandbox is not ready; recreating it".into(),
        });
    }
    out.actions.push(Action::CreateSandbox {
        attempt: next_attempt.unwrap_or(0),
    });
    // A new sandbox reruns init containers from the first, as the kubelet does.
    match desired.init_containers.first() {
        Some(first) => {
            let kind = ContainerKind::of_init(first);
            out.actions.push(start(observed, kind, &first.name))
        }
        None => {
            for c in to_start {
                out.actions
                    .push(start(observed, ContainerKind::App, &c.name));
            }
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_sidecar_tests.rs"]
mod sidecar_tests;
