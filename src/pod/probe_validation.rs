//! Validation of a container's probes (liveness, readiness, startup) and
//! lifecycle hooks (postStart, preStop), as the API server's `validateProbe`,
//! `validateHandler` and `validateLifecycle` check them. Part of
//! [`super::model`]'s `validate_container`.
//!
//! Invariant: the answer is the one the kubelet gives for the *defaulted*
//! pod, although crilet validates before defaulting (`parse_pod` validates,
//! the sources then default): an omitted field is fine, and so is an explicit
//! `0` in the fields the API server defaults from zero (periodSeconds,
//! timeoutSeconds, successThreshold, failureThreshold: see
//! [`super::defaults::default_probe`]), and an empty httpGet path or scheme.
//! Every problem is added as one `(field, message)` naming the field.

use k8s_openapi::api::core::v1::{
    Container, ExecAction, HTTPGetAction, LifecycleHandler, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::defaults::{
    DEFAULT_PROBE_FAILURE_THRESHOLD, DEFAULT_PROBE_PERIOD_SECONDS, DEFAULT_PROBE_SUCCESS_THRESHOLD,
    DEFAULT_PROBE_TIMEOUT_SECONDS,
};
use super::problems::{Invalid, Problems, iana_svc_name_problem, note};

/// What a container's hooks are checked against.
#[derive(Debug, Clone, Copy)]
pub(super) struct HookContext {
    /// An init container (the API refuses probes and hooks on those unless
    /// they are sidecars, `restartPolicy: Always`).
    pub is_init: bool,
    /// The pod's `terminationGracePeriodSeconds` (30 when absent): a sleep
    /// hook may not outlast it.
    pub pod_grace_seconds: i64,
}

/// Checks the three probes, then postStart and preStop. `path` is the
/// container's field path, e.g. `spec.containers[0]`. An init container
/// that is not a sidecar may have none of them: each one set is refused
/// whole, as the API server refuses it (lifecycle first, then the probes).
pub(super) fn validate_probes_and_hooks(
    path: &str,
    c: &Container,
    ctx: HookContext,
    out: &mut Problems,
) {
    let probes = [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ];
    if ctx.is_init && !super::is_restartable_init_container(c) {
        let lifecycle = c.lifecycle.as_ref().map(|_| "lifecycle");
        let set = probes.iter().filter(|(_, p)| p.is_some()).map(|(n, _)| *n);
        for name in lifecycle.into_iter().chain(set) {
            out.push((format!("{path}.{name}"), NOT_ON_INIT.into()));
        }
        return;
    }
    for (name, probe) in probes {
        let Some(probe) = probe else { continue };
        validate_probe(&format!("{path}.{name}"), name, probe, out);
    }
    let Some(lifecycle) = &c.lifecycle else {
        return;
    };
    let hooks = [
        ("postStart", &lifecycle.post_start),
        ("preStop", &lifecycle.pre_stop),
    ];
    for (name, hook) in hooks {
        let Some(hook) = hook else { continue };
        let field = format!("{path}.lifecycle.{name}");
        validate_lifecycle_handler(&field, hook, ctx.pod_grace_seconds, out);
    }
}

/// The API server's words for a probe or lifecycle on an init container
/// without `restartPolicy: Always`.
const NOT_ON_INIT: &str =
    "Forbidden: may not be set for init containers without restartPolicy=Always";

/// One probe: exactly one handler, then its fields. `name` is
/// `livenessProbe`, `readinessProbe` or `startupProbe`.
fn validate_probe(field: &str, name: &str, probe: &Probe, out: &mut Problems) {
    let handlers = [
        ("exec", probe.exec.is_some()),
        ("httpGet", probe.http_get.is_some()),
        ("tcpSocket", probe.tcp_socket.is_some()),
        ("grpc", probe.grpc.is_some()),
    ];
    note(out, exactly_one(field, &handlers));
    if let Some(exec) = &probe.exec {
        note(out, validate_exec(field, exec));
    }
    if let Some(http) = &probe.http_get {
        validate_http_get(field, http, out);
    }
    if let Some(tcp) = &probe.tcp_socket {
        note(out, validate_tcp_socket(field, tcp));
    }
    if let Some(grpc) = &probe.grpc {
        if !(1..=65535).contains(&grpc.port) {
            out.push((
                format!("{field}.grpc.port"),
                format!("{} is not in 1..=65535", grpc.port),
            ));
        }
    }

    if let Some(delay) = probe.initial_delay_seconds.filter(|d| *d < 0) {
        out.push((
            format!("{field}.initialDelaySeconds"),
            format!("must not be negative, found {delay}"),
        ));
    }
    let defaulted = [
        (
            "periodSeconds",
            probe.period_seconds,
            DEFAULT_PROBE_PERIOD_SECONDS,
        ),
        (
            "timeoutSeconds",
            probe.timeout_seconds,
            DEFAULT_PROBE_TIMEOUT_SECONDS,
        ),
        (
            "successThreshold",
            probe.success_threshold,
            DEFAULT_PROBE_SUCCESS_THRESHOLD,
        ),
        (
            "failureThreshold",
            probe.failure_threshold,
            DEFAULT_PROBE_FAILURE_THRESHOLD,
        ),
    ];
    for (child, value, default) in defaulted {
        if let Some(value) = value.filter(|v| *v < 0) {
            out.push((
                format!("{field}.{child}"),
                format!(
                    "must be at least 1 (0 or absent means the default, {default}), found {value}"
                ),
            ));
        }
    }
    // A liveness or startup probe decides on one success: the kubelet has
    // nothing to "become" after several (they only act on failure).
    let success = match probe.success_threshold {
        None | Some(0) => DEFAULT_PROBE_SUCCESS_THRESHOLD,
        Some(n) => n,
    };
    if name != "readinessProbe" && success != 1 {
        out.push((
            format!("{field}.successThreshold"),
            format!("must be 1 for {name}, found {success}"),
        ));
    }
    match probe.termination_grace_period_seconds {
        None => {}
        Some(_) if name == "readinessProbe" => {
            out.push((
                format!("{field}.terminationGracePeriodSeconds"),
                "must not be set for readinessProbe (only a liveness or startup failure \
                 kills the container)"
                    .into(),
            ));
        }
        Some(grace) if grace <= 0 => {
            out.push((
                format!("{field}.terminationGracePeriodSeconds"),
                format!("must be greater than 0, found {grace}"),
            ));
        }
        Some(_) => {}
    }
}

/// postStart or preStop: exactly one of exec, httpGet, sleep.
///
/// `tcpSocket` is refused here although the API server accepts it (kept for
/// backward compatibility only): the kubelet cannot run it, so a postStart
/// tcpSocket would fail, and kill the container, on every start, and a
/// preStop one would only log an error. Refusing the manifest says so once,
/// up front, naming the field.
fn validate_lifecycle_handler(
    field: &str,
    hook: &LifecycleHandler,
    pod_grace_seconds: i64,
    out: &mut Problems,
) {
    let handlers = [
        ("exec", hook.exec.is_some()),
        ("httpGet", hook.http_get.is_some()),
        ("tcpSocket", hook.tcp_socket.is_some()),
        ("sleep", hook.sleep.is_some()),
    ];
    note(out, exactly_one(field, &handlers));
    if hook.tcp_socket.is_some() {
        out.push((
            format!("{field}.tcpSocket"),
            "is deprecated for lifecycle hooks and never run by the kubelet; \
             use exec, httpGet or sleep"
                .into(),
        ));
    }
    if let Some(exec) = &hook.exec {
        note(out, validate_exec(field, exec));
    }
    if let Some(http) = &hook.http_get {
        validate_http_get(field, http, out);
    }
    if let Some(sleep) = &hook.sleep {
        if sleep.seconds < 0 || sleep.seconds > pod_grace_seconds {
            out.push((
                format!("{field}.sleep.seconds"),
                format!(
                    "must be between 0 and terminationGracePeriodSeconds ({pod_grace_seconds}), \
                     found {}",
                    sleep.seconds
                ),
            ));
        }
    }
}

/// Exactly one `(name, present)` is present; the error names `field`.
fn exactly_one(field: &str, handlers: &[(&str, bool)]) -> Result<(), Invalid> {
    let set: Vec<&str> = handlers
        .iter()
        .filter(|(_, present)| *present)
        .map(|(name, _)| *name)
        .collect();
    let all: Vec<&str> = handlers.iter().map(|(name, _)| *name).collect();
    match set.len() {
        1 => Ok(()),
        0 => Err((
            field.to_owned(),
            format!("must specify a handler type (one of {})", all.join(", ")),
        )),
        _ => Err((
            field.to_owned(),
            format!(
                "may not specify more than 1 handler type (found {})",
                set.join(", ")
            ),
        )),
    }
}

fn validate_exec(field: &str, exec: &ExecAction) -> Result<(), Invalid> {
    if exec.command.as_ref().is_none_or(Vec::is_empty) {
        return Err((format!("{field}.exec.command"), "is required".into()));
    }
    Ok(())
}

fn validate_http_get(field: &str, http: &HTTPGetAction, out: &mut Problems) {
    let field = format!("{field}.httpGet");
    note(
        out,
        port_number_or_name(&format!("{field}.port"), &http.port),
    );
    // Empty means the default (HTTP); the API compares case-sensitively.
    match http.scheme.as_deref() {
        None | Some("" | "HTTP" | "HTTPS") => {}
        Some(other) => {
            out.push((
                format!("{field}.scheme"),
                format!("{other:?} is not one of \"HTTP\", \"HTTPS\""),
            ));
        }
    }
    for (i, header) in http.http_headers.iter().flatten().enumerate() {
        let ok = !header.name.is_empty()
            && header
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            out.push((
                format!("{field}.httpHeaders[{i}].name"),
                format!(
                    "{:?} is not a valid HTTP header name (letters, digits and '-')",
                    header.name
                ),
            ));
        }
    }
}

fn validate_tcp_socket(field: &str, tcp: &TCPSocketAction) -> Result<(), Invalid> {
    port_number_or_name(&format!("{field}.tcpSocket.port"), &tcp.port)
}

/// A number in 1..=65535 or an IANA service name (looked up in the
/// container's ports when the probe runs, not here: the API does not check
/// that the name exists).
fn port_number_or_name(field: &str, port: &IntOrString) -> Result<(), Invalid> {
    let problem = match port {
        IntOrString::Int(n) => {
            (!(1..=65535).contains(n)).then(|| format!("{n} is not in 1..=65535"))
        }
        IntOrString::String(name) => iana_svc_name_problem(name),
    };
    match problem {
        Some(problem) => Err((field.to_owned(), problem)),
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "probe_validation_tests.rs"]
mod tests;
