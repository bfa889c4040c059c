//! Which address a probe or hook dials. Pure.
//!
//! Invariant: an empty string counts as unset everywhere (the API's
//! default for `host`), and an answer is never an empty host.

/// The host an httpGet / tcpSocket handler dials: its `host` if set, else
/// the pod's IP; a host-network pod's IP is the node's IP (the kubelet
/// reports `status.podIP` = the node's primary IP for those), so the node IP
/// wins there. gRPC probes have no `host` and pass `None`.
///
/// The same rule serves lifecycle hooks. The kubelet takes a hook's default
/// host from the runtime's sandbox status instead, which is empty for a
/// host-network sandbox, so an httpGet hook without `host` fails on every
/// static pod (upstream bug kubernetes/kubernetes#134285); we use the node
/// IP and the hook works.
///
/// `None` when no address is known yet (a pod-network pod before its
/// sandbox has an IP): the driver reports that as `ProbeOutcome::Error`
/// (or a failed hook) rather than dialling nowhere.
pub fn target_host(
    explicit: Option<&str>,
    pod_ip: Option<&str>,
    node_ip: Option<&str>,
    host_network: bool,
) -> Option<String> {
    fn set(s: Option<&str>) -> Option<&str> {
        s.filter(|s| !s.is_empty())
    }
    if let Some(host) = set(explicit) {
        return Some(host.to_string());
    }
    let found = if host_network {
        set(node_ip).or(set(pod_ip))
    } else {
        set(pod_ip)
    };
    found.map(str::to_string)
}

/// `host:port`, with an IPv6 address in brackets (Go's `net.JoinHostPort`);
/// a host already in brackets is kept as it is.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_host_then_pod_ip_then_node_ip_for_host_network() {
        // (host, pod IP, node IP, hostNetwork, want); "" is unset.
        let cases = [
            ("db.local", "10.0.0.5", "192.0.2.1", false, "db.local"),
            ("db.local", "", "192.0.2.1", true, "db.local"),
            ("", "10.0.0.5", "192.0.2.1", false, "10.0.0.5"),
            // Host network: the node's IP, even when a pod IP is passed.
            ("", "10.0.0.5", "192.0.2.1", true, "192.0.2.1"),
            ("", "192.0.2.1", "", true, "192.0.2.1"),
            ("", "", "192.0.2.1", true, "192.0.2.1"),
            // Nothing known: no address, never an empty one.
            ("", "", "192.0.2.1", false, ""),
            ("", "", "", true, ""),
        ];
        for (explicit, pod_ip, node_ip, host_network, want) in cases {
            let want = Some(want).filter(|w| !w.is_empty());
            assert_eq!(
                target_host(Some(explicit), Some(pod_ip), Some(node_ip), host_network).as_deref(),
                want,
                "{explicit:?} {pod_ip:?} {node_ip:?} {host_network}"
            );
            let none = |s: &'static str| Some(s).filter(|s| !s.is_empty());
            assert_eq!(
                target_host(none(explicit), none(pod_ip), none(node_ip), host_network).as_deref(),
                want
            );
        }
    }

    #[test]
    fn ipv6_hosts_are_bracketed_once() {
        assert_eq!(join_host_port("10.0.0.5", 80), "10.0.0.5:80");
        assert_eq!(join_host_port("localhost", 8080), "localhost:8080");
        assert_eq!(join_host_port("::1", 443), "[::1]:443");
        assert_eq!(join_host_port("fd00::5", 9), "[fd00::5]:9");
        assert_eq!(join_host_port("[::1]", 443), "[::1]:443");
    }
}
