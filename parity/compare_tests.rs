use super::*;
use serde_json::json;

fn snap(items: &[(&str, Json)]) -> Snapshot {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn equal_snapshots_have_no_differences() {
    let a = snap(&[("pods web", json!({"a": [1, 2], "b": {"c": "d"}}))]);
    assert!(differences(&a, &a.clone()).is_empty());
}

#[test]
fn each_field_that_differs_is_one_line_with_both_values() {
    let a = snap(&[(
        "cri RunPodSandbox web",
        json!({"config": {"hostname": "web", "linux": {"resources": {"cpu_period": 100000}}}}),
    )]);
    let b = snap(&[(
        "cri RunPodSandbox web",
        json!({"config": {"hostname": "", "linux": {}, "annotations": {"io.kubernetes.x": "1"}}}),
    )]);
    assert_eq!(
        differences(&a, &b),
        [
            r#"cri RunPodSandbox web: config.annotations: kubelet (absent) | crilet {"io.kubernetes.x":"1"}"#,
            r#"cri RunPodSandbox web: config.hostname: kubelet "web" | crilet """#,
            r#"cri RunPodSandbox web: config.linux.resources: kubelet {"cpu_period":100000} | crilet (absent)"#,
        ]
    );
}

#[test]
fn keys_that_are_not_identifiers_are_quoted() {
    let a = snap(&[("o", json!({"labels": {"io.kubernetes.pod.uid": "1"}}))]);
    let b = snap(&[("o", json!({"labels": {"io.kubernetes.pod.uid": "2"}}))]);
    assert_eq!(
        differences(&a, &b),
        [r#"o: labels["io.kubernetes.pod.uid"]: kubelet "1" | crilet "2""#]
    );
}

#[test]
fn an_object_only_one_agent_has_is_named_once() {
    let a = snap(&[
        ("cri CreateContainer web/init", json!({})),
        ("node", json!({})),
    ]);
    let b = snap(&[("node", json!({})), ("pods extra", json!({}))]);
    assert_eq!(
        differences(&a, &b),
        [
            "cri CreateContainer web/init: only under the kubelet",
            "pods extra: only under crilet",
        ]
    );
}

#[test]
fn keyed_lists_compare_items_by_key_and_their_order_apart() {
    let a = snap(&[(
        "o",
        json!({"mounts": [
            {"container_path": "/a", "readonly": true},
            {"container_path": "/etc/hosts"},
            {"container_path": "/b"},
        ]}),
    )]);
    let b = snap(&[(
        "o",
        json!({"mounts": [
            {"container_path": "/b"},
            {"container_path": "/a"},
        ]}),
    )]);
    assert_eq!(
        differences(&a, &b),
        [
            r#"o: mounts[container_path=/a].readonly: kubelet true | crilet (absent)"#,
            r#"o: mounts[container_path=/etc/hosts]: kubelet {"container_path":"/etc/hosts"} | crilet (absent)"#,
            "o: mounts order: kubelet /a,/b | crilet /b,/a",
        ]
    );
}

#[test]
fn lists_of_plain_values_are_one_value_and_unkeyed_objects_compare_by_index() {
    let a = snap(&[(
        "o",
        json!({"command": ["sh", "-c", "x"], "paths": ["/a"], "objs": [{"v": 1}, {"v": 2}]}),
    )]);
    let b = snap(&[(
        "o",
        json!({"command": ["sh", "-c", "y"], "paths": ["/a", "/b"], "objs": [{"v": 1}, {"v": 3}]}),
    )]);
    assert_eq!(
        differences(&a, &b),
        [
            r#"o: command: kubelet ["sh","-c","x"] | crilet ["sh","-c","y"]"#,
            "o: objs[1].v: kubelet 2 | crilet 3",
            r#"o: paths: kubelet ["/a"] | crilet ["/a","/b"]"#,
        ]
    );
}

#[test]
fn a_key_repeated_within_a_list_falls_back_to_indexes() {
    let a = snap(&[(
        "o",
        json!({"l": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]}),
    )]);
    let b = snap(&[(
        "o",
        json!({"l": [{"name": "x", "v": 1}, {"name": "x", "v": 3}]}),
    )]);
    assert_eq!(differences(&a, &b), ["o: l[1].v: kubelet 2 | crilet 3"]);
}

#[test]
fn long_values_are_cut() {
    let long = "x".repeat(1000);
    let a = snap(&[("o", json!({"v": long}))]);
    let b = snap(&[("o", json!({}))]);
    let lines = differences(&a, &b);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].ends_with("… | crilet (absent)"), "{}", lines[0]);
    assert!(lines[0].len() < 400);
}
