//! The API server, as crilet needs it: the Node, its Lease, mirror pods and
//! their status, a watch of the pods bound to this node, and a watch of the
//! Services (for the containers' service environment variables).
//!
//! Invariant: the rest of crilet sees only `MirrorClient`; kube-rs types stay
//! here (and in `kube_events.rs` and `kube_events_core.rs`, the Events over
//! the same connection).
//! `KubeMirrorClient` talks to a real API server; the integration
//! tests run it against a real kube-apiserver, and against the in-repo
//! double for the faults a real server cannot produce on cue.

use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, Service};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, utils::Backoff, watcher};
use serde_json::Value;

/// Errors of the API server client, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("{what}: {}", describe(source))]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("kubeconfig {path}: {message}")]
    Config { path: String, message: String },
    /// `what` names the watch, e.g. "watching the pods bound to this node".
    #[error("{what}: {message}")]
    Watch { what: &'static str, message: String },
}

impl MirrorError {
    /// The HTTP status the API server answered, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            MirrorError::Api {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, MirrorError>;

/// One line for an operator: an API server's refusal as `<code> <reason>:
/// <message>` (the message is the server's, e.g. NodeRestriction's "a mirror
/// pod may not reference service accounts"); any other failure with its
/// `source()` chain, which is where a transport error says what went wrong.
fn describe(error: &kube::Error) -> String {
    if let kube::Error::Api(status) = error {
        return format!("{} {}: {}", status.code, status.reason, status.message);
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// As [`describe`], for what the pod watch reports.
fn describe_watch(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(e) => format!("listing: {}", describe(e)),
        watcher::Error::WatchStartFailed(e) => format!("starting the watch: {}", describe(e)),
        watcher::Error::WatchFailed(e) => format!("reading the watch: {}", describe(e)),
        watcher::Error::WatchError(s) => format!(
            "the watch ended with {} {}: {}",
            s.code, s.reason, s.message
        ),
        watcher::Error::NoResourceVersion => error.to_string(),
    }
}

/// Where the service account token sits in a pod.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Whether crilet runs inside a pod of the cluster (then, without a
/// kubeconfig, it uses the pod's service account as a client would).
pub fn in_cluster_available(service_host: Option<&str>, token_exists: bool) -> bool {
    service_host.is_some_and(|h| !h.is_empty()) && token_exists
}

/// What a watch reports.
#[derive(Debug, Clone)]
pub enum WatchEvent<K> {
    /// A full list: these are all the objects the watch selects now.
    Restarted(Vec<K>),
    Applied(K),
    Deleted(K),
}

/// What the watch of this node's pods reports.
pub type PodEvent = WatchEvent<Pod>;
/// What the watch of this node's own Node reports.
pub type NodeEvent = WatchEvent<Node>;
/// What the watch of the Services reports.
pub type ServiceEvent = WatchEvent<Service>;

#[async_trait::async_trait]
pub trait MirrorClient: Send + Sync {
    async fn get_node(&self, name: &str) -> Result<Option<Node>>;
    async fn create_node(&self, node: &Node) -> Result<Node>;
    async fn patch_node_status(&self, name: &str, status: &NodeStatus) -> Result<Node>;
    /// Renews the lease (holder = the node, now) and returns it as stored.
    /// With `cached`, the copy the last renewal returned, that is one PUT,
    /// as the kubelet's lease controller renews; without it, or when the
    /// cached copy is stale (Conflict, NotFound), it reads the lease first
    /// and creates it if missing.
    async fn renew_lease(&self, lease: &Lease, cached: Option<&Lease>) -> Result<Lease>;
    /// Creates a mirror pod; AlreadyExists comes back as an error (code 409).
    async fn create_pod(&self, pod: &Pod) -> Result<Pod>;
    /// Deletes a pod at once (grace 0) if it still has `uid`; a pod already
    /// gone or replaced (NotFound, Conflict) counts as done.
    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<()>;
    /// Reads a pod; None if there is none.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>>;
    /// Reads a RuntimeClass; None if there is none.
    async fn get_runtime_class(&self, name: &str) -> Result<Option<RuntimeClass>>;
    /// Sends `patch`, a strategic merge patch (`{"status": ...}`, and any
    /// `metadata.uid` / `metadata.resourceVersion` preconditions), to the
    /// pod's status subresource; returns the pod as stored.
    async fn patch_pod_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<Pod>;
    /// Pods bound to `node`, as a list then changes; reconnects on its own.
    fn watch_pods(&self, node: &str) -> BoxStream<'static, Result<PodEvent>>;
    /// The Node named `name` alone (`metadata.name` field selector), as a
    /// list then changes; reconnects on its own. It is how crilet learns
    /// that its Node was deleted, as the kubelet's node informer does,
    /// without reading the Node every pass.
    fn watch_node(&self, name: &str) -> BoxStream<'static, Result<NodeEvent>>;
    /// The Services of every namespace that have a cluster IP (the
    /// `spec.clusterIP!=None` field selector of the kubelet's service
    /// informer: headless Services give no variables), as a list then
    /// changes; reconnects on its own. One watch for the whole node, as
    /// the kubelet's, however many pods it runs.
    fn watch_services(&self) -> BoxStream<'static, Result<ServiceEvent>>;
}

/// The field selector of the Service watch, the kubelet's.
pub const SERVICE_FIELD_SELECTOR: &str = "spec.clusterIP!=None";

/// How long crilet waits for the API server to send anything on a request
/// (the next bytes of an answer): a server that hangs fails the request
/// instead of holding crilet.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the server keeps one watch request open (its `timeoutSeconds`):
/// 7.5 minutes, the middle of the kubelet's reflectors' 5 to 10 (kube-rs
/// asks for one length every time, so the kubelet's random pick is not
/// copied). Every watch is one request, so this sets the watches' share of
/// crilet's idle requests: with the pod and the Node watch, one request per
/// 225 s (the pod watch alone was one per 25 s while it shared the 30 s
/// read timeout). Ended by the server, a watch resumes at once from its
/// resourceVersion, losing nothing.
pub const WATCH_TIMEOUT_SECONDS: u32 = 450;

/// How long the pod watch waits for the server's next bytes: a little more
/// than [`WATCH_TIMEOUT_SECONDS`], since a real server sends nothing at all
/// on a quiet watch (kube-apiserver 1.32 sent no bookmark in 200 s of a
/// quiet `allowWatchBookmarks` watch here). The watch has its own client
/// for it, so every other request keeps [`READ_TIMEOUT`].
pub const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(WATCH_TIMEOUT_SECONDS as u64 + 30);

/// How long the server keeps one watch of the Services open: 15 minutes.
/// Services change rarely and a watch the server ends resumes from its
/// resourceVersion, losing nothing, so a longer watch than the pods' and
/// the Node's costs nothing but requests saved: this third watch adds one
/// request per 900 s to an idle node (docs/footprint.md).
pub const SERVICE_WATCH_TIMEOUT_SECONDS: u32 = 900;

/// [`WATCH_READ_TIMEOUT`] for the Service watch.
pub const SERVICE_WATCH_READ_TIMEOUT: Duration =
    Duration::from_secs(SERVICE_WATCH_TIMEOUT_SECONDS as u64 + 30);

/// `MirrorClient` over kube-rs.
#[derive(Clone)]
pub struct KubeMirrorClient {
    client: kube::Client,
    /// The same server and credentials, with [`WATCH_READ_TIMEOUT`].
    watch_client: kube::Client,
    /// The same, with [`SERVICE_WATCH_READ_TIMEOUT`].
    service_watch_client: kube::Client,
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> MirrorError {
    let what = what.into();
    move |source| MirrorError::Api { what, source }
}

fn is_code(e: &kube::Error, codes: &[u16]) -> bool {
    matches!(e, kube::Error::Api(s) if codes.contains(&s.code))
}

impl KubeMirrorClient {
    /// From a kubeconfig file (token, client certificate, CA), with a
    /// `crilet/<version>` user agent and per-request timeouts.
    pub async fn from_kubeconfig(path: &std::path::Path) -> Result<Self> {
        let cfg_err = |message: String| MirrorError::Config {
            path: path.display().to_string(),
            message,
        };
        let (config, identity) = super::transport::load_kubeconfig(path)
            .await
            .map_err(cfg_err)?;
        Self::from_parts(config, identity.as_ref()).map_err(cfg_err)
    }

    /// The client `crilet run` uses: from `kubeconfig` if given, else the
    /// pod's service account when crilet runs in a pod of the cluster, else
    /// none (standalone).
    pub async fn connect(kubeconfig: Option<&std::path::Path>, node: &str) -> Result<Option<Self>> {
        if let Some(path) = kubeconfig {
            let client = KubeMirrorClient::from_kubeconfig(path).await?;
            tracing::info!(kubeconfig = %path.display(), node, "mirror pods on the API server");
            return Ok(Some(client));
        }
        let in_cluster = in_cluster_available(
            std::env::var("KUBERNETES_SERVICE_HOST").ok().as_deref(),
            std::path::Path::new(SERVICE_ACCOUNT_TOKEN).exists(),
        );
        if !in_cluster {
            return Ok(None);
        }
        tracing::info!(
            node,
            "no --kubeconfig, but running in a pod: using its service account for mirror pods"
        );
        KubeMirrorClient::in_cluster().map(Some)
    }

    /// In a pod: the service account's token and CA.
    pub fn in_cluster() -> Result<Self> {
        let config = kube::Config::incluster().map_err(|e| MirrorError::Config {
            path: "in-cluster".into(),
            message: e.to_string(),
        })?;
        Self::from_config(config).map_err(|e| MirrorError::Config {
            path: "in-cluster".into(),
            message: e.to_string(),
        })
    }

    fn from_config(config: kube::Config) -> std::result::Result<Self, String> {
        Self::from_parts(config, None)
    }

    fn from_parts(
        mut config: kube::Config,
        identity: Option<&std::sync::Arc<super::transport::FileIdentity>>,
    ) -> std::result::Result<Self, String> {
        config.connect_timeout = Some(Duration::from_secs(10));
        config.write_timeout = Some(Duration::from_secs(30));
        let ua = format!("crilet/{}", env!("CARGO_PKG_VERSION"));
        let build = |timeout| super::transport::client(&config, identity, timeout, &ua);
        Ok(KubeMirrorClient {
            client: build(READ_TIMEOUT)?,
            watch_client: build(WATCH_READ_TIMEOUT)?,
            service_watch_client: build(SERVICE_WATCH_READ_TIMEOUT)?,
        })
    }

    /// The client of every short request (the events recorder's too).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The connection, for the Events recorder beside this file.
    pub(crate) fn kube_client(&self) -> kube::Client {
        self.client.clone()
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

#[async_trait::async_trait]
impl MirrorClient for KubeMirrorClient {
    async fn get_node(&self, name: &str) -> Result<Option<Node>> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .get_opt(name)
            .await
            .map(|n| n.map(lean))
            .map_err(api_err(format!("getting node {name}")))
    }

    async fn create_node(&self, node: &Node) -> Result<Node> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.clone().unwrap_or_default();
        nodes
            .create(&PostParams::default(), node)
            .await
            .map(lean)
            .map_err(api_err(format!("creating node {name}")))
    }

    async fn patch_node_status(&self, name: &str, status: &NodeStatus) -> Result<Node> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let patch = serde_json::json!({ "status": status });
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map(lean)
            .map_err(api_err(format!("updating the status of node {name}")))
    }

    async fn renew_lease(&self, lease: &Lease, cached: Option<&Lease>) -> Result<Lease> {
        let ns = lease.metadata.namespace.clone().unwrap_or_default();
        let name = lease.metadata.name.clone().unwrap_or_default();
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &ns);
        let what = format!("renewing lease {ns}/{name}");
        let renewed = |mut current: Lease| {
            current.spec = lease.spec.clone();
            current
        };
        if let Some(cached) = cached {
            match leases
                .replace(&name, &PostParams::default(), &renewed(cached.clone()))
                .await
            {
                Ok(stored) => return Ok(stored),
                // Changed or deleted meanwhile: read it again below.
                Err(e) if is_code(&e, &[404, 409]) => {}
                Err(e) => return Err(api_err(what)(e)),
            }
        }
        match leases.get_opt(&name).await.map_err(api_err(what.clone()))? {
            None => leases.create(&PostParams::default(), lease).await,
            Some(current) => {
                (leases.replace(&name, &PostParams::default(), &renewed(current))).await
            }
        }
        .map_err(api_err(what))
    }

    async fn create_pod(&self, pod: &Pod) -> Result<Pod> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.pods(&ns)
            .create(&PostParams::default(), pod)
            .await
            .map(lean)
            .map_err(api_err(format!("creating mirror pod {ns}/{name}")))
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<()> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.pods(namespace).delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, &[404, 409]) => Ok(()),
            Err(e) => Err(api_err(format!("deleting mirror pod {namespace}/{name}"))(
                e,
            )),
        }
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        self.pods(namespace)
            .get_opt(name)
            .await
            .map(|p| p.map(lean))
            .map_err(api_err(format!("reading pod {namespace}/{name}")))
    }

    async fn get_runtime_class(&self, name: &str) -> Result<Option<RuntimeClass>> {
        let classes: Api<RuntimeClass> = Api::all(self.client.clone());
        classes
            .get_opt(name)
            .await
            .map_err(api_err(format!("reading RuntimeClass {name}")))
    }

    async fn patch_pod_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<Pod> {
        self.pods(namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(lean)
            .map_err(api_err(format!(
                "updating the status of pod {namespace}/{name}"
            )))
    }

    fn watch_pods(&self, node: &str) -> BoxStream<'static, Result<PodEvent>> {
        let pods: Api<Pod> = Api::all(self.watch_client.clone());
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={node}"))
            .timeout(WATCH_TIMEOUT_SECONDS);
        watch_events(
            "watching the pods bound to this node",
            watcher::watcher(pods, config),
        )
        .backoff(WatchBackoff::default())
        .boxed()
    }

    fn watch_node(&self, name: &str) -> BoxStream<'static, Result<NodeEvent>> {
        let nodes: Api<Node> = Api::all(self.watch_client.clone());
        let config = watcher::Config::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(WATCH_TIMEOUT_SECONDS);
        watch_events("watching this node's Node", watcher::watcher(nodes, config))
            .backoff(WatchBackoff::default())
            .boxed()
    }

    fn watch_services(&self) -> BoxStream<'static, Result<ServiceEvent>> {
        let services: Api<Service> = Api::all(self.service_watch_client.clone());
        let config = watcher::Config::default()
            .fields(SERVICE_FIELD_SELECTOR)
            .timeout(SERVICE_WATCH_TIMEOUT_SECONDS);
        watch_events("watching the Services", watcher::watcher(services, config))
            .backoff(WatchBackoff::default())
            .boxed()
    }
}

