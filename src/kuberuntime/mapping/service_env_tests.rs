//! Table tests of the service variables: their names and values as the
//! kubelet's `FromServices` makes them, which Services a pod sees, and how
//! they merge with the container's own env (precedence and `$(VAR)`).

use super::*;
use crate::cri::CgroupDriver;
use crate::cri::types::DnsConfig;
use crate::kuberuntime::mapping::{ContainerStart, NodeContext, container_config};
use serde_json::{Value, json};

/// A Service; each port is (name, port, protocol), "" for unset.
fn svc(namespace: &str, name: &str, ip: &str, ports: &[(&str, i32, &str)]) -> Service {
    let ports: Vec<Value> = (ports.iter())
        .map(|(n, port, proto)| {
            let mut p = json!({"port": port});
            if !n.is_empty() {
                p["name"] = json!(n);
            }
            if !proto.is_empty() {
                p["protocol"] = json!(proto);
            }
            p
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterIP": ip, "ports": ports}
    }))
    .unwrap()
}

fn master() -> Service {
    svc(
        "default",
        "kubernetes",
        "10.96.0.1",
        &[("https", 443, "TCP")],
    )
}

/// A pod in `namespace` with `enableServiceLinks` as given (None: unset)
/// and one container "app" with `container`'s fields.
fn pod_in(namespace: &str, links: Option<bool>, container: Value) -> Pod {
    let mut c = json!({"name": "app", "image": "busybox"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut spec = json!({"containers": [c]});
    if let Some(links) = links {
        spec["enableServiceLinks"] = json!(links);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "web-node-1", "namespace": namespace, "uid": "u1"},
        "spec": spec
    }))
    .unwrap()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    (list.iter())
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// What the kubelet gave every container of a pod in `default` on the
/// lab's API server (its CreateContainer, read back with crictl inspect).
const MASTER_VARS: [(&str, &str); 8] = [
    ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
    ("KUBERNETES_SERVICE_PORT", "443"),
    ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
    ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
    ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
    ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
    ("KUBERNETES_PORT_443_TCP_PORT", "443"),
    ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
];

