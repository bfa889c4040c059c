use super::*;
use std::time::Duration;

use k8s_openapi::api::core::v1::LifecycleHandler;
use serde_json::json;

fn probe(v: serde_json::Value) -> Probe {
    serde_json::from_value(v).unwrap()
}

fn container(v: serde_json::Value) -> Container {
    serde_json::from_value(v).unwrap()
}

#[test]
fn names_and_labels() {
    let rows = [
        (ProbeType::Liveness, "Liveness", ProbeResult::Success),
        (ProbeType::Readiness, "Readiness", ProbeResult::Failure),
        (ProbeType::Startup, "Startup", ProbeResult::Unknown),
    ];
    for (kind, name, initial) in rows {
        assert_eq!(kind.as_str(), name);
        assert_eq!(kind.initial_result(), initial);
    }
    assert_eq!(ProbeType::ALL.len(), 3);
    let results = [
        (ProbeResult::Success, "Success", "successful"),
        (ProbeResult::Failure, "Failure", "failed"),
        (ProbeResult::Unknown, "Unknown", "unknown"),
    ];
    for (result, name, label) in results {
        assert_eq!((result.as_str(), result.metric_label()), (name, label));
    }
    let c = container(json!({"name": "a", "readinessProbe": {"tcpSocket": {"port": 1}}}));
    assert!(ProbeType::Readiness.probe_of(&c).is_some());
    assert!(ProbeType::Liveness.probe_of(&c).is_none());
}

#[test]
fn started_and_ready_from_probe_results() {
    use ProbeResult::{Failure, Success, Unknown};
    let on = |id: &str, result| {
        Some(ProbeReading {
            container_id: Some(id.into()),
            result,
        })
    };
    let never = Some(ProbeReading {
        container_id: None,
        result: Failure,
    });
    let results = |readiness, startup| Some(ContainerProbeResults { readiness, startup });
    // (running, probes, started, ready); the current instance is "c1".
    let rows: Vec<(bool, Option<ContainerProbeResults>, bool, bool)> = vec![
        (true, None, true, true),
        (false, None, false, false),
        (true, results(None, None), true, true),
        (true, results(on("c1", Failure), None), true, false),
        (true, results(on("c1", Success), None), true, true),
        (false, results(on("c1", Success), None), false, false),
        // A result about the previous instance, or none yet: not ready.
        (true, results(on("c0", Success), None), true, false),
        (true, results(never.clone(), None), true, false),
        // Startup pending: neither started nor ready, whatever readiness says.
        (true, results(None, on("c1", Unknown)), false, false),
        (
            true,
            results(on("c1", Success), on("c1", Unknown)),
            false,
            false,
        ),
        (true, results(None, on("c1", Failure)), false, false),
        (true, results(None, on("c0", Success)), false, false),
        (true, results(None, never), false, false),
        (true, results(None, on("c1", Success)), true, true),
        (
            true,
            results(on("c1", Failure), on("c1", Success)),
            true,
            false,
        ),
        (
            true,
            results(on("c1", Success), on("c1", Success)),
            true,
            true,
        ),
        (
            false,
            results(on("c1", Success), on("c1", Success)),
            false,
            false,
        ),
    ];
    for (running, probes, started, ready) in rows {
        let got = container_readiness(running, "c1", probes.as_ref());
        assert_eq!(got, Readiness { started, ready }, "{running} {probes:?}");
    }
}

