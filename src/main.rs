//! The `crilet` command line. Wiring only: the work is in the library.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use crilet::nodestatus::machine::node_ip;

use crilet::agent::config::{LogFormat, RunArgs};
use crilet::cli::command::{self, Cli, Command};
use crilet::cli::{OutputFormat, agent_client, debug, runtime_info, validate};
use crilet::cri::{CriRuntime, RuntimeError, RuntimeOptions};
use crilet::images::disk::Statvfs;

/// Prints `value` as a table (via `table`), JSON or YAML.
fn print_as<T: serde::Serialize>(
    output: OutputFormat,
    value: &T,
    table: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    match output {
        OutputFormat::Table => print!("{}", table(value)),
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).context("encoding JSON")?
        ),
        OutputFormat::Yaml => print!(
            "{}",
            serde_saphyr::to_string(value).context("encoding YAML")?
        ),
    }
    Ok(())
}

fn now_unix_nano() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
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
        Command::Run(args) => run_agent(*args).await,
        Command::Hollow(args) => {
            let cancel = tokio_util::sync::CancellationToken::new();
            let systemd = crilet::agent::sd_notify::Notifier::from_env();
            spawn_signal_handler(cancel.clone(), systemd);
            crilet::kubemark::run(*args, cancel).await
        }
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
            print_as(output, &info, runtime_info::render_table)
        }
        Command::Pods(a) => {
            let pods = agent_client::pods(&a.socket).await?;
            print_as(a.output, &pods, |p| {
                agent_client::render_pods(p, now_unix_nano())
            })
        }
        Command::Stats { pod, agent: a } => {
            let stats = agent_client::stats(&a.socket, pod.as_deref()).await?;
            print_as(a.output, &stats, |s| agent_client::render_stats(s))
        }
        Command::Summary(a) => {
            let summary = agent_client::summary(&a.socket).await?;
            print_as(a.output, &summary, agent_client::render_summary)
        }
        Command::Images(a) => {
            let images = agent_client::images(&a.socket).await?;
            print_as(a.output, &images, |i| {
                let views: Vec<_> = i
                    .iter()
                    .map(crilet::stats::images_api::image_view)
                    .collect();
                crilet::images::render::render_images_table(&views, now_unix_nano())
            })
        }
        Command::Gc {
            dry_run: _,
            agent: a,
        } => {
            let plan = agent_client::plan_image_gc(&a.socket).await?;
            print_as(a.output, &plan, |p| p.report.clone())
        }
        Command::Takeover(a) => {
            print!("{}", crilet::cli::takeover_report::dry_run(&a).await?);
            Ok(())
        }
        Command::Logs(a) => {
            let req = debug::logs_request(&a)?;
            Ok(debug::logs(&a.socket, req, &mut std::io::stdout()).await?)
        }
        Command::Exec(_) => unreachable!("`crilet exec` runs through exec_command"),
        Command::Validate(_) | Command::Completion { .. } | Command::Man { .. } => {
            unreachable!("answered before the async runtime starts")
        }
    }
}

/// `crilet exec`: the command's exit status becomes ours.
async fn exec_command(a: debug::ExecArgs) -> anyhow::Result<ExitCode> {
    let req = debug::exec_request(&a)?;
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let code = debug::exec(&a.socket, req, &mut out, &mut err).await?;
    Ok(ExitCode::from(debug::exit_status(code)))
}

