//! The `crilet` command line. Wiring only: the work is in the library.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crilet::agent::config::{LogFormat, RunArgs};
use crilet::cli::{OutputFormat, duration::parse_duration, runtime_info};
use crilet::images::disk::Statvfs;
use crilet::runtime::{CriRuntime, DEFAULT_ENDPOINT, RuntimeError, RuntimeOptions};

#[derive(Parser)]
#[command(
    name = "crilet",
    version,
    about = "Runs static pods on a CRI runtime, as the kubelet does"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the agent: static pods from --pod-manifest-path on the CRI runtime.
    Run(RunArgs),
    /// Show the runtime's name, version, conditions, image filesystem and images.
    RuntimeInfo {
        /// The CRI endpoint (unix socket).
        #[arg(long, env = "CONTAINER_RUNTIME_ENDPOINT", default_value = DEFAULT_ENDPOINT)]
        container_runtime_endpoint: String,
        /// Deadline of each CRI call (Go duration, as the kubelet's flag).
        #[arg(long, default_value = "2m", value_parser = parse_duration)]
        runtime_request_timeout: Duration,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
}

/// Logs go to stderr; CRILET_LOG (an env-filter) overrides the level.
fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CRILET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => run_agent(args).await,
        Command::RuntimeInfo {
            container_runtime_endpoint,
            runtime_request_timeout,
            output,
        } => {
            let options = RuntimeOptions {
                request_timeout: runtime_request_timeout,
                ..RuntimeOptions::default()
            };
            let rt = CriRuntime::connect_lazy(&container_runtime_endpoint, options)?;
            let info = runtime_info::gather(&rt, &container_runtime_endpoint, &Statvfs).await?;
            match output {
                OutputFormat::Table => print!("{}", runtime_info::render_table(&info)),
                OutputFormat::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&info).context("encoding JSON")?
                ),
            }
            Ok(())
        }
    }
}

/// `crilet run`: start the agent and run until SIGTERM or SIGINT; pods are
/// left running, as the kubelet leaves them.
async fn run_agent(args: RunArgs) -> anyhow::Result<()> {
    use crilet::agent::{Agent, node};
    use crilet::runtime::mapping::NodeContext;
    use crilet::runtime::{Runtime, cgroup::CGROUP_ROOT};
    use std::sync::Arc;

    let settings = crilet::agent::config::load(&args)?;
    let node_name = node::node_name(settings.hostname_override.as_deref())
        .context("determining the node name")?;
    let runtime = CriRuntime::connect_lazy(
        &settings.container_runtime_endpoint,
        RuntimeOptions {
            request_timeout: settings.runtime_request_timeout,
            ..RuntimeOptions::default()
        },
    )?;
    let cancel = tokio_util::sync::CancellationToken::new();
    spawn_signal_handler(cancel.clone());
    // Like the kubelet, wait for the runtime rather than give up on it.
    let version = loop {
        match runtime.version().await {
            Ok(v) => break v,
            Err(e) => {
                tracing::error!(error = %e, "container runtime not answering; retrying in 5s");
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    };
    tracing::info!(
        node = %node_name,
        runtime = %version.runtime_name,
        version = %version.runtime_version,
        endpoint = %settings.container_runtime_endpoint,
        "crilet starting"
    );
    let node = NodeContext {
        node_name,
        root_dir: settings.root_dir.clone(),
        cgroup_root: settings.cgroup_root.clone(),
        host_dns: node::read_host_dns(std::path::Path::new("/etc/resolv.conf")),
        host_ip: node::node_ip(settings.node_ip.as_deref()),
        memory_capacity: node::read_memory_capacity(),
    };
    let runtime = Arc::new(runtime) as Arc<dyn Runtime>;
    // Image GC; `image_gc` is the handle for the agent socket and /metrics.
    let image_gc = crilet::images::gc::ImageGcHandle::new(
        runtime.clone(),
        Arc::new(Statvfs),
        settings.image_gc.clone(),
        crilet::images::gc::system_clock(),
    );
    tokio::spawn(image_gc.clone().run(cancel.clone()));
    let agent = Agent {
        runtime,
        runtime_name: version.runtime_name.clone(),
        node,
        pod_manifest_path: settings.pod_manifest_path.clone(),
        file_check_frequency: settings.file_check_frequency,
        cgroup_fs: std::path::PathBuf::from(CGROUP_ROOT),
    };
    let runtime_version = format!("{}://{}", version.runtime_name, version.runtime_version);
    let node_name = agent.node.node_name.clone();
    let node_ip = agent.node.host_ip.clone();
    let (handles, join) = agent.start(cancel.clone());
    use crilet::mirror::client::{
        KubeMirrorClient, MirrorClient, SERVICE_ACCOUNT_TOKEN, in_cluster_available,
    };
    let in_cluster = in_cluster_available(
        std::env::var("KUBERNETES_SERVICE_HOST").ok().as_deref(),
        std::path::Path::new(SERVICE_ACCOUNT_TOKEN).exists(),
    );
    let client = match &settings.kubeconfig {
        Some(path) => {
            let client = KubeMirrorClient::from_kubeconfig(path).await?;
            tracing::info!(kubeconfig = %path.display(), node = %node_name, "mirror pods on the API server");
            Some(client)
        }
        None if in_cluster => {
            tracing::info!(node = %node_name, "no --kubeconfig, but running in a pod: using its service account for mirror pods");
            Some(KubeMirrorClient::in_cluster()?)
        }
        None => None,
    };
    match client {
        Some(client) => {
            let manager = crilet::mirror::manager::MirrorManager {
                client: Arc::new(client) as Arc<dyn MirrorClient>,
                node_name,
                node_ip,
                runtime_version,
                view: handles.view.clone(),
                statuses: handles.statuses.clone(),
                status_changed: handles.status_changed.clone(),
                mirrors_tx: handles.mirrors.clone(),
            };
            tokio::spawn(manager.run(cancel.clone()));
        }
        None => {
            tracing::info!("no --kubeconfig: running standalone, without a Node or mirror pods")
        }
    }
    join.await.context("the sync loop stopped unexpectedly")?;
    Ok(())
}

fn spawn_signal_handler(cancel: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot install signal handlers");
            return;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
        cancel.cancel();
    });
}

/// One line: the contexts, then the first runtime error, whose text already
/// carries its innermost cause (tonic's own Display of a status is noisy).
fn one_line(err: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in err.chain() {
        parts.push(cause.to_string());
        if cause.downcast_ref::<RuntimeError>().is_some() {
            break;
        }
    }
    parts.join(": ")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (log_format, level) = match &cli.command {
        Command::Run(args) => match crilet::agent::config::load(args) {
            Ok(settings) => (settings.log_format, "info"),
            Err(e) => {
                eprintln!("crilet: error: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => (LogFormat::Text, "warn"),
    };
    init_logging(log_format, level);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("crilet: error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("crilet: error: {}", one_line(&err));
            ExitCode::FAILURE
        }
    }
}
