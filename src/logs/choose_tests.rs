use super::*;
use serde_json::json;

fn pod(status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-n1", "namespace": "default"},
        "spec": {"containers": [{"name": "app"}], "initContainers": [{"name": "init"}]},
        "status": status,
    }))
    .unwrap()
}

fn st(name: &str, c: serde_json::Value) -> serde_json::Value {
    let mut c = c;
    c["name"] = json!(name);
    json!({"containerStatuses": [c]})
}

fn choose(status: serde_json::Value, container: &str, previous: bool) -> Result<String, String> {
    choose_container(&pod(status), None, container, previous).map_err(|e| e.to_string())
}

#[test]
fn the_kubelet_table() {
    let running = st(
        "app",
        json!({"containerID": "containerd://c2", "state": {"running": {}},
        "lastState": {"terminated": {"containerID": "containerd://c1", "exitCode": 1}}}),
    );
    assert_eq!(choose(running.clone(), "app", false), Ok("c2".into()));
    assert_eq!(choose(running, "app", true), Ok("c1".into()));

    let fresh = st(
        "app",
        json!({"containerID": "containerd://c1", "state": {"running": {}}}),
    );
    assert_eq!(
        choose(fresh, "app", true),
        Err("previous terminated container \"app\" in pod \"web-n1\" not found".into())
    );

    let terminated = st(
        "app",
        json!({"containerID": "cri-o://c3", "state": {"terminated": {"containerID": "cri-o://c3", "exitCode": 0}}}),
    );
    assert_eq!(choose(terminated, "app", false), Ok("c3".into()));

    let next_not_started = st(
        "app",
        json!({"state": {"terminated": {"exitCode": 0}},
        "lastState": {"terminated": {"containerID": "containerd://c1", "exitCode": 0}}}),
    );
    assert_eq!(choose(next_not_started, "app", false), Ok("c1".into()));

    let crashloop = st(
        "app",
        json!({"state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"containerID": "containerd://c4", "exitCode": 2}}}),
    );
    assert_eq!(choose(crashloop, "app", false), Ok("c4".into()));

    for (reason, text) in [
        ("ErrImagePull", "image can't be pulled"),
        ("ImagePullBackOff", "trying and failing to pull image"),
        ("ContainerCreating", "ContainerCreating"),
    ] {
        let waiting = st("app", json!({"state": {"waiting": {"reason": reason}}}));
        assert_eq!(
            choose(waiting, "app", false),
            Err(format!(
                "container \"app\" in pod \"web-n1\" is waiting to start: {text}"
            ))
        );
    }
    assert_eq!(
        choose(st("app", json!({})), "app", false),
        Err("container \"app\" in pod \"web-n1\" is waiting to start - no logs yet".into())
    );
    assert_eq!(
        choose(json!({}), "app", false),
        Err("container \"app\" in pod \"web-n1\" is not available".into())
    );
    assert_eq!(
        choose(json!({}), "nope", false),
        Err("container \"nope\" not found in pod \"web-n1\"".into())
    );
    let init = json!({"initContainerStatuses": [{"name": "init", "containerID": "containerd://i1",
        "state": {"terminated": {"containerID": "containerd://i1", "exitCode": 0}}}]});
    assert_eq!(choose(init, "init", false), Ok("i1".into()));
}

#[test]
fn the_cached_status_wins_over_the_pods_own() {
    let p = pod(st("app", json!({"state": {"waiting": {"reason": "x"}}})));
    let cached: PodStatus = serde_json::from_value(st(
        "app",
        json!({"containerID": "containerd://c9", "state": {"running": {}}}),
    ))
    .unwrap();
    assert_eq!(
        choose_container(&p, Some(&cached), "app", false),
        Ok("c9".into())
    );
}

#[test]
fn the_default_container() {
    let mk = |containers: serde_json::Value, annotations: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"containers": containers},
        }))
        .unwrap()
    };
    let one = mk(json!([{"name": "a"}]), json!({}));
    assert_eq!(default_container(&one), Ok("a".into()));
    let two = mk(json!([{"name": "a"}, {"name": "b"}]), json!({}));
    assert_eq!(
        default_container(&two).unwrap_err().to_string(),
        "a container name must be specified for pod \"p\", choose one of: [a b]"
    );
    let annotated = mk(
        json!([{"name": "a"}, {"name": "b"}]),
        json!({DEFAULT_CONTAINER_ANNOTATION: "b"}),
    );
    assert_eq!(default_container(&annotated), Ok("b".into()));
    let stale = mk(
        json!([{"name": "a"}]),
        json!({DEFAULT_CONTAINER_ANNOTATION: "gone"}),
    );
    assert_eq!(default_container(&stale), Ok("a".into()));
}
