//! What `crilet run` and every hollow node start alike, as upstream's
//! `cmd/kubelet/app` RunKubelet is called by the kubelet and by kubemark's
//! hollow node: the API server's client, the Events recorder, the Service
//! and RuntimeClass lookups, the agent (sources, sync loop, pod workers,
//! probes) and, with an API server, the manager of the mirror pods, the
//! Node and its Lease.
//!
//! Invariant: the same code runs a real node and a hollow one; only what
//! [`KubeletDeps`] hands in (the runtime, the host's readings) differs.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::config::Settings;
use crate::agent::{Agent, AgentHandles};
use crate::cri::{Runtime, RuntimeHandler, VersionInfo};
use crate::kubeapi::client::{KubeMirrorClient, MirrorClient};
use crate::kubeapi::runtime_class::RuntimeClassLookup;
use crate::kubeapi::service_watch::ServiceLister;
use crate::kuberuntime::mapping::NodeContext;
use crate::nodestatus::allocatable::NodeResources;
use crate::nodestatus::eviction::Observation;
use crate::pod::view::StatusCache;

/// What the caller found out before the agent starts: the runtime and its
/// answers, and the node as read from its host (or made up, when hollow).
pub struct KubeletDeps {
    pub runtime: Arc<dyn Runtime>,
    pub version: VersionInfo,
    pub runtime_handlers: Vec<RuntimeHandler>,
    pub node: NodeContext,
    pub capacity: NodeResources,
    pub allocatable: NodeResources,
    /// Where workers write pod statuses (shared with the API servers).
    pub statuses: StatusCache,
    pub manifest_url: Option<crate::config::http::UrlSource>,
    pub probe_recorder: Option<Arc<dyn crate::prober::manager::ProbeRecorder>>,
    pub event_counters: Arc<crate::pleg::container_events::EventCounters>,
    /// The StopPodSandbox calls in flight, shared with the stats collector.
    pub sandbox_stops: crate::kubeapi::call_count::CallCount,
    /// The node's latest readings, for the pressure conditions.
    pub observation: tokio::sync::watch::Receiver<Option<Observation>>,
    /// The cgroup filesystem (`/sys/fs/cgroup` on a real node).
    pub cgroup_fs: PathBuf,
}

/// Starts the agent and, with `--kubeconfig` (or in a pod), the mirror
/// manager; answers the agent's handles and its sync loop's task.
pub async fn start_kubelet(
    settings: &Settings,
    deps: KubeletDeps,
    cancel: CancellationToken,
) -> anyhow::Result<(AgentHandles, tokio::task::JoinHandle<()>)> {
    // The kube client comes before the agent, so that the agent's pod
    // workers and probers can record Events over it; `events` is also the
    // handle for the Node's events.
    let node_name = deps.node.node_name.clone();
    let client = KubeMirrorClient::connect(settings.kubeconfig.as_deref(), &node_name).await?;
    // The pod workers count their starts; the mirror manager and the event
    // recorder hold their writes back while any runs (kubeapi::call_count).
    let pod_starts = crate::kubeapi::call_count::CallCount::default();
    let events = crate::events::kube_events::KubeEventRecorder::for_client(
        client.as_ref(),
        &node_name,
        pod_starts.clone(),
        cancel.clone(),
    );
    // The Services, for the containers' service variables: one watch,
    // started before the first pod so that its list is likely in first.
    let services = match &client {
        Some(client) => {
            let client = Arc::new(client.clone()) as Arc<dyn MirrorClient>;
            ServiceLister::start(client, cancel.clone())
        }
        None => ServiceLister::standalone(),
    };
    let runtime_classes = match &client {
        Some(client) => RuntimeClassLookup::new(Arc::new(client.clone())),
        None => RuntimeClassLookup::standalone(),
    };
    let version = &deps.version;
    let agent = Agent {
        runtime: deps.runtime.clone(),
        statuses: deps.statuses,
        runtime_name: version.runtime_name.clone(),
        node: deps.node,
        pod_manifest_path: settings.pod_manifest_path.clone(),
        file_check_frequency: settings.file_check_frequency,
        manifest_trust: settings.manifest_trust,
        cgroup_fs: deps.cgroup_fs,
        manifest_url: deps.manifest_url,
        probe_recorder: deps.probe_recorder,
        container_events: crate::pleg::container_events::choose(
            settings.evented_pleg,
            &version.runtime_name,
            &version.runtime_version,
        ),
        event_counters: deps.event_counters,
        events: events.clone(),
        services,
        runtime_classes,
        sandbox_stops: deps.sandbox_stops,
        pod_starts: pod_starts.clone(),
    };
    let node_runtime_version = crate::nodestatus::node::container_runtime_version(
        &version.runtime_name,
        &version.runtime_version,
    );
    let node_ip = agent.node.host_ip.clone();
    let (handles, join) = agent.start(cancel.clone());
    let Some(client) = client else {
        tracing::info!("no --kubeconfig: running standalone, without a Node or mirror pods");
        return Ok((handles, join));
    };
    let manager = crate::mirror::manager::MirrorManager {
        client: Arc::new(client) as Arc<dyn MirrorClient>,
        node: settings.node_facts(
            node_ip,
            node_runtime_version,
            deps.capacity,
            deps.allocatable,
            deps.runtime_handlers,
        ),
        node_name,
        status_policy: settings.node_status.policy(),
        node_inputs: crate::nodestatus::node_sync::NodeInputs {
            observation: deps.observation,
            runtime: Some(deps.runtime),
        },
        view: handles.view.clone(),
        statuses: handles.statuses.clone(),
        status_changed: handles.status_changed.clone(),
        mirrors_tx: handles.mirrors.clone(),
        events,
        pod_starts,
    };
    tokio::spawn(manager.run(cancel));
    Ok((handles, join))
}
