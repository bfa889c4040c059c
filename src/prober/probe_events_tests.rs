use super::*;
use crate::events::kubelet_events::tests::{assert_one_series_per_template, pod_templates};
use crate::events::recorder::EventType::Warning;

#[test]
fn probe_events_have_the_kubelets_reason_action_and_wording() {
    let cases = [
        (
            probe_failed(
                ProbeType::Liveness,
                "HTTP probe failed with statuscode: 500",
            ),
            Warning,
            "Unhealthy",
            "LivenessProbe",
            "Liveness probe failed: HTTP probe failed with statuscode: 500",
        ),
        (
            probe_failed(ProbeType::Readiness, ""),
            Warning,
            "Unhealthy",
            "ReadinessProbe",
            "Readiness probe failed: ",
        ),
        (
            probe_errored(ProbeType::Startup, "port \"web\" not found"),
            Warning,
            "Unhealthy",
            "StartupProbe",
            "Startup probe errored and resulted in unknown state: port \"web\" not found",
        ),
        (
            probe_warning(ProbeType::Readiness, "redirect to another host"),
            Warning,
            "ProbeWarning",
            "ReadinessProbe",
            "Readiness probe warning: redirect to another host",
        ),
    ];
    for (e, type_, reason, action, message) in cases {
        assert_eq!(
            (e.type_, e.reason, e.action, e.message.as_str()),
            (type_, reason, action, message)
        );
    }
}

#[test]
fn messages_that_share_a_reason_never_share_an_action() {
    // The probes' messages against all the others.
    let mut all = pod_templates();
    all.extend([
        probe_failed(ProbeType::Liveness, ""),
        probe_failed(ProbeType::Readiness, ""),
        probe_warning(ProbeType::Readiness, ""),
    ]);
    assert_one_series_per_template(&all);
}
