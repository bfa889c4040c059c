//! What an operator types, end to end: `kubectl logs`, `exec`, `attach` and
//! `port-forward` on the mirror pod of a static pod go through the real
//! kube-apiserver, which dials crilet's kubelet server with its
//! kubelet-client certificate (CN kube-apiserver-kubelet-client, O
//! system:masters) at the Node's InternalIP and daemon endpoint port. And
//! RBAC decides: the API server refuses a user without `nodes/proxy`, and
//! crilet's own SubjectAccessReview lets one with it through.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::agent::*;
use crate::kube::{Lab, NodeClaim};
use crate::mirror::{mirror_of, start_on};

const LIMIT: Duration = Duration::from_secs(60);

fn kubectl_bin() -> String {
    std::env::var("CRILET_KUBECTL").expect(
        "CRILET_KUBECTL is not set: scripts/test.sh sets it from ../shared/lab/bin.sh kubectl",
    )
}

fn admin_kubeconfig() -> PathBuf {
    PathBuf::from(std::env::var("CRILET_KUBE_ADMIN_KUBECONFIG").expect("the real API server"))
}

fn kubectl(args: &[&str]) -> Command {
    let mut c = Command::new(kubectl_bin());
    c.arg("--kubeconfig").arg(admin_kubeconfig()).args(args);
    c
}

pub fn run(args: &[&str]) -> Output {
    kubectl(args).output().expect("run kubectl")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A child whose stdout lines are read until `want` returns true or the
/// time runs out; the child is killed either way.
fn read_until(mut child: Child, limit: Duration, want: impl Fn(&[String]) -> bool) -> Vec<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let mut lines = Vec::new();
    while !want(&lines) {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn numbers(lines: &[String]) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("line ")?.trim().parse().ok())
        .collect()
}

const MANIFEST: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: debug
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: talker
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'i=0; while true; do echo "line $i"; i=$((i+1)); sleep 0.2; done']
  - name: crasher
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'echo "run $(cat /proc/sys/kernel/random/uuid)"; sleep 2; exit 1']
  - name: web
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'mkdir -p /www && echo hello-from-the-pod > /www/index.html && exec httpd -f -p 8080 -h /www']
"#;

