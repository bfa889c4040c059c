//! The pod plan: given what a pod should be and what the runtime has for
//! it, the next CRI actions. This is the kubelet's "compute pod actions".
//!
//! Invariant: pure. The worker observes the runtime, calls `plan`, runs the
//! actions, and observes again; nothing here remembers anything between
//! calls except what the caller passes in (`BackOff`).

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
    /// The spec hash (`io.kubernetes.container.hash`).
    pub hash: u64,
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
    Init,
    App,
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

    // Init containers: one at a time, in order, each to completion.
    for init in &desired.init_containers {
        match observed.latest_in(&sandbox.id, &init.name) {
            None => {
                out.actions
                    .push(start(observed, ContainerKind::Init, &init.name));
                return out;
            }
            Some(c) if matches!(c.state, ContainerState::Running | ContainerState::Created) => {
                return out; // still working
            }
            Some(c) if c.state == ContainerState::Exited && c.exit_code == 0 => continue,
            Some(c) => {
                if desired.restart_policy == RestartPolicy::Never {
                    out.actions.push(Action::KillPod {
                        reason: format!("init container {} failed", init.name),
                    });
                    return out;
                }
                match backoff.blocked_until(&init.name, c.finished_at, now) {
                    Some(until) => out.waiting.push(Waiting {
                        name: init.name.clone(),
                        until,
                    }),
                    None => out
                        .actions
                        .push(start(observed, ContainerKind::Init, &init.name)),
                }
                return out;
            }
        }
    }

    // App containers.
    let mut keep = 0;
    for want in &desired.containers {
        match observed.latest_in(&sandbox.id, &want.name) {
            None => out
                .actions
                .push(start(observed, ContainerKind::App, &want.name)),
            Some(c) if c.state == ContainerState::Running && c.hash == want.hash => keep += 1,
            Some(c) if matches!(c.state, ContainerState::Running | ContainerState::Created) => {
                let reason = if c.hash != want.hash {
                    SPEC_CHANGED
                } else {
                    "created but never started"
                };
                out.actions.push(Action::KillContainer {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    reason: reason.into(),
                });
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
                    None => out
                        .actions
                        .push(start(observed, ContainerKind::App, &want.name)),
                }
            }
        }
    }
    // Containers the spec no longer has are stopped.
    for c in &observed.containers {
        let wanted = desired.containers.iter().any(|d| d.name == c.name)
            || desired.init_containers.iter().any(|d| d.name == c.name);
        if !wanted && c.state == ContainerState::Running {
            out.actions.push(Action::KillContainer {
                id: c.id.clone(),
                name: c.name.clone(),
                reason: "not in the pod spec".into(),
            });
        }
    }
    let starting = out
        .actions
        .iter()
        .any(|a| matches!(a, Action::StartContainer { .. }));
    if keep == 0 && !starting {
        out.actions.push(Action::KillPod {
            reason: "all containers have terminated and none will restart".into(),
        });
    }
    out
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
        Some(first) => out
            .actions
            .push(start(observed, ContainerKind::Init, &first.name)),
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
