use super::*;

const IMAGE: &str = "docker.io/library/busybox:latest";

#[test]
fn messages_read_as_the_kubelets() {
    let pod = pod_desc("web-node-1", "default", "0123abcd");
    let cases: Vec<(Event, EventType, &str, &str, &str)> = vec![
        (
            pulling(IMAGE),
            Normal,
            "Pulling",
            "PullImage",
            r#"Pulling image "docker.io/library/busybox:latest""#,
        ),
        (
            pulled(
                IMAGE,
                Duration::from_micros(1_234_567),
                Duration::from_micros(1_534_999),
                2_117_120,
            ),
            Normal,
            "Pulled",
            "PullImage",
            r#"Successfully pulled image "docker.io/library/busybox:latest" in 1.234s (1.534s including waiting). Image size: 2117120 bytes."#,
        ),
        (
            pulled(
                IMAGE,
                Duration::from_micros(523_900),
                Duration::from_millis(523),
                7,
            ),
            Normal,
            "Pulled",
            "PullImage",
            r#"Successfully pulled image "docker.io/library/busybox:latest" in 523ms (523ms including waiting). Image size: 7 bytes."#,
        ),
        (
            already_present(IMAGE),
            Normal,
            "Pulled",
            "InspectImage",
            r#"Container image "docker.io/library/busybox:latest" already present on machine"#,
        ),
        (
            failed_to_pull("nope:1", "rpc error: code = NotFound desc = not found"),
            Warning,
            "Failed",
            "PullImage",
            r#"Failed to pull image "nope:1": rpc error: code = NotFound desc = not found"#,
        ),
        (
            back_off_pulling("nope:1"),
            Normal,
            "BackOff",
            "PullImage",
            r#"Back-off pulling image "nope:1""#,
        ),
        (
            never_pull("nope:1"),
            Warning,
            "ErrImageNeverPull",
            "InspectImage",
            r#"Container image "nope:1" is not present with pull policy of Never"#,
        ),
        (
            failed_to_inspect("nope:1", "unavailable"),
            Warning,
            "InspectFailed",
            "InspectImage",
            r#"Failed to inspect image "nope:1": unavailable"#,
        ),
        (
            failed_mount(
                r#"MountVolume.SetUp failed for volume "conf" : hostPath type check failed"#,
            ),
            Warning,
            "FailedMount",
            "MountVolume",
            r#"MountVolume.SetUp failed for volume "conf" : hostPath type check failed"#,
        ),
        (
            failed_create_pod_sandbox("cni plugin not initialized"),
            Warning,
            "FailedCreatePodSandBox",
            "RunPodSandbox",
            "Failed to create pod sandbox: cni plugin not initialized",
        ),
        (
            failed("ErrImagePull", "ErrImagePull"),
            Warning,
            "Failed",
            "ErrImagePull",
            "Error: ErrImagePull",
        ),
        (
            failed("CreateContainerConfigError", "bad env"),
            Warning,
            "Failed",
            "CreateContainerConfigError",
            "Error: bad env",
        ),
        (
            created("web"),
            Normal,
            "Created",
            "CreateContainer",
            "Created container: web",
        ),
        (
            started("web"),
            Normal,
            "Started",
            "StartContainer",
            "Started container web",
        ),
        (
            killing("web", None),
            Normal,
            "Killing",
            "KillContainer",
            "Stopping container web",
        ),
        (
            killing("web", Some(&definition_changed("web"))),
            Normal,
            "Killing",
            "KillContainer",
            "Container web definition changed, will be restarted",
        ),
        (
            killing("web", Some(FAILED_POST_START_HOOK)),
            Normal,
            "Killing",
            "KillContainer",
            "FailedPostStartHook",
        ),
        (
            back_off_restarting("web", &pod),
            Warning,
            "BackOff",
            "StartContainer",
            "Back-off restarting failed container web in pod web-node-1_default(0123abcd)",
        ),
        (
            failed_post_start_hook(),
            Warning,
            "FailedPostStartHook",
            "PostStartHook",
            "PostStartHook failed",
        ),
        (
            failed_pre_stop_hook(),
            Warning,
            "FailedPreStopHook",
            "PreStopHook",
            "PreStopHook failed",
        ),
        (
            starting(),
            Normal,
            "Starting",
            "Starting",
            "Starting kubelet.",
        ),
        (
            node_status("node-1", "NodeHasDiskPressure"),
            Normal,
            "NodeHasDiskPressure",
            "NodeStatus",
            "Node node-1 status is now: NodeHasDiskPressure",
        ),
        (
            rejected("StaticPodsOnly", "static pods only".into()),
            Warning,
            "StaticPodsOnly",
            "Admit",
            "static pods only",
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
fn a_container_id_in_a_runtime_error_becomes_its_name() {
    let cases = [
        (
            "failed to start abc123: exit 1",
            "abc123",
            "failed to start web: exit 1",
        ),
        ("abc123 and abc123", "abc123", "web and web"),
        ("no id here", "abc123", "no id here"),
        ("empty id keeps it", "", "empty id keeps it"),
    ];
    for (message, id, want) in cases {
        assert_eq!(without_id(message, id, "web"), want, "{message}");
    }
}

/// One of each pod message template, for the series checks here and in
/// `prober::probe_events`, whose templates share the kubelet's reasons.
pub(crate) fn pod_templates() -> Vec<Event> {
    vec![
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
    ]
}

/// Panics when two templates under one reason share an action too.
pub(crate) fn assert_one_series_per_template(all: &[Event]) {
    // One series per object, type, reason and action: two templates under
    // one reason must differ in action, or one's message would be counted
    // on the other's.
    let mut seen = std::collections::HashMap::new();
    for e in all {
        if let Some(other) = seen.insert((e.type_, e.reason, e.action), &e.message) {
            panic!(
                "{:?} shares {:?} with {other:?}",
                e.message,
                (e.reason, e.action)
            );
        }
    }
}

#[test]
fn messages_that_share_a_reason_never_share_an_action() {
    assert_one_series_per_template(&pod_templates());
}
