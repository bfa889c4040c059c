//! Service environment variables, as the kubelet v1.32 makes them
//! (`pkg/kubelet/envvars/envvars.go` `FromServices`, and the choice of
//! Services in `pkg/kubelet/kubelet_pods.go` `getServiceEnvVarMap`): which
//! Services a pod sees, and the variables each gives. How they merge with
//! the container's own env is `env::environment`. Part of `mapping`.
//!
//! Invariant: pure; the same pod and Services give the same variables in
//! the same order, whatever order the Services come in. The kubelet keeps
//! them in a Go map, so its order changes from one container to the next;
//! crilet's is by Service name, each Service's variables in the order
//! `FromServices` makes them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};

use super::spec;
use crate::pod::namespace;

/// The namespace of the master Services, and their names: every pod sees
/// these, whatever its namespace and `enableServiceLinks`.
const MASTER_SERVICE_NAMESPACE: &str = "default";
const MASTER_SERVICES: [&str; 1] = ["kubernetes"];

/// The variables of the Services `pod` sees among `services` (all the node
/// knows of, in any namespace): the master Service `default/kubernetes`
/// always, and with `enableServiceLinks` (the API default, so also when
/// unset) every Service of the pod's namespace, which wins over the master
/// Service of the same name. Services without a cluster IP give nothing.
/// A name two Services both make keeps its first place and the later
/// Service's value.
pub fn service_env<'a>(
    pod: &Pod,
    services: impl IntoIterator<Item = &'a Service>,
) -> Vec<(String, String)> {
    let pod_namespace = namespace(pod);
    let links = spec(pod).enable_service_links.unwrap_or(true);
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for service in services {
        if !has_cluster_ip(service) {
            continue;
        }
        let meta = &service.metadata;
        let (ns, name) = (
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref(),
        );
        let Some(name) = name else { continue };
        if ns == MASTER_SERVICE_NAMESPACE && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(service);
        } else if ns == pod_namespace && links {
            chosen.insert(name, service);
        }
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in chosen.values().flat_map(|s| from_service(s)) {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => out.push((name, value)),
        }
    }
    out
}

/// The kubelet's `IsServiceIPSet`: a cluster IP that is neither empty nor
/// "None" (headless).
fn has_cluster_ip(service: &Service) -> bool {
    let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
    !matches!(ip, None | Some("") | Some("None"))
}

/// One Service's variables: `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`
/// (the first port), `<NAME>_SERVICE_PORT_<PORT NAME>` per named port, then
/// Docker's link variables: `<NAME>_PORT` (the first port's URL) and per
/// port `<NAME>_PORT_<port>_<PROTO>` (its URL) with `_PROTO`, `_PORT` and
/// `_ADDR`. The URL brackets an IPv6 address. A Service without ports (the
/// API server refuses one with a cluster IP) gives nothing.
fn from_service(service: &Service) -> Vec<(String, String)> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    let ip = spec.cluster_ip.as_deref().unwrap_or("");
    let ports = spec.ports.as_deref().unwrap_or_default();
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    let prefix = env_var_name(service.metadata.name.as_deref().unwrap_or(""));
    let host_port = |port: i32| {
        if ip.contains(':') {
            format!("[{ip}]:{port}")
        } else {
            format!("{ip}:{port}")
        }
    };
    let service_port = format!("{prefix}_SERVICE_PORT");
    let mut out = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.to_owned()),
        (service_port.clone(), first.port.to_string()),
    ];
    for port in ports {
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let var = format!("{service_port}_{}", env_var_name(name));
            out.push((var, port.port.to_string()));
        }
    }
    for (i, port) in ports.iter().enumerate() {
        let protocol = port.protocol.as_deref().filter(|p| !p.is_empty());
        let protocol = protocol.unwrap_or("TCP");
        let (lower, upper) = (protocol.to_lowercase(), protocol.to_uppercase());
        let url = format!("{lower}://{}", host_port(port.port));
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{upper}", port.port);
        out.push((port_prefix.clone(), url));
        out.push((format!("{port_prefix}_PROTO"), lower));
        out.push((format!("{port_prefix}_PORT"), port.port.to_string()));
        out.push((format!("{port_prefix}_ADDR"), ip.to_owned()));
    }
    out
}

/// A Service or port name as a variable name: upper case, `-` as `_`.
fn env_var_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

#[cfg(test)]
#[path = "service_env_tests.rs"]
mod tests;
