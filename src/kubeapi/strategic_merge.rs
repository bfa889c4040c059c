//! Strategic merge patches, the part crilet writes: the two-way patch that
//! turns an object's old JSON into its new JSON (what apimachinery's
//! `CreateTwoWayMergePatch` computes for the kubelet's status writes), and
//! applying a patch as the API server applies it (the oracle of the tests,
//! and what the fake client does).
//!
//! The rules, for JSON objects keyed by field path (`status.conditions`):
//! maps merge field by field, and a field the new object no longer has is
//! sent as `null`, which removes it; a list whose field has a merge key
//! ([`MergeKey`], `patchMergeKey` in the Go types) merges item by item:
//! changed or new items carry their key and what changed, removed ones are
//! `{"$patch": "delete", key: value}`, and `$setElementOrder/<field>`
//! beside the list gives the new order; any other list is atomic and is
//! sent whole when it changed.
//!
//! Invariant: pure, and for any `old` and `new` (JSON objects whose merged
//! lists hold objects with unique keys), `apply(old, two_way(old, new)) ==
//! new`; an empty patch means no change. A merged list whose items lack a
//! key or repeat one is replaced whole (`$patch: replace`), so the
//! invariant holds for those too.

use serde_json::{Map, Value, json};

/// The merge key of the list at a field path, if that list merges by key.
pub type MergeKey = fn(&str) -> Option<&'static str>;

/// The lists of a Pod that merge by key (`patchMergeKey` in
/// `k8s.io/api/core/v1`); every other list of a Pod's status, among them
/// `containerStatuses` and `initContainerStatuses`, is atomic.
pub fn pod_merge_key(path: &str) -> Option<&'static str> {
    match path {
        "status.conditions" => Some("type"),
        "status.podIPs" | "status.hostIPs" => Some("ip"),
        "status.resourceClaimStatuses" => Some("name"),
        "metadata.ownerReferences" => Some("uid"),
        _ => None,
    }
}

const DIRECTIVE: &str = "$patch";
const ORDER_PREFIX: &str = "$setElementOrder/";

/// The patch that turns `old` into `new`; `{}` when they are equal. Both
/// are objects (anything else is replaced whole).
pub fn two_way(old: &Value, new: &Value, keys: MergeKey) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => Value::Object(diff_maps(o, n, "", keys)),
        _ => new.clone(),
    }
}

fn child(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn diff_maps(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    path: &str,
    keys: MergeKey,
) -> Map<String, Value> {
    let mut patch = Map::new();
    for (field, value) in new {
        let here = child(path, field);
        match (old.get(field), value) {
            (Some(before), _) if before == value => {}
            (Some(Value::Object(o)), Value::Object(n)) => {
                patch.insert(field.clone(), Value::Object(diff_maps(o, n, &here, keys)));
            }
            (Some(Value::Array(o)), Value::Array(n)) => match keys(&here) {
                Some(key) => diff_list(&mut patch, field, o, n, key, &here, keys),
                None => {
                    patch.insert(field.clone(), value.clone());
                }
            },
            // New, or of another type: sent whole.
            _ => {
                patch.insert(field.clone(), value.clone());
            }
        }
    }
    for field in old.keys().filter(|f| !new.contains_key(*f)) {
        patch.insert(field.clone(), Value::Null);
    }
    patch
}

/// The key of each item, or None if some item has none or repeats one.
fn item_keys<'a>(items: &'a [Value], key: &str) -> Option<Vec<&'a Value>> {
    let mut seen: Vec<&Value> = Vec::with_capacity(items.len());
    for item in items {
        let k = item.as_object()?.get(key)?;
        if k.is_null() || seen.contains(&k) {
            return None;
        }
        seen.push(k);
    }
    Some(seen)
}