#[test]
fn each_service_gives_the_kubelets_variables() {
    struct Case {
        what: &'static str,
        service: Service,
        want: Vec<(&'static str, &'static str)>,
    }
    let cases = [
        Case {
            what: "the master Service",
            service: master(),
            want: MASTER_VARS.to_vec(),
        },
        Case {
            what: "an unnamed port, protocol unset (TCP), a name with dashes",
            service: svc("default", "my-db-1", "10.96.0.30", &[("", 5432, "")]),
            want: vec![
                ("MY_DB_1_SERVICE_HOST", "10.96.0.30"),
                ("MY_DB_1_SERVICE_PORT", "5432"),
                ("MY_DB_1_PORT", "tcp://10.96.0.30:5432"),
                ("MY_DB_1_PORT_5432_TCP", "tcp://10.96.0.30:5432"),
                ("MY_DB_1_PORT_5432_TCP_PROTO", "tcp"),
                ("MY_DB_1_PORT_5432_TCP_PORT", "5432"),
                ("MY_DB_1_PORT_5432_TCP_ADDR", "10.96.0.30"),
            ],
        },
        Case {
            what: "several named ports, UDP, SCTP: the first port is the default",
            service: svc(
                "default",
                "dns",
                "10.96.0.10",
                &[
                    ("dns", 53, "UDP"),
                    ("dns-tcp", 53, "TCP"),
                    ("metrics", 9153, "SCTP"),
                ],
            ),
            want: vec![
                ("DNS_SERVICE_HOST", "10.96.0.10"),
                ("DNS_SERVICE_PORT", "53"),
                ("DNS_SERVICE_PORT_DNS", "53"),
                ("DNS_SERVICE_PORT_DNS_TCP", "53"),
                ("DNS_SERVICE_PORT_METRICS", "9153"),
                ("DNS_PORT", "udp://10.96.0.10:53"),
                ("DNS_PORT_53_UDP", "udp://10.96.0.10:53"),
                ("DNS_PORT_53_UDP_PROTO", "udp"),
                ("DNS_PORT_53_UDP_PORT", "53"),
                ("DNS_PORT_53_UDP_ADDR", "10.96.0.10"),
                ("DNS_PORT_53_TCP", "tcp://10.96.0.10:53"),
                ("DNS_PORT_53_TCP_PROTO", "tcp"),
                ("DNS_PORT_53_TCP_PORT", "53"),
                ("DNS_PORT_53_TCP_ADDR", "10.96.0.10"),
                ("DNS_PORT_9153_SCTP", "sctp://10.96.0.10:9153"),
                ("DNS_PORT_9153_SCTP_PROTO", "sctp"),
                ("DNS_PORT_9153_SCTP_PORT", "9153"),
                ("DNS_PORT_9153_SCTP_ADDR", "10.96.0.10"),
            ],
        },
        Case {
            what: "an IPv6 cluster IP is bracketed in the URLs only",
            service: svc("default", "v6", "fd00:10:96::1", &[("https", 443, "TCP")]),
            want: vec![
                ("V6_SERVICE_HOST", "fd00:10:96::1"),
                ("V6_SERVICE_PORT", "443"),
                ("V6_SERVICE_PORT_HTTPS", "443"),
                ("V6_PORT", "tcp://[fd00:10:96::1]:443"),
                ("V6_PORT_443_TCP", "tcp://[fd00:10:96::1]:443"),
                ("V6_PORT_443_TCP_PROTO", "tcp"),
                ("V6_PORT_443_TCP_PORT", "443"),
                ("V6_PORT_443_TCP_ADDR", "fd00:10:96::1"),
            ],
        },
        Case {
            what: "headless: nothing",
            service: svc("default", "headless", "None", &[("web", 80, "TCP")]),
            want: vec![],
        },
        Case {
            what: "no cluster IP (ExternalName): nothing",
            service: svc("default", "external", "", &[("web", 80, "TCP")]),
            want: vec![],
        },
        Case {
            what: "no ports (the API server refuses it): nothing",
            service: svc("default", "portless", "10.96.0.40", &[]),
            want: vec![],
        },
    ];
    let pod = pod_in("default", None, json!({}));
    for case in cases {
        let got = service_env(&pod, [&case.service]);
        assert_eq!(got, pairs(&case.want), "{}", case.what);
    }
}

