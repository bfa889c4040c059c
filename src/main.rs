//! The `crilet` command line. Wiring only: the work is in the library.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

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

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CRILET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
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
    init_logging();
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
