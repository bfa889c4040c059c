//! `crilet hollow`: many hollow nodes in one process, to load a control
//! plane as a fleet of crilet nodes would, as kubemark's hollow nodes do
//! for the kubelet (`pkg/kubemark`, `cmd/kubemark`).
//!
//! Each node has its own name, joins through its own TLS bootstrap, and
//! runs the real agent and mirror manager on its own paced in-memory
//! runtime ([`crate::cri::fake::Pacing`]) and a made-up machine
//! ([`fleet`]). Only the runtime and the host's readings are fake.
//!
//! Invariant: one node failing to start is logged with its name and leaves
//! the others running; nothing of a node outlives the process but its
//! files under the state dir.

pub mod fleet;
mod hollow_node;

use std::path::PathBuf;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// The flags of `crilet hollow`.
#[derive(Debug, Clone, clap::Args)]
pub struct HollowArgs {
    /// How many hollow nodes to run.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Static pods per node.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// The kubeconfig every node bootstraps with (a bootstrap token's).
    #[arg(long)]
    pub bootstrap_kubeconfig: PathBuf,
    /// Where each node keeps its manifests, root dir and kubeconfig.
    #[arg(long, default_value = "/var/lib/crilet-hollow")]
    pub state_dir: PathBuf,
    /// Nodes are named `<prefix>-<index>`.
    #[arg(long, default_value = "hollow")]
    pub name_prefix: String,
    /// The first node's index (to split a fleet over processes).
    #[arg(long, default_value_t = 0)]
    pub first_index: usize,
    /// A kubelet configuration file every node reads, as `crilet run --config`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The generated pods' image (the fake runtime pulls nothing).
    #[arg(long, default_value = "registry.k8s.io/pause:3.10")]
    pub image: String,
    /// Runtime latencies as a multiple of containerd's (0: none).
    #[arg(long, default_value_t = 1)]
    pub latency_scale: u32,
}

/// What every node of the fleet shares.
#[derive(Debug, Clone)]
pub struct HollowSettings {
    pub pods_per_node: usize,
    pub bootstrap_kubeconfig: PathBuf,
    pub state_dir: PathBuf,
    pub name_prefix: String,
    pub config: Option<PathBuf>,
    pub image: String,
    pub latency_scale: u32,
}

impl HollowArgs {
    fn settings(&self) -> HollowSettings {
        HollowSettings {
            pods_per_node: self.pods_per_node,
            bootstrap_kubeconfig: self.bootstrap_kubeconfig.clone(),
            state_dir: self.state_dir.clone(),
            name_prefix: self.name_prefix.clone(),
            config: self.config.clone(),
            image: self.image.clone(),
            latency_scale: self.latency_scale,
        }
    }
}

/// Runs the fleet until `cancel`. Fails only when no node could start.
pub async fn run(args: HollowArgs, cancel: CancellationToken) -> anyhow::Result<()> {
    if args.nodes == 0 {
        anyhow::bail!("--nodes 0: a fleet needs at least one node");
    }
    if !args.bootstrap_kubeconfig.is_file() {
        anyhow::bail!(
            "--bootstrap-kubeconfig {}: not a readable file",
            args.bootstrap_kubeconfig.display()
        );
    }
    // One heap trimmer for the process (each `crilet run` has one too).
    tokio::spawn(crate::agent::process::trim_heap_periodically(
        cancel.clone(),
    ));
    let settings = std::sync::Arc::new(args.settings());
    let began = Instant::now();
    let mut starting = tokio::task::JoinSet::new();
    for index in args.first_index..args.first_index + args.nodes {
        let (settings, cancel) = (settings.clone(), cancel.clone());
        starting.spawn(async move {
            let name = fleet::node_name(&settings.name_prefix, index);
            (name, hollow_node::start(&settings, index, cancel).await)
        });
    }
    let (mut running, mut failed) = (Vec::new(), 0usize);
    while let Some(joined) = starting.join_next().await {
        match joined {
            Ok((_, Ok(node))) => running.push(node),
            Ok((name, Err(e))) => {
                failed += 1;
                tracing::error!(node = %name, error = format!("{e:#}"), "hollow node did not start");
            }
            Err(e) => {
                failed += 1;
                tracing::error!(error = %e, "a hollow node's start panicked");
            }
        }
    }
    tracing::info!(
        started = running.len(),
        failed,
        seconds = format!("{:.1}", began.elapsed().as_secs_f64()),
        "hollow fleet started"
    );
    if running.is_empty() {
        anyhow::bail!("none of the {} hollow nodes started", args.nodes);
    }
    for node in running {
        let _ = node.await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(nodes: usize, bootstrap: &std::path::Path) -> HollowArgs {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            hollow: HollowArgs,
        }
        let nodes = nodes.to_string();
        let argv = ["hollow", "--nodes", &nodes, "--bootstrap-kubeconfig"];
        let mut cli =
            Cli::try_parse_from(argv.iter().copied().chain([bootstrap.to_str().unwrap()]))
                .expect("the flags parse");
        cli.hollow.state_dir = std::env::temp_dir().join("crilet-hollow-test-unused");
        cli.hollow
    }

    #[tokio::test]
    async fn a_missing_bootstrap_kubeconfig_or_no_nodes_is_refused_naming_it() {
        let missing = std::path::Path::new("/nonexistent/bootstrap-kubelet.conf");
        let e = run(args(3, missing), CancellationToken::new())
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("/nonexistent/bootstrap-kubelet.conf"),
            "{e}"
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        let e = run(args(0, file.path()), CancellationToken::new())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("--nodes 0"), "{e}");
    }

    #[test]
    fn the_defaults_are_a_ten_pod_node_named_hollow() {
        let a = args(1, std::path::Path::new("/b"));
        assert_eq!((a.pods_per_node, a.name_prefix.as_str()), (10, "hollow"));
        assert_eq!((a.first_index, a.latency_scale), (0, 1));
    }
}
