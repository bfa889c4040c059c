//! From a probe or hook as the spec says it (`prober`) to what
//! a handler runs: named ports looked up in the container's ports, `$(VAR)`
//! expanded in exec commands, the host chosen (the spec's, else the pod IP,
//! the node IP for host-network pods).
//!
//! Invariant: pure; an `Err` is the reason the probe could not run, which
//! the prober reports as a probe error (it changes no result).

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::handlers::{self, HookAction, HttpGetTarget, Scheme, target_host};
use crate::prober::{
    HttpGet, HttpScheme, LifecycleAction, ProbeAction, probe_command, resolve_port,
};

/// Where the pod can be reached: its IP (empty until the sandbox has one;
/// for a host-network pod it is empty and the node IP stands in).
#[derive(Debug, Clone, Copy)]
pub struct PodAddress<'a> {
    pub pod_ip: &'a str,
    pub node_ip: &'a str,
    pub host_network: bool,
}

impl PodAddress<'_> {
    fn host(&self, explicit: Option<&str>) -> Result<String, String> {
        // target_host treats an empty IP as unknown.
        target_host(
            explicit,
            Some(self.pod_ip),
            Some(self.node_ip),
            self.host_network,
        )
        .ok_or_else(|| "the pod has no IP yet".to_string())
    }
}

fn http_target(http: &HttpGet, c: &Container, addr: &PodAddress) -> Result<HttpGetTarget, String> {
    Ok(HttpGetTarget {
        scheme: match http.scheme {
            HttpScheme::Http => Scheme::Http,
            HttpScheme::Https => Scheme::Https,
        },
        host: addr.host(http.host.as_deref())?,
        port: resolve_port(&http.port, c)?,
        path: http.path.clone(),
        headers: http.headers.clone(),
    })
}

/// The handler's action for a probe of container `c`.
pub fn probe_action(
    action: &ProbeAction,
    c: &Container,
    addr: &PodAddress,
) -> Result<handlers::ProbeAction, String> {
    Ok(match action {
        ProbeAction::Exec { command } => handlers::ProbeAction::Exec {
            command: probe_command(c, command),
        },
        ProbeAction::HttpGet(http) => handlers::ProbeAction::HttpGet(http_target(http, c, addr)?),
        ProbeAction::TcpSocket(tcp) => handlers::ProbeAction::TcpSocket {
            host: addr.host(tcp.host.as_deref())?,
            port: resolve_port(&tcp.port, c)?,
        },
        // gRPC probes have no host field: always the pod IP.
        ProbeAction::Grpc { port, service } => handlers::ProbeAction::Grpc {
            host: addr.host(None)?,
            port: *port,
            service: service.clone().unwrap_or_default(),
        },
    })
}

/// The handler's action for a postStart or preStop hook of container `c`.
pub fn hook_action(
    action: &LifecycleAction,
    c: &Container,
    addr: &PodAddress,
) -> Result<HookAction, String> {
    Ok(match action {
        LifecycleAction::Exec { command } => HookAction::Exec {
            command: probe_command(c, command),
        },
        LifecycleAction::HttpGet(http) => HookAction::HttpGet(http_target(http, c, addr)?),
        LifecycleAction::Sleep { seconds } => HookAction::Sleep {
            duration: Duration::from_secs(*seconds),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prober::{PortRef, TcpSocket};
    use k8s_openapi::api::core::v1::{ContainerPort, EnvVar};

    fn container() -> Container {
        Container {
            name: "etcd".into(),
            ports: Some(vec![ContainerPort {
                name: Some("metrics".into()),
                container_port: 2381,
                ..Default::default()
            }]),
            env: Some(vec![EnvVar {
                name: "WHO".into(),
                value: Some("me".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    const HOST_NET: PodAddress = PodAddress {
        pod_ip: "",
        node_ip: "192.0.2.10",
        host_network: true,
    };

    #[test]
    fn named_ports_hosts_and_commands_are_resolved() {
        let c = container();
        let http = ProbeAction::HttpGet(HttpGet {
            host: None,
            port: PortRef::Name("metrics".into()),
            path: "/readyz".into(),
            scheme: HttpScheme::Http,
            headers: vec![],
        });
        let Ok(handlers::ProbeAction::HttpGet(t)) = probe_action(&http, &c, &HOST_NET) else {
            panic!("not resolved");
        };
        assert_eq!((t.host.as_str(), t.port), ("192.0.2.10", 2381));
        let pod_net = PodAddress {
            pod_ip: "10.88.0.5",
            node_ip: "192.0.2.10",
            host_network: false,
        };
        let tcp = ProbeAction::TcpSocket(TcpSocket {
            host: Some("127.0.0.1".into()),
            port: PortRef::Number(80),
        });
        assert_eq!(
            probe_action(&tcp, &c, &pod_net),
            Ok(handlers::ProbeAction::TcpSocket {
                host: "127.0.0.1".into(),
                port: 80
            })
        );
        let grpc = ProbeAction::Grpc {
            port: 9000,
            service: None,
        };
        assert_eq!(
            probe_action(&grpc, &c, &pod_net),
            Ok(handlers::ProbeAction::Grpc {
                host: "10.88.0.5".into(),
                port: 9000,
                service: String::new()
            })
        );
        let exec = ProbeAction::Exec {
            command: vec!["echo".into(), "$(WHO)".into()],
        };
        assert_eq!(
            probe_action(&exec, &c, &pod_net),
            Ok(handlers::ProbeAction::Exec {
                command: vec!["echo".into(), "me".into()]
            })
        );
    }

    #[test]
    fn what_cannot_be_resolved_says_why() {
        let c = container();
        let missing = ProbeAction::TcpSocket(TcpSocket {
            host: None,
            port: PortRef::Name("admin".into()),
        });
        let err = probe_action(&missing, &c, &HOST_NET).unwrap_err();
        assert!(err.contains("admin"), "{err}");
        let no_ip = PodAddress {
            pod_ip: "",
            node_ip: "192.0.2.10",
            host_network: false,
        };
        let grpc = ProbeAction::Grpc {
            port: 9000,
            service: None,
        };
        assert_eq!(
            probe_action(&grpc, &c, &no_ip).unwrap_err(),
            "the pod has no IP yet"
        );
    }

    #[test]
    fn hooks_on_host_network_pods_go_to_the_node_ip() {
        let c = container();
        let hook = LifecycleAction::HttpGet(HttpGet {
            host: None,
            port: PortRef::Number(8080),
            path: "/shutdown".into(),
            scheme: HttpScheme::Http,
            headers: vec![],
        });
        let Ok(HookAction::HttpGet(t)) = hook_action(&hook, &c, &HOST_NET) else {
            panic!("not resolved");
        };
        assert_eq!(t.host, "192.0.2.10");
        assert_eq!(
            hook_action(&LifecycleAction::Sleep { seconds: 3 }, &c, &HOST_NET),
            Ok(HookAction::Sleep {
                duration: Duration::from_secs(3)
            })
        );
    }
}
