//! Kubernetes Events, as the rest of crilet records them: the
//! [`EventRecorder`] trait, the object an event regards ([`EventObject`],
//! built as the kubelet builds its references) and the event itself
//! ([`Event`]: type, reason, action, message). The kubelet's events, with
//! their wording, are made in [`super::kubelet_events`]; the recorder that
//! sends them to the API server is [`super::kube_events`].
//!
//! Which object a static pod's events regard: the kubelet records them on
//! the *static* pod (`GenerateContainerRef` over the pod from its config
//! source): kind Pod, apiVersion v1, the pod's namespace and name, and the
//! static UID (the config hash), never the mirror pod's UID; a container's
//! events add the fieldPath `spec.containers{NAME}` (or
//! `spec.initContainers{NAME}`). `kubectl describe pod` finds them on the
//! mirror pod because it searches a mirror pod's events by the UID in its
//! `kubernetes.io/config.mirror` annotation, which is that static UID. A
//! Node's events regard kind Node with the node's name as name and UID, as
//! the kubelet's `nodeRef` does (`kubectl describe node` searches that way).
//!
//! Invariant: recording is fire-and-forget. [`EventRecorder::event`] never
//! blocks and never fails: an event that cannot be sent is dropped, and the
//! pod worker, prober or manager that recorded it goes on unchanged. This
//! module is pure (no I/O), so agent code may record without knowing
//! whether an API server is configured ([`NoopRecorder`] when none is).

use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;

use crate::pod;

/// An event's severity (`type`), as `kubectl describe` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The object an event regards (`regarding`, shown as `involvedObject`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct EventObject {
    pub api_version: String,
    pub kind: String,
    /// Empty for a cluster-scoped object (a Node): its events go to
    /// namespace `default`, as client-go's recorder puts them.
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The part of the object, e.g. `spec.containers{web}`; empty for the
    /// whole object.
    pub field_path: String,
}

impl EventObject {
    /// The pod itself (for a static pod: its static UID).
    pub fn pod(p: &Pod) -> EventObject {
        EventObject {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: pod::namespace(p).to_string(),
            name: pod::name(p).to_string(),
            uid: pod::uid(p).to_string(),
            field_path: String::new(),
        }
    }

    /// Container `container` of the pod, with the kubelet's fieldPath:
    /// `spec.initContainers{NAME}` for an init container,
    /// `spec.containers{NAME}` for an app container, and the kubelet's
    /// `implicitly required container NAME` for one the spec lacks.
    pub fn container(p: &Pod, container: &str) -> EventObject {
        let spec = p.spec.as_ref();
        let has = |list: Option<&Vec<k8s_openapi::api::core::v1::Container>>| {
            list.is_some_and(|cs| cs.iter().any(|c| c.name == container))
        };
        let field_path = if has(spec.map(|s| &s.containers)) {
            format!("spec.containers{{{container}}}")
        } else if has(spec.and_then(|s| s.init_containers.as_ref())) {
            format!("spec.initContainers{{{container}}}")
        } else {
            format!("implicitly required container {container}")
        };
        EventObject {
            field_path,
            ..EventObject::pod(p)
        }
    }

    /// A Node, as the kubelet's `nodeRef`: the node name is its UID too.
    pub fn node(name: &str) -> EventObject {
        EventObject {
            api_version: "v1".into(),
            kind: "Node".into(),
            namespace: String::new(),
            name: name.into(),
            uid: name.into(),
            field_path: String::new(),
        }
    }

    /// Container `field_path` of pod `name` (UID `uid-NAME`) in `default`,
    /// for tests that need no Pod.
    #[cfg(test)]
    pub(crate) fn test_pod(name: &str, field_path: &str) -> EventObject {
        EventObject {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            field_path: field_path.into(),
        }
    }

    /// The namespace the Event object is created in.
    pub fn event_namespace(&self) -> &str {
        if self.namespace.is_empty() {
            "default"
        } else {
            &self.namespace
        }
    }
}

