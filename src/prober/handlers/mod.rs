//! The I/O that runs one probe or one lifecycle hook of a container, as the
//! kubelet's `pkg/probe/{exec,http,tcp,grpc}` and `pkg/kubelet/lifecycle`
//! do (research/kubelet-node-features.md §1.3, §2).
//!
//! Invariants: a probe never takes longer than its timeout (hooks have no
//! timeout of their own: the caller bounds them); at most
//! [`MAX_OUTPUT_BYTES`] of any output or body is held; a handler never
//! panics on what a container answers. Inputs are resolved already: host
//! (see [`target_host`]) and numeric port; named ports and `$(VAR)`
//! expansion belong to the mapping from the pod spec.
//!
//! The driver uses [`ProbeRunner`] and [`HookRunner`] (real: [`Handlers`];
//! in tests: [`fake::FakeHandlers`]); the plain async fns are the handlers
//! themselves.

mod exec;
pub mod fake;
mod grpc;
mod hook;
mod http;
mod target;
mod tcp;
#[cfg(test)]
mod test_server;
mod tls;

pub use crate::prober::ProbeOutcome;

pub use exec::exec_probe;
pub use grpc::grpc_probe;
pub use hook::{HOOK_SLEEP_CANCELLED, run_hook};
pub use http::{HOOK_USER_AGENT, HttpGetClient, PROBE_USER_AGENT, http_hook, http_probe};
pub use target::{join_host_port, target_host};
pub use tcp::tcp_probe;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cri::Runtime;

/// The most of a command's output or an HTTP body a handler keeps (the
/// kubelet's 10 KiB); the rest is dropped, not an error.
pub const MAX_OUTPUT_BYTES: usize = 10 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// An httpGet probe or hook, resolved: `host` is a name or an IP (IPv6
/// with or without brackets), `path` as in the spec (`/` if empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGetTarget {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    pub path: String,
    /// `httpHeaders` in spec order; a name may repeat. `User-Agent`,
    /// `Accept` and `Host` given here replace the defaults.
    pub headers: Vec<(String, String)>,
}

/// What a probe runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// CRI ExecSync in the container.
    Exec {
        command: Vec<String>,
    },
    HttpGet(HttpGetTarget),
    TcpSocket {
        host: String,
        port: u16,
    },
    /// `grpc.health.v1.Health/Check`; `service` empty for the server.
    Grpc {
        host: String,
        port: u16,
        service: String,
    },
}

/// What a postStart or preStop hook runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAction {
    Exec { command: Vec<String> },
    HttpGet(HttpGetTarget),
    Sleep { duration: Duration },
}

/// Runs one probe of a container once.
#[async_trait::async_trait]
pub trait ProbeRunner: Send + Sync {
    /// `timeout` is the probe's `timeoutSeconds`; the answer comes within
    /// about that (an exec waits for the runtime, which enforces it).
    async fn run_probe(
        &self,
        container_id: &str,
        action: &ProbeAction,
        timeout: Duration,
    ) -> ProbeOutcome;
}

/// Runs one lifecycle hook of a container once; `Err` is the message for
/// the `FailedPostStartHook` / `FailedPreStopHook` event and log.
#[async_trait::async_trait]
pub trait HookRunner: Send + Sync {
    /// See [`run_hook`] for `exec_timeout` and `cancel`.
    async fn run_hook(
        &self,
        container_id: &str,
        action: &HookAction,
        exec_timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<(), String>;
}

/// The real handlers: the runtime for exec, one HTTP client per purpose
/// (built once: they share one TLS config).
#[derive(Clone)]
pub struct Handlers {
    runtime: Arc<dyn Runtime>,
    probe_http: HttpGetClient,
    hook_http: HttpGetClient,
}

impl Handlers {
    pub fn new(runtime: Arc<dyn Runtime>) -> Self {
        Handlers {
            runtime,
            probe_http: HttpGetClient::new(PROBE_USER_AGENT),
            hook_http: HttpGetClient::new(HOOK_USER_AGENT),
        }
    }
}

#[async_trait::async_trait]
impl ProbeRunner for Handlers {
    async fn run_probe(
        &self,
        container_id: &str,
        action: &ProbeAction,
        timeout: Duration,
    ) -> ProbeOutcome {
        match action {
            ProbeAction::Exec { command } => {
                exec_probe(self.runtime.as_ref(), container_id, command, timeout).await
            }
            ProbeAction::HttpGet(target) => http_probe(&self.probe_http, target, timeout).await,
            ProbeAction::TcpSocket { host, port } => tcp_probe(host, *port, timeout).await,
            ProbeAction::Grpc {
                host,
                port,
                service,
            } => grpc_probe(host, *port, service, timeout).await,
        }
    }
}

#[async_trait::async_trait]
impl HookRunner for Handlers {
    async fn run_hook(
        &self,
        container_id: &str,
        action: &HookAction,
        exec_timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        run_hook(
            self.runtime.as_ref(),
            &self.hook_http,
            container_id,
            action,
            exec_timeout,
            cancel,
        )
        .await
    }
}

/// `parts` concatenated, cut at [`MAX_OUTPUT_BYTES`], as text (a cut
/// character or invalid UTF-8 becomes U+FFFD).
fn capped_text(parts: &[&[u8]]) -> String {
    let mut kept = Vec::new();
    for part in parts {
        let room = MAX_OUTPUT_BYTES - kept.len();
        kept.extend_from_slice(&part[..part.len().min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// An error and its causes on one line: tonic and hyper keep the useful
/// part ("connection refused") in the source chain.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line
}

/// A failed connect as Go's net package words it after "dial tcp ADDR: ":
/// `connect: connection refused`, not Rust's "Connection refused (os error
/// 111)". Errors without an OS code keep their own text.
pub fn go_dial_error(e: &std::io::Error) -> String {
    let Some(code) = e.raw_os_error() else {
        return e.to_string();
    };
    let text = std::io::Error::from_raw_os_error(code).to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    let lower = match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    format!("connect: {lower}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_concatenated_and_capped() {
        assert_eq!(capped_text(&[b"out ", b"err"]), "out err");
        let big = vec![b'a'; MAX_OUTPUT_BYTES - 2];
        let text = capped_text(&[&big, b"xyz"]);
        assert_eq!(text.len(), MAX_OUTPUT_BYTES);
        assert!(text.ends_with("axy"));
        // A multi-byte character cut in half does not panic.
        let cut = capped_text(&[&big, "€".as_bytes()]);
        assert!(cut.ends_with('\u{FFFD}'), "{cut}");
    }

    #[derive(Debug)]
    struct Outer(&'static str, std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn error_chain_appends_causes_not_already_said() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(
            error_chain(&Outer("transport error", refused())),
            "transport error: refused"
        );
        assert_eq!(
            error_chain(&Outer("dial: refused", refused())),
            "dial: refused"
        );
    }

    #[test]
    fn dial_errors_are_worded_as_go_words_them() {
        let refused = std::io::Error::from_raw_os_error(111);
        assert_eq!(go_dial_error(&refused), "connect: connection refused");
        let unreachable = std::io::Error::from_raw_os_error(113);
        assert_eq!(go_dial_error(&unreachable), "connect: no route to host");
        let other = std::io::Error::other("no such host");
        assert_eq!(go_dial_error(&other), "no such host");
    }
}
