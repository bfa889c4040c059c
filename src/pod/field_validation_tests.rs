//! One row per rule: a manifest fragment that passes and one that fails,
//! with the field path and message the failure must give.

use serde_json::{Value, json};

use crate::pod::model::parse_pod;

/// A valid pod with `patch` merged into it (objects merged, the rest replaced).
pub(crate) fn pod(patch: Value) -> Value {
    let mut base = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    });
    merge(&mut base, patch);
    base
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

pub(crate) fn check(patch: Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(&pod(patch)).unwrap();
    parse_pod("web.json", &bytes)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

pub(crate) fn container(fields: Value) -> Value {
    let mut c = json!({"name": "app", "image": "busybox"});
    merge(&mut c, fields);
    json!({"spec": {"containers": [c]}})
}

#[test]
fn every_rule_has_a_passing_and_a_failing_row() {
    // (what, passes, fails, field and message the failure names)
    let rows: Vec<(&str, Value, Value, &str)> = vec![
        (
            "terminationGracePeriodSeconds",
            json!({"spec": {"terminationGracePeriodSeconds": 0}}),
            json!({"spec": {"terminationGracePeriodSeconds": -1}}),
            "spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "activeDeadlineSeconds",
            json!({"spec": {"activeDeadlineSeconds": 1}}),
            json!({"spec": {"activeDeadlineSeconds": 0}}),
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
        ),
        (
            "imagePullPolicy",
            container(json!({"imagePullPolicy": "IfNotPresent"})),
            container(json!({"imagePullPolicy": "Maybe"})),
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
        ),
        (
            "label key",
            json!({"metadata": {"labels": {"app.kubernetes.io/name": "web"}}}),
            json!({"metadata": {"labels": {"bad key!": "x"}}}),
            "metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters",
        ),
        (
            "label key prefix",
            json!({"metadata": {"labels": {"example.com/a": "b"}}}),
            json!({"metadata": {"labels": {"Example.com/a": "b"}}}),
            "metadata.labels: Invalid value: \"Example.com/a\": prefix part",
        ),
        (
            "label value",
            json!({"metadata": {"labels": {"a": ""}}}),
            json!({"metadata": {"labels": {"a": "-x"}}}),
            "metadata.labels[a]: Invalid value: \"-x\": a valid label must be an empty string",
        ),
        (
            "label value length",
            json!({"metadata": {"labels": {"a": "x".repeat(63)}}}),
            json!({"metadata": {"labels": {"a": "x".repeat(64)}}}),
            "must be no more than 63 characters",
        ),
        (
            "annotation key",
            json!({"metadata": {"annotations": {"kubernetes.io/config.hash": "x"}}}),
            json!({"metadata": {"annotations": {"a b": "x"}}}),
            "metadata.annotations: Invalid value: \"a b\"",
        ),
        (
            "annotations size",
            json!({"metadata": {"annotations": {"a": "x".repeat(256 * 1024 - 1)}}}),
            json!({"metadata": {"annotations": {"a": "x".repeat(256 * 1024)}}}),
            "metadata.annotations: Too long: may not be more than 262144 bytes",
        ),
        (
            "env name",
            container(json!({"env": [{"name": "A_1.b-c", "value": "x"}]})),
            container(json!({"env": [{"name": "", "value": "x"}]})),
            "spec.containers[0].env[0].name: Required value",
        ),
        (
            "env name characters",
            container(json!({"env": [{"name": "X", "value": "x"}]})),
            container(json!({"env": [{"name": "A=B", "value": "x"}]})),
            "spec.containers[0].env[0].name: Invalid value: \"A=B\"",
        ),
        (
            "hostPath absolute",
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/var/lib/x"}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "var/lib/x"}}]}}),
            "spec.volumes[0].hostPath.path: Invalid value: \"var/lib/x\": must be an absolute path",
        ),
        (
            "hostPath backsteps",
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/a..b"}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/a/../etc"}}]}}),
            "spec.volumes[0].hostPath.path: Invalid value: \"/a/../etc\": must not contain '..'",
        ),
        (
            "hostPath required",
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/"}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": ""}}]}}),
            "spec.volumes[0].hostPath.path: Required value",
        ),
        (
            "quantity",
            container(json!({"resources": {"limits": {"memory": "128Mi"}}})),
            container(json!({"resources": {"limits": {"memory": "lots"}}})),
            "spec.containers[0].resources.limits[memory]: Invalid value: \"lots\": quantities must match",
        ),
        (
            "negative quantity",
            container(json!({"resources": {"requests": {"cpu": "0"}}})),
            container(json!({"resources": {"requests": {"cpu": "-1"}}})),
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        ),
        (
            "requests within limits",
            container(
                json!({"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "0.5"}}}),
            ),
            container(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}})),
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        ),
    ];
    check_rows(rows);
}