/// One event. `action` is machine-readable (events.k8s.io/v1 requires it):
/// the step that was taken or failed. Repeats are counted on one Event per
/// object, type, reason and action, so every message template has its own
/// action where two templates share a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub action: &'static str,
    pub message: String,
}

/// Where events go. Implementations return at once: sending happens
/// elsewhere, and an event that cannot be sent is dropped.
pub trait EventRecorder: Send + Sync {
    fn event(&self, object: &EventObject, event: Event);
}

/// For a standalone crilet (no API server): events are dropped.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopRecorder;

impl EventRecorder for NoopRecorder {
    fn event(&self, _object: &EventObject, _event: Event) {}
}

/// Keeps every event recorded, in order, for tests.
#[derive(Debug, Default)]
pub struct FakeRecorder {
    events: Mutex<Vec<(EventObject, Event)>>,
}

impl FakeRecorder {
    pub fn new() -> FakeRecorder {
        FakeRecorder::default()
    }

    /// Everything recorded so far.
    pub fn events(&self) -> Vec<(EventObject, Event)> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The reasons recorded so far, in order.
    pub fn reasons(&self) -> Vec<&'static str> {
        self.events().iter().map(|(_, e)| e.reason).collect()
    }
}

impl EventRecorder for FakeRecorder {
    fn event(&self, object: &EventObject, event: Event) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.push((object.clone(), event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn static_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-node-1",
                "namespace": "kube-system",
                "uid": "0123456789abcdef0123456789abcdef",
                "annotations": {"kubernetes.io/config.hash": "0123456789abcdef0123456789abcdef"}
            },
            "spec": {
                "initContainers": [{"name": "setup", "image": "busybox"}],
                "containers": [{"name": "web", "image": "busybox"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn references_are_the_kubelets() {
        let p = static_pod();
        let uid = "0123456789abcdef0123456789abcdef";
        let cases = [
            (
                EventObject::pod(&p),
                "Pod",
                "kube-system",
                "web-node-1",
                uid,
                "",
            ),
            (
                EventObject::container(&p, "web"),
                "Pod",
                "kube-system",
                "web-node-1",
                uid,
                "spec.containers{web}",
            ),
            (
                EventObject::container(&p, "setup"),
                "Pod",
                "kube-system",
                "web-node-1",
                uid,
                "spec.initContainers{setup}",
            ),
            (
                EventObject::container(&p, "gone"),
                "Pod",
                "kube-system",
                "web-node-1",
                uid,
                "implicitly required container gone",
            ),
            (
                EventObject::node("node-1"),
                "Node",
                "",
                "node-1",
                "node-1",
                "",
            ),
        ];
        for (object, kind, namespace, name, uid, field_path) in cases {
            let got = (
                object.api_version.as_str(),
                object.kind.as_str(),
                object.namespace.as_str(),
                object.name.as_str(),
                object.uid.as_str(),
                object.field_path.as_str(),
            );
            assert_eq!(got, ("v1", kind, namespace, name, uid, field_path));
        }
    }

    #[test]
    fn a_nodes_events_go_to_default_and_a_pods_to_its_namespace() {
        assert_eq!(EventObject::node("n").event_namespace(), "default");
        assert_eq!(
            EventObject::pod(&static_pod()).event_namespace(),
            "kube-system"
        );
    }

    #[test]
    fn the_fake_keeps_events_in_order() {
        let fake = FakeRecorder::new();
        let object = EventObject::node("n");
        for reason in ["Starting", "NodeReady"] {
            let event = Event {
                type_: EventType::Normal,
                reason,
                action: "Test",
                message: String::new(),
            };
            fake.event(&object, event);
        }
        assert_eq!(fake.reasons(), ["Starting", "NodeReady"]);
        NoopRecorder.event(&object, fake.events()[0].1.clone());
    }
}
