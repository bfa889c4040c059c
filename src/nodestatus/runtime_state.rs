//! The container runtime's health as the Node's `Ready` condition reports
//! it: the kubelet's `runtimeState` (`pkg/kubelet/runtime.go`) and its
//! `updateRuntimeUp`. A RuntimeStatus that answers is a sync; its
//! `RuntimeReady` and `NetworkReady` conditions become errors when false or
//! missing; no sync for [`RUNTIME_SYNC_THRESHOLD`] is "container runtime is
//! down". Any error makes the Node NotReady (`KubeletNotReady`, the errors
//! as its message, worded as the kubelet words them).
//!
//! Invariant: pure. Times are given, never read; a failed RuntimeStatus
//! changes nothing (the last sync ages), as in the kubelet.

use std::time::{Duration, Instant};

use crate::cri::{NETWORK_READY, RUNTIME_READY, RuntimeCondition, RuntimeStatus};

/// The kubelet's `maxWaitForContainerRuntime`: a runtime that has not
/// answered RuntimeStatus for this long is down.
pub const RUNTIME_SYNC_THRESHOLD: Duration = Duration::from_secs(30);

/// How long one RuntimeStatus may take before it counts as not answered
/// (the node's status pass waits on it; the kubelet's runs apart, every
/// 5 s).
pub const RUNTIME_STATUS_DEADLINE: Duration = Duration::from_secs(5);

/// What the last RuntimeStatus calls said.
#[derive(Debug, Clone)]
pub struct RuntimeState {
    /// When RuntimeStatus last answered with RuntimeReady true.
    last_sync: Option<Instant>,
    runtime_error: Option<String>,
    network_error: Option<String>,
}

impl Default for RuntimeState {
    /// Before any answer: the network's state is unknown, as the kubelet's
    /// `ErrNetworkUnknown`.
    fn default() -> RuntimeState {
        RuntimeState {
            last_sync: None,
            runtime_error: None,
            network_error: Some("network state unknown".into()),
        }
    }
}

impl RuntimeState {
    /// A RuntimeStatus answered at `now`.
    pub fn observe(&mut self, status: &RuntimeStatus, now: Instant) {
        let condition = |kind: &str| status.conditions.iter().find(|c| c.kind == kind);
        let network = condition(NETWORK_READY);
        self.network_error = (!network.is_some_and(|c| c.status)).then(|| {
            format!(
                "container runtime network not ready: {}",
                go_condition(network)
            )
        });
        let runtime = condition(RUNTIME_READY);
        if runtime.is_some_and(|c| c.status) {
            self.runtime_error = None;
            self.last_sync = Some(now);
        } else {
            self.runtime_error = Some(format!(
                "container runtime not ready: {}",
                go_condition(runtime)
            ));
        }
    }

    /// The errors that keep the Node NotReady at `now`, in the kubelet's
    /// order (the runtime's, then the network's); none: Ready.
    pub fn errors(&self, now: Instant) -> Vec<String> {
        let mut errors = Vec::new();
        match self.last_sync {
            None => errors.push("container runtime status check may not have completed yet".into()),
            Some(at) if now.saturating_duration_since(at) >= RUNTIME_SYNC_THRESHOLD => {
                errors.push("container runtime is down".into())
            }
            Some(_) => {}
        }
        errors.extend(self.runtime_error.clone());
        errors.extend(self.network_error.clone());
        errors
    }
}

/// A runtime condition as the kubelet prints one (`RuntimeCondition.String`
/// in `pkg/kubelet/container`), `<nil>` when the runtime did not report it.
fn go_condition(c: Option<&RuntimeCondition>) -> String {
    match c {
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.kind, c.status, c.reason, c.message
        ),
        None => "<nil>".into(),
    }
}

