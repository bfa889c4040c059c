//! The JSON annotations, byte for byte as the kubelet wrote them
//! (`crictl inspect`, kubelet v1.32.13 on containerd 1.6), and Go's forms
//! of the other handler kinds.

use serde_json::{Value, json};

use super::annotations::{ports_annotation, pre_stop_annotation};
use super::*;

fn with(container: Value) -> Container {
    let mut c = json!({"name": "c"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut pod: Pod = serde_json::from_value(json!({"spec": {"containers": [c]}})).unwrap();
    crate::pod::defaults::apply_api_defaults(&mut pod);
    pod.spec.unwrap().containers.remove(0)
}

#[test]
fn pre_stop_handlers_as_go_writes_them() {
    let rows = [
        // Measured: the kubelet's annotation for this handler.
        (
            json!({"httpGet": {"port": 8080, "path": "/quit", "httpHeaders": [{"name": "X-A", "value": "b"}]}}),
            r#"{"httpGet":{"path":"/quit","port":8080,"scheme":"HTTP","httpHeaders":[{"name":"X-A","value":"b"}]}}"#,
        ),
        (
            json!({"httpGet": {"port": "http", "host": "10.0.0.1", "scheme": "HTTPS"}}),
            r#"{"httpGet":{"path":"/","port":"http","host":"10.0.0.1","scheme":"HTTPS"}}"#,
        ),
        (
            json!({"exec": {"command": ["sh", "-c", "a && b <x>"]}}),
            r#"{"exec":{"command":["sh","-c","a \u0026\u0026 b \u003cx\u003e"]}}"#,
        ),
        (json!({"exec": {}}), r#"{"exec":{}}"#),
        (
            json!({"tcpSocket": {"port": 53}}),
            r#"{"tcpSocket":{"port":53}}"#,
        ),
        (
            json!({"sleep": {"seconds": 5}}),
            r#"{"sleep":{"seconds":5}}"#,
        ),
    ];
    for (handler, want) in rows {
        let c = with(json!({"lifecycle": {"preStop": handler}}));
        assert_eq!(pre_stop_annotation(&c).as_deref(), Some(want), "{handler}");
    }
    let post_start_only = with(json!({"lifecycle": {"postStart": {"sleep": {"seconds": 1}}}}));
    assert_eq!(pre_stop_annotation(&post_start_only), None);
    assert_eq!(pre_stop_annotation(&with(json!({}))), None);
}

#[test]
fn ports_as_go_writes_them() {
    let rows = [
        (
            json!([{"containerPort": 80}]),
            r#"[{"containerPort":80,"protocol":"TCP"}]"#,
        ),
        (
            json!([{"containerPort": 53, "protocol": "UDP", "name": "dns", "hostPort": 5353, "hostIP": "::1"}]),
            r#"[{"name":"dns","hostPort":5353,"containerPort":53,"protocol":"UDP","hostIP":"::1"}]"#,
        ),
        (
            json!([{"containerPort": 80, "hostPort": 0, "name": ""}]),
            r#"[{"containerPort":80,"protocol":"TCP"}]"#,
        ),
    ];
    for (ports, want) in rows {
        let c = with(json!({"ports": ports}));
        assert_eq!(ports_annotation(&c).as_deref(), Some(want), "{ports}");
    }
    assert_eq!(ports_annotation(&with(json!({"ports": []}))), None);
}

#[test]
fn both_annotations_reach_the_container_config() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "a", "uid": "u"},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1}],
                 "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}]}
    }))
    .unwrap();
    let c = &spec(&pod).containers[0];
    let got = container_config(&NodeContext::default(), &pod, c, &ContainerStart::default());
    let annotations = got.unwrap().annotations;
    assert_eq!(
        annotations["io.kubernetes.container.ports"],
        r#"[{"containerPort":1}]"#
    );
    assert_eq!(
        annotations["io.kubernetes.container.preStopHandler"],
        r#"{"sleep":{"seconds":1}}"#
    );
}
