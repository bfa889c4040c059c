use super::*;
use crate::pod::model::{ManifestError, parse_pod, validate_pod};
use k8s_openapi::api::core::v1::{GRPCAction, HTTPHeader, Lifecycle, Pod, PodSpec, SleepAction};

const ORIGIN: &str = "/etc/kubernetes/manifests/etcd.yaml";

/// etcd's probes as kubeadm writes them (every defaultable field omitted),
/// plus a named-port readiness probe and hooks of each runnable kind.
const KUBEADM: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  hostNetwork: true
  initContainers:
  - name: init
    image: busybox
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.15-0
    ports:
    - {name: probe-port, containerPort: 2381}
    livenessProbe:
      httpGet: {host: 127.0.0.1, path: /livez, port: 2381, scheme: HTTP}
      initialDelaySeconds: 10
      timeoutSeconds: 15
      failureThreshold: 8
    readinessProbe:
      httpGet: {host: 127.0.0.1, path: /readyz, port: probe-port, scheme: HTTP}
      timeoutSeconds: 15
      periodSeconds: 1
    startupProbe:
      httpGet: {host: 127.0.0.1, path: /readyz, port: 2381, scheme: HTTP}
      initialDelaySeconds: 10
      timeoutSeconds: 15
      failureThreshold: 24
    lifecycle:
      postStart:
        exec: {command: [sh, -c, 'echo started']}
      preStop:
        sleep: {seconds: 5}
";

fn base() -> Pod {
    parse_pod(ORIGIN, KUBEADM.as_bytes()).expect("kubeadm-shaped probes are valid")
}

fn spec(p: &mut Pod) -> &mut PodSpec {
    p.spec.as_mut().unwrap()
}

fn app(p: &mut Pod) -> &mut Container {
    &mut spec(p).containers[0]
}

fn init(p: &mut Pod) -> &mut Container {
    &mut spec(p).init_containers.as_mut().unwrap()[0]
}

fn live(p: &mut Pod) -> &mut Probe {
    app(p).liveness_probe.as_mut().unwrap()
}

fn ready(p: &mut Pod) -> &mut Probe {
    app(p).readiness_probe.as_mut().unwrap()
}

fn startup(p: &mut Pod) -> &mut Probe {
    app(p).startup_probe.as_mut().unwrap()
}

fn http(probe: &mut Probe) -> &mut HTTPGetAction {
    probe.http_get.as_mut().unwrap()
}

fn lifecycle(p: &mut Pod) -> &mut Lifecycle {
    app(p).lifecycle.as_mut().unwrap()
}

fn post_start(p: &mut Pod) -> &mut LifecycleHandler {
    lifecycle(p).post_start.as_mut().unwrap()
}

fn pre_stop(p: &mut Pod) -> &mut LifecycleHandler {
    lifecycle(p).pre_stop.as_mut().unwrap()
}

fn exec(command: &[&str]) -> Option<ExecAction> {
    Some(ExecAction {
        command: Some(command.iter().map(|s| s.to_string()).collect()),
    })
}

fn tcp(port: IntOrString) -> Option<TCPSocketAction> {
    Some(TCPSocketAction { host: None, port })
}

fn http_get(port: i32) -> Option<HTTPGetAction> {
    Some(HTTPGetAction {
        port: IntOrString::Int(port),
        ..HTTPGetAction::default()
    })
}

/// A probe with only a handler: everything else omitted.
fn tcp_probe() -> Option<Probe> {
    Some(Probe {
        tcp_socket: tcp(IntOrString::Int(80)),
        ..Probe::default()
    })
}