/// `object` without its `managedFields`: crilet never reads them, and on a
/// mirror pod or a Node they are most of what is kept (server-side apply's
/// field sets, as JSON maps). Found in a heap profile of 100 hollow nodes.
fn lean<K: kube::Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}

/// The watcher's events as [`WatchEvent`]s: a relist is gathered into one
/// `Restarted`. The backoff goes on this stream, not on the watcher's: the
/// watcher starts every relist with an `Init` event, and a backoff resets on
/// any item, so on the raw stream a list that always fails (a 403) was
/// retried every 500 ms for ever. Here only real progress (a completed list,
/// a change) resets it.
fn watch_events<K: kube::Resource + Send + 'static>(
    what: &'static str,
    events: impl futures::Stream<Item = std::result::Result<watcher::Event<K>, watcher::Error>>
    + Send
    + 'static,
) -> impl futures::Stream<Item = Result<WatchEvent<K>>> + Send + 'static {
    let mut buffer: Vec<K> = Vec::new();
    events.filter_map(move |event| {
        let out = match event {
            Ok(watcher::Event::Init) => {
                buffer.clear();
                None
            }
            Ok(watcher::Event::InitApply(p)) => {
                buffer.push(lean(p));
                None
            }
            Ok(watcher::Event::InitDone) => {
                Some(Ok(WatchEvent::Restarted(std::mem::take(&mut buffer))))
            }
            Ok(watcher::Event::Apply(p)) => Some(Ok(WatchEvent::Applied(lean(p)))),
            Ok(watcher::Event::Delete(p)) => Some(Ok(WatchEvent::Deleted(lean(p)))),
            Err(e) => Some(Err(MirrorError::Watch {
                what,
                message: describe_watch(&e),
            })),
        };
        futures::future::ready(out)
    })
}

/// Retry delays of the pod watch: 500 ms doubling to 5 s. Short, because
/// mirror pods lag behind their static pods until the watch is back; never
/// zero, so an API server that is down is not hammered.
#[derive(Debug, Clone)]
struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: Duration::from_millis(500),
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(Duration::from_secs(5));
        Some(now)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        *self = WatchBackoff::default();
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
