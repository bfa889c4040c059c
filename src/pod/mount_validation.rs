//! The API server's rules for volume mount paths, propagation and
//! recursive read-only mode, the termination message policy, container
//! restart policies, port host IPs, and the pod's hostname, subdomain,
//! host aliases, nodeName, priorityClassName and process-namespace
//! sharing. Part of [`super::spec_validation`].
//!
//! Invariant: pure; every problem is added as (field path, message), at
//! most one per field, in the API server's wording where it has one; a
//! mount that passes is one the runtime mapping accepts (relative subPath
//! without '..', a known propagation, Bidirectional only when privileged,
//! no recursive read-only mode that crilet would not honour).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, PodSpec, VolumeMount};

use super::field_validation::{invalid, unsupported};
use super::problems::{
    Problems, dns1123_label_problem, dns1123_subdomain_problem, ip_address_problem,
};

const PROPAGATIONS: [&str; 3] = ["Bidirectional", "HostToContainer", "None"];
const RECURSIVE_READ_ONLY: [&str; 3] = ["Disabled", "Enabled", "IfPossible"];
const MESSAGE_POLICIES: [&str; 2] = ["FallbackToLogsOnError", "File"];

/// hostname and subdomain (DNS-1123 labels), nodeName and
/// priorityClassName (subdomains), hostAliases (an IP, subdomain host
/// names), shareProcessNamespace with hostPID.
pub(super) fn validate_pod_names(spec: &PodSpec, out: &mut Problems) {
    for (i, alias) in spec.host_aliases.iter().flatten().enumerate() {
        let field = format!("spec.hostAliases[{i}]");
        if let Some(problem) = ip_address_problem(&alias.ip) {
            out.push((format!("{field}.ip"), invalid(&alias.ip, problem)));
        }
        for (j, name) in alias.hostnames.iter().flatten().enumerate() {
            if let Some(problem) = dns1123_subdomain_problem(name) {
                out.push((format!("{field}.hostnames[{j}]"), problem));
            }
        }
    }
    let labels = [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)];
    for (name, value) in labels {
        if let Some(problem) = non_empty(value).and_then(dns1123_label_problem) {
            out.push((format!("spec.{name}"), problem));
        }
    }
    let subdomains = [
        ("nodeName", &spec.node_name),
        ("priorityClassName", &spec.priority_class_name),
    ];
    for (name, value) in subdomains {
        if let Some(problem) = non_empty(value).and_then(dns1123_subdomain_problem) {
            out.push((format!("spec.{name}"), problem));
        }
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        out.push((
            "spec.securityContext.shareProcessNamespace".into(),
            "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled".into(),
        ));
    }
}

/// Mount paths unique, subPath relative without '..', subPath and
/// subPathExpr exclusive, propagation known (Bidirectional privileged);
/// terminationMessagePolicy; restartPolicy only `Always` on an init
/// container; port hostIP an IP address.
pub(super) fn validate_container_misc(
    path: &str,
    c: &Container,
    is_init: bool,
    out: &mut Problems,
) {
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let mut paths = HashSet::new();
    for (k, m) in c.volume_mounts.iter().flatten().enumerate() {
        let field = |child: &str| format!("{path}.volumeMounts[{k}].{child}");
        if !m.mount_path.is_empty() && !paths.insert(m.mount_path.as_str()) {
            out.push((field("mountPath"), invalid(&m.mount_path, "must be unique")));
        }
        let (sub, expr) = (non_empty(&m.sub_path), non_empty(&m.sub_path_expr));
        if sub.is_some() && expr.is_some() {
            out.push((
                field("subPathExpr"),
                invalid(
                    expr.unwrap_or_default(),
                    "subPathExpr and subPath are mutually exclusive",
                ),
            ));
        }
        for (child, value) in [("subPath", sub), ("subPathExpr", expr)] {
            if let Some(problem) = value.and_then(descending_path_problem) {
                out.push((field(child), invalid(value.unwrap_or_default(), problem)));
            }
        }
        match m.mount_propagation.as_deref() {
            None => {}
            Some(p) if !PROPAGATIONS.contains(&p) => {
                out.push((field("mountPropagation"), unsupported(p, &PROPAGATIONS)));
            }
            Some("Bidirectional") if !privileged => out.push((
                field("mountPropagation"),
                "Forbidden: Bidirectional mount propagation is available only to privileged \
                 containers"
                    .into(),
            )),
            Some(_) => {}
        }
        if let Some(problem) = recursive_read_only_problem(m) {
            out.push((field("recursiveReadOnly"), problem));
        }
    }
    if let Some(policy) = non_empty(&c.termination_message_policy) {
        if !MESSAGE_POLICIES.contains(&policy) {
            out.push((
                format!("{path}.terminationMessagePolicy"),
                unsupported(policy, &MESSAGE_POLICIES),
            ));
        }
    }
    if let Some(policy) = c.restart_policy.as_deref() {
        if !is_init {
            out.push((
                format!("{path}.restartPolicy"),
                "Forbidden: may not be set for non-init containers".into(),
            ));
        } else if policy != "Always" {
            out.push((
                format!("{path}.restartPolicy"),
                unsupported(policy, &["Always"]),
            ));
        }
    }
    for (j, port) in c.ports.iter().flatten().enumerate() {
        let ip = non_empty(&port.host_ip);
        if ip.is_some_and(|ip| ip.parse::<std::net::IpAddr>().is_err()) {
            out.push((
                format!("{path}.ports[{j}].hostIP"),
                invalid(ip.unwrap_or_default(), "must be a valid IP address"),
            ));
        }
    }
}

/// The API server's rules for `recursiveReadOnly`: a known mode; other
/// than Disabled only on a read-only mount without propagation. Whether the
/// runtime can make one is the mapping's to say, when the container is
/// created (Enabled on a runtime without them fails the container, as the
/// kubelet fails it).
fn recursive_read_only_problem(m: &VolumeMount) -> Option<String> {
    let mode = m.recursive_read_only.as_deref()?;
    if !RECURSIVE_READ_ONLY.contains(&mode) {
        return Some(unsupported(mode, &RECURSIVE_READ_ONLY));
    }
    if mode == "Disabled" {
        return None;
    }
    if m.read_only != Some(true) {
        return Some("Forbidden: may only be specified when readOnly is true".into());
    }
    if m.mount_propagation.as_deref().is_some_and(|p| p != "None") {
        return Some(
            "Forbidden: may only be specified when mountPropagation is None or not specified"
                .into(),
        );
    }
    None
}

/// `validateLocalDescendingPath`: relative, no '..' element.
fn descending_path_problem(p: &str) -> Option<&'static str> {
    if p.starts_with('/') {
        Some("must be a relative path")
    } else if p.split('/').any(|part| part == "..") {
        Some("must not contain '..'")
    } else {
        None
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}