#[test]
fn kubeadm_probes_and_other_valid_shapes_pass() {
    type Edit = fn(&mut Pod);
    let cases: Vec<(&str, Edit)> = vec![
        ("as kubeadm writes them", |_| {}),
        ("a sidecar with probes and hooks", |p| {
            let (probe, hooks) = (app(p).liveness_probe.clone(), app(p).lifecycle.clone());
            let c = init(p);
            c.restart_policy = Some("Always".into());
            (c.liveness_probe, c.startup_probe) = (probe.clone(), probe);
            c.lifecycle = hooks;
        }),
        ("omitted period, thresholds, scheme and path", |p| {
            *live(p) = Probe {
                http_get: http_get(2381),
                ..Probe::default()
            };
        }),
        ("explicit zeros mean the defaults", |p| {
            let l = live(p);
            (l.period_seconds, l.timeout_seconds) = (Some(0), Some(0));
            (l.success_threshold, l.failure_threshold) = (Some(0), Some(0));
            l.initial_delay_seconds = Some(0);
            http(l).path = Some(String::new());
            http(l).scheme = Some(String::new());
        }),
        ("liveness successThreshold 1 spelled out", |p| {
            live(p).success_threshold = Some(1)
        }),
        ("readiness successThreshold 3", |p| {
            ready(p).success_threshold = Some(3)
        }),
        ("probe grace on liveness and startup", |p| {
            live(p).termination_grace_period_seconds = Some(1);
            startup(p).termination_grace_period_seconds = Some(60);
        }),
        ("exec probe", |p| {
            *ready(p) = Probe {
                exec: exec(&["cat", "/tmp/ready"]),
                ..Probe::default()
            };
        }),
        ("tcpSocket by name", |p| {
            *live(p) = Probe {
                tcp_socket: tcp(IntOrString::String("probe-port".into())),
                ..Probe::default()
            };
        }),
        ("grpc with a service", |p| {
            *live(p) = Probe {
                grpc: Some(GRPCAction {
                    port: 2379,
                    service: Some("etcd".into()),
                }),
                ..Probe::default()
            };
        }),
        ("https with headers", |p| {
            let h = http(live(p));
            h.scheme = Some("HTTPS".into());
            h.http_headers = Some(vec![HTTPHeader {
                name: "X-Custom-Header".into(),
                value: "".into(),
            }]);
        }),
        (
            "named port absent from ports (the prober reports it)",
            |p| http(ready(p)).port = IntOrString::String("nope".into()),
        ),
        ("httpGet and sleep 0 hooks", |p| {
            post_start(p).exec = None;
            post_start(p).http_get = http_get(8080);
            pre_stop(p).sleep = Some(SleepAction { seconds: 0 });
        }),
        ("sleep up to the pod's grace period", |p| {
            spec(p).termination_grace_period_seconds = Some(60);
            pre_stop(p).sleep = Some(SleepAction { seconds: 60 });
        }),
        ("probes and hooks on a restartable init container", |p| {
            let i = init(p);
            i.restart_policy = Some("Always".into());
            i.startup_probe = tcp_probe();
            i.lifecycle = Some(Lifecycle {
                pre_stop: Some(LifecycleHandler {
                    exec: exec(&["true"]),
                    ..LifecycleHandler::default()
                }),
                ..Lifecycle::default()
            });
        }),
    ];
    for (what, edit) in cases {
        let mut pod = base();
        edit(&mut pod);
        assert_eq!(validate_pod(ORIGIN, &pod), Ok(()), "{what}");
    }
}

/// The error names the origin and the field; returns the message.
fn refused(pod: &Pod, field: &str) -> String {
    let err: ManifestError = validate_pod(ORIGIN, pod).expect_err(field);
    assert_eq!(err.origin, ORIGIN);
    assert_eq!(err.field.as_deref(), Some(field), "{err}");
    let text = err.to_string();
    assert!(text.starts_with(&format!("{ORIGIN}: {field}: ")), "{text}");
    err.message
}

