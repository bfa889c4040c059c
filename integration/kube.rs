//! The real kube-apiserver of the tests (`scripts/apiserver-env.sh up`): an
//! admin client that reads what the server holds and acts as other clients
//! do (`kubectl delete`, `kubectl label`), and node identities that tests
//! claim by name.
//!
//! Invariant: a node name is held by at most one test at a time (a second
//! claim panics), and a claim starts from a server that holds nothing of
//! that node: no Node, no Lease, no pod bound to it, no Event it reported. Tests that share the
//! server therefore never see each other's objects, and a rerun against a
//! server left up starts clean too.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use crate::support::eventually;

/// The admin kubeconfig (CN kubernetes-admin, O system:masters).
pub const ADMIN_ENV: &str = "CRILET_KUBE_ADMIN_KUBECONFIG";
/// The directory of the node kubeconfigs, `kubeconfig-<node>` each.
pub const NODE_DIR_ENV: &str = "CRILET_KUBE_NODE_KUBECONFIG_DIR";
/// The nodes the lab holds credentials for; keep in step with
/// `scripts/apiserver-env.sh` (NODES).
pub const NODES: [&str; 18] = [
    "crilet-node-1",
    "crilet-node-2",
    "crilet-node-3",
    "crilet-node-4",
    "crilet-node-5",
    "crilet-node-6",
    "crilet-node-7",
    "crilet-node-8",
    "crilet-node-9",
    "crilet-node-10",
    "crilet-node-11",
    "crilet-node-12",
    "crilet-node-13",
    "crilet-node-14",
    "crilet-node-15",
    "crilet-node-16",
    "crilet-node-17",
    "crilet-node-18",
];

static CLAIMED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn env(name: &str) -> PathBuf {
    match std::env::var_os(name) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => panic!(
            "{name} is not set: this test needs the real kube-apiserver. Run `bash \
             scripts/test.sh`, or start it with `eval \"$(bash scripts/apiserver-env.sh up)\"` \
             (which exports {ADMIN_ENV} and {NODE_DIR_ENV}) and stop it with `bash \
             scripts/apiserver-env.sh down`"
        ),
    }
}

/// The admin's view of the real API server.
pub struct Lab {
    client: kube::Client,
    node_dir: PathBuf,
}

/// A node name this test holds, with that node's own credentials.
pub struct NodeClaim {
    pub name: String,
    /// `kubeconfig-<name>`: CN system:node:<name>, O system:nodes.
    pub kubeconfig: PathBuf,
}

impl Drop for NodeClaim {
    fn drop(&mut self) {
        let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
        claimed.get_or_insert_with(HashSet::new).remove(&self.name);
    }
}

impl NodeClaim {
    /// `--kubeconfig <this node's kubeconfig>`, for an agent's command line.
    pub fn kubeconfig_args(&self) -> Vec<String> {
        let path = self.kubeconfig.to_string_lossy().into_owned();
        vec!["--kubeconfig".into(), path]
    }
}

/// A client with the credentials of kubeconfig `path`.
pub async fn client_from(path: &std::path::Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", path.display()));
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", path.display()));
    kube::Client::try_from(config).expect("a kube client")
}

impl Lab {
    /// Connects as admin; panics, naming the variable, when the lab's
    /// environment is missing.
    pub async fn connect() -> Lab {
        let admin = env(ADMIN_ENV);
        let node_dir = env(NODE_DIR_ENV);
        Lab {
            client: client_from(&admin).await,
            node_dir,
        }
    }

    /// Holds `name` for this test (until the claim is dropped) and removes
    /// whatever the server still has of that node.
    pub async fn claim(&self, name: &str) -> NodeClaim {
        assert!(
            NODES.contains(&name),
            "{name} is not one of the lab's nodes {NODES:?}"
        );
        let kubeconfig = self.node_dir.join(format!("kubeconfig-{name}"));
        assert!(
            kubeconfig.is_file(),
            "no {}: start the lab with `--node {name}` (scripts/apiserver-env.sh up does)",
            kubeconfig.display()
        );
        self.hold(name, kubeconfig).await
    }

    /// Holds `name` for a node that joins with a bootstrap token (no lab
    /// credentials: `kubeconfig` is where its bootstrap writes its own), and
    /// removes whatever the server still has of that node.
    pub async fn claim_joining(&self, name: &str, kubeconfig: PathBuf) -> NodeClaim {
        assert!(
            !NODES.contains(&name),
            "{name} has lab credentials: claim it with claim()"
        );
        self.hold(name, kubeconfig).await
    }

    async fn hold(&self, name: &str, kubeconfig: PathBuf) -> NodeClaim {
        {
            let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
            let fresh = claimed.get_or_insert_with(HashSet::new).insert(name.into());
            assert!(fresh, "node {name} is claimed by another running test");
        }
        let claim = NodeClaim {
            name: name.into(),
            kubeconfig,
        };
        self.forget_node(name).await;
        claim
    }

    /// The admin's client, for what the helpers here do not cover.
    pub fn admin(&self) -> kube::Client {
        self.client.clone()
    }

    /// Deletes the Node, its Lease, every pod bound to it (grace 0) and
    /// every Event it reported, and waits until the pods are gone.
    async fn forget_node(&self, name: &str) {
        self.forget_events(name).await;
        for p in self.pods_on(name).await {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let pod = p.metadata.name.clone().unwrap_or_default();
            self.delete_pod(&ns, &pod, Some(0)).await;
        }
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        ignore_not_found(leases.delete(name, &DeleteParams::default()).await, "lease");
        self.delete_node(name).await;
        let clean = eventually(Duration::from_secs(10), || async {
            self.pods_on(name).await.is_empty().then_some(())
        })
        .await;
        assert!(clean.is_some(), "pods bound to {name} did not go");
    }