#[test]
fn spec_from_a_kubeadm_probe_gets_the_defaults() {
    // etcd's liveness probe as kubeadm writes it (nothing defaulted).
    let p = probe(json!({
        "httpGet": {"host": "127.0.0.1", "path": "/livez", "port": 2381, "scheme": "HTTP"},
        "initialDelaySeconds": 10, "timeoutSeconds": 15, "failureThreshold": 8
    }));
    let spec = ProbeSpec::from_probe(&p).unwrap();
    assert_eq!(
        spec,
        ProbeSpec {
            initial_delay: Duration::from_secs(10),
            period: Duration::from_secs(10),
            timeout: Duration::from_secs(15),
            success_threshold: 1,
            failure_threshold: 8,
            termination_grace_period_seconds: None,
            action: ProbeAction::HttpGet(HttpGet {
                host: Some("127.0.0.1".into()),
                port: PortRef::Number(2381),
                path: "/livez".into(),
                scheme: HttpScheme::Http,
                headers: vec![],
            }),
        }
    );
    let bare = ProbeSpec::from_probe(&probe(json!({"tcpSocket": {"port": "metrics"}}))).unwrap();
    assert_eq!(bare.initial_delay, Duration::ZERO);
    assert_eq!(
        (bare.period, bare.timeout),
        (Duration::from_secs(10), Duration::from_secs(1))
    );
    assert_eq!((bare.success_threshold, bare.failure_threshold), (1, 3));
    assert_eq!(
        bare.action,
        ProbeAction::TcpSocket(TcpSocket {
            host: None,
            port: PortRef::Name("metrics".into())
        })
    );
}

#[test]
fn spec_actions_of_each_kind() {
    let rows = [
        (
            json!({"exec": {"command": ["cat", "$(F)"]}, "terminationGracePeriodSeconds": 5}),
            ProbeAction::Exec {
                command: vec!["cat".into(), "$(F)".into()],
            },
        ),
        (
            json!({"httpGet": {"port": "http", "host": "", "path": "healthz", "scheme": "HTTPS",
                   "httpHeaders": [{"name": "Host", "value": "x"}, {"name": "A", "value": "1"}]}}),
            ProbeAction::HttpGet(HttpGet {
                host: None,
                port: PortRef::Name("http".into()),
                path: "/healthz".into(),
                scheme: HttpScheme::Https,
                headers: vec![("Host".into(), "x".into()), ("A".into(), "1".into())],
            }),
        ),
        (
            json!({"tcpSocket": {"port": 6443, "host": "10.0.0.1"}}),
            ProbeAction::TcpSocket(TcpSocket {
                host: Some("10.0.0.1".into()),
                port: PortRef::Number(6443),
            }),
        ),
        (
            json!({"grpc": {"port": 2379, "service": "etcd"}}),
            ProbeAction::Grpc {
                port: 2379,
                service: Some("etcd".into()),
            },
        ),
    ];
    for (p, want) in &rows {
        let spec = ProbeSpec::from_probe(&probe(p.clone())).unwrap();
        assert_eq!(&spec.action, want, "{p}");
    }
    let grace = ProbeSpec::from_probe(&probe(rows[0].0.clone())).unwrap();
    assert_eq!(grace.termination_grace_period_seconds, Some(5));
}

#[test]
fn spec_refuses_what_cannot_run() {
    let rows = [
        (json!({}), "exactly one"),
        (
            json!({"exec": {"command": ["a"]}, "tcpSocket": {"port": 1}}),
            "exactly one",
        ),
        (json!({"exec": {"command": []}}), "command"),
        (json!({"exec": {}}), "command"),
        (json!({"tcpSocket": {"port": 0}}), "port 0"),
        (json!({"httpGet": {"port": 65536}}), "port 65536"),
        (json!({"httpGet": {"port": 80, "scheme": "ftp"}}), "scheme"),
        (json!({"grpc": {"port": -1}}), "port -1"),
        (json!({"tcpSocket": {"port": ""}}), "empty"),
        (
            json!({"tcpSocket": {"port": 1}, "periodSeconds": -1}),
            "periodSeconds",
        ),
        (
            json!({"tcpSocket": {"port": 1}, "initialDelaySeconds": -1}),
            "initialDelaySeconds",
        ),
    ];
    for (p, words) in rows {
        let err = ProbeSpec::from_probe(&probe(p.clone())).unwrap_err();
        assert!(err.contains(words), "{p}: {err}");
    }
}

