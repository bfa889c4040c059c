//! What a probe or a lifecycle hook asks the handlers to do, in domain
//! types built once from the (defaulted) `k8s_openapi` spec: timings,
//! thresholds, and the action (exec, httpGet, tcpSocket, grpc, sleep).
//! Part of [`super`].
//!
//! Invariant: a built [`ProbeSpec`] has a period and timeout of at least one
//! second, thresholds of at least one, and ports in 1..=65535 (named ports
//! are resolved per run by [`resolve_port`]): whatever reaches a handler is
//! runnable. Building applies the API defaults again, so a spec that skipped
//! defaulting still gets the kubelet's values.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::pod::defaults::{DEFAULT_HTTP_GET_PATH, default_probe};
use crate::units::expansion::expand;

/// A port as a probe names it: a number, or the name of one of the
/// container's `ports[]` (resolved with [`resolve_port`] at each run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

impl PortRef {
    fn from_spec(port: &IntOrString) -> Result<Self, String> {
        match port {
            IntOrString::Int(n) => port_number(*n).map(PortRef::Number),
            IntOrString::String(name) if name.is_empty() => Err("port name is empty".into()),
            IntOrString::String(name) => Ok(PortRef::Name(name.clone())),
        }
    }
}

fn port_number(n: i32) -> Result<u16, String> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("port {n} is not in 1..=65535"))
}

/// The port a probe connects to. A name is looked up in the container's
/// `ports[].name` and gives that port's **containerPort** (not hostPort);
/// like the kubelet, a name that matches no port but reads as a number is
/// taken as that number. The error names the port and the container.
pub fn resolve_port(port: &PortRef, c: &Container) -> Result<u16, String> {
    let name = match port {
        PortRef::Number(n) => return Ok(*n),
        PortRef::Name(name) => name,
    };
    let declared = c
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(name.as_str()));
    match declared {
        Some(p) => port_number(p.container_port)
            .map_err(|e| format!("port {name:?} of container {:?}: {e}", c.name)),
        None => name
            .parse::<i32>()
            .ok()
            .and_then(|n| port_number(n).ok())
            .ok_or_else(|| {
                format!(
                    "port {name:?} not found in the ports of container {:?}",
                    c.name
                )
            }),
    }
}

/// An exec probe's command with `$(VAR)` expanded from the container's
/// `env[].value` entries only, as the kubelet does
/// (`ExpandContainerCommandOnlyStatic`): an env entry set by `valueFrom`
/// counts as the empty string, a later entry of the same name wins, values
/// are not themselves expanded, `$$` is a literal `$`, and an unknown
/// `$(VAR)` stays as written. (Lifecycle exec commands are not expanded.)
pub fn probe_command(c: &Container, command: &[String]) -> Vec<String> {
    let vars: Vec<(String, String)> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    command.iter().map(|arg| expand(arg, &vars)).collect()
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpScheme {
    Http,
    Https,
}

impl HttpScheme {
    /// The URL scheme, lowercase.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpScheme::Http => "http",
            HttpScheme::Https => "https",
        }
    }
}

/// An HTTP GET, for probes and hooks alike.
///
/// The handler's job, not modelled here: `host` `None` means the pod IP (for
/// a hostNetwork pod the node's IP); headers add `User-Agent:
/// kube-probe/<major>.<minor>` (hooks: `kube-lifecycle/...`) and `Accept:
/// */*` unless given, a `Host` header sets the request's host; TLS is not
/// verified; redirects are followed only to the same host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGet {
    pub host: Option<String>,
    pub port: PortRef,
    /// Starts with '/' (may carry a query string).
    pub path: String,
    pub scheme: HttpScheme,
    /// `httpHeaders`, in spec order (a name may repeat).
    pub headers: Vec<(String, String)>,
}

impl HttpGet {
    fn from_spec(http: &HTTPGetAction) -> Result<Self, String> {
        let scheme = match http.scheme.as_deref() {
            None | Some("" | "HTTP") => HttpScheme::Http,
            Some("HTTPS") => HttpScheme::Https,
            Some(other) => return Err(format!("httpGet scheme {other:?} is not HTTP or HTTPS")),
        };
        let path = match http.path.as_deref() {
            None | Some("") => DEFAULT_HTTP_GET_PATH.to_owned(),
            Some(p) if p.starts_with('/') => p.to_owned(),
            Some(p) => format!("/{p}"),
        };
        Ok(HttpGet {
            host: http.host.clone().filter(|h| !h.is_empty()),
            port: PortRef::from_spec(&http.port)?,
            path,
            scheme,
            headers: http
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        })
    }

    /// `scheme://host:port/path`, with an IPv6 host in brackets; `host` is
    /// `self.host` or the pod IP, `port` the resolved port.
    pub fn url(&self, host: &str, port: u16) -> String {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        format!("{}://{host}:{port}{}", self.scheme.as_str(), self.path)
    }
}

/// A TCP connect (then close); `host` `None` means the pod IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSocket {
    pub host: Option<String>,
    pub port: PortRef,
}

