//! The API server double's Events (events.k8s.io/v1 and core/v1): taken
//! and answered as a real server answers them (201 with the object on a
//! create, 200 on a patch) but not kept, since no test reads them back here;
//! or, once a test calls `ApiServer::refuse_events`, refused with the 403 a
//! server whose RBAC lacks the node's events rule gives. The real
//! kube-apiserver lets nodes create events, so that refusal only exists on
//! the double.

use serde_json::{Value, json};

/// Whether `path` names Events: `/apis/events.k8s.io/v1/...events...` or
/// `/api/v1/namespaces/<ns>/events...`.
pub fn is_events(path: &[&str]) -> bool {
    match path {
        ["apis", "events.k8s.io", "v1", rest @ ..] => rest.contains(&"events"),
        ["api", "v1", "namespaces", _, "events", ..] => true,
        _ => false,
    }
}

/// The answer to an Events request on `path` by node `who`: Ok (code,
/// object), or Err (code, reason, message).
pub fn answer(
    refused: bool,
    method: &str,
    path: &[&str],
    who: Option<&str>,
    body: &Value,
    stamp: u64,
) -> Result<(u16, Value), (u16, &'static str, String)> {
    let group = if path.get(1) == Some(&"events.k8s.io") {
        "events.k8s.io"
    } else {
        ""
    };
    let namespace = path
        .iter()
        .position(|s| *s == "namespaces")
        .and_then(|i| path.get(i + 1))
        .copied()
        .unwrap_or("default");
    if refused {
        let user = format!("system:node:{}", who.unwrap_or("unknown"));
        let verb = match method {
            "POST" => "create",
            "PATCH" => "patch",
            "PUT" => "update",
            "DELETE" => "delete",
            _ => "get",
        };
        let message = format!(
            "events{dot}{group} is forbidden: User {user:?} cannot {verb} resource \"events\" in API group {group:?} in the namespace {namespace:?}",
            dot = if group.is_empty() { "" } else { "." },
        );
        return Err((403, "Forbidden", message));
    }
    let mut object = body.clone();
    match method {
        "POST" => {
            object["metadata"]["uid"] = json!(format!("event-uid-{stamp}"));
            object["metadata"]["resourceVersion"] = json!(stamp.to_string());
            Ok((201, object))
        }
        "PATCH" | "PUT" => {
            object["metadata"]["resourceVersion"] = json!(stamp.to_string());
            Ok((200, object))
        }
        _ => Err((
            405,
            "MethodNotAllowed",
            "the double only takes Events".into(),
        )),
    }
}
