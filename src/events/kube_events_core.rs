//! kube-runtime's `events::Recorder` speaks only events.k8s.io/v1, and a
//! node may not write that group: the Node authorizer's rules for nodes
//! (the `system:node` rules) grant `create`, `update` and `patch` on core/v1
//! `events` only, which is what the kubelet writes. A node's events.k8s.io
//! request is refused with 403 (measured on the lab's kube-apiserver 1.32).
//! So the Recorder's client goes through [`CoreV1Events`]: each of its
//! Events requests is sent as the same Event in core/v1 form, and the answer
//! comes back in events.k8s.io/v1 form. Both are views of one stored
//! object; the field mapping is the one the API server applies between them
//! (`regarding`/`involvedObject`, `note`/`message`,
//! `reportingController`/`reportingComponent`, the `deprecated*` fields),
//! and `series` and `eventTime` are the same in both. Where the Event has no
//! `source`, it gets the kubelet's (component = reportingController, host =
//! reportingInstance), so `--field-selector source=kubelet` finds it.
//!
//! Invariant: only Events requests are touched; anything else, and every
//! answer that is not a success (a Status), passes through unchanged. The
//! mapping functions are pure.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use serde_json::Value;

/// `(events.k8s.io/v1 name, core/v1 name)` of the fields that differ.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// The core/v1 path of an events.k8s.io/v1 Events path (query aside), or
/// None for any other path.
pub fn core_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/apis/events.k8s.io/v1/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let events = matches!(
        parts.as_slice(),
        ["namespaces", _, "events"] | ["namespaces", _, "events", _] | ["events"]
    );
    events.then(|| format!("/api/v1/{rest}"))
}

fn rename(object: &mut Value, from: &str, to: &str) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    if let Some(v) = map.remove(from) {
        map.insert(to.to_string(), v);
    }
}

/// An events.k8s.io/v1 Event (or merge patch of one) as core/v1.
pub fn to_core(mut event: Value) -> Value {
    for (v1, core) in RENAMED {
        rename(&mut event, v1, core);
    }
    let Some(map) = event.as_object_mut() else {
        return event;
    };
    if map.contains_key("apiVersion") {
        map.insert("apiVersion".into(), "v1".into());
    }
    let has_source = map
        .get("source")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty());
    if !has_source {
        let component = map.get("reportingComponent").cloned();
        let host = map.get("reportingInstance").cloned();
        if let (Some(component), Some(host)) = (component, host) {
            let source = serde_json::json!({"component": component, "host": host});
            map.insert("source".into(), source);
        }
    }
    event
}

/// A core/v1 Event as events.k8s.io/v1.
pub fn from_core(mut event: Value) -> Value {
    for (v1, core) in RENAMED {
        rename(&mut event, core, v1);
    }
    if let Some(map) = event.as_object_mut() {
        if map.contains_key("apiVersion") {
            map.insert("apiVersion".into(), "events.k8s.io/v1".into());
        }
    }
    event
}

/// `bytes` as JSON mapped by `f`; bytes that are not JSON stay as they are.
fn map_json(bytes: bytes::Bytes, f: fn(Value) -> Value) -> bytes::Bytes {
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => serde_json::to_vec(&f(v)).map_or(bytes, bytes::Bytes::from),
        Err(_) => bytes,
    }
}

type Request = http::Request<kube::client::Body>;
type Response = http::Response<kube::client::Body>;

/// The Recorder's client: a kube client whose Events requests go to core/v1.
#[derive(Clone)]
pub struct CoreV1Events {
    inner: kube::Client,
}

impl CoreV1Events {
    /// A client for kube-runtime's Recorder over `inner`'s connection.
    pub fn client(inner: kube::Client) -> kube::Client {
        let namespace = inner.default_namespace().to_string();
        kube::Client::new(CoreV1Events { inner }, namespace)
    }
}

