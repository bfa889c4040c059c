//! `crilet logs` and `crilet exec`: a static pod's container log and a
//! one-shot command in it, through the agent's debug service on its socket
//! (not the CRI: the agent finds the pod, by name or either UID, and the
//! container). Flags follow `kubectl logs` / `kubectl exec`.
//!
//! Invariant: arguments are checked here, before the socket is dialled
//! (pure, tested); the agent checks them again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::io::Write;

use super::agent_client::{ClientError, channel, pod_ref};
use crate::api::debug::v1 as pb;
use crate::pod::lookup::PodRef;
use crate::units::parse_duration;
use pb::debug_client::DebugClient;

/// The largest ExecSync answer the CLI accepts: the runtime's own output
/// cap is the CRI message limit (16 MiB, the kubelet's), stdout and stderr
/// together; tonic's default of 4 MiB would refuse a big output.
pub const MAX_EXEC_RESPONSE: usize = 32 << 20;

/// `crilet logs POD`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogsArgs {
    /// The pod: NAMESPACE/NAME, NAME (namespace default), or its static or
    /// mirror UID.
    pub pod: String,
    /// The container; defaults to the one the pod's
    /// kubectl.kubernetes.io/default-container annotation names, else its
    /// only container.
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// Keep streaming new lines until the container stops.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The previous instance's log (after a restart).
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Only the last N lines; -1: all.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub tail: Option<i64>,
    /// Only lines newer than this (Go duration: 5s, 2m, 3h).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub since: Option<Duration>,
    /// Only lines at or after this RFC3339 time.
    #[arg(long, value_name = "RFC3339")]
    pub since_time: Option<String>,
    /// Prefix each line with its timestamp (RFC3339, nanoseconds).
    #[arg(long)]
    pub timestamps: bool,
    /// Stop after this many bytes.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub limit_bytes: Option<i64>,
    /// The agent's socket (`crilet run --socket`).
    #[arg(long, env = "CRILET_SOCKET", default_value = crate::stats::grpc::DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

/// `crilet exec POD -- CMD...`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    /// The pod: NAMESPACE/NAME, NAME (namespace default), or its static or
    /// mirror UID.
    pub pod: String,
    /// The container; defaulted as for `crilet logs`.
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// How long the runtime lets the command run (Go duration, whole
    /// seconds, rounded up); 0: no limit of its own.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub timeout: Duration,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// The agent's socket (`crilet run --socket`).
    #[arg(long, env = "CRILET_SOCKET", default_value = crate::stats::grpc::DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

/// A flag the agent would refuse, caught before dialling it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error(transparent)]
    Pod(#[from] crate::pod::lookup::LookupError),
    #[error("--tail must be -1 (all lines) or at least 0, not {0}")]
    Tail(i64),
    #[error("--limit-bytes must be at least 1, not {0}")]
    LimitBytes(i64),
    #[error("--since must be at least 1s, not {0:?}")]
    Since(Duration),
    #[error("--since-time {0:?} is not an RFC3339 time (e.g. 2026-12-01T00:00:00Z): {1}")]
    SinceTime(String, String),
    #[error("at most one of --since and --since-time may be given")]
    SinceBoth,
    #[error("--container must not be empty")]
    EmptyContainer,
    #[error("a command is required after `--` (e.g. crilet exec POD -- ls /)")]
    NoCommand,
}

#[derive(Debug, thiserror::Error)]
pub enum DebugError {
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("writing the output: {0}")]
    Write(std::io::Error),
}

impl From<tonic::Status> for DebugError {
    fn from(s: tonic::Status) -> Self {
        DebugError::Client(s.into())
    }
}

fn container(c: &Option<String>) -> Result<String, ArgError> {
    match c {
        Some(c) if c.trim().is_empty() => Err(ArgError::EmptyContainer),
        Some(c) => Ok(c.trim().to_owned()),
        None => Ok(String::new()),
    }
}

