//! The two-way patch, row by row, each row also applied back; then the
//! property: for any two objects, applying the patch to the old gives the
//! new.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// Merge keys of the test objects: `list` and `obj.list` merge by `k`.
fn test_key(path: &str) -> Option<&'static str> {
    match path {
        "list" | "obj.list" => Some("k"),
        _ => None,
    }
}

#[test]
fn two_way_rows() {
    let rows: Vec<(&str, Value, Value, Value)> = vec![
        (
            "equal",
            json!({"a": 1, "list": [{"k": "x"}]}),
            json!({"a": 1, "list": [{"k": "x"}]}),
            json!({}),
        ),
        (
            "a changed field and a removed one",
            json!({"a": 1, "b": "x"}),
            json!({"a": 2}),
            json!({"a": 2, "b": null}),
        ),
        (
            "an added field",
            json!({}),
            json!({"a": {"b": 1}}),
            json!({"a": {"b": 1}}),
        ),
        (
            "nested: only what changed",
            json!({"obj": {"a": 1, "b": 2, "c": {"d": 1}}}),
            json!({"obj": {"a": 1, "c": {"d": 2}}}),
            json!({"obj": {"b": null, "c": {"d": 2}}}),
        ),
        (
            "an atomic list is sent whole",
            json!({"atoms": [{"k": "x", "v": 1}, {"k": "y"}]}),
            json!({"atoms": [{"k": "y"}]}),
            json!({"atoms": [{"k": "y"}]}),
        ),
        (
            "a merged item loses fields: they are nulled, by key",
            json!({"list": [{"k": "Ready", "status": "False", "reason": "R", "message": "m"}]}),
            json!({"list": [{"k": "Ready", "status": "True"}]}),
            json!({
                "$setElementOrder/list": [{"k": "Ready"}],
                "list": [{"k": "Ready", "status": "True", "reason": null, "message": null}],
            }),
        ),
        (
            "an item added, one deleted, one kept",
            json!({"list": [{"k": "a"}, {"k": "b", "v": 1}]}),
            json!({"list": [{"k": "b", "v": 1}, {"k": "c"}]}),
            json!({
                "$setElementOrder/list": [{"k": "b"}, {"k": "c"}],
                "list": [{"k": "c"}, {"$patch": "delete", "k": "a"}],
            }),
        ),
        (
            "a new order alone",
            json!({"list": [{"k": "a"}, {"k": "b"}]}),
            json!({"list": [{"k": "b"}, {"k": "a"}]}),
            json!({"$setElementOrder/list": [{"k": "b"}, {"k": "a"}]}),
        ),
        (
            "a merged list the old object lacked",
            json!({}),
            json!({"obj": {"list": [{"k": "a"}]}}),
            json!({"obj": {"list": [{"k": "a"}]}}),
        ),
        (
            "a merged list new in an object: sent whole, as any new field",
            json!({"obj": {}}),
            json!({"obj": {"list": [{"k": "a"}]}}),
            json!({"obj": {"list": [{"k": "a"}]}}),
        ),
        (
            "repeated keys: replaced whole",
            json!({"list": [{"k": "a"}]}),
            json!({"list": [{"k": "a", "v": 1}, {"k": "a", "v": 2}]}),
            json!({"list": [{"$patch": "replace"}, {"k": "a", "v": 1}, {"k": "a", "v": 2}]}),
        ),
        (
            "items without a key: replaced whole",
            json!({"list": [{"k": "a"}]}),
            json!({"list": ["a"]}),
            json!({"list": [{"$patch": "replace"}, "a"]}),
        ),
        (
            "a merged list emptied",
            json!({"list": [{"k": "a"}]}),
            json!({"list": []}),
            json!({
                "$setElementOrder/list": [],
                "list": [{"$patch": "delete", "k": "a"}],
            }),
        ),
    ];
    for (what, old, new, want) in rows {
        let patch = two_way(&old, &new, test_key);
        assert_eq!(patch, want, "{what}");
        assert_eq!(apply(&old, &patch, test_key), new, "{what}: applied back");
    }
}

#[test]
fn apply_keeps_what_the_patch_does_not_name() {
    // The server's copy has a condition the writer never knew of: a merge
    // by key leaves it alone, and an order that omits it puts it last.
    let server = json!({"list": [{"k": "Foreign"}, {"k": "Ready", "reason": "R"}], "other": 1});
    let patch = json!({
        "$setElementOrder/list": [{"k": "Ready"}],
        "list": [{"k": "Ready", "reason": null}],
    });
    assert_eq!(
        apply(&server, &patch, test_key),
        json!({"list": [{"k": "Ready"}, {"k": "Foreign"}], "other": 1})
    );
}

#[test]
fn pod_merge_keys_are_the_api_types() {
    assert_eq!(pod_merge_key("status.conditions"), Some("type"));
    assert_eq!(pod_merge_key("status.podIPs"), Some("ip"));
    assert_eq!(pod_merge_key("status.hostIPs"), Some("ip"));
    // Container statuses are atomic: the API server replaces the list.
    assert_eq!(pod_merge_key("status.containerStatuses"), None);
    assert_eq!(pod_merge_key("status.initContainerStatuses"), None);
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec!["x", "y", "", "z"]).prop_map(Value::from),
        (0i64..3).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

/// A small object of optional leaves and one nested level.
fn small_object() -> impl Strategy<Value = Value> {
    (
        prop::option::of(leaf()),
        prop::option::of(leaf()),
        prop::option::of(prop::option::of(leaf())),
    )
        .prop_map(|(a, b, c)| {
            let mut map = Map::new();
            a.map(|v| map.insert("a".into(), v));
            b.map(|v| map.insert("b".into(), v));
            if let Some(inner) = c {
                let mut sub = Map::new();
                inner.map(|v| sub.insert("d".into(), v));
                map.insert("c".into(), Value::Object(sub));
            }
            Value::Object(map)
        })
}

/// A merged list: items with unique keys, in any order.
fn merged_list() -> impl Strategy<Value = Value> {
    let keys = prop::sample::subsequence(vec!["a", "b", "c", "d"], 0..=4).prop_shuffle();
    keys.prop_flat_map(|keys| {
        let n = keys.len();
        (Just(keys), prop::collection::vec(small_object(), n))
    })
    .prop_map(|(keys, bodies)| {
        let items = keys.into_iter().zip(bodies).map(|(k, mut body)| {
            body.as_object_mut()
                .unwrap()
                .insert("k".into(), Value::from(k));
            body
        });
        Value::Array(items.collect())
    })
}

fn object() -> impl Strategy<Value = Value> {
    (
        prop::option::of(leaf()),
        prop::option::of(merged_list()),
        prop::option::of(prop::collection::vec(leaf(), 0..3)),
        prop::option::of((small_object(), prop::option::of(merged_list()))),
    )
        .prop_map(|(a, list, atoms, obj)| {
            let mut map = Map::new();
            a.map(|v| map.insert("a".into(), v));
            list.map(|v| map.insert("list".into(), v));
            atoms.map(|v| map.insert("atoms".into(), Value::Array(v)));
            if let Some((mut o, inner)) = obj {
                inner.map(|v| o.as_object_mut().unwrap().insert("list".into(), v));
                map.insert("obj".into(), o);
            }
            Value::Object(map)
        })
}

proptest! {
    #[test]
    fn applying_the_patch_to_the_old_gives_the_new(old in object(), new in object()) {
        let patch = two_way(&old, &new, test_key);
        prop_assert_eq!(apply(&old, &patch, test_key), new.clone());
        prop_assert_eq!(patch == json!({}), old == new);
    }
}
