//! One hollow node: the real agent and mirror manager (through
//! [`crate::app::start_kubelet`]) and the real TLS bootstrap, on a paced
//! in-memory runtime and a made-up machine.
//!
//! Invariant: everything a hollow node writes is under its own directory
//! of the fleet's state dir; it reads nothing of the host's that a real
//! node would change (cgroups, disks, the machine's size).

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::HollowSettings;
use super::fleet::{self, NodeDirs};
use crate::cri::Runtime;
use crate::cri::fake::{FakeRuntime, Pacing};

/// Lays out node `index`'s directories and manifests, joins the cluster
/// and runs until `cancel`. Answers once the node's agent has started.
pub async fn start(
    fleet_settings: &HollowSettings,
    index: usize,
    cancel: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let node = fleet::node_name(&fleet_settings.name_prefix, index);
    let dirs = NodeDirs::new(&fleet_settings.state_dir, &node);
    lay_out(&dirs, &node, fleet_settings).with_context(|| format!("{node}: its directories"))?;
    let args = fleet::node_args(
        &dirs,
        &node,
        &fleet_settings.bootstrap_kubeconfig,
        fleet_settings.config.as_deref(),
    );
    let settings = crate::agent::config::load(&args).with_context(|| format!("{node}: flags"))?;
    let kubeconfig = settings
        .kubeconfig
        .clone()
        .unwrap_or_else(|| dirs.kubeconfig());
    let ip = settings.node_ip.clone().unwrap_or_default();
    crate::certificate::start(
        &node,
        &ip,
        &kubeconfig,
        &settings.certificates,
        cancel.clone(),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{node}: TLS bootstrap: {e}"))?;
    let fake = FakeRuntime::paced(Pacing {
        scale: fleet_settings.latency_scale,
    });
    let runtime = Arc::new(fake) as Arc<dyn Runtime>;
    let version = runtime.version().await?;
    let pods = settings.node_status.max_pods;
    let capacity = fleet::machine_capacity(pods);
    let allocatable = settings.allocatable_of(&capacity);
    let mut node_context = settings.node_context(node.clone(), &allocatable, &[]);
    node_context.memory_capacity = fleet::MEMORY_BYTES as u64;
    let (_observation_tx, observation) = tokio::sync::watch::channel(Some(fleet::observation()));
    let deps = crate::app::KubeletDeps {
        runtime,
        version,
        runtime_handlers: Vec::new(),
        node: node_context,
        capacity,
        allocatable,
        statuses: Default::default(),
        manifest_url: None,
        probe_recorder: None,
        event_counters: Default::default(),
        sandbox_stops: Default::default(),
        observation,
        cgroup_fs: dirs.cgroup_fs(),
    };
    let (_handles, join) = crate::app::start_kubelet(&settings, deps, cancel).await?;
    Ok(tokio::spawn(async move {
        // The readings never change: the sender lives as long as the node.
        let _observation_tx = _observation_tx;
        let _ = join.await;
    }))
}

/// The node's directories, its stand-in cgroup filesystem and its static
/// pods (written anew each start, so a changed fleet size shows).
fn lay_out(dirs: &NodeDirs, node: &str, s: &HollowSettings) -> std::io::Result<()> {
    for dir in [
        dirs.manifests(),
        dirs.root(),
        dirs.cgroup_fs(),
        dirs.pod_logs(),
        dirs.container_logs(),
    ] {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        dirs.cgroup_fs().join("cgroup.controllers"),
        "cpu memory pids\n",
    )?;
    for entry in std::fs::read_dir(dirs.manifests())? {
        std::fs::remove_file(entry?.path())?;
    }
    for pod in 0..s.pods_per_node {
        let text = fleet::manifest(node, pod, &s.image);
        std::fs::write(dirs.manifests().join(fleet::manifest_file(pod)), text)?;
    }
    Ok(())
}