fn diff_list(
    patch: &mut Map<String, Value>,
    field: &str,
    old: &[Value],
    new: &[Value],
    key: &str,
    path: &str,
    keys: MergeKey,
) {
    let (Some(old_keys), Some(new_keys)) = (item_keys(old, key), item_keys(new, key)) else {
        let mut items = vec![json!({ DIRECTIVE: "replace" })];
        items.extend(new.iter().cloned());
        patch.insert(field.to_string(), Value::Array(items));
        return;
    };
    let mut items = Vec::new();
    for (item, k) in new.iter().zip(&new_keys) {
        match old_keys.iter().position(|o| o == k) {
            None => items.push(item.clone()),
            Some(at) if old[at] == *item => {}
            Some(at) => {
                let (Value::Object(o), Value::Object(n)) = (&old[at], item) else {
                    unreachable!("item_keys only keys objects");
                };
                let mut changed = diff_maps(o, n, path, keys);
                changed.insert(key.to_string(), (*k).clone());
                items.push(Value::Object(changed));
            }
        }
    }
    for k in old_keys.iter().filter(|k| !new_keys.contains(k)) {
        items.push(json!({ DIRECTIVE: "delete", key: k }));
    }
    let reordered = {
        let kept: Vec<&&Value> = old_keys.iter().filter(|k| new_keys.contains(k)).collect();
        let kept_in_new: Vec<&&Value> = new_keys.iter().filter(|k| old_keys.contains(k)).collect();
        kept != kept_in_new
    };
    if items.is_empty() && !reordered {
        return;
    }
    let order = new_keys.iter().map(|k| json!({ key: k })).collect();
    patch.insert(format!("{ORDER_PREFIX}{field}"), Value::Array(order));
    if !items.is_empty() {
        patch.insert(field.to_string(), Value::Array(items));
    }
}

/// `target` with `patch` applied, as the API server applies a strategic
/// merge patch (the directives [`two_way`] writes).
pub fn apply(target: &Value, patch: &Value, keys: MergeKey) -> Value {
    apply_at(target, patch, "", keys)
}

fn apply_at(target: &Value, patch: &Value, path: &str, keys: MergeKey) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut fields = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (field, value) in patch.iter().filter(|(f, _)| !f.starts_with('$')) {
        let here = child(path, field);
        if value.is_null() {
            fields.remove(field);
            continue;
        }
        let merged = match (keys(&here), value) {
            (Some(key), Value::Array(items)) => {
                merge_list(fields.get(field), items, key, &here, keys)
            }
            (_, Value::Object(_)) => apply_at(
                fields.get(field).unwrap_or(&Value::Null),
                value,
                &here,
                keys,
            ),
            _ => value.clone(),
        };
        fields.insert(field.clone(), merged);
    }
    for (directive, order) in patch.iter().filter(|(f, _)| f.starts_with(ORDER_PREFIX)) {
        let field = &directive[ORDER_PREFIX.len()..];
        let (Some(key), Some(Value::Array(list)), Value::Array(order)) =
            (keys(&child(path, field)), fields.get(field), order)
        else {
            continue;
        };
        let rank = |item: &Value| order.iter().position(|o| o.get(key) == item.get(key));
        let mut sorted = list.clone();
        // Items the order does not name keep their place after those it does.
        sorted.sort_by_key(|item| rank(item).unwrap_or(usize::MAX));
        fields.insert(field.to_string(), Value::Array(sorted));
    }
    Value::Object(fields)
}

fn merge_list(
    target: Option<&Value>,
    items: &[Value],
    key: &str,
    path: &str,
    keys: MergeKey,
) -> Value {
    let replace = items
        .iter()
        .any(|i| i.get(DIRECTIVE) == Some(&json!("replace")));
    let mut list = match target {
        Some(Value::Array(list)) if !replace => list.clone(),
        _ => Vec::new(),
    };
    for item in items
        .iter()
        .filter(|i| i.get(DIRECTIVE) != Some(&json!("replace")))
    {
        if replace {
            list.push(item.clone());
            continue;
        }
        let at = list.iter().position(|have| have.get(key) == item.get(key));
        let delete = item.get(DIRECTIVE) == Some(&json!("delete"));
        match (at, delete) {
            (Some(at), true) => drop(list.remove(at)),
            (None, true) => {}
            (Some(at), false) => list[at] = apply_at(&list[at], item, path, keys),
            (None, false) => list.push(apply_at(&Value::Null, item, path, keys)),
        }
    }
    Value::Array(list)
}

#[cfg(test)]
#[path = "strategic_merge_tests.rs"]
mod tests;