#[test]
fn named_ports_resolve_to_the_container_port() {
    let c = container(json!({"name": "etcd", "ports": [
        {"name": "client", "containerPort": 2379},
        {"name": "metrics", "containerPort": 2381, "hostPort": 12381}
    ]}));
    let rows: [(PortRef, Result<u16, &str>); 5] = [
        (PortRef::Number(8080), Ok(8080)),
        (PortRef::Name("metrics".into()), Ok(2381)),
        (PortRef::Name("client".into()), Ok(2379)),
        // The kubelet's last resort: a name that is a number.
        (PortRef::Name("9090".into()), Ok(9090)),
        (
            PortRef::Name("http".into()),
            Err("port \"http\" not found in the ports of container \"etcd\""),
        ),
    ];
    for (port, want) in rows {
        assert_eq!(
            resolve_port(&port, &c),
            want.map_err(String::from),
            "{port:?}"
        );
    }
}

#[test]
fn exec_commands_expand_only_static_env_values() {
    let c = container(json!({"name": "a", "env": [
        {"name": "DIR", "value": "/etc"},
        {"name": "FILE", "value": "$(DIR)/x"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "DIR", "value": "/var"}
    ]}));
    let cmd = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let rows = [
        (cmd(&["cat", "$(DIR)/ok"]), cmd(&["cat", "/var/ok"])),
        // Values are not expanded themselves.
        (cmd(&["$(FILE)"]), cmd(&["$(DIR)/x"])),
        // valueFrom entries have no static value: the empty string.
        (cmd(&["ping", "$(POD_IP)"]), cmd(&["ping", ""])),
        (
            cmd(&["$(NOPE)", "$$(DIR)", "$"]),
            cmd(&["$(NOPE)", "$(DIR)", "$"]),
        ),
        (cmd(&[]), cmd(&[])),
    ];
    for (command, want) in rows {
        assert_eq!(probe_command(&c, &command), want, "{command:?}");
    }
}

#[test]
fn lifecycle_actions() {
    let handler = |v: serde_json::Value| -> LifecycleHandler { serde_json::from_value(v).unwrap() };
    let ok = [
        (
            json!({"exec": {"command": ["sh", "-c", "$(X)"]}}),
            LifecycleAction::Exec {
                command: vec!["sh".into(), "-c".into(), "$(X)".into()],
            },
        ),
        (
            json!({"httpGet": {"port": 8080}}),
            LifecycleAction::HttpGet(HttpGet {
                host: None,
                port: PortRef::Number(8080),
                path: "/".into(),
                scheme: HttpScheme::Http,
                headers: vec![],
            }),
        ),
        (
            json!({"sleep": {"seconds": 0}}),
            LifecycleAction::Sleep { seconds: 0 },
        ),
        (
            json!({"sleep": {"seconds": 15}}),
            LifecycleAction::Sleep { seconds: 15 },
        ),
    ];
    for (h, want) in ok {
        assert_eq!(
            LifecycleAction::from_handler(&handler(h.clone())),
            Ok(want),
            "{h}"
        );
    }
    let bad = [
        (json!({"tcpSocket": {"port": 80}}), "tcpSocket"),
        (json!({}), "exactly one"),
        (
            json!({"exec": {"command": ["a"]}, "sleep": {"seconds": 1}}),
            "exactly one",
        ),
        (json!({"sleep": {"seconds": -1}}), "negative"),
        (json!({"exec": {"command": []}}), "command"),
    ];
    for (h, words) in bad {
        let err = LifecycleAction::from_handler(&handler(h.clone())).unwrap_err();
        assert!(err.contains(words), "{h}: {err}");
    }
}

#[test]
fn http_get_urls() {
    let get = |path: &str, scheme| HttpGet {
        host: None,
        port: PortRef::Number(1),
        path: path.into(),
        scheme,
        headers: vec![],
    };
    let rows = [
        (
            get("/livez", HttpScheme::Http),
            "127.0.0.1",
            2381,
            "http://127.0.0.1:2381/livez",
        ),
        (
            get("/", HttpScheme::Https),
            "::1",
            6443,
            "https://[::1]:6443/",
        ),
        (
            get("/a?b=c", HttpScheme::Http),
            "[::1]",
            80,
            "http://[::1]:80/a?b=c",
        ),
    ];
    for (g, host, port, want) in rows {
        assert_eq!(g.url(host, port), want);
    }
}
