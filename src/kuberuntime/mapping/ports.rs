//! The sandbox's port mappings (`pkg/kubelet/kuberuntime/kuberuntime_sandbox.go`
//! `generatePodSandboxConfig` over `kubecontainer.MakePortMappings`,
//! `pkg/kubelet/container/helpers.go`). Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. Every port of every app
//! container is listed, with or without a hostPort, in spec order; within
//! one container a port whose name (given, or made of its family,
//! protocol, host IP and ports) repeats an earlier one is left out.

use std::collections::HashSet;
use std::net::IpAddr;

use super::*;

/// The sandbox's port mappings: each app container's ports in order (init
/// containers have none that count), hostPort 0 where none is set.
pub(super) fn port_mappings(spec: &PodSpec) -> Vec<PortMapping> {
    spec.containers
        .iter()
        .flat_map(container_port_mappings)
        .collect()
}

/// `MakePortMappings` for one container.
fn container_port_mappings(c: &Container) -> Vec<PortMapping> {
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for p in c.ports.iter().flatten() {
        let protocol = p.protocol.as_deref().unwrap_or("TCP");
        let host_ip = p.host_ip.as_deref().unwrap_or("");
        let host_port = p.host_port.unwrap_or(0);
        let name = match p.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => name.to_owned(),
            None => format!(
                "{}-{protocol}-{host_ip}:{}:{host_port}",
                ip_family(host_ip),
                p.container_port
            ),
        };
        if !names.insert(name) {
            continue;
        }
        out.push(PortMapping {
            protocol: match protocol {
                "UDP" => Protocol::Udp,
                "SCTP" => Protocol::Sctp,
                // The kubelet maps anything else to TCP too.
                _ => Protocol::Tcp,
            },
            container_port: p.container_port,
            host_port,
            host_ip: host_ip.to_owned(),
        });
    }
    out
}

/// "any" without a host IP, "v6" for an IPv6 address (not an IPv4-mapped
/// one), else "v4", as the kubelet tells duplicate ports of different
/// families apart.
fn ip_family(host_ip: &str) -> &'static str {
    match host_ip.parse::<IpAddr>() {
        _ if host_ip.is_empty() => "any",
        Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => "v6",
        _ => "v4",
    }
}