/// Each row's valid manifest passes; its invalid one fails with exactly one
/// problem, the wanted one (field path and message).
pub(crate) fn check_rows(rows: Vec<(&str, Value, Value, &str)>) {
    for (what, good, bad, want) in rows {
        if let Err(e) = check(good) {
            panic!("{what}: the valid row was refused: {e}");
        }
        let err = check(bad).expect_err(what);
        assert!(err.starts_with("web.json: "), "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}\nwanted: {want}");
        assert!(!err.contains("; "), "{what}: more than one problem: {err}");
    }
}

/// The six broken manifests crilet used to accept (issue 15).
#[test]
fn the_six_manifests_that_used_to_run() {
    let bad = [
        json!({"spec": {"terminationGracePeriodSeconds": -5}}),
        container(json!({"imagePullPolicy": "Maybe"})),
        json!({"metadata": {"labels": {"bad key!": "x"}}}),
        json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "data"}}]}}),
        container(json!({"env": [{"name": "", "value": "x"}]})),
        container(json!({"resources": {"limits": {"memory": "lots"}}})),
    ];
    for patch in bad {
        assert!(check(patch.clone()).is_err(), "accepted {patch}");
    }
}

/// The API server lists every problem of a pod; so does crilet, in field
/// order, at most one per field, all in one line naming the file.
#[test]
fn every_problem_of_a_file_is_reported_together() {
    let bad = pod(json!({
        "metadata": {"labels": {"bad key!": "x"}},
        "spec": {
            "terminationGracePeriodSeconds": -5,
            "volumes": [{"name": "v", "hostPath": {"path": "data"}}],
            "containers": [
                {"name": "app", "image": "busybox", "imagePullPolicy": "Maybe",
                 "env": [{"name": "", "value": "x"}],
                 "resources": {"limits": {"memory": "lots"}}},
                {"name": "app", "image": ""},
            ],
        },
    }));
    let bytes = serde_json::to_vec(&bad).unwrap();
    let err = parse_pod("web.json", &bytes).expect_err("eight problems");
    let fields: Vec<&str> = err.problems().map(|(f, _)| f.unwrap()).collect();
    assert_eq!(
        fields,
        [
            "metadata.labels",
            "spec.terminationGracePeriodSeconds",
            "spec.volumes[0].hostPath.path",
            "spec.containers[0].imagePullPolicy",
            "spec.containers[0].env[0].name",
            "spec.containers[0].resources.limits[memory]",
            "spec.containers[1].name",
            "spec.containers[1].image",
        ]
    );
    let text = err.to_string();
    assert!(
        text.starts_with("web.json: metadata.labels: Invalid value"),
        "{text}"
    );
    assert_eq!(text.matches("; spec.").count(), 7, "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}

/// In a PodList every problem of an item is under that item's path.
#[test]
fn a_pod_list_item_reports_all_its_problems_under_its_path() {
    let list = json!({"apiVersion": "v1", "kind": "PodList", "items": [
        pod(json!({})),
        pod(json!({"spec": {"restartPolicy": "Sometimes", "dnsPolicy": "Cluster"}})),
    ]});
    let bytes = serde_json::to_vec(&list).unwrap();
    let err = crate::pod::model::parse_pods("http://127.0.0.1/pods", &bytes).expect_err("bad item");
    let fields: Vec<&str> = err.problems().map(|(f, _)| f.unwrap()).collect();
    assert_eq!(
        fields,
        ["items[1].spec.dnsPolicy", "items[1].spec.restartPolicy"]
    );
}
