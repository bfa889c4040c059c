//! Two agents' snapshots, compared field by field, each difference one
//! line: `<object>: <path>: kubelet <value> | crilet <value>`.
//!
//! Invariant: pure and deterministic. Objects, keys and keyed list items
//! come out sorted, so the same two snapshots always print the same lines,
//! and a line can be matched against the accepted list by pattern.
//! Lists of objects that carry a key (`name`, `type`, `key`, ...) are
//! compared item by item under that key, with their order compared apart,
//! so one extra item is one line, not a shifted list; a list of plain
//! values (a command, a sequence of calls) is one value.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

/// What one agent's run left, one JSON document per compared object,
/// named e.g. `cri CreateContainer web-<node>/main`, `pods web-<node>`,
/// `node`.
pub type Snapshot = BTreeMap<String, Json>;

/// The fields that identify an item in a list, tried in this order.
const ITEM_KEYS: [&str; 10] = [
    "name",
    "type",
    "key",
    "container_path",
    "containerPath",
    "destination",
    "mountPath",
    "devicePath",
    "page_size",
    "container_port",
];

/// Values longer than this are cut in a line.
const MAX_VALUE: usize = 300;

pub fn differences(kubelet: &Snapshot, crilet: &Snapshot) -> Vec<String> {
    let names: BTreeSet<&String> = kubelet.keys().chain(crilet.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        match (kubelet.get(name), crilet.get(name)) {
            (Some(a), Some(b)) => diff(name, "", a, b, &mut out),
            (Some(_), None) => out.push(format!("{name}: only under the kubelet")),
            (None, Some(_)) => out.push(format!("{name}: only under crilet")),
            (None, None) => {}
        }
    }
    out
}

fn diff(object: &str, path: &str, a: &Json, b: &Json, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Json::Object(a), Json::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let path = format!("{path}{}", key_segment(key));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff(object, &path, x, y, out),
                    (x, y) => out.push(line(object, &path, x, y)),
                }
            }
        }
        (Json::Array(a), Json::Array(b)) => diff_list(object, path, a, b, out),
        _ => out.push(line(object, path, Some(a), Some(b))),
    }
}

fn diff_list(object: &str, path: &str, a: &[Json], b: &[Json], out: &mut Vec<String>) {
    if let Some(key) = item_key(a, b) {
        let id = |item: &Json| item[key].to_string().trim_matches('"').to_string();
        let (ka, kb): (Vec<String>, Vec<String>) =
            (a.iter().map(id).collect(), b.iter().map(id).collect());
        let by_a: BTreeMap<&String, &Json> = ka.iter().zip(a).collect();
        let by_b: BTreeMap<&String, &Json> = kb.iter().zip(b).collect();
        let ids: BTreeSet<&String> = by_a.keys().chain(by_b.keys()).copied().collect();
        for item in ids {
            let path = format!("{path}[{key}={item}]");
            match (by_a.get(item), by_b.get(item)) {
                (Some(x), Some(y)) => diff(object, &path, x, y, out),
                (x, y) => out.push(line(object, &path, x.copied(), y.copied())),
            }
        }
        let common = |mine: &[String], theirs: &BTreeMap<&String, &Json>| -> Vec<String> {
            mine.iter()
                .filter(|k| theirs.contains_key(k))
                .cloned()
                .collect()
        };
        let (oa, ob) = (common(&ka, &by_b), common(&kb, &by_a));
        if oa != ob {
            out.push(format!(
                "{object}: {} order: kubelet {} | crilet {}",
                path.strip_prefix('.').unwrap_or(path),
                oa.join(","),
                ob.join(",")
            ));
        }
    } else if a.len() == b.len() && !a.iter().chain(b).all(is_scalar) {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            diff(object, &format!("{path}[{i}]"), x, y, out);
        }
    } else {
        let (x, y) = (Json::Array(a.to_vec()), Json::Array(b.to_vec()));
        out.push(line(object, path, Some(&x), Some(&y)));
    }
}

fn is_scalar(v: &Json) -> bool {
    !matches!(v, Json::Array(_) | Json::Object(_))
}

/// The first of [`ITEM_KEYS`] that every item of both lists has, as a
/// scalar, with no repeats within a list.
fn item_key(a: &[Json], b: &[Json]) -> Option<&'static str> {
    if a.is_empty() && b.is_empty() {
        return None;
    }
    ITEM_KEYS.into_iter().find(|key| {
        [a, b].iter().all(|list| {
            let mut seen = BTreeSet::new();
            list.iter().all(|item| match item.get(key) {
                Some(v @ (Json::String(_) | Json::Number(_))) => seen.insert(v.to_string()),
                _ => false,
            })
        })
    })
}

fn key_segment(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!(".{key}")
    } else {
        format!("[{key:?}]")
    }
}

fn line(object: &str, path: &str, a: Option<&Json>, b: Option<&Json>) -> String {
    let path = path.strip_prefix('.').unwrap_or(path);
    format!(
        "{object}: {path}: kubelet {} | crilet {}",
        shown(a),
        shown(b)
    )
}

fn shown(v: Option<&Json>) -> String {
    let Some(v) = v else {
        return "(absent)".into();
    };
    let text = v.to_string();
    if text.chars().count() <= MAX_VALUE {
        return text;
    }
    let cut: String = text.chars().take(MAX_VALUE).collect();
    format!("{cut}…")
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
