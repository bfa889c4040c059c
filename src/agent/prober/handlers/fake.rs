//! Scripted probe and hook runners for the driver's unit tests.
//!
//! Invariant: never touches the network or a runtime; answers the queued
//! outcomes in order (Success("") / Ok once the queue is empty) and records
//! every call.

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
    hooks: Mutex<VecDeque<Result<(), String>>>,
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

    /// The next hook run answers `result`.
    pub fn push_hook(&self, result: Result<(), String>) {
        self.hooks.lock().unwrap().push_back(result);
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
        let next = self.probes.lock().unwrap().pop_front();
        next.unwrap_or_else(|| ProbeOutcome::Success(String::new()))
    }
}

#[async_trait::async_trait]
impl HookRunner for FakeHandlers {
    /// Answers at once, whatever `cancel` says.
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
        next.unwrap_or(Ok(()))
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
}