/// `crilet run`: start the agent and run until SIGTERM or SIGINT; pods are
/// left running, as the kubelet leaves them.
async fn run_agent(args: RunArgs) -> anyhow::Result<()> {
    use crilet::cm::cgroup::CGROUP_ROOT;
    use crilet::cm::cgroup_driver;
    use crilet::cri::Runtime;
    use crilet::nodestatus::machine;
    use crilet::pod::view::AgentView;
    use crilet::pod::view::StatusCache;
    use std::sync::Arc;

    let settings = crilet::agent::config::load(&args)?;
    let node_name = machine::node_name(settings.hostname_override.as_deref())
        .context("determining the node name")?;
    let metrics = Arc::new(crilet::stats::metrics::Metrics::new());
    let manifest_url = crilet::agent::url_source::manifest_url_source(&settings, &node_name)?;
    let runtime = CriRuntime::connect_lazy(
        &settings.container_runtime_endpoint,
        RuntimeOptions {
            request_timeout: settings.runtime_request_timeout,
            ..RuntimeOptions::default()
        },
    )?
    .with_observer(metrics.clone());
    // Bind the API listeners before anything else, so that a taken socket
    // or port fails the start instead of surfacing later.
    let listeners = stats_server::bind(&settings.serve).await?;
    let kubelet_listener = crilet::server::start::bind(&settings, &node_name).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let systemd = crilet::agent::sd_notify::Notifier::from_env();
    spawn_signal_handler(cancel.clone(), systemd.clone());
    let mut runtime = Arc::new(runtime) as Arc<dyn Runtime>;
    if settings.max_parallel_runtime_mutations > 0 {
        runtime = Arc::new(crilet::cri::BoundedRuntime::new(
            runtime,
            settings.max_parallel_runtime_mutations,
        ));
    }
    // The API answers from the start, even while the runtime is down: the
    // agent's view and the samples fill in once it is up.
    let (view_tx, view_rx) = tokio::sync::watch::channel(Arc::new(AgentView::default()));
    let (samples_tx, samples) = tokio::sync::watch::channel(None);
    let statuses = StatusCache::default();
    let sources = crilet::stats::StatsSources {
        view: view_rx,
        statuses: statuses.clone(),
        samples,
    };
    // Image GC; the handle also serves `crilet images` / `crilet gc --dry-run`.
    let image_gc = crilet::images::gc::ImageGcHandle::new(
        runtime.clone(),
        Arc::new(Statvfs),
        settings.image_gc.clone(),
        crilet::images::gc::system_clock(),
    );
    metrics.set_image_gc(image_gc.counters());
    let event_counters = Arc::new(crilet::pleg::container_events::EventCounters::default());
    metrics.set_container_events(event_counters.clone());
    let probe_recorder: Arc<dyn crilet::prober::manager::ProbeRecorder> = metrics.clone();
    let debug = crilet::stats::debug_api::DebugApi {
        sources: sources.clone(),
        runtime: runtime.clone(),
        pod_logs_dir: settings.log_dirs.pod_logs_dir.clone(),
    };
    let kubelet_handlers = crilet::server::handlers::Handlers {
        sources: sources.clone(),
        http: crilet::stats::http::HttpApi {
            sources: sources.clone(),
            metrics: metrics.clone(),
        },
        runtime: runtime.clone(),
        pod_logs_dir: settings.log_dirs.pod_logs_dir.clone(),
    };
    // The TLS bootstrap writes the kubeconfig the servers' clients read.
    if let Some(kubeconfig) = &settings.kubeconfig {
        let (certs, ip) = (&settings.certificates, node_ip(settings.node_ip.as_deref()));
        let start = crilet::certificate::start(&node_name, &ip, kubeconfig, certs, cancel.clone());
        start
            .await
            .map_err(|e| anyhow::anyhow!("TLS bootstrap: {e}"))?;
    }
    let mut servers = stats_server::spawn(
        listeners,
        sources,
        Some(crilet::stats::images_api::ImagesApi {
            gc: image_gc.clone(),
        }),
        debug,
        metrics,
        cancel.clone(),
    );
    if let Some(listener) = kubelet_listener {
        servers.push(
            crilet::server::start::spawn(
                listener,
                &settings,
                &node_name,
                kubelet_handlers,
                cancel.clone(),
            )
            .await?,
        );
    }
    // The pod workers count their StopPodSandbox calls; the collector
    // leaves ListPodSandboxStats out while any runs (kubeapi::call_count).
    let sandbox_stops = crilet::kubeapi::call_count::CallCount::default();
    let collector = crilet::stats::collector::Collector {
        runtime: Arc::clone(&runtime),
        sandbox_stops: sandbox_stops.clone(),
        disk: Arc::new(Statvfs),
        node_name: node_name.clone(),
        root_dir: settings.root_dir.clone(),
        pod_logs_dir: settings.log_dirs.pod_logs_dir.clone(),
        proc_root: std::path::PathBuf::from("/proc"),
        period: settings.serve.stats_period,
    };
    // The collector's samples as eviction signals, for the Node's pressure
    // conditions (read only with --kubeconfig, but cheap either way).
    let (observation_tx, observation_rx) = tokio::sync::watch::channel(None);
    tokio::spawn(crilet::nodestatus::node_signals::forward(
        samples_tx.subscribe(),
        std::path::PathBuf::from("/proc"),
        observation_tx,
    ));
    tokio::spawn(collector.run(samples_tx, cancel.clone()));
    // Like the kubelet, wait for the runtime rather than give up on it.
    let version = loop {
        match runtime.version().await {
            Ok(v) => break v,
            Err(e) => {
                tracing::error!(error = %e, "container runtime not answering; retrying in 5s");
                systemd.status(&format!("waiting for the container runtime: {e}"));
                tokio::select! {
                    _ = cancel.cancelled() => {
                        for server in servers {
                            let _ = server.await;
                        }
                        return Ok(());
                    }
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    };
    // The runtime's handlers and their features, read once at start (the
    // kubelet re-reads them with each runtime status: a runtime configured
    // anew is seen when crilet restarts).
    let runtime_handlers = match runtime.status().await {
        Ok(status) => status.handlers,
        Err(e) => {
            tracing::warn!(error = %e, "runtime status unreadable: no runtime handlers known, no recursive read-only mounts");
            Vec::new()
        }
    };
    // As the kubelet: a runtime placing cgroups differently would fail
    // every pod, so a reported mismatch stops the start.
    let answer = runtime.runtime_config().await;
    cgroup_driver::check_cgroup_driver(settings.cgroup_driver, answer)?.log();
    tracing::info!(
        node = %node_name,
        runtime = %version.runtime_name,
        version = %version.runtime_version,
        endpoint = %settings.container_runtime_endpoint,
        "crilet starting"
    );
    // The kubelet's data directories: the pod logs directory must be there,
    // the symlinks' is made if it can be.
    crilet::logs::symlinks::setup_dirs(&settings.log_dirs)?;
    // Containers started by a crilet with other log directories (before an
    // upgrade, or other flags) get the links they lack.
    tokio::spawn({
        let (runtime, dirs) = (runtime.clone(), settings.log_dirs.clone());
        async move {
            crilet::logs::symlinks::link_existing(runtime.as_ref(), &dirs).await;
        }
    });
    let (capacity, allocatable) = settings.node_resources();
    let node = settings.node_context(node_name, &allocatable, &runtime_handlers);
    // Image GC collects once the runtime answers.
    tokio::spawn(image_gc.clone().run(cancel.clone()));
    // Container log rotation, unless a negative max size turned it off.
    let logs_dir = &settings.log_dirs.pod_logs_dir;
    match settings
        .container_logs
        .rotation_task(runtime.clone(), logs_dir)
    {
        Some(rotation) => drop(tokio::spawn(rotation.run(cancel.clone()))),
        None => tracing::info!("container log rotation off (negative --container-log-max-size)"),
    }
    let deps = crilet::app::KubeletDeps {
        runtime: runtime.clone(),
        version: version.clone(),
        runtime_handlers,
        node,
        capacity,
        allocatable,
        statuses,
        manifest_url,
        probe_recorder: Some(probe_recorder),
        event_counters,
        sandbox_stops,
        observation: observation_rx,
        cgroup_fs: std::path::PathBuf::from(CGROUP_ROOT),
    };
    let runtime_version = format!("{}://{}", version.runtime_name, version.runtime_version);
    let (handles, join) = crilet::app::start_kubelet(&settings, deps, cancel.clone()).await?;
    tokio::spawn(crilet::agent::process::trim_heap_periodically(
        cancel.clone(),
    ));
    // Listeners bound, runtime answering, sync loop started: ready.
    systemd.ready(&format!("running on {runtime_version}"));
    // Forward the sync loop's view to the API servers.
    let mut agent_view = handles.view.clone();
    tokio::spawn(async move {
        loop {
            let view = Arc::clone(&agent_view.borrow_and_update());
            view_tx.send_replace(view);
            if agent_view.changed().await.is_err() {
                return;
            }
        }
    });
    join.await.context("the sync loop stopped unexpectedly")?;
    // Let the servers finish (and remove the socket) after the loop stops.
    for server in servers {
        let _ = server.await;
    }
    Ok(())
}

/// The API listeners of `crilet run`: bound at start, served once the
/// agent's handles exist.
mod stats_server {
    use std::sync::Arc;

    use anyhow::Context;
    use crilet::agent::config::ServeSettings;
    use crilet::stats::debug_api::DebugApi;
    use crilet::stats::grpc::{self, StatsApi, TlsFiles};
    use crilet::stats::http::{self, HttpApi};
    use crilet::stats::images_api::ImagesApi;
    use crilet::stats::{StatsSources, metrics::Metrics};
    use tokio_util::sync::CancellationToken;

    pub struct Listeners {
        unix: (tokio::net::UnixListener, std::path::PathBuf),
        tcp: Option<(tokio::net::TcpListener, tonic::transport::ServerTlsConfig)>,
        http: Option<tokio::net::TcpListener>,
    }

    pub async fn bind(s: &ServeSettings) -> anyhow::Result<Listeners> {
        let unix = grpc::bind_unix(&s.socket).await?;
        let tcp = match (&s.grpc_address, &s.tls_cert_file, &s.tls_private_key_file) {
            (Some(addr), Some(cert), Some(key)) => Some(
                grpc::bind_tcp(
                    addr,
                    &TlsFiles {
                        cert: cert.clone(),
                        key: key.clone(),
                        client_ca: s.client_ca_file.clone(),
                    },
                )
                .await?,
            ),
            _ => None,
        };
        let http = match s.http_address {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("--http-address {addr}"))?,
            ),
            None => None,
        };
        tracing::info!(
            socket = %s.socket.display(),
            grpc_address = s.grpc_address.as_deref().unwrap_or("-"),
            http_address = %s.http_address.map_or("-".to_string(), |a| a.to_string()),
            "serving the stats API"
        );
        Ok(Listeners {
            unix: (unix, s.socket.clone()),
            tcp,
            http,
        })
    }

    pub fn spawn(
        l: Listeners,
        sources: StatsSources,
        images: Option<ImagesApi>,
        debug: DebugApi,
        metrics: Arc<Metrics>,
        cancel: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let api = StatsApi::new(sources.clone());
        let mut tasks = Vec::new();
        let (listener, path) = l.unix;
        let (a, i, c) = (api.clone(), images.clone(), cancel.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = grpc::serve_unix(listener, path, a, i, Some(debug), c).await {
                tracing::error!(error = %e, "the stats socket stopped");
            }
        }));
        if let Some((listener, tls)) = l.tcp {
            let (a, i, c) = (api.clone(), images.clone(), cancel.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = grpc::serve_tcp(listener, tls, a, i, c).await {
                    tracing::error!(error = %e, "the TCP gRPC listener stopped");
                }
            }));
        }
        if let Some(listener) = l.http {
            let api = HttpApi { sources, metrics };
            tasks.push(tokio::spawn(http::serve(listener, api, cancel)));
        }
        tasks
    }
}

