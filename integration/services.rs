//! Service environment variables with the real binary, the real runtime and
//! the real kube-apiserver, as the kubelet v1.32 gives them (compared side
//! by side on containerd 1.6): every container of a static pod sees the
//! master Service `default/kubernetes` (10.96.0.1 on the lab's server), and
//! with `enableServiceLinks` (the default) the Services of its namespace;
//! its own env wins over a service variable and its `$(VAR)`s find them;
//! headless Services give nothing; a container gets the Services known when
//! it is created, followed by one watch. Without an API server, nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use crilet::cri::{CriRuntime, Runtime};
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use crate::agent::*;
use crate::kube::Lab;

const LIMIT: Duration = Duration::from_secs(60);

/// The tests' own namespace, kept between runs (no controller-manager
/// would finish deleting it).
const NS: &str = "crilet-services";

/// The Services this test makes in [`NS`]; leftovers of an earlier run go.
const SERVICES: [&str; 3] = ["web-front", "headless", "late"];

/// What every container on the lab's API server gets from the master
/// Service (the kubelet's CreateContainer carried exactly these).
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

fn service(name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}))
        .unwrap()
}

/// A pod in [`NS`] whose container prints nothing and sleeps, with
/// `extra_spec` (indented spec lines) and `env` (a YAML flow list).
fn env_pod(name: &str, extra_spec: &str, env: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {NS}\nspec:\n  terminationGracePeriodSeconds: 1\n{extra_spec}  containers:\n  - name: app\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sleep, '100000']\n    env: {env}\n"
    )
}

/// The environment of the running container `app` of pod `name`.
async fn environment(
    rt: &CriRuntime,
    agent: &AgentProcess,
    name: &str,
) -> BTreeMap<String, String> {
    let v = wait_for(rt, agent, name, LIMIT, "its container running", |v| {
        v.running("app").is_some()
    })
    .await;
    let id = &v.running("app").unwrap().id;
    let r = rt
        .exec_sync(id, &["env".to_string()], Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        r.exit_code,
        0,
        "env: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8_lossy(&r.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The names of the Services whose variables `env` holds.
fn services_in(env: &BTreeMap<String, String>) -> Vec<&str> {
    (env.keys())
        .filter_map(|k| k.strip_suffix("_SERVICE_HOST"))
        .collect()
}

fn assert_master_vars(env: &BTreeMap<String, String>, except: &[&str], what: &str) {
    for (name, value) in MASTER_VARS.iter().filter(|(n, _)| !except.contains(n)) {
        assert_eq!(
            env.get(*name).map(String::as_str),
            Some(*value),
            "{what}: {name} in {env:#?}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime and the real kube-apiserver (scripts/test.sh)"]
async fn static_pods_get_the_service_variables_of_the_api_server() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    lab.ensure_namespace(NS).await;
    for name in SERVICES {
        lab.delete_service(NS, name).await;
    }
    let front = lab
        .create_service(&service(
            "web-front",
            json!({"ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        ))
        .await;
    let ip = front.spec.unwrap().cluster_ip.expect("a cluster IP");
    lab.create_service(&service(
        "headless",
        json!({"clusterIP": "None", "ports": [{"port": 80}]}),
    ))
    .await;

    let node = lab.claim("crilet-node-18").await;
    let agent = crate::mirror::start_on(&node, &[]);
    agent.write(
        "links.yaml",
        &env_pod(
            "links",
            "",
            "[{name: KUBERNETES_SERVICE_PORT, value: '6443'}, \
             {name: API, value: '$(KUBERNETES_SERVICE_HOST):$(WEB_FRONT_SERVICE_PORT_HTTP)'}, \
             {name: PORT, value: '$(KUBERNETES_SERVICE_PORT)'}]",
        ),
    );
    agent.write(
        "nolinks.yaml",
        &env_pod("nolinks", "  enableServiceLinks: false\n", "[]"),
    );

    // Links on: the master Service and the namespace's, the pod's own
    // value first, and its references resolved.
    let env = environment(&rt, &agent, "links").await;
    assert_eq!(services_in(&env), ["KUBERNETES", "WEB_FRONT"], "{env:#?}");
    assert_master_vars(&env, &["KUBERNETES_SERVICE_PORT"], "links");
    let want = [
        ("KUBERNETES_SERVICE_PORT", "6443".to_string()),
        ("API", "10.96.0.1:80".into()),
        ("PORT", "6443".into()),
        ("WEB_FRONT_SERVICE_HOST", ip.clone()),
        ("WEB_FRONT_SERVICE_PORT", "80".into()),
        ("WEB_FRONT_SERVICE_PORT_HTTP", "80".into()),
        ("WEB_FRONT_SERVICE_PORT_DNS", "53".into()),
        ("WEB_FRONT_PORT", format!("tcp://{ip}:80")),
        ("WEB_FRONT_PORT_80_TCP", format!("tcp://{ip}:80")),
        ("WEB_FRONT_PORT_80_TCP_PROTO", "tcp".into()),
        ("WEB_FRONT_PORT_80_TCP_PORT", "80".into()),
        ("WEB_FRONT_PORT_80_TCP_ADDR", ip.clone()),
        ("WEB_FRONT_PORT_53_UDP", format!("udp://{ip}:53")),
        ("WEB_FRONT_PORT_53_UDP_PROTO", "udp".into()),
        ("WEB_FRONT_PORT_53_UDP_PORT", "53".into()),
        ("WEB_FRONT_PORT_53_UDP_ADDR", ip.clone()),
    ];
    for (name, value) in &want {
        assert_eq!(env.get(*name), Some(value), "{name} in {env:#?}");
    }

    // Links off: the master Service alone.
    let env = environment(&rt, &agent, "nolinks").await;
    assert_eq!(services_in(&env), ["KUBERNETES"], "{env:#?}");
    assert_master_vars(&env, &[], "nolinks");

    // The watch follows: a Service deleted and one created are what a
    // container created afterwards sees; a running one keeps its own.
    lab.delete_service(NS, "web-front").await;
    lab.create_service(&service("late", json!({"ports": [{"port": 8080}]})))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    agent.write("later.yaml", &env_pod("later", "", "[]"));
    let env = environment(&rt, &agent, "later").await;
    assert_eq!(services_in(&env), ["KUBERNETES", "LATE"], "{env:#?}");
    let env = environment(&rt, &agent, "links").await;
    assert_eq!(services_in(&env), ["KUBERNETES", "WEB_FRONT"], "{env:#?}");

    for name in SERVICES {
        lab.delete_service(NS, name).await;
    }
    drop(agent);
    clean_runtime(&rt).await;
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn standalone_static_pods_get_no_service_variables() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write(
        "alone.yaml",
        &env_pod(
            "alone",
            "",
            "[{name: X, value: '$(KUBERNETES_SERVICE_HOST)'}]",
        ),
    );
    let env = environment(&rt, &agent, "alone").await;
    assert!(services_in(&env).is_empty(), "{env:#?}");
    assert_eq!(
        env.get("X").map(String::as_str),
        Some("$(KUBERNETES_SERVICE_HOST)")
    );
    drop(agent);
    clean_runtime(&rt).await;
}