/// The request `crilet logs` sends, as kubectl builds its PodLogOptions:
/// `--since` rounded to whole seconds, `--tail -1` meaning all lines.
pub fn logs_request(a: &LogsArgs) -> Result<pb::ContainerLogsRequest, ArgError> {
    let pod = PodRef::parse(&a.pod)?;
    let tail_lines = match a.tail {
        None | Some(-1) => None,
        Some(n) if n < 0 => return Err(ArgError::Tail(n)),
        Some(n) => Some(n),
    };
    if let Some(n) = a.limit_bytes.filter(|n| *n < 1) {
        return Err(ArgError::LimitBytes(n));
    }
    let since_seconds = match a.since {
        None => None,
        Some(d) => {
            let secs = (d.as_millis() + 500) / 1000;
            match i64::try_from(secs) {
                Ok(0) => return Err(ArgError::Since(d)),
                Ok(s) => Some(s),
                Err(_) => Some(i64::MAX),
            }
        }
    };
    let since_time = match a.since_time.as_deref().map(str::trim) {
        None => String::new(),
        Some(t) => t
            .parse::<jiff::Timestamp>()
            .map_err(|e| ArgError::SinceTime(t.to_owned(), e.to_string()))?
            .to_string(),
    };
    if since_seconds.is_some() && !since_time.is_empty() {
        return Err(ArgError::SinceBoth);
    }
    Ok(pb::ContainerLogsRequest {
        pod: Some(pod_ref(&pod)),
        container: container(&a.container)?,
        follow: a.follow,
        previous: a.previous,
        timestamps: a.timestamps,
        since_seconds,
        since_time,
        tail_lines,
        limit_bytes: a.limit_bytes,
    })
}

/// The request `crilet exec` sends; the timeout in whole seconds, rounded
/// up (CRI counts seconds; a sub-second limit must not become none).
pub fn exec_request(a: &ExecArgs) -> Result<pb::ExecSyncRequest, ArgError> {
    let pod = PodRef::parse(&a.pod)?;
    if a.command.first().is_none_or(String::is_empty) {
        return Err(ArgError::NoCommand);
    }
    let secs = a.timeout.as_secs() + u64::from(a.timeout.subsec_nanos() > 0);
    Ok(pb::ExecSyncRequest {
        pod: Some(pod_ref(&pod)),
        container: container(&a.container)?,
        cmd: a.command.clone(),
        timeout_seconds: i64::try_from(secs).unwrap_or(i64::MAX),
    })
}

/// The status `crilet exec` exits with: the command's, as a shell (and
/// `kubectl exec`) passes it on, in 0..=255.
pub fn exit_status(code: i32) -> u8 {
    (code & 0xff) as u8
}

/// Writes and flushes `bytes` (a blocking write: the CLI has nothing else
/// to do meanwhile); a closed reader (`crilet logs … | head`) ends the
/// output without an error, answered as `false`.
fn put(out: &mut impl Write, bytes: &[u8]) -> Result<bool, DebugError> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(DebugError::Write(e)),
    }
}

/// Streams the log to `out` chunk by chunk, as it arrives.
pub async fn logs(
    socket: &Path,
    req: pb::ContainerLogsRequest,
    out: &mut impl Write,
) -> Result<(), DebugError> {
    let mut c = DebugClient::new(channel(socket).await?);
    let mut stream = c.container_logs(req).await?.into_inner();
    while let Some(chunk) = stream.message().await? {
        if !put(out, &chunk.data)? {
            break;
        }
    }
    Ok(())
}

/// Runs the command; its output goes to `stdout` and `stderr`, its exit
/// code is the answer.
pub async fn exec(
    socket: &Path,
    req: pb::ExecSyncRequest,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> Result<i32, DebugError> {
    let mut c =
        DebugClient::new(channel(socket).await?).max_decoding_message_size(MAX_EXEC_RESPONSE);
    let r = c.exec_sync(req).await?.into_inner();
    put(stdout, &r.stdout)?;
    put(stderr, &r.stderr)?;
    Ok(r.exit_code)
}

#[cfg(test)]
#[path = "debug_tests.rs"]
mod tests;