/// Errors as one message, as Go's `utilerrors.NewAggregate(...).Error()`:
/// repeats dropped, one as it is, several as `[a, b]`; none: `None`.
pub fn aggregate(errors: &[String]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(runtime: Option<bool>, network: Option<bool>) -> RuntimeStatus {
        let cond = |kind: &str, ok: bool| RuntimeCondition {
            kind: kind.into(),
            status: ok,
            reason: if ok { "" } else { "NotReadyReason" }.into(),
            message: if ok { "" } else { "it is not" }.into(),
        };
        RuntimeStatus {
            conditions: [
                runtime.map(|ok| cond(RUNTIME_READY, ok)),
                network.map(|ok| cond(NETWORK_READY, ok)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            handlers: Vec::new(),
        }
    }

    #[test]
    fn before_any_answer_the_check_may_not_have_completed() {
        let t0 = Instant::now();
        assert_eq!(
            RuntimeState::default().errors(t0),
            [
                "container runtime status check may not have completed yet",
                "network state unknown"
            ]
        );
    }

    #[test]
    fn a_ready_runtime_is_ready_until_it_has_not_answered_for_the_threshold() {
        let t0 = Instant::now();
        let mut s = RuntimeState::default();
        s.observe(&status(Some(true), Some(true)), t0);
        for (after, want) in [
            (Duration::ZERO, vec![]),
            (RUNTIME_SYNC_THRESHOLD - Duration::from_millis(1), vec![]),
            (RUNTIME_SYNC_THRESHOLD, vec!["container runtime is down"]),
            (Duration::from_secs(600), vec!["container runtime is down"]),
        ] {
            assert_eq!(
                s.errors(t0 + after),
                want,
                "{after:?} after the last answer"
            );
        }
        // It answers again: Ready at once.
        let later = t0 + Duration::from_secs(600);
        s.observe(&status(Some(true), Some(true)), later);
        assert!(s.errors(later).is_empty());
    }

    #[test]
    fn false_or_missing_conditions_are_worded_as_the_kubelet_words_them() {
        let t0 = Instant::now();
        let table = [
            (Some(true), Some(true), vec![]),
            (
                Some(true),
                Some(false),
                vec![
                    "container runtime network not ready: NetworkReady=false reason:NotReadyReason \
                     message:it is not",
                ],
            ),
            (
                Some(true),
                None,
                vec!["container runtime network not ready: <nil>"],
            ),
            (
                None,
                Some(true),
                vec![
                    "container runtime status check may not have completed yet",
                    "container runtime not ready: <nil>",
                ],
            ),
            (
                Some(false),
                Some(false),
                vec![
                    "container runtime status check may not have completed yet",
                    "container runtime not ready: RuntimeReady=false reason:NotReadyReason \
                     message:it is not",
                    "container runtime network not ready: NetworkReady=false \
                     reason:NotReadyReason message:it is not",
                ],
            ),
        ];
        for (runtime, network, want) in table {
            let mut s = RuntimeState::default();
            s.observe(&status(runtime, network), t0);
            assert_eq!(
                s.errors(t0),
                want,
                "runtime {runtime:?}, network {network:?}"
            );
        }
    }

    #[test]
    fn a_runtime_that_turns_not_ready_keeps_its_last_sync() {
        let t0 = Instant::now();
        let mut s = RuntimeState::default();
        s.observe(&status(Some(true), Some(true)), t0);
        s.observe(
            &status(Some(false), Some(true)),
            t0 + Duration::from_secs(5),
        );
        let errors = s.errors(t0 + Duration::from_secs(5));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("container runtime not ready: RuntimeReady=false"));
        assert_eq!(
            s.errors(t0 + RUNTIME_SYNC_THRESHOLD)[0],
            "container runtime is down"
        );
    }

    #[test]
    fn errors_aggregate_as_go_prints_them() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(aggregate(&[]), None);
        assert_eq!(aggregate(&s(&["a"])).as_deref(), Some("a"));
        assert_eq!(aggregate(&s(&["a", "b"])).as_deref(), Some("[a, b]"));
        assert_eq!(aggregate(&s(&["a", "a"])).as_deref(), Some("a"));
        assert_eq!(aggregate(&s(&["a", "b", "a"])).as_deref(), Some("[a, b]"));
    }
}