#[test]
fn a_pod_sees_the_master_service_and_its_own_namespaces() {
    let services = [
        master(),
        svc("web", "cache", "10.96.0.21", &[("", 6379, "TCP")]),
        svc("web", "headless", "None", &[("", 80, "TCP")]),
        svc("other", "db", "10.96.0.22", &[("", 5432, "TCP")]),
        svc("default", "front", "10.96.0.23", &[("", 80, "TCP")]),
    ];
    let host = |vars: &[(String, String)]| -> Vec<String> {
        (vars.iter())
            .filter(|(n, _)| n.ends_with("_SERVICE_HOST"))
            .map(|(n, _)| n.clone())
            .collect()
    };
    struct Case {
        what: &'static str,
        namespace: &'static str,
        links: Option<bool>,
        want: Vec<&'static str>,
    }
    let cases = [
        Case {
            what: "links unset (the API default): its namespace's Services and the master",
            namespace: "web",
            links: None,
            want: vec!["CACHE_SERVICE_HOST", "KUBERNETES_SERVICE_HOST"],
        },
        Case {
            what: "links on",
            namespace: "web",
            links: Some(true),
            want: vec!["CACHE_SERVICE_HOST", "KUBERNETES_SERVICE_HOST"],
        },
        Case {
            what: "links off: the master Service only",
            namespace: "web",
            links: Some(false),
            want: vec!["KUBERNETES_SERVICE_HOST"],
        },
        Case {
            what: "kube-system with links off: still the master Service",
            namespace: "kube-system",
            links: Some(false),
            want: vec!["KUBERNETES_SERVICE_HOST"],
        },
        Case {
            what: "in default: all of default's",
            namespace: "default",
            links: None,
            want: vec!["FRONT_SERVICE_HOST", "KUBERNETES_SERVICE_HOST"],
        },
        Case {
            what: "in default, links off: the master Service only",
            namespace: "default",
            links: Some(false),
            want: vec!["KUBERNETES_SERVICE_HOST"],
        },
        Case {
            what: "a namespace without Services",
            namespace: "empty",
            links: None,
            want: vec!["KUBERNETES_SERVICE_HOST"],
        },
    ];
    for case in cases {
        let pod = pod_in(case.namespace, case.links, json!({}));
        let got = service_env(&pod, &services);
        assert_eq!(host(&got), case.want, "{}", case.what);
        assert_eq!(
            got.iter().find(|(n, _)| n == "KUBERNETES_SERVICE_HOST"),
            Some(&("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into())),
            "{}",
            case.what
        );
    }
    // Standalone: no Services, no variables.
    assert!(service_env(&pod_in("web", None, json!({})), []).is_empty());
}

#[test]
fn a_kubernetes_service_of_the_pods_namespace_wins_with_links_on() {
    let own = svc("web", "kubernetes", "10.96.0.50", &[("", 8443, "TCP")]);
    for services in [[master(), own.clone()], [own.clone(), master()]] {
        let on = service_env(&pod_in("web", Some(true), json!({})), &services);
        assert_eq!(
            on[0],
            ("KUBERNETES_SERVICE_HOST".into(), "10.96.0.50".into())
        );
        assert_eq!(on.len(), 7, "one Service's variables: {on:?}");
        let off = service_env(&pod_in("web", Some(false), json!({})), &services);
        assert_eq!(off, pairs(&MASTER_VARS));
    }
}

#[test]
fn the_order_is_by_service_name_whatever_order_they_come_in() {
    let a = svc("web", "alpha", "10.96.0.2", &[("", 1, "TCP")]);
    let b = svc("web", "beta", "10.96.0.3", &[("", 2, "TCP")]);
    let pod = pod_in("web", None, json!({}));
    let forward = service_env(&pod, [&a, &master(), &b]);
    let backward = service_env(&pod, [&b, &master(), &a]);
    assert_eq!(forward, backward);
    let hosts: Vec<&str> = (forward.iter())
        .filter(|(n, _)| n.ends_with("_SERVICE_HOST"))
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        hosts,
        [
            "ALPHA_SERVICE_HOST",
            "BETA_SERVICE_HOST",
            "KUBERNETES_SERVICE_HOST"
        ]
    );
}

#[test]
fn a_name_two_services_make_keeps_its_place_and_the_later_value() {
    // foo's FOO_PORT_80_TCP_PORT is "80"; foo-port-80-tcp's own `_PORT`
    // variable has the same name.
    let foo = svc("web", "foo", "10.96.0.2", &[("", 80, "TCP")]);
    let other = svc("web", "foo-port-80-tcp", "10.96.0.3", &[("", 81, "TCP")]);
    let got = service_env(&pod_in("web", Some(true), json!({})), [&other, &foo]);
    let at: Vec<usize> = (got.iter().enumerate())
        .filter(|(_, (n, _))| n == "FOO_PORT_80_TCP_PORT")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at, [5], "once, in foo's place: {got:?}");
    assert_eq!(got[5].1, "tcp://10.96.0.3:81");
}

fn ctx() -> NodeContext {
    NodeContext {
        node_name: "node-1".into(),
        root_dir: "/var/lib/crilet".into(),
        cgroup_root: "/".into(),
        cgroup_driver: CgroupDriver::Cgroupfs,
        host_dns: DnsConfig::default(),
        host_ip: "192.168.1.10".into(),
        memory_capacity: 1 << 30,
        oom_score_adj_floor: None,
        ..Default::default()
    }
}

/// The container's env as CreateContainer carries it, with the master
/// Service and web/cache known.
fn envs_of(pod: &Pod) -> Vec<(String, String)> {
    let services = [
        master(),
        svc("web", "cache", "10.96.0.21", &[("", 6379, "TCP")]),
    ];
    let service_env = service_env(pod, &services);
    let c = &pod.spec.as_ref().unwrap().containers[0];
    let config = container_config(
        &ctx(),
        pod,
        c,
        &ContainerStart {
            pod_ip: "10.88.0.5",
            service_env: &service_env,
            ..ContainerStart::default()
        },
    );
    config.unwrap().envs
}

