//! Each scalar type mismatch, in YAML and JSON, through the manifest parser
//! as the file and URL sources call it: refused naming the field, or
//! accepted where the kubelet accepts it (checked against kubelet v1.32.13's
//! own decoding of the same manifests).

use serde_json::json;

use super::*;
use crate::pod::model::{parse_pod, parse_pods};

const ORIGIN: &str = "/etc/kubernetes/manifests/bad.yaml";

fn yaml(container_extra: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n{spec_extra}  containers:\n  - name: main\n    image: busybox\n{container_extra}"
    )
}

fn json_pod(container_extra: &str, spec_extra: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "web"}}, "spec": {{{spec_extra}"containers": [{{"name": "main", "image": "busybox"{container_extra}}}]}}}}"#
    )
}

#[test]
fn scalars_of_the_wrong_type_are_refused_naming_the_field() {
    let c0 = "spec.containers[0]";
    let rows: Vec<(&str, String, String, &str)> = vec![
        (
            "a boolean as a command word",
            yaml("    livenessProbe: {exec: {command: [true]}}\n", ""),
            format!("{c0}.livenessProbe.exec.command[0]"),
            "expected a string, found a boolean (true) at line 8 column 38; quote it to make it a string",
        ),
        (
            "YAML 1.1's yes",
            yaml("    args: [yes]\n", ""),
            format!("{c0}.args[0]"),
            "found a boolean (true)",
        ),
        (
            "YAML 1.1's on",
            yaml("    args: [a, on]\n", ""),
            format!("{c0}.args[1]"),
            "found a boolean (true)",
        ),
        (
            "YAML 1.1's y",
            yaml("    args: [y]\n", ""),
            format!("{c0}.args[0]"),
            "found a boolean (true)",
        ),
        (
            "a number as the image",
            yaml("", "").replace("image: busybox", "image: 1"),
            format!("{c0}.image"),
            "expected a string, found a number (1)",
        ),
        (
            "a float as an env value",
            yaml("    env: [{name: A, value: 1.5}]\n", ""),
            format!("{c0}.env[0].value"),
            "expected a string, found a number (1.5)",
        ),
        (
            "a hex number",
            yaml("    args: [0x10]\n", ""),
            format!("{c0}.args[0]"),
            "found a number (16)",
        ),
        (
            "a quoted port",
            yaml("    ports: [{containerPort: \"80\"}]\n", ""),
            format!("{c0}.ports[0].containerPort"),
            "expected an integer, found a string (\"80\"); write it without quotes",
        ),
        (
            "a quoted grace period",
            yaml("", "  terminationGracePeriodSeconds: \"30\"\n"),
            "spec.terminationGracePeriodSeconds".into(),
            "expected an integer, found a string (\"30\")",
        ),
        (
            "a quoted boolean",
            yaml("    stdin: \"true\"\n", ""),
            format!("{c0}.stdin"),
            "expected a boolean, found a string (\"true\")",
        ),
        (
            "JSON: a boolean as a command word",
            json_pod(r#", "command": [true]"#, ""),
            format!("{c0}.command[0]"),
            "expected a string, found a boolean (true) at line 1 column 142; quote it to make it a string",
        ),
        (
            "JSON: a number as the image",
            json_pod("", "").replace(r#""image": "busybox""#, r#""image": 1"#),
            format!("{c0}.image"),
            "expected a string, found a number (1)",
        ),
        (
            "JSON: a string as a port",
            json_pod(r#", "ports": [{"containerPort": "80"}]"#, ""),
            format!("{c0}.ports[0].containerPort"),
            "expected an integer, found a string (\"80\")",
        ),
        (
            "JSON: 30.0 is not an integer (the kubelet's JSON decoding refuses it too)",
            json_pod("", r#""terminationGracePeriodSeconds": 30.0, "#),
            "spec.terminationGracePeriodSeconds".into(),
            "expected an integer, found a number (30.0)",
        ),
    ];
    for (what, text, field, words) in rows {
        let err = parse_pod(ORIGIN, text.as_bytes()).expect_err(what);
        let shown = err.to_string();
        assert_eq!(
            err.field.as_deref(),
            Some(field.as_str()),
            "{what}: {shown}"
        );
        assert!(
            shown.starts_with(&format!("{ORIGIN}: {field}: invalid Pod: ")),
            "{what}: {shown}"
        );
        assert!(shown.contains(words), "{what}: wanted {words:?} in {shown}");
    }
}

#[test]
fn yaml_type_errors_carry_their_line_where_the_yaml_decoder_sees_them() {
    let text = yaml("    livenessProbe: {exec: {command: [true]}}\n", "");
    let err = parse_pod(ORIGIN, text.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("at line 8 column"), "{err}");
}

#[test]
fn what_the_kubelet_accepts_is_accepted() {
    let rows = [
        (
            "a whole float as an integer (YAML to JSON writes 30)",
            yaml("", "  terminationGracePeriodSeconds: 30.0\n"),
        ),
        (
            "a quoted boolean word",
            yaml("    args: [\"true\", \"yes\", \"1\"]\n", ""),
        ),
        ("a date is text", yaml("    args: [2001-12-14]\n", "")),
        (
            "a number as a quantity",
            yaml("    resources: {limits: {cpu: 1, memory: 1.5}}\n", ""),
        ),
        (
            "a named port",
            yaml(
                "    readinessProbe: {httpGet: {port: http}}\n    ports: [{name: http, containerPort: 80}]\n",
                "",
            ),
        ),
        (
            "a numbered port",
            yaml("    readinessProbe: {tcpSocket: {port: 80}}\n", ""),
        ),
        (
            "JSON",
            json_pod(
                r#", "args": ["true"], "resources": {"limits": {"cpu": 1}}"#,
                "",
            ),
        ),
    ];
    for (what, text) in rows {
        if let Err(e) = parse_pod(ORIGIN, text.as_bytes()) {
            panic!("{what}: refused: {e}");
        }
    }
    let pod = parse_pod(
        ORIGIN,
        yaml("", "  terminationGracePeriodSeconds: 30.0\n").as_bytes(),
    )
    .unwrap();
    assert_eq!(pod.spec.unwrap().termination_grace_period_seconds, Some(30));
}

#[test]
fn a_pod_list_item_of_the_wrong_type_is_named_within_the_list() {
    let text = "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: busybox, command: [true]}]}\n";
    let err = parse_pods("http://host/pods", text.as_bytes()).unwrap_err();
    assert_eq!(
        err.field.as_deref(),
        Some("items[0].spec.containers[0].command[0]"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("expected a string, found a boolean (true)"),
        "{err}"
    );
}

#[test]
fn whole_floats_become_integers_and_nothing_else_changes() {
    let value = json!({"a": 30.0, "b": [1.5, -2.0, 1e300], "c": "30.0", "d": 7});
    assert_eq!(
        whole_floats_as_integers(value),
        json!({"a": 30, "b": [1.5, -2, 1e300], "c": "30.0", "d": 7})
    );
}

#[test]
fn serde_messages_in_the_manifests_words() {
    let rows = [
        (
            "invalid type: boolean `true`, expected a string",
            "expected a string, found a boolean (true); quote it to make it a string",
        ),
        (
            "invalid type: integer `1`, expected a string",
            "expected a string, found a number (1); quote it to make it a string",
        ),
        (
            "invalid type: string \"80\", expected i32",
            "expected an integer, found a string (\"80\"); write it without quotes",
        ),
        (
            "invalid type: map, expected a sequence",
            "expected a list, found an object",
        ),
        (
            "invalid type: sequence, expected struct Probe",
            "expected an object, found a list",
        ),
        (
            "invalid type: null, expected a string",
            "expected a string, found null",
        ),
        ("missing field `name`", "missing field `name`"),
    ];
    for (serde, ours) in rows {
        let (problem, hint) = describe(serde);
        assert_eq!(format!("{problem}{hint}"), ours, "{serde}");
    }
}
