//! Recorded CRI requests as JSON: each request decoded against crilet's
//! own CRI descriptor set (compiled by build.rs from proto/), keyed by the
//! proto field names (as containerd's `crictl inspect` prints them).
//!
//! Invariant: nothing the agent sent is lost. A field crilet's proto does
//! not declare is kept as `"#<number>": "<text format>"`, so a field the
//! kubelet sends and crilet does not even know shows up as a difference
//! instead of vanishing in the decode; a method the proto does not declare
//! is kept whole, as hex.

use std::sync::LazyLock;

use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MapKey, Value};
use serde_json::{Map, Value as Json};

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/cri_descriptor.bin"))[..])
        .expect("build.rs writes a valid CRI descriptor set")
});

/// The request of `method` (`/runtime.v1.RuntimeService/CreateContainer`)
/// as JSON.
pub fn request_json(method: &str, request: &[u8]) -> Json {
    let input = method
        .trim_start_matches('/')
        .split_once('/')
        .and_then(|(service, name)| {
            let service = POOL.get_service_by_name(service)?;
            let found = service.methods().find(|m| m.name() == name);
            found.map(|m| m.input())
        });
    let undecoded = || serde_json::json!({ "#undecoded": hex::encode(request) });
    match input {
        Some(desc) => match DynamicMessage::decode(desc, request) {
            Ok(message) => message_json(&message),
            Err(_) => undecoded(),
        },
        None => undecoded(),
    }
}

fn message_json(message: &DynamicMessage) -> Json {
    let mut out = Map::new();
    for (field, value) in message.fields() {
        out.insert(field.name().to_string(), value_json(&field.kind(), value));
    }
    for unknown in message.unknown_fields() {
        out.insert(
            format!("#{}", unknown.number()),
            Json::String(unknown.to_string()),
        );
    }
    Json::Object(out)
}

fn value_json(kind: &Kind, value: &Value) -> Json {
    match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => Json::from(*n),
        Value::I64(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::U64(n) => Json::from(*n),
        Value::F32(n) => Json::from(*n),
        Value::F64(n) => Json::from(*n),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(String::from_utf8_lossy(b).into_owned()),
        Value::EnumNumber(n) => kind
            .as_enum()
            .and_then(|e| e.get_value(*n))
            .map(|v| Json::String(v.name().to_string()))
            .unwrap_or_else(|| Json::from(*n)),
        Value::Message(m) => message_json(m),
        Value::List(items) => Json::Array(items.iter().map(|v| value_json(kind, v)).collect()),
        Value::Map(entries) => {
            let value_kind = kind
                .as_message()
                .map(|entry| entry.map_entry_value_field().kind())
                .unwrap_or_else(|| kind.clone());
            let mut out = Map::new();
            for (key, v) in entries {
                out.insert(map_key(key), value_json(&value_kind, v));
            }
            Json::Object(out)
        }
    }
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CreateContainerRequest by hand: pod_sandbox_id (1) "sb", config (2)
    /// { metadata (1) { name (1) "c" }, labels (9) {"k": "v"} }, plus field
    /// 99 that no CRI version declares.
    fn encoded() -> Vec<u8> {
        let metadata = [0x0a, 0x01, b'c'];
        let entry = [0x0a, 0x01, b'k', 0x12, 0x01, b'v'];
        let mut config = vec![0x0a, metadata.len() as u8];
        config.extend(metadata);
        config.extend([0x4a, entry.len() as u8]);
        config.extend(entry);
        let mut out = vec![0x0a, 0x02, b's', b'b', 0x12, config.len() as u8];
        out.extend(config);
        out.extend([0x98, 0x06, 0x07]); // field 99, varint 7
        out
    }

    #[test]
    fn a_request_decodes_by_field_name_and_keeps_unknown_fields() {
        let json = request_json("/runtime.v1.RuntimeService/CreateContainer", &encoded());
        assert_eq!(json["pod_sandbox_id"], "sb");
        assert_eq!(json["config"]["metadata"]["name"], "c");
        assert_eq!(json["config"]["labels"]["k"], "v");
        assert_eq!(json["#99"], "99:7");
    }

    #[test]
    fn an_unknown_method_or_a_broken_message_is_kept_whole() {
        let json = request_json("/runtime.v1.RuntimeService/NoSuchCall", b"\x01\x02");
        assert_eq!(json["#undecoded"], "0102");
        let json = request_json("/runtime.v1.RuntimeService/CreateContainer", b"\x0a\x09ab");
        assert_eq!(json["#undecoded"], "0a096162");
    }
}
