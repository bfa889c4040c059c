//! `crilet takeover --dry-run`: on a node the kubelet ran, what `crilet run`
//! with the same flags would keep of the pods that run, what it would
//! replace and why, before anything is touched. Read-only: it lists and
//! inspects the runtime's pods and reads the manifests, nothing else.

use std::sync::Arc;

use anyhow::Context;

use crate::agent::config::{RunArgs, load};
use crate::config::file::read_manifests_trusting;
use crate::cri::{CriRuntime, Runtime, RuntimeOptions};
use crate::kuberuntime::takeover_driver::{Survey, survey};
use crate::nodestatus::machine;

/// The flags of `crilet takeover`.
#[derive(Debug, Clone, clap::Args)]
pub struct TakeoverArgs {
    /// Print what would be kept and replaced (required: `crilet run` is
    /// what takes the node over).
    #[arg(long, required = true)]
    pub dry_run: bool,
    /// The flags `crilet run` will be started with.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The report, one line per static pod and per pod no manifest names.
pub async fn dry_run(args: &TakeoverArgs) -> anyhow::Result<String> {
    let settings = load(&args.run)?;
    let node_name = machine::node_name(settings.hostname_override.as_deref())
        .context("determining the node name")?;
    let runtime = CriRuntime::connect_lazy(
        &settings.container_runtime_endpoint,
        RuntimeOptions {
            request_timeout: settings.runtime_request_timeout,
            ..RuntimeOptions::default()
        },
    )?;
    let runtime: Arc<dyn Runtime> = Arc::new(runtime);
    let handlers = runtime
        .status()
        .await
        .with_context(|| format!("the runtime at {}", settings.container_runtime_endpoint))?
        .handlers;
    let (_, allocatable) = settings.node_resources();
    let node = settings.node_context(node_name.clone(), &allocatable, &handlers);
    let mut pods = Vec::new();
    let mut notes = Vec::new();
    if let Some(path) = &settings.pod_manifest_path {
        let now = jiff::Timestamp::now();
        let read = read_manifests_trusting(path, &node_name, now, settings.manifest_trust);
        for e in &read.errors {
            notes.push(format!("refused manifest (crilet run refuses it too): {e}"));
        }
        pods.extend(read.pods.iter().map(|p| (*p.pod).clone()));
    }
    if let Some(url) = &settings.manifest_url {
        notes.push(format!(
            "the pods of --manifest-url {url} are not read here; crilet run judges them the same way when it fetches them"
        ));
    }
    let found = survey(runtime.as_ref(), &node, &pods)
        .await
        .with_context(|| format!("the runtime at {}", settings.container_runtime_endpoint))?;
    Ok(render(&found, &notes))
}

fn render(found: &Survey, notes: &[String]) -> String {
    let mut out = found.to_string();
    if found.findings.is_empty() && found.strangers.is_empty() {
        out.push_str("no static pods and no running pods\n");
    }
    for n in notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}