#[test]
fn each_bad_probe_or_hook_is_refused_naming_its_field() {
    type Edit = fn(&mut Pod);
    const C: &str = "spec.containers[0]";
    let cases: Vec<(Edit, String, &str)> = vec![
        (
            |p| http(live(p)).port = IntOrString::Int(0),
            format!("{C}.livenessProbe.httpGet.port"),
            "0 is not in 1..=65535",
        ),
        (
            |p| http(live(p)).port = IntOrString::Int(65536),
            format!("{C}.livenessProbe.httpGet.port"),
            "65536",
        ),
        (
            |p| http(ready(p)).port = IntOrString::String("2381".into()),
            format!("{C}.readinessProbe.httpGet.port"),
            "not a valid port name",
        ),
        (
            |p| http(ready(p)).port = IntOrString::String("Probe_Port".into()),
            format!("{C}.readinessProbe.httpGet.port"),
            "not a valid port name",
        ),
        (
            |p| http(live(p)).scheme = Some("http".into()),
            format!("{C}.livenessProbe.httpGet.scheme"),
            "\"http\" is not one of",
        ),
        (
            |p| {
                http(live(p)).http_headers = Some(vec![HTTPHeader {
                    name: "Bad Header".into(),
                    value: "x".into(),
                }])
            },
            format!("{C}.livenessProbe.httpGet.httpHeaders[0].name"),
            "not a valid HTTP header name",
        ),
        (
            |p| live(p).http_get = None,
            format!("{C}.livenessProbe"),
            "must specify a handler type (one of exec, httpGet, tcpSocket, grpc)",
        ),
        (
            |p| live(p).tcp_socket = tcp(IntOrString::Int(2381)),
            format!("{C}.livenessProbe"),
            "more than 1 handler type (found httpGet, tcpSocket)",
        ),
        (
            |p| {
                let r = ready(p);
                r.exec = exec(&["true"]);
                r.grpc = Some(GRPCAction {
                    port: 1,
                    service: None,
                });
            },
            format!("{C}.readinessProbe"),
            "found exec, httpGet, grpc",
        ),
        (
            |p| startup(p).success_threshold = Some(2),
            format!("{C}.startupProbe.successThreshold"),
            "must be 1 for startupProbe, found 2",
        ),
        (
            |p| live(p).success_threshold = Some(3),
            format!("{C}.livenessProbe.successThreshold"),
            "must be 1 for livenessProbe",
        ),
        (
            |p| ready(p).termination_grace_period_seconds = Some(10),
            format!("{C}.readinessProbe.terminationGracePeriodSeconds"),
            "must not be set for readinessProbe",
        ),
        (
            |p| live(p).termination_grace_period_seconds = Some(0),
            format!("{C}.livenessProbe.terminationGracePeriodSeconds"),
            "greater than 0, found 0",
        ),
        (
            |p| startup(p).termination_grace_period_seconds = Some(-1),
            format!("{C}.startupProbe.terminationGracePeriodSeconds"),
            "greater than 0, found -1",
        ),
        (
            |p| ready(p).period_seconds = Some(-1),
            format!("{C}.readinessProbe.periodSeconds"),
            "at least 1 (0 or absent means the default, 10), found -1",
        ),
        (
            |p| live(p).timeout_seconds = Some(-15),
            format!("{C}.livenessProbe.timeoutSeconds"),
            "default, 1), found -15",
        ),
        (
            |p| ready(p).success_threshold = Some(-2),
            format!("{C}.readinessProbe.successThreshold"),
            "found -2",
        ),
        (
            |p| startup(p).failure_threshold = Some(-24),
            format!("{C}.startupProbe.failureThreshold"),
            "default, 3), found -24",
        ),
        (
            |p| live(p).initial_delay_seconds = Some(-10),
            format!("{C}.livenessProbe.initialDelaySeconds"),
            "must not be negative, found -10",
        ),
        (
            |p| {
                *ready(p) = Probe {
                    exec: Some(ExecAction { command: None }),
                    ..Probe::default()
                }
            },
            format!("{C}.readinessProbe.exec.command"),
            "is required",
        ),
        (
            |p| {
                *ready(p) = Probe {
                    exec: exec(&[]),
                    ..Probe::default()
                }
            },
            format!("{C}.readinessProbe.exec.command"),
            "is required",
        ),
        (
            |p| {
                *live(p) = Probe {
                    tcp_socket: tcp(IntOrString::Int(-1)),
                    ..Probe::default()
                }
            },
            format!("{C}.livenessProbe.tcpSocket.port"),
            "-1 is not in 1..=65535",
        ),
        (
            |p| {
                *live(p) = Probe {
                    grpc: Some(GRPCAction {
                        port: 70000,
                        service: None,
                    }),
                    ..Probe::default()
                }
            },
            format!("{C}.livenessProbe.grpc.port"),
            "70000 is not in 1..=65535",
        ),
        (
            |p| init(p).liveness_probe = tcp_probe(),
            "spec.initContainers[0].livenessProbe".into(),
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
        (
            |p| {
                init(p).lifecycle = Some(Lifecycle {
                    post_start: Some(LifecycleHandler {
                        exec: exec(&["true"]),
                        ..LifecycleHandler::default()
                    }),
                    ..Lifecycle::default()
                })
            },
            "spec.initContainers[0].lifecycle".into(),
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
        (
            |p| {
                init(p).restart_policy = Some("Always".into());
                init(p).liveness_probe = tcp_probe();
                init(p).liveness_probe.as_mut().unwrap().success_threshold = Some(2);
            },
            "spec.initContainers[0].livenessProbe.successThreshold".into(),
            "must be 1",
        ),
        (
            |p| post_start(p).exec = None,
            format!("{C}.lifecycle.postStart"),
            "must specify a handler type (one of exec, httpGet, tcpSocket, sleep)",
        ),
        (
            |p| pre_stop(p).exec = exec(&["true"]),
            format!("{C}.lifecycle.preStop"),
            "more than 1 handler type (found exec, sleep)",
        ),
        (
            |p| {
                post_start(p).exec = None;
                post_start(p).tcp_socket = tcp(IntOrString::Int(80));
            },
            format!("{C}.lifecycle.postStart.tcpSocket"),
            "deprecated for lifecycle hooks",
        ),
        (
            |p| post_start(p).exec = exec(&[]),
            format!("{C}.lifecycle.postStart.exec.command"),
            "is required",
        ),
        (
            |p| {
                pre_stop(p).sleep = None;
                pre_stop(p).http_get = http_get(0);
            },
            format!("{C}.lifecycle.preStop.httpGet.port"),
            "0 is not in 1..=65535",
        ),
        (
            |p| pre_stop(p).sleep = Some(SleepAction { seconds: -1 }),
            format!("{C}.lifecycle.preStop.sleep.seconds"),
            "between 0 and terminationGracePeriodSeconds (30), found -1",
        ),
        (
            |p| pre_stop(p).sleep = Some(SleepAction { seconds: 31 }),
            format!("{C}.lifecycle.preStop.sleep.seconds"),
            "(30), found 31",
        ),
        (
            |p| {
                spec(p).termination_grace_period_seconds = Some(3);
                pre_stop(p).sleep = Some(SleepAction { seconds: 5 });
            },
            format!("{C}.lifecycle.preStop.sleep.seconds"),
            "(3), found 5",
        ),
    ];
    for (edit, field, words) in cases {
        let mut pod = base();
        edit(&mut pod);
        let message = refused(&pod, &field);
        assert!(message.contains(words), "{field}: {message}");
    }
}

/// An init container that is not a sidecar may have no probe and no
/// lifecycle: each one set is refused whole, in the API server's order and
/// words (checked against kube-apiserver 1.32 with a server-side dry run).
#[test]
fn probes_and_hooks_on_an_init_container_need_restart_policy_always() {
    let mut pod = base();
    let c = init(&mut pod);
    c.liveness_probe = tcp_probe();
    c.readiness_probe = tcp_probe();
    c.startup_probe = tcp_probe();
    c.lifecycle = Some(Lifecycle::default());
    let problems = crate::pod::model::pod_problems(&pod);
    let forbidden = "Forbidden: may not be set for init containers without restartPolicy=Always";
    let want: Vec<(String, String)> = [
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
    ]
    .iter()
    .map(|f| (format!("spec.initContainers[0].{f}"), forbidden.to_string()))
    .collect();
    assert_eq!(problems, want);
    // As a sidecar the same container is valid.
    init(&mut pod).restart_policy = Some("Always".into());
    init(&mut pod).lifecycle = None;
    validate_pod(ORIGIN, &pod).expect("a sidecar may have probes");
}

#[test]
fn a_bad_probe_in_a_pod_list_item_names_the_item() {
    let list = format!(
        "apiVersion: v1\nkind: PodList\nitems:\n- {}",
        serde_json::to_string(&{
            let mut p = base();
            live(&mut p).period_seconds = Some(-1);
            p
        })
        .unwrap()
    );
    let err = crate::pod::model::parse_pods(ORIGIN, list.as_bytes()).unwrap_err();
    assert_eq!(
        err.field.as_deref(),
        Some("items[0].spec.containers[0].livenessProbe.periodSeconds")
    );
}