fn spawn_signal_handler(
    cancel: tokio_util::sync::CancellationToken,
    systemd: crilet::agent::sd_notify::Notifier,
) {
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
        systemd.stopping();
        cancel.cancel();
    });
}

/// Writes a generated text (completion script, man page) to stdout.
fn print_bytes(text: std::io::Result<Vec<u8>>) -> ExitCode {
    use std::io::Write;
    match text.and_then(|t| std::io::stdout().write_all(&t)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crilet: error: {e}");
            ExitCode::FAILURE
        }
    }
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
    match &cli.command {
        Command::Validate(args) => return validate::run(args),
        Command::Completion { shell } => return print_bytes(Ok(command::completion(*shell))),
        Command::Man { out_dir: None } => return print_bytes(command::man_page()),
        Command::Man { out_dir: Some(dir) } => {
            return print_bytes(
                command::write_man_pages(dir).map(|names| (names.join("\n") + "\n").into_bytes()),
            );
        }
        _ => {}
    }
    let (log_format, level) = match &cli.command {
        Command::Run(args) => match crilet::agent::config::load(args) {
            Ok(settings) => (
                settings.log_format,
                crilet::agent::config::log_filter(settings.verbosity),
            ),
            Err(e) => {
                eprintln!("crilet: error: {e}");
                return ExitCode::FAILURE;
            }
        },
        Command::Hollow(_) => (
            LogFormat::Text,
            "warn,crilet::kubemark=info,crilet::certificate=info",
        ),
        _ => (LogFormat::Text, "warn"),
    };
    init_logging(log_format, level);
    let rt = match crilet::agent::process::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("crilet: error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Exec(a) => exec_command(a).await,
            command => run(Cli { command }).await.map(|()| ExitCode::SUCCESS),
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("crilet: error: {}", one_line(&err));
            ExitCode::FAILURE
        }
    }
}
