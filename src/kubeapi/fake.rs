//! An in-memory `MirrorClient` that records calls, for unit tests of the
//! mirror driver. Invariant: no I/O; uids are `uid-<n>`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::Value;

use super::client::{MirrorClient, MirrorError, NodeEvent, PodEvent, Result, ServiceEvent};
use super::strategic_merge;

#[derive(Debug, Default)]
struct State {
    next_uid: u64,
    /// The last resourceVersion given to a pod.
    next_version: u64,
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<(String, String), Pod>,
    leases: BTreeMap<String, Lease>,
    runtime_classes: BTreeMap<String, RuntimeClass>,
    calls: Vec<String>,
    fail: Vec<&'static str>,
}

#[derive(Debug, Default)]
pub struct FakeMirrorClient {
    state: Mutex<State>,
    /// The receiving end of [`FakeMirrorClient::node_events`], taken by
    /// the first `watch_node`.
    node_events: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<NodeEvent>>>,
    /// The Service watches [`FakeMirrorClient::service_watch`] prepared,
    /// each taken by one `watch_services`, in order.
    service_watches: Mutex<VecDeque<ServiceWatch>>,
}

type ServiceWatch = tokio::sync::mpsc::UnboundedReceiver<Result<ServiceEvent>>;

impl FakeMirrorClient {
    pub fn new() -> Self {
        Self::default()
    }

    /// A sender of what the node watch reports (one watch per client).
    pub fn node_events(&self) -> tokio::sync::mpsc::UnboundedSender<NodeEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        *self.node_events.lock().unwrap() = Some(rx);
        tx
    }

    /// Prepares the next Service watch: what the sender sends, it reports;
    /// dropping the sender ends it, as a watch the server dropped (the
    /// watcher then asks for a new one). A `watch_services` with none
    /// prepared reports nothing, for ever.
    pub fn service_watch(&self) -> tokio::sync::mpsc::UnboundedSender<Result<ServiceEvent>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.service_watches.lock().unwrap().push_back(rx);
        tx
    }

    /// Adds a RuntimeClass naming `handler`, as an admin's create.
    pub fn add_runtime_class(&self, name: &str, handler: &str) {
        let class = RuntimeClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            handler: handler.into(),
            ..Default::default()
        };
        let mut s = self.state.lock().unwrap();
        s.runtime_classes.insert(name.into(), class);
    }

    /// Removes a node, as an admin's delete.
    pub fn delete_node(&self, name: &str) {
        self.state.lock().unwrap().nodes.remove(name);
    }

    /// Calls so far, as "op ns/name".
    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.state.lock().unwrap().pods.values().cloned().collect()
    }

    /// A pod the API server holds already (an API pod bound to the node).
    pub fn insert_pod(&self, pod: Pod) {
        self.state.lock().unwrap().pods.insert(key(&pod), pod);
    }

    /// Someone else writes a pod's status (a new resourceVersion), as
    /// another client of the API server would.
    pub fn write_status(
        &self,
        namespace: &str,
        name: &str,
        status: k8s_openapi::api::core::v1::PodStatus,
    ) {
        let mut s = self.state.lock().unwrap();
        s.next_version += 1;
        let version = s.next_version.to_string();
        if let Some(p) = s.pods.get_mut(&(namespace.to_string(), name.to_string())) {
            p.status = Some(status);
            p.metadata.resource_version = Some(version);
        }
    }

    /// The next call of `op` (create_pod, delete_pod, ...) fails with a 500.
    pub fn fail_next(&self, op: &'static str) {
        self.state.lock().unwrap().fail.push(op);
    }

    fn enter(&self, op: &'static str, what: &str) -> Result<std::sync::MutexGuard<'_, State>> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(format!("{op} {what}"));
        if let Some(i) = s.fail.iter().position(|f| *f == op) {
            s.fail.remove(i);
            return Err(MirrorError::Watch {
                what: "the fake API server",
                message: format!("{op} {what}: injected failure"),
            });
        }
        Ok(s)
    }
}

/// An API server's refusal, as kube-rs reports it.
fn api_error(code: u16, reason: &str, message: &str) -> MirrorError {
    MirrorError::Api {
        what: "the fake API server".into(),
        source: kube::Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        ),
    }
}

fn key(p: &Pod) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

#[async_trait::async_trait]
impl MirrorClient for FakeMirrorClient {
    async fn get_node(&self, name: &str) -> Result<Option<Node>> {
        let s = self.enter("get_node", name)?;
        Ok(s.nodes.get(name).cloned())
    }

