//! Scripted probe and hook runners for the driver's unit tests.
//!
//! Invariant: never touches the network or a runtime; answers the queued
//! outcomes in order (a probe's own queue for its action first, then the
//! shared one; Success("") / Ok once empty) and records every call. A hook
//! may take (tokio) time before it answers.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{HookAction, HookRunner, ProbeAction, ProbeOutcome, ProbeRunner};

/// One call the driver made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerCall {
    Probe {
        container_id: String,
        action: ProbeAction,
        timeout: Duration,
    },
    Hook {
        container_id: String,
        action: HookAction,
        exec_timeout: Option<Duration>,
    },
}

#[derive(Debug, Default)]
pub struct FakeHandlers {
    probes: Mutex<VecDeque<ProbeOutcome>>,
    /// Outcomes for one action only (a container's liveness and readiness
    /// probes differ in their action).
    scripts: Mutex<Vec<(ProbeAction, ProbeOutcome)>>,
    hooks: Mutex<VecDeque<(Duration, Result<(), String>)>>,
    calls: Mutex<Vec<HandlerCall>>,
}

impl FakeHandlers {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next probe run answers `outcome`.
    pub fn push_probe(&self, outcome: ProbeOutcome) {
        self.probes.lock().unwrap().push_back(outcome);
    }

    /// The next run of a probe with this `action` answers `outcome`
    /// (before anything queued with [`Self::push_probe`]).
    pub fn push_probe_for(&self, action: ProbeAction, outcome: ProbeOutcome) {
        self.scripts.lock().unwrap().push((action, outcome));
    }

    /// The next hook run answers `result`.
    pub fn push_hook(&self, result: Result<(), String>) {
        self.push_hook_taking(Duration::ZERO, result);
    }

    /// The next hook run answers `result` after `took` of tokio time.
    pub fn push_hook_taking(&self, took: Duration, result: Result<(), String>) {
        self.hooks.lock().unwrap().push_back((took, result));
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<HandlerCall> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ProbeRunner for FakeHandlers {
    async fn run_probe(
        &self,
        container_id: &str,
        action: &ProbeAction,
        timeout: Duration,
    ) -> ProbeOutcome {
        self.calls.lock().unwrap().push(HandlerCall::Probe {
            container_id: container_id.to_string(),
            action: action.clone(),
            timeout,
        });
        let scripted = {
            let mut scripts = self.scripts.lock().unwrap();
            let at = scripts.iter().position(|(a, _)| a == action);
            at.map(|i| scripts.remove(i).1)
        };
        let next = scripted.or_else(|| self.probes.lock().unwrap().pop_front());
        next.unwrap_or_else(|| ProbeOutcome::Success(String::new()))
    }
}

#[async_trait::async_trait]
impl HookRunner for FakeHandlers {
    /// Answers after the queued time, whatever `cancel` says.
    async fn run_hook(
        &self,
        container_id: &str,
        action: &HookAction,
        exec_timeout: Option<Duration>,
        _cancel: &CancellationToken,
    ) -> Result<(), String> {
        self.calls.lock().unwrap().push(HandlerCall::Hook {
            container_id: container_id.to_string(),
            action: action.clone(),
            exec_timeout,
        });
        let next = self.hooks.lock().unwrap().pop_front();
        let (took, result) = next.unwrap_or((Duration::ZERO, Ok(())));
        if !took.is_zero() {
            tokio::time::sleep(took).await;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_in_order_then_defaults_and_records_calls() {
        let fake = FakeHandlers::new();
        fake.push_probe(ProbeOutcome::Failure("down".into()));
        fake.push_hook(Err("boom".into()));
        let action = ProbeAction::TcpSocket {
            host: "10.0.0.5".into(),
            port: 80,
        };
        let t = Duration::from_secs(1);
        let runner: &dyn ProbeRunner = &fake;
        assert_eq!(
            runner.run_probe("c1", &action, t).await,
            ProbeOutcome::Failure("down".into())
        );
        assert_eq!(
            runner.run_probe("c1", &action, t).await,
            ProbeOutcome::Success(String::new())
        );
        let hook = HookAction::Sleep {
            duration: Duration::from_secs(3),
        };
        let cancel = CancellationToken::new();
        let hooks: &dyn HookRunner = &fake;
        assert_eq!(
            hooks.run_hook("c1", &hook, None, &cancel).await,
            Err("boom".into())
        );
        assert_eq!(hooks.run_hook("c1", &hook, None, &cancel).await, Ok(()));
        let calls = fake.calls();
        assert_eq!(calls.len(), 4);
        assert_eq!(
            calls[0],
            HandlerCall::Probe {
                container_id: "c1".into(),
                action,
                timeout: t
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_action_s_script_comes_first_and_a_hook_takes_its_time() {
        let fake = FakeHandlers::new();
        let tcp = |port| ProbeAction::TcpSocket {
            host: "10.0.0.5".into(),
            port,
        };
        fake.push_probe(ProbeOutcome::Failure("shared".into()));
        fake.push_probe_for(tcp(81), ProbeOutcome::Error("own".into()));
        let t = Duration::from_secs(1);
        assert_eq!(
            fake.run_probe("c1", &tcp(81), t).await,
            ProbeOutcome::Error("own".into())
        );
        assert_eq!(
            fake.run_probe("c1", &tcp(81), t).await,
            ProbeOutcome::Failure("shared".into())
        );

        fake.push_hook_taking(Duration::from_secs(3), Err("slow".into()));
        let hook = HookAction::Exec {
            command: vec!["true".into()],
        };
        let start = tokio::time::Instant::now();
        let cancel = CancellationToken::new();
        let result = fake.run_hook("c1", &hook, None, &cancel).await;
        assert_eq!(result, Err("slow".into()));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }
}