async fn collect(body: kube::client::Body) -> Result<bytes::Bytes, kube::Error> {
    Ok(body.collect().await?.to_bytes())
}

async fn forward(inner: kube::Client, req: Request) -> Result<Response, kube::Error> {
    let Some(path) = core_path(req.uri().path()) else {
        return inner.send(req).await;
    };
    let (mut parts, body) = req.into_parts();
    let uri = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    parts.uri = uri
        .parse()
        .map_err(|e: http::uri::InvalidUri| kube::Error::Service(e.into()))?;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let body = map_json(collect(body).await?, to_core);
    let res = inner
        .send(http::Request::from_parts(parts, body.into()))
        .await?;
    if !res.status().is_success() {
        return Ok(res);
    }
    let (mut parts, body) = res.into_parts();
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let body = map_json(collect(body).await?, from_core);
    Ok(http::Response::from_parts(parts, body.into()))
}

impl tower::Service<Request> for CoreV1Events {
    type Response = Response;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        Box::pin(forward(self.inner.clone(), req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_events_paths_move_to_core_v1() {
        let cases = [
            (
                "/apis/events.k8s.io/v1/namespaces/default/events",
                Some("/api/v1/namespaces/default/events"),
            ),
            (
                "/apis/events.k8s.io/v1/namespaces/kube-system/events/web.17a",
                Some("/api/v1/namespaces/kube-system/events/web.17a"),
            ),
            ("/apis/events.k8s.io/v1/events", Some("/api/v1/events")),
            ("/api/v1/namespaces/default/events", None),
            ("/api/v1/namespaces/default/pods", None),
            ("/apis/events.k8s.io/v1/namespaces/default/pods", None),
            ("/apis/coordination.k8s.io/v1/namespaces/x/leases/n", None),
        ];
        for (path, want) in cases {
            assert_eq!(core_path(path).as_deref(), want, "{path}");
        }
    }

    #[test]
    fn an_event_maps_field_for_field_and_back() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
            "reportingController": "kubelet",
            "reportingInstance": "node-1",
            "action": "StartContainer",
            "reason": "BackOff",
            "type": "Warning",
            "note": "Back-off restarting failed container main",
            "regarding": {"kind": "Pod", "name": "web", "uid": "u1", "fieldPath": "spec.containers{main}"},
        });
        let core = to_core(v1.clone());
        let want = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1",
            "action": "StartContainer",
            "reason": "BackOff",
            "type": "Warning",
            "message": "Back-off restarting failed container main",
            "involvedObject": {"kind": "Pod", "name": "web", "uid": "u1", "fieldPath": "spec.containers{main}"},
            "source": {"component": "kubelet", "host": "node-1"},
        });
        assert_eq!(core, want);
        // Back, with the source the server keeps as deprecatedSource.
        let mut back = v1;
        back["deprecatedSource"] = json!({"component": "kubelet", "host": "node-1"});
        assert_eq!(from_core(core), back);
    }

    #[test]
    fn a_given_source_and_the_deprecated_fields_are_kept() {
        let v1 = json!({
            "deprecatedSource": {"component": "other", "host": "h"},
            "deprecatedCount": 4,
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
            "deprecatedLastTimestamp": "2026-01-01T00:02:00Z",
            "reportingController": "kubelet",
            "reportingInstance": "node-1",
        });
        let core = to_core(v1);
        assert_eq!(core["source"], json!({"component": "other", "host": "h"}));
        assert_eq!(core["count"], 4);
        assert_eq!(core["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(core["lastTimestamp"], "2026-01-01T00:02:00Z");
        // A merge patch without apiVersion gets none.
        assert!(core.get("apiVersion").is_none());
    }

    #[test]
    fn a_body_that_is_not_json_is_left_alone() {
        let raw = bytes::Bytes::from_static(b"not json");
        assert_eq!(map_json(raw.clone(), to_core), raw);
        let empty = bytes::Bytes::new();
        assert_eq!(map_json(empty.clone(), to_core), empty);
    }
}
