use super::*;
use crate::events::kubelet_events::*;
use crate::events::recorder::EventType::Warning;
use std::time::Duration;

const IMAGE: &str = "docker.io/library/busybox:latest";

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
    // One series per object, type, reason and action: two templates under
    // one reason must differ in action, or one's message would be counted
    // on the other's. The probes' messages against all the others.
    let all = [
        pulling(IMAGE),
        pulled(IMAGE, Duration::ZERO, Duration::ZERO, 0),
        already_present(IMAGE),
        failed_to_pull(IMAGE, "e"),
        back_off_pulling(IMAGE),
        never_pull(IMAGE),
        failed_to_inspect(IMAGE, "e"),
        failed("ErrImagePull", "ErrImagePull"),
        failed("ImagePullBackOff", "ImagePullBackOff"),
        created("c"),
        started("c"),
        back_off_restarting("c", "p"),
        failed_post_start_hook(),
        failed_pre_stop_hook(),
        probe_failed(ProbeType::Liveness, ""),
        probe_failed(ProbeType::Readiness, ""),
        probe_warning(ProbeType::Readiness, ""),
    ];
    let mut seen = std::collections::HashMap::new();
    for e in &all {
        if let Some(other) = seen.insert((e.type_, e.reason, e.action), &e.message) {
            panic!(
                "{:?} shares {:?} with {other:?}",
                e.message,
                (e.reason, e.action)
            );
        }
    }
}
