//! Each limit with an input just under it (accepted: a valid Pod) and one
//! just over it (refused, naming the input and the limit), and the hostile
//! inputs of the issue: each refused quickly.

use std::time::{Duration, Instant};

use super::*;
use crate::pod::model::{parse_pod, parse_pods};

const ORIGIN: &str = "/etc/kubernetes/manifests/web.yaml";

/// A valid Pod; callers append an unknown top-level field, which the Pod
/// type ignores but the decoder still has to read.
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n\
                   spec: {containers: [{name: a, image: busybox}]}\n";

const POD_JSON: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"a","image":"busybox"}]}"#;

/// The refusal's text, checked to name the input and to contain `limit`.
fn refused(text: &str, limit: &str) -> String {
    let err = parse_pod(ORIGIN, text.as_bytes()).expect_err("over the limit");
    let message = err.to_string();
    assert!(message.starts_with(&format!("{ORIGIN}: ")), "{message}");
    assert!(message.contains(limit), "wanted {limit:?} in {message}");
    message
}

fn accepted(text: &str) {
    if let Err(e) = parse_pod(ORIGIN, text.as_bytes()) {
        panic!("just under the limit, refused: {e}");
    }
}

/// `x:` holding `lists` nested flow lists: the document is `lists + 1` deep.
fn yaml_flow_depth(lists: usize) -> String {
    format!("{POD}x: {}{}\n", "[".repeat(lists), "]".repeat(lists))
}

fn yaml_block_depth(lists: usize) -> String {
    let mut text = format!("{POD}x:\n");
    for i in 0..lists {
        text.push_str(&format!("{}-\n", "  ".repeat(i)));
    }
    text
}

fn json_depth(lists: usize) -> String {
    format!(
        "{POD_JSON},\"x\":{}{}}}",
        "[".repeat(lists),
        "]".repeat(lists)
    )
}

#[test]
fn nesting_depth_is_the_same_for_json_and_yaml() {
    let depth = MAX_NESTING_DEPTH.to_string();
    for make in [yaml_flow_depth, yaml_block_depth, json_depth] {
        // The top-level object is the first level.
        accepted(&make(MAX_NESTING_DEPTH - 1));
        let message = refused(&make(MAX_NESTING_DEPTH), &depth);
        assert!(message.contains("nested deeper than"), "{message}");
    }
}

#[test]
fn json_depth_ignores_brackets_in_strings() {
    let text = format!(
        "{POD_JSON},\"x\":\"{}\\\"{}\"}}",
        "[".repeat(1000),
        "{".repeat(1000)
    );
    accepted(&text);
    assert!(check_json_depth(&"[".repeat(MAX_NESTING_DEPTH)).is_ok());
    assert!(check_json_depth(&"[".repeat(MAX_NESTING_DEPTH + 1)).is_err());
}

/// `x` anchors `items` scalars; `y` refers to it `refs` times. Each
/// reference replays `items + 2` events (the list's start and end).
fn aliases(items: usize, refs: usize) -> String {
    let items = vec!["v"; items].join(", ");
    let refs = vec!["*x"; refs].join(", ");
    format!("{POD}x: &x [{items}]\ny: [{refs}]\n")
}

#[test]
fn alias_expansion_is_bounded() {
    // 1000 references of 98 + 2 events: exactly the limit, then one over.
    assert_eq!(MAX_YAML_ALIAS_EVENTS, 1000 * 100);
    accepted(&aliases(98, 1000));
    let limit = MAX_YAML_ALIAS_EVENTS.to_string();
    let message = refused(&aliases(99, 1000), &limit);
    assert!(message.contains("alias"), "{message}");
    refused(&aliases(98, 1001), &limit);
}

#[test]
fn alias_count_is_bounded() {
    let scalar_refs = |refs: usize| {
        let refs = vec!["*s"; refs].join(", ");
        format!("{POD}s: &s v\ny: [{refs}]\n")
    };
    accepted(&scalar_refs(MAX_YAML_ALIASES));
    refused(
        &scalar_refs(MAX_YAML_ALIASES + 1),
        &MAX_YAML_ALIASES.to_string(),
    );
}

#[test]
fn document_count_is_bounded() {
    let docs = |n: usize| vec![POD; n].join("---\n");
    // Under the limit: the usual "exactly one" refusal, with the count.
    let message = refused(&docs(MAX_YAML_DOCUMENTS), "exactly one");
    assert!(
        message.contains(&format!("{MAX_YAML_DOCUMENTS} YAML documents")),
        "{message}"
    );
    let message = refused(&docs(MAX_YAML_DOCUMENTS + 1), "(the limit)");
    assert!(
        message.contains(&MAX_YAML_DOCUMENTS.to_string()),
        "{message}"
    );
}

#[test]
fn manifest_size_is_bounded_for_pods_and_lists() {
    for json in [false, true] {
        let mut text = if json {
            format!("{POD_JSON}}}")
        } else {
            POD.to_string()
        };
        let pad = MAX_MANIFEST_BYTES - text.len();
        text.push_str(&" ".repeat(pad));
        assert_eq!(text.len(), MAX_MANIFEST_BYTES);
        accepted(&text);
        assert_eq!(parse_pods(ORIGIN, text.as_bytes()).unwrap().len(), 1);
        text.push(' ');
        refused(&text, &MAX_MANIFEST_BYTES.to_string());
        let err = parse_pods(ORIGIN, text.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("over the limit"), "{err}");
    }
}

/// The issue's hostile inputs: a clear error, in well under a second on
/// an optimised build (the bound here leaves room for debug builds on a
/// busy machine).
#[test]
fn hostile_inputs_fail_fast_with_a_clear_error() {
    let mut laughs = format!("{POD}a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..9u8 {
        let (name, prev) = ((b'a' + level) as char, (b'a' + level - 1) as char);
        let refs = vec![format!("*{prev}"); 10].join(", ");
        laughs.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    // Compact block lists, "- - - ...", one level per two bytes.
    let nested_block = format!("{POD}x:\n{}v\n", "- ".repeat(20_000));
    let mut two_mib = POD.to_string();
    two_mib.push_str(&"#".repeat(2 * 1024 * 1024));
    let cases = [
        ("billion laughs", laughs, "alias"),
        (
            "20 000 flow levels",
            yaml_flow_depth(20_000),
            "nested deeper",
        ),
        ("20 000 block levels", nested_block, "nested deeper"),
        ("20 000 JSON levels", json_depth(20_000), "nested deeper"),
        ("2 MiB", two_mib, "over the limit"),
    ];
    for (what, text, wanted) in cases {
        let start = Instant::now();
        let message = refused(&text, wanted);
        let took = start.elapsed();
        assert!(took < Duration::from_secs(5), "{what}: took {took:?}");
        assert!(message.len() < 500, "{what}: {message}");
    }
}