/// An agent on `node` with its kubelet server on a free loopback port,
/// trusting the lab CA for client certificates (as kubeadm's kubelet
/// trusts the cluster CA); returns it and the port.
fn agent_with_server(node: &NodeClaim) -> (AgentProcess, u16) {
    let port = free_port();
    let ca = node.kubeconfig.parent().unwrap().join("pki/ca.crt");
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--address",
        "127.0.0.1",
        "--client-ca-file",
        ca.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    (start_on(node, &args), port)
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime, the real kube-apiserver and kubectl (scripts/test.sh)"]
async fn kubectl_logs_exec_attach_port_forward_on_a_static_pod() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-11").await;
    let (agent, _port) = agent_with_server(&node);
    agent.write("debug.yaml", MANIFEST);
    let full = agent.pod_name("debug");
    mirror_of(
        &lab,
        &agent,
        "debug",
        "Running with a restarted crasher",
        |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| {
                    cs.iter().all(|c| {
                        c.state.as_ref().is_some_and(|s| s.running.is_some()) || c.name == "crasher"
                    }) && cs
                        .iter()
                        .any(|c| c.name == "crasher" && c.restart_count >= 1)
                })
        },
    )
    .await;

    // kubectl logs --tail: the last two lines, in order.
    let out = run(&["logs", &full, "-c", "talker", "--tail=2"]);
    assert!(
        out.status.success(),
        "kubectl logs: {}\ncrilet:\n{}",
        text(&out.stderr),
        agent.logs()
    );
    let lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    let n = numbers(&lines);
    assert_eq!(n.len(), 2, "{lines:?}");
    assert_eq!(n[1], n[0] + 1, "{lines:?}");

    // kubectl logs -f: new lines keep coming.
    let child = kubectl(&["logs", "-f", &full, "-c", "talker", "--tail=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = read_until(child, Duration::from_secs(20), |l| numbers(l).len() >= 4);
    let n = numbers(&lines);
    assert!(n.len() >= 4, "kubectl logs -f gave {lines:?}");
    assert!(n.windows(2).all(|w| w[1] == w[0] + 1), "{lines:?}");

    // kubectl logs --previous: the crashed instance's output, not the current one's.
    let prev = run(&["logs", &full, "-c", "crasher", "--previous"]);
    assert!(
        prev.status.success(),
        "kubectl logs --previous: {}",
        text(&prev.stderr)
    );
    assert!(
        text(&prev.stdout).starts_with("run "),
        "{}",
        text(&prev.stdout)
    );
    let refused = run(&["logs", &full, "-c", "nope"]);
    assert!(!refused.status.success());

    // kubectl exec: output on both streams and the exit status.
    let out = run(&[
        "exec",
        &full,
        "-c",
        "talker",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(
        text(&out.stdout),
        "out\n",
        "stderr: {}\ncrilet:\n{}",
        text(&out.stderr),
        agent.logs()
    );
    assert!(text(&out.stderr).contains("err"), "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));

    // kubectl exec with stdin.
    let out = with_stdin(
        &["exec", "-i", &full, "-c", "talker", "--", "cat"],
        b"through stdin\n",
    );
    assert_eq!(
        text(&out.stdout),
        "through stdin\n",
        "{}",
        text(&out.stderr)
    );

    // kubectl attach: the running process's output.
    let child = kubectl(&["attach", &full, "-c", "talker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = read_until(child, Duration::from_secs(20), |l| numbers(l).len() >= 2);
    assert!(
        numbers(&lines).len() >= 2,
        "kubectl attach gave {lines:?}\ncrilet:\n{}",
        agent.logs()
    );

    // kubectl port-forward to the pod's httpd.
    let local = free_port();
    let mut child = kubectl(&[
        "port-forward",
        &format!("pod/{full}"),
        &format!("{local}:8080"),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let body = crate::support::eventually(Duration::from_secs(20), || async {
        let mut s = TcpStream::connect(("127.0.0.1", local)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
            .ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).ok()?;
        body.contains("hello-from-the-pod").then_some(body)
    })
    .await;
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(
        body.is_some(),
        "no answer through kubectl port-forward: {}\ncrilet:\n{}",
        text(&out.stderr),
        agent.logs()
    );
}

/// kubectl `args` with `input` on its stdin, to the end.
fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = kubectl(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn apply(yaml: &str) {
    let out = with_stdin(&["apply", "-f", "-"], yaml.as_bytes());
    assert!(out.status.success(), "kubectl apply: {}", text(&out.stderr));
}

fn token(namespace: &str) -> String {
    let out = run(&["create", "token", "default", "-n", namespace]);
    assert!(
        out.status.success(),
        "kubectl create token: {}",
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

/// `curl` straight to crilet's server (its certificate is self-signed, as
/// the API server does not verify it either); returns (status, body).
fn curl_crilet(port: u16, path: &str, token: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "-o", "-", "-w", "\n%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let all = text(&out.stdout);
    let (body, code) = all.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime, the real kube-apiserver and kubectl (scripts/test.sh)"]
async fn nodes_proxy_rights_decide_on_the_api_server_and_on_crilet() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-11").await;
    let (agent, port) = agent_with_server(&node);
    let wait_node =
        crate::support::eventually(LIMIT, || async { lab.node(&node.name).await }).await;
    assert!(
        wait_node.is_some(),
        "no Node {}:\n{}",
        node.name,
        agent.logs()
    );

    // The ServiceAccount kube-system/default has no rights at all; the one
    // in default gets nodes/proxy (as `kubectl` users debugging nodes do).
    apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: crilet-test-node-proxy\nrules:\n- apiGroups: [\"\"]\n  resources: [nodes/proxy]\n  verbs: [get, create]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: crilet-test-node-proxy\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: crilet-test-node-proxy\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: default\n",
    );
    let allowed = token("default");
    let denied = token("kube-system");
    let raw = format!("/api/v1/nodes/{}/proxy/healthz", node.name);

    // Through the API server: it checks nodes/proxy for the user itself.
    // A kubeconfig-less kubectl, so that the admin's certificate is not sent.
    let kubeconfig = std::fs::read_to_string(admin_kubeconfig()).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .expect("a server in the admin kubeconfig")
        .trim()
        .to_string();
    let ca = node.kubeconfig.parent().unwrap().join("pki/ca.crt");
    let as_user = |t: &str| {
        Command::new(kubectl_bin())
            .args([
                "--kubeconfig",
                "/dev/null",
                "--server",
                &server,
                "--token",
                t,
            ])
            .arg("--certificate-authority")
            .arg(&ca)
            .args(["get", "--raw", &raw])
            .output()
            .unwrap()
    };
    let out = as_user(&denied);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Forbidden") || text(&out.stderr).contains("forbidden"),
        "{}",
        text(&out.stderr)
    );
    // With the right, the API server's authorization lets the user through;
    // it then refuses to proxy to a node whose address is loopback ("address
    // not allowed"), which is all this lab's nodes have: so the proxying
    // itself is checked with `kubectl logs/exec` above, which do not go
    // through nodes/proxy.
    let out = as_user(&allowed);
    assert!(
        !text(&out.stderr).to_lowercase().contains("forbidden")
            && text(&out.stderr).contains("address not allowed"),
        "nodes/proxy through the API server with the right: {} {}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // Straight to crilet with the token: TokenReview, then crilet's own
    // SubjectAccessReview on nodes/proxy.
    let (code, body) = curl_crilet(port, "/healthz", &allowed);
    assert_eq!(
        (code, body.as_str()),
        (200, "ok"),
        "crilet:\n{}",
        agent.logs()
    );
    let (code, body) = curl_crilet(port, "/healthz", &denied);
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("user=system:serviceaccount:kube-system:default")
            && body.contains("subresource(s)=[proxy]"),
        "{body}"
    );
    let (code, _) = curl_crilet(port, "/healthz", "not-a-token");
    assert_eq!(code, 401);
}