#[test]
fn the_containers_own_env_comes_first_and_wins() {
    struct Case {
        what: &'static str,
        env: Value,
        /// The container's own entries, in this order, before the service
        /// variables it does not set.
        own: Vec<(&'static str, &'static str)>,
    }
    let cases = [
        Case {
            what: "no env: the service variables alone",
            env: json!([]),
            own: vec![],
        },
        Case {
            what: "its own value overrides a service variable, in its own place",
            env: json!([{"name": "A", "value": "1"},
                        {"name": "KUBERNETES_SERVICE_HOST", "value": "my-api"}]),
            own: vec![("A", "1"), ("KUBERNETES_SERVICE_HOST", "my-api")],
        },
        Case {
            what: "$(VAR) finds a service variable",
            env: json!([{"name": "API",
                         "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
                        {"name": "CACHE", "value": "$(CACHE_PORT)"}]),
            own: vec![
                ("API", "https://10.96.0.1:443"),
                ("CACHE", "tcp://10.96.0.21:6379"),
            ],
        },
        Case {
            what: "$(VAR) finds its own earlier entry before a service variable",
            env: json!([{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
                        {"name": "API", "value": "$(KUBERNETES_SERVICE_PORT)"}]),
            own: vec![("KUBERNETES_SERVICE_PORT", "6443"), ("API", "6443")],
        },
        Case {
            what: "an own entry defined later is not seen yet: the service's value is",
            env: json!([{"name": "API", "value": "$(KUBERNETES_SERVICE_PORT)"},
                        {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]),
            own: vec![("API", "443"), ("KUBERNETES_SERVICE_PORT", "6443")],
        },
        Case {
            what: "an unknown name and $$ stay as written",
            env: json!([{"name": "X", "value": "$(NOPE) $$(KUBERNETES_PORT)"}]),
            own: vec![("X", "$(NOPE) $(KUBERNETES_PORT)")],
        },
        Case {
            what: "a downward API value overrides a service variable too",
            env: json!([{"name": "KUBERNETES_PORT",
                         "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]),
            own: vec![("KUBERNETES_PORT", "10.88.0.5")],
        },
    ];
    for case in cases {
        let pod = pod_in("web", None, json!({"env": case.env}));
        let got = envs_of(&pod);
        let own = pairs(&case.own);
        assert_eq!(got[..own.len()], own[..], "{}", case.what);
        let mut want_rest = service_env(
            &pod,
            &[
                master(),
                svc("web", "cache", "10.96.0.21", &[("", 6379, "TCP")]),
            ],
        );
        want_rest.retain(|(n, _)| !own.iter().any(|(o, _)| o == n));
        assert_eq!(got[own.len()..], want_rest[..], "{}", case.what);
    }
}

#[test]
fn command_and_args_expand_service_variables() {
    let pod = pod_in(
        "web",
        Some(false),
        json!({"command": ["sh", "-c", "echo $(KUBERNETES_SERVICE_HOST)"],
               "args": ["$(KUBERNETES_PORT_443_TCP_PORT)", "$(CACHE_SERVICE_HOST)"]}),
    );
    let service_env = service_env(&pod, &[master()]);
    let c = &pod.spec.as_ref().unwrap().containers[0];
    let config = container_config(
        &ctx(),
        &pod,
        c,
        &ContainerStart {
            service_env: &service_env,
            ..ContainerStart::default()
        },
    )
    .unwrap();
    assert_eq!(config.command, ["sh", "-c", "echo 10.96.0.1"]);
    // Links off: web/cache is not seen, so its reference stays.
    assert_eq!(config.args, ["443", "$(CACHE_SERVICE_HOST)"]);
    assert_eq!(config.envs, pairs(&MASTER_VARS));
}

#[test]
fn services_do_not_change_the_container_hash() {
    let pod = pod_in("web", None, json!({}));
    let c = &pod.spec.as_ref().unwrap().containers[0];
    let with = container_config(
        &ctx(),
        &pod,
        c,
        &ContainerStart {
            service_env: &pairs(&MASTER_VARS),
            ..ContainerStart::default()
        },
    )
    .unwrap();
    let without = container_config(
        &ctx(),
        &pod,
        c,
        &ContainerStart {
            service_env: &[],
            ..ContainerStart::default()
        },
    )
    .unwrap();
    assert_eq!(with.annotations, without.annotations);
    assert_ne!(with.envs, without.envs);
}