    /// Deletes every Event that node `node` reported (its reportingInstance,
    /// or the host of its source), in every namespace.
    async fn forget_events(&self, node: &str) {
        let all: Api<Event> = Api::all(self.client.clone());
        let list = (all.list(&ListParams::default()).await)
            .unwrap_or_else(|e| panic!("listing the events: {e}"));
        let reported = |e: &Event| {
            let host = e.source.as_ref().and_then(|s| s.host.as_deref());
            e.reporting_instance.as_deref() == Some(node) || host == Some(node)
        };
        for e in list.items.iter().filter(|e| reported(e)) {
            let ns = e.metadata.namespace.as_deref().unwrap_or_default();
            let name = e.metadata.name.as_deref().unwrap_or_default();
            self.delete_event(ns, name).await;
        }
    }

    /// As `kubectl delete event NAME`; one already gone is ignored.
    pub async fn delete_event(&self, namespace: &str, name: &str) {
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let deleted = events.delete(name, &DeleteParams::default()).await;
        ignore_not_found(deleted, "event");
    }

    /// The Events (as core/v1 shows them) regarding the object whose UID is
    /// `uid`, in `namespace`.
    pub async fn events_of(&self, namespace: &str, uid: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
        (events.list(&params).await)
            .unwrap_or_else(|e| panic!("listing the events of {uid} in {namespace}: {e}"))
            .items
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub async fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        (self.pods(namespace).get_opt(name).await)
            .unwrap_or_else(|e| panic!("GET pod {namespace}/{name}: {e}"))
    }

    /// Every pod bound to `node`, in every namespace.
    pub async fn pods_on(&self, node: &str) -> Vec<Pod> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let list = pods.list(&params).await;
        list.unwrap_or_else(|e| panic!("listing the pods on {node}: {e}"))
            .items
    }

    pub async fn node(&self, name: &str) -> Option<Node> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        (nodes.get_opt(name).await).unwrap_or_else(|e| panic!("GET node {name}: {e}"))
    }

    pub async fn lease(&self, name: &str) -> Option<Lease> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        (leases.get_opt(name).await).unwrap_or_else(|e| panic!("GET lease {name}: {e}"))
    }

    /// As `kubectl delete pod [--grace-period=N]`: the pod as the server
    /// answered (a graceful delete of a bound pod answers it marked with
    /// deletionTimestamp and deletionGracePeriodSeconds), None if it had none.
    pub async fn delete_pod(&self, namespace: &str, name: &str, grace: Option<u32>) -> Option<Pod> {
        let params = DeleteParams {
            grace_period_seconds: grace,
            ..DeleteParams::default()
        };
        match self.pods(namespace).delete(name, &params).await {
            Ok(either) => either.left(),
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => panic!("DELETE pod {namespace}/{name}: {e}"),
        }
    }

    /// As `kubectl delete node`: gone at once (a Node has no grace period),
    /// and with no garbage collector in the lab its pods stay.
    pub async fn delete_node(&self, name: &str) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        ignore_not_found(nodes.delete(name, &DeleteParams::default()).await, "node");
    }

    pub async fn create_pod(&self, pod: &Pod) -> Pod {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        (self.pods(&ns).create(&PostParams::default(), pod).await)
            .unwrap_or_else(|e| panic!("POST pod in {ns}: {e}"))
    }

    /// Creates namespace `name` unless it exists. Tests keep theirs: with
    /// no controller-manager, a deleted namespace stays Terminating.
    pub async fn ensure_namespace(&self, name: &str) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}
        }))
        .unwrap();
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("POST namespace {name}: {e}"),
        }
    }

    pub fn services(&self, namespace: &str) -> Api<Service> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// As `kubectl create service`: the Service as stored (with the
    /// cluster IP the server gave it).
    pub async fn create_service(&self, service: &Service) -> Service {
        let ns = service.metadata.namespace.clone().unwrap_or_default();
        let name = service.metadata.name.clone().unwrap_or_default();
        (self
            .services(&ns)
            .create(&PostParams::default(), service)
            .await)
            .unwrap_or_else(|e| panic!("POST service {ns}/{name}: {e}"))
    }

    /// As `kubectl delete service`; one already gone is ignored.
    pub async fn delete_service(&self, namespace: &str, name: &str) {
        let deleted = (self.services(namespace))
            .delete(name, &DeleteParams::default())
            .await;
        ignore_not_found(deleted, "service");
    }

    /// As `kubectl label pod NAME key=value`.
    pub async fn label_pod(&self, namespace: &str, name: &str, key: &str, value: &str) -> Pod {
        let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
        let params = PatchParams::default();
        (self
            .pods(namespace)
            .patch(name, &params, &Patch::Merge(&patch))
            .await)
            .unwrap_or_else(|e| panic!("labelling pod {namespace}/{name}: {e}"))
    }
}

fn ignore_not_found<T>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("DELETE {what}: {e}"),
    }
}

/// The manager names of a pod's managedFields: the server records each
/// writer's User-Agent (its first word) there.
pub fn managers(pod: &Pod) -> Vec<String> {
    let fields = pod.metadata.managed_fields.iter().flatten();
    fields.filter_map(|f| f.manager.clone()).collect()
}