    async fn create_node(&self, node: &Node) -> Result<Node> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut s = self.enter("create_node", &name)?;
        s.next_uid += 1;
        let mut n = node.clone();
        n.metadata.uid = Some(format!("uid-{}", s.next_uid));
        s.nodes.insert(name, n.clone());
        Ok(n)
    }

    async fn patch_node_status(&self, name: &str, status: &NodeStatus) -> Result<Node> {
        let mut s = self.enter("patch_node_status", name)?;
        let n = s.nodes.get_mut(name).expect("node exists");
        n.status = Some(status.clone());
        Ok(n.clone())
    }

    async fn renew_lease(&self, lease: &Lease, cached: Option<&Lease>) -> Result<Lease> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let op = if cached.is_some() {
            "renew_lease_cached"
        } else {
            "renew_lease"
        };
        let mut st = self.enter(op, &name)?;
        st.leases.insert(name, lease.clone());
        Ok(lease.clone())
    }

    async fn create_pod(&self, pod: &Pod) -> Result<Pod> {
        let k = key(pod);
        let mut s = self.enter("create_pod", &format!("{}/{}", k.0, k.1))?;
        s.next_uid += 1;
        let mut p = pod.clone();
        p.metadata.uid = Some(format!("uid-{}", s.next_uid));
        s.next_version += 1;
        p.metadata.resource_version = Some(s.next_version.to_string());
        s.pods.insert(k, p.clone());
        Ok(p)
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<()> {
        let mut s = self.enter("delete_pod", &format!("{namespace}/{name}"))?;
        let k = (namespace.to_string(), name.to_string());
        if s.pods.get(&k).and_then(|p| p.metadata.uid.as_deref()) == Some(uid) {
            s.pods.remove(&k);
        }
        Ok(())
    }

    async fn get_runtime_class(&self, name: &str) -> Result<Option<RuntimeClass>> {
        let s = self.enter("get_runtime_class", name)?;
        Ok(s.runtime_classes.get(name).cloned())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        let s = self.enter("get_pod", &format!("{namespace}/{name}"))?;
        Ok(s.pods
            .get(&(namespace.to_string(), name.to_string()))
            .cloned())
    }

    /// Applies the patch as the API server does, preconditions included: a
    /// `metadata.uid` of another pod is refused with 422, a stale
    /// `metadata.resourceVersion` with 409. Every write bumps the pod's
    /// resourceVersion.
    async fn patch_pod_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<Pod> {
        let mut s = self.enter("patch_pod_status", &format!("{namespace}/{name}"))?;
        let key = (namespace.to_string(), name.to_string());
        let Some(pod) = s.pods.get(&key) else {
            return Err(api_error(
                404,
                "NotFound",
                &format!("pods \"{name}\" not found"),
            ));
        };
        let meta = &patch["metadata"];
        let differs = |field: &str, have: &Option<String>| {
            meta[field]
                .as_str()
                .is_some_and(|want| Some(want) != have.as_deref())
        };
        if differs("uid", &pod.metadata.uid) {
            return Err(api_error(
                422,
                "Invalid",
                "metadata.uid: field is immutable",
            ));
        }
        if differs("resourceVersion", &pod.metadata.resource_version) {
            return Err(api_error(409, "Conflict", "the object has been modified"));
        }
        let status = serde_json::to_value(pod.status.clone().unwrap_or_default())
            .expect("a status serialises");
        let old = serde_json::json!({ "status": status });
        let new = strategic_merge::apply(&old, patch, strategic_merge::pod_merge_key);
        let mut pod = pod.clone();
        pod.status = Some(serde_json::from_value(new["status"].clone()).map_err(|e| {
            api_error(
                422,
                "Invalid",
                &format!("the patched status does not decode: {e}"),
            )
        })?);
        s.next_version += 1;
        pod.metadata.resource_version = Some(s.next_version.to_string());
        s.pods.insert(key, pod.clone());
        Ok(pod)
    }

    fn watch_pods(&self, _node: &str) -> BoxStream<'static, Result<PodEvent>> {
        futures::stream::pending().boxed()
    }

    /// The node's events as [`FakeMirrorClient::node_events`] sends them.
    fn watch_node(&self, _name: &str) -> BoxStream<'static, Result<NodeEvent>> {
        let rx = self.node_events.lock().unwrap().take();
        match rx {
            Some(rx) => tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
                .map(Ok)
                .boxed(),
            None => futures::stream::pending().boxed(),
        }
    }

    /// The next watch [`FakeMirrorClient::service_watch`] prepared.
    fn watch_services(&self) -> BoxStream<'static, Result<ServiceEvent>> {
        self.state
            .lock()
            .unwrap()
            .calls
            .push("watch_services".into());
        let rx = self.service_watches.lock().unwrap().pop_front();
        match rx {
            Some(rx) => tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed(),
            None => futures::stream::pending().boxed(),
        }
    }
}