/// What one probe run does. Exec runs through CRI ExecSync with the probe's
/// timeout (expand `command` with [`probe_command`] first); gRPC always
/// dials the pod IP, insecure, and calls `grpc.health.v1.Health/Check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    Exec { command: Vec<String> },
    HttpGet(HttpGet),
    TcpSocket(TcpSocket),
    Grpc { port: u16, service: Option<String> },
}

/// One probe of one container, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Nothing runs until this long after the container's startedAt.
    pub initial_delay: Duration,
    pub period: Duration,
    /// Per run: the exec/HTTP/TCP/gRPC deadline.
    pub timeout: Duration,
    /// Consecutive successes that make the result Success (1 for liveness
    /// and startup).
    pub success_threshold: u32,
    /// Consecutive failures that make the result Failure.
    pub failure_threshold: u32,
    /// Liveness/startup only: the grace period of the kill that a failure
    /// causes, overriding the pod's (a pod deletion grace still wins).
    pub termination_grace_period_seconds: Option<i64>,
    pub action: ProbeAction,
}

impl ProbeSpec {
    /// Builds the spec, applying the API defaults again (so an undefaulted
    /// probe gets period 10 s, timeout 1 s, thresholds 1 and 3). Refuses
    /// what validation refuses about the values used here: not exactly one
    /// handler, a negative timing, a port out of range, an empty exec
    /// command, an unknown scheme.
    pub fn from_probe(probe: &Probe) -> Result<ProbeSpec, String> {
        let mut p = probe.clone();
        default_probe(&mut p);
        let action = match (&p.exec, &p.http_get, &p.tcp_socket, &p.grpc) {
            (Some(exec), None, None, None) => ProbeAction::Exec {
                command: exec_command(exec.command.as_deref())?,
            },
            (None, Some(http), None, None) => ProbeAction::HttpGet(HttpGet::from_spec(http)?),
            (None, None, Some(tcp), None) => ProbeAction::TcpSocket(TcpSocket {
                host: tcp.host.clone().filter(|h| !h.is_empty()),
                port: PortRef::from_spec(&tcp.port)?,
            }),
            (None, None, None, Some(grpc)) => ProbeAction::Grpc {
                port: port_number(grpc.port)?,
                service: grpc.service.clone(),
            },
            _ => return Err("a probe needs exactly one of exec, httpGet, tcpSocket, grpc".into()),
        };
        let seconds = |name: &str, v: Option<i32>| -> Result<u64, String> {
            u64::try_from(v.unwrap_or(0)).map_err(|_| format!("{name} is negative"))
        };
        let count = |name: &str, v: Option<i32>| -> Result<u32, String> {
            u32::try_from(v.unwrap_or(0))
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{name} must be at least 1"))
        };
        Ok(ProbeSpec {
            initial_delay: Duration::from_secs(seconds(
                "initialDelaySeconds",
                p.initial_delay_seconds,
            )?),
            period: Duration::from_secs(count("periodSeconds", p.period_seconds)?.into()),
            timeout: Duration::from_secs(count("timeoutSeconds", p.timeout_seconds)?.into()),
            success_threshold: count("successThreshold", p.success_threshold)?,
            failure_threshold: count("failureThreshold", p.failure_threshold)?,
            termination_grace_period_seconds: p.termination_grace_period_seconds.filter(|g| *g > 0),
            action,
        })
    }
}

fn exec_command(command: Option<&[String]>) -> Result<Vec<String>, String> {
    match command {
        Some(c) if !c.is_empty() => Ok(c.to_vec()),
        _ => Err("exec needs a command".into()),
    }
}

/// What a postStart or preStop hook does. Exec runs through CRI ExecSync
/// with no timeout and no `$(VAR)` expansion; an httpGet's response status
/// is ignored (only a transport error fails it) and it has no timeout;
/// sleep waits, cut short if the container's stop is cancelled.
///
/// `tcpSocket` has no variant: the API keeps it only for compatibility and
/// the kubelet cannot run it (validation refuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleAction {
    Exec { command: Vec<String> },
    HttpGet(HttpGet),
    Sleep { seconds: u64 },
}

impl LifecycleAction {
    /// Builds the action; refuses a handler with not exactly one of exec,
    /// httpGet, sleep, a tcpSocket, or a negative sleep.
    pub fn from_handler(handler: &LifecycleHandler) -> Result<LifecycleAction, String> {
        if handler.tcp_socket.is_some() {
            return Err("tcpSocket lifecycle handlers are deprecated and cannot be run".into());
        }
        match (&handler.exec, &handler.http_get, &handler.sleep) {
            (Some(exec), None, None) => Ok(LifecycleAction::Exec {
                command: exec_command(exec.command.as_deref())?,
            }),
            (None, Some(http), None) => Ok(LifecycleAction::HttpGet(HttpGet::from_spec(http)?)),
            (None, None, Some(sleep)) => u64::try_from(sleep.seconds)
                .map(|seconds| LifecycleAction::Sleep { seconds })
                .map_err(|_| format!("sleep seconds {} is negative", sleep.seconds)),
            _ => Err("a lifecycle handler needs exactly one of exec, httpGet, sleep".into()),
        }
    }
}
