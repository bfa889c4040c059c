//! Probes with the real binary and real containerd: readiness reaching
//! `/pods`, `crilet pods` and the mirror pod on the real kube-apiserver, liveness restarting a hung
//! server, startup gating, a kubeadm-shaped etcd manifest, and bad probes.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::Value;

use crate::agent::*;
use crate::kube::{Lab, NodeClaim};
use crate::support::{RuntimeKind, cli, eventually, free_port, runtime_kind, try_http_get};

const LIMIT: Duration = Duration::from_secs(40);

/// An agent on the claimed node that mirrors to the real API server and
/// serves `/pods` on `http_port`.
pub fn agent_with_api(node: &NodeClaim, http_port: u16) -> AgentProcess {
    crate::mirror::start_on(
        node,
        &["--http-address".into(), format!("127.0.0.1:{http_port}")],
    )
}

/// An agent without API server, serving `/pods` on `http_port`.
pub fn agent_with_http(http_port: u16) -> AgentProcess {
    AgentProcess::start_with(&["--http-address".into(), format!("127.0.0.1:{http_port}")])
}

/// The status `/pods` reports for static pod `name` (`<name>-<its node>`).
pub fn served_status(port: u16, name: &str) -> Option<PodStatus> {
    let (code, body) = try_http_get(port, "/pods").ok()?;
    if code != 200 {
        return None;
    }
    let list: Value = serde_json::from_str(&body).ok()?;
    let item = list["items"]
        .as_array()?
        .iter()
        .find(|p| {
            let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
            p["metadata"]["name"] == format!("{name}-{node}").as_str()
        })?
        .clone();
    let pod: Pod = serde_json::from_value(item).ok()?;
    pod.status
}

pub fn condition(status: &PodStatus, kind: &str) -> Option<String> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

pub fn container_ready(status: &PodStatus, name: &str) -> Option<bool> {
    status
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.ready)
}

pub fn restart_count(status: &PodStatus, name: &str) -> i32 {
    status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)
        .map_or(0, |c| c.restart_count)
}

/// The waiting reason and message of container `name`, if it is waiting.
pub fn waiting(status: &PodStatus, name: &str) -> Option<(String, String)> {
    let c = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)?;
    let w = c.state.as_ref()?.waiting.as_ref()?;
    Some((
        w.reason.clone().unwrap_or_default(),
        w.message.clone().unwrap_or_default(),
    ))
}

/// Waits until `/pods` shows a status of `name` passing `check`.
pub async fn wait_status(
    agent: &AgentProcess,
    port: u16,
    name: &str,
    limit: Duration,
    what: &str,
    check: impl Fn(&PodStatus) -> bool,
) -> PodStatus {
    eventually(limit, || async {
        served_status(port, name).filter(|s| check(s))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "timed out after {limit:?} waiting for {what} of {name}; /pods has {:#?}\ncrilet log:\n{}",
            served_status(port, name),
            agent.logs()
        )
    })
}

fn probe_pod(name: &str, container: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n{container}"
    )
}

/// Runs `cmd` in the running container `main` of pod `name`.
pub async fn exec_in(rt: &crilet::cri::CriRuntime, agent: &AgentProcess, name: &str, cmd: &str) {
    use crilet::cri::Runtime;
    let v = agent.view(rt, name).await;
    let c = v.running("main").expect("main runs");
    let r = rt
        .exec_sync(
            &c.id,
            &["sh".into(), "-c".into(), cmd.into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(r.exit_code, 0, "{cmd}: {r:?}");
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn exec_readiness_follows_a_file_everywhere() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-7").await;
    let port = free_port();
    let agent = agent_with_api(&node, port);
    // period 1 s × failureThreshold 2: a change shows within 3 s.
    let bound = Duration::from_secs(3);
    agent.write(
        "ready.yaml",
        &probe_pod(
            "ready",
            "  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'exec sleep 100000']\n    readinessProbe:\n      exec:\n        command: [cat, /tmp/ready]\n      periodSeconds: 1\n      failureThreshold: 2\n",
        ),
    );
    // Running but not Ready: the probe fails.
    let s = wait_status(&agent, port, "ready", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    // Not Ready is also the state before any probe ran: the probe runs and
    // fails (period 1 s, failureThreshold 2) in this window, and Ready must
    // stay False; no state marks that it ran.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s2 = served_status(port, "ready").unwrap();
    assert_eq!(container_ready(&s2, "main"), Some(false), "{s:#?}");
    assert_eq!(condition(&s2, "Ready").as_deref(), Some("False"));
    let cs = s2.conditions.as_ref().unwrap();
    let ready = cs.iter().find(|c| c.type_ == "ContainersReady").unwrap();
    assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [main]")
    );

    // False → True, on /pods, the CLI and the mirror pod.
    exec_in(&rt, &agent, "ready", "touch /tmp/ready").await;
    let t = Instant::now();
    wait_status(&agent, port, "ready", LIMIT, "Ready", |s| {
        condition(s, "Ready").as_deref() == Some("True")
    })
    .await;
    let took = t.elapsed();
    assert!(took <= bound, "Ready after {took:?}, over {bound:?}");
    let sock = agent.socket();
    let (ok, out, err) = cli(&["pods", "--socket", sock.to_str().unwrap()]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.contains("ready-")).unwrap();
    assert!(line.contains(" 1/1 "), "{out}");
    let full = agent.pod_name("ready");
    let mirror_ready = || async {
        let status = lab.pod("default", &full).await.and_then(|p| p.status);
        status.and_then(|s| condition(&s, "Ready"))
    };
    let seen = eventually(bound, || async {
        (mirror_ready().await.as_deref() == Some("True")).then_some(())
    })
    .await;
    if seen.is_none() {
        panic!("mirror Ready: {:?}\n{}", mirror_ready().await, agent.logs());
    }

    // Every run is counted under the kubelet's metric names.
    let (_, metrics) = crate::support::http_get(port, "/metrics");
    for result in ["failed", "successful"] {
        let series = format!(
            "prober_probe_total{{probe_type=\"Readiness\",result=\"{result}\",container=\"main\",pod=\"{full}\",namespace=\"default\""
        );
        assert!(metrics.contains(&series), "no {series} in\n{metrics}");
    }
    assert!(
        metrics.contains("prober_probe_duration_seconds_count{probe_type=\"Readiness\""),
        "{metrics}"
    );

    // True → False.
    exec_in(&rt, &agent, "ready", "rm /tmp/ready").await;
    let t = Instant::now();
    wait_status(&agent, port, "ready", LIMIT, "not Ready", |s| {
        condition(s, "Ready").as_deref() == Some("False")
    })
    .await;
    let took = t.elapsed();
    assert!(took <= bound, "not Ready after {took:?}, over {bound:?}");
    let seen = eventually(bound, || async {
        (mirror_ready().await.as_deref() == Some("False")).then_some(())
    })
    .await;
    if seen.is_none() {
        panic!(
            "mirror not Ready: {:?}\n{}",
            mirror_ready().await,
            agent.logs()
        );
    }
    let (_, out, _) = cli(&["pods", "--socket", sock.to_str().unwrap()]);
    assert!(
        out.lines()
            .any(|l| l.contains("ready-") && l.contains(" 0/1 ")),
        "{out}"
    );
    // Readiness never restarts anything.
    assert_eq!(
        restart_count(&served_status(port, "ready").unwrap(), "main"),
        0
    );
}

/// The host PID of the process whose command line holds `needle`.
fn host_pid_of(needle: &str) -> Option<i32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) && !cmd.contains("sh -c") {
            return Some(pid);
        }
    }
    None
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn liveness_restarts_a_stopped_httpd() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let web = free_port();
    let agent = agent_with_http(port);
    let (period, failures, grace) = (1, 3, 1);
    agent.write(
        "httpd.yaml",
        &probe_pod(
            "httpd",
            &format!("  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [httpd, -f, -p, '127.0.0.1:{web}', -h, /etc]\n    livenessProbe:\n      httpGet:\n        host: 127.0.0.1\n        port: {web}\n        path: /hostname\n      periodSeconds: {period}\n      failureThreshold: {failures}\n"),
        )
        .replace("terminationGracePeriodSeconds: 1", &format!("terminationGracePeriodSeconds: {grace}")),
    );
    wait_status(&agent, port, "httpd", LIMIT, "Running and Ready", |s| {
        container_ready(s, "main") == Some(true)
    })
    .await;
    // Healthy: not restarted while it answers.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let s = served_status(port, "httpd").unwrap();
    assert_eq!(restart_count(&s, "main"), 0, "{}", agent.logs());

    let needle = format!("127.0.0.1:{web}");
    let pid = host_pid_of(&needle).expect("httpd on the host");
    // SIGSTOP: the process hangs, the socket stays open, probes time out.
    assert_eq!(send_signal(pid, "STOP"), 0);
    let t = Instant::now();
    wait_status(&agent, port, "httpd", LIMIT, "a restart", |s| {
        restart_count(s, "main") == 1 && container_ready(s, "main") == Some(true)
    })
    .await;
    let took = t.elapsed();
    // period × failureThreshold + grace + 5 s (the timeouts are 1 s each).
    let bound = Duration::from_secs(period * failures + grace + 5);
    assert!(took <= bound, "restarted after {took:?}, over {bound:?}");
    let logs = agent.logs();
    assert!(
        logs.contains("Container main failed liveness probe, will be restarted"),
        "{logs}"
    );
}

/// Sends a signal with kill(1).
fn send_signal(pid: i32, signal: &str) -> i32 {
    std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .map_or(-1, |s| s.code().unwrap_or(-1))
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn startup_probe_holds_liveness_back_and_fails_past_its_threshold() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    // Liveness always fails, but only runs once startup has succeeded.
    agent.write(
        "slow.yaml",
        &probe_pod(
            "slow",
            "  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'exec sleep 100000']\n    startupProbe:\n      exec:\n        command: [cat, /tmp/started]\n      periodSeconds: 1\n      failureThreshold: 60\n    livenessProbe:\n      exec:\n        command: ['false']\n      periodSeconds: 1\n      failureThreshold: 1\n",
        ),
    );
    // Never started: startup pending, no restart although liveness would fail.
    agent.write(
        "nostart.yaml",
        &probe_pod(
            "nostart",
            "  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'exec sleep 100000']\n    startupProbe:\n      exec:\n        command: ['false']\n      periodSeconds: 1\n      failureThreshold: 3\n",
        ),
    );
    wait_status(&agent, port, "slow", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    // Liveness would fail every second: a window in which a restart before
    // startup succeeded would show.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let s = served_status(port, "slow").unwrap();
    let c = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(c.restart_count, 0, "liveness ran before startup succeeded");
    assert_eq!(c.started, Some(false));
    assert!(!c.ready);
    // Startup failing 3 times in a row: killed and restarted.
    wait_status(&agent, port, "nostart", LIMIT, "a restart", |s| {
        restart_count(s, "main") >= 1
    })
    .await;
    assert!(
        agent
            .logs()
            .contains("Container main failed startup probe, will be restarted"),
        "{}",
        agent.logs()
    );

    // Once started, liveness runs (and fails at once here).
    exec_in(&rt, &agent, "slow", "touch /tmp/started").await;
    wait_status(&agent, port, "slow", LIMIT, "a liveness restart", |s| {
        restart_count(s, "main") >= 1
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn kubeadm_etcd_shaped_manifest_goes_ready() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let metrics = free_port();
    let data = tempfile::Builder::new()
        .prefix("crilet-etcd-")
        .tempdir()
        .unwrap();
    let data_dir = data.path().join("var-lib-etcd");
    // As kubeadm writes it: JSON→YAML, every defaultable field omitted.
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://127.0.0.1:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - sh
    - -c
    - mkdir -p /www && echo ok > /www/livez && echo ok > /www/readyz && exec httpd -f -p 127.0.0.1:{metrics} -h /www
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /livez
        port: {metrics}
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    readinessProbe:
      failureThreshold: 3
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: {metrics}
        scheme: HTTP
      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: {metrics}
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: {data_dir}
      type: DirectoryOrCreate
    name: etcd-data
status: {{}}
"#,
        data_dir = data_dir.display()
    );
    let mut args = vec!["--http-address".to_string(), format!("127.0.0.1:{port}")];
    if runtime_kind() == RuntimeKind::Crio {
        // CRI-O does not restrict oom_score_adj as containerd does, and root
        // on this machine lacks CAP_SYS_RESOURCE: the node-critical -997
        // fails every CreateContainer. crilet shows the runtime's reason...
        let agent = agent_with_http(port);
        agent.write("etcd.yaml", &manifest);
        wait_status(&agent, port, "etcd", LIMIT, "CreateContainerError", |s| {
            waiting(s, "etcd").is_some_and(|(reason, message)| {
                reason == "CreateContainerError" && message.contains("oom_score_adj")
            })
        })
        .await;
        drop(agent);
        clean_runtime(&rt).await;
        // ...and runs it with --restrict-oom-score-adj.
        args.push("--restrict-oom-score-adj".into());
    }
    let agent = AgentProcess::start_with(&args);
    agent.write("etcd.yaml", &manifest);
    // Not Ready before the startup probe has run.
    let early = wait_status(&agent, port, "etcd", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    assert_eq!(condition(&early, "Ready").as_deref(), Some("False"));
    // The startup probe's first run is 10 s after the start.
    let s = wait_status(&agent, port, "etcd", LIMIT, "Ready", |s| {
        condition(s, "Ready").as_deref() == Some("True")
    })
    .await;
    assert_eq!(restart_count(&s, "etcd"), 0);
    assert!(data_dir.is_dir(), "DirectoryOrCreate made the data dir");
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn bad_probes_are_refused_naming_file_and_field() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let main = "  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'exec sleep 100000']\n";
    let cases = [
        (
            "two-handlers",
            "    livenessProbe:\n      exec:\n        command: ['true']\n      tcpSocket:\n        port: 80\n",
            "spec.containers[0].livenessProbe",
        ),
        (
            "negative-period",
            "    readinessProbe:\n      exec:\n        command: ['true']\n      periodSeconds: -1\n",
            "spec.containers[0].readinessProbe.periodSeconds",
        ),
        (
            "liveness-success",
            "    livenessProbe:\n      exec:\n        command: ['true']\n      successThreshold: 2\n",
            "spec.containers[0].livenessProbe.successThreshold",
        ),
    ];
    for (name, probe, _) in &cases {
        agent.write(
            &format!("{name}.yaml"),
            &probe_pod(name, &format!("{main}{probe}")),
        );
    }
    agent.write(
        "bad-hostpath.yaml",
        &probe_pod("bad-hostpath", &format!("{main}    volumeMounts:\n    - name: v\n      mountPath: /v\n"))
            .replace("  containers:\n", "  volumes:\n  - name: v\n    hostPath:\n      path: /tmp\n      type: Folder\n  containers:\n"),
    );
    // A named port that does not exist: the pod runs, never goes Ready.
    agent.write(
        "noport.yaml",
        &probe_pod(
            "noport",
            &format!("{main}    readinessProbe:\n      httpGet:\n        port: metrics\n      periodSeconds: 1\n"),
        ),
    );
    agent.write("good.yaml", &probe_pod("good", main));
    wait_status(&agent, port, "good", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    wait_status(&agent, port, "noport", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    // noport must never go Ready: a window in which it would.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = served_status(port, "noport").unwrap();
    assert_eq!(container_ready(&s, "main"), Some(false));
    let logs = agent.logs();
    for (name, _, field) in &cases {
        let line = logs
            .lines()
            .find(|l| l.contains(&format!("{name}.yaml")) && l.contains(field))
            .unwrap_or_else(|| panic!("no error naming {name}.yaml and {field}:\n{logs}"));
        assert!(!line.is_empty());
        assert!(served_status(port, name).is_none(), "{name} was admitted");
    }
    assert!(
        logs.lines()
            .any(|l| l.contains("bad-hostpath.yaml") && l.contains("spec.volumes[0].hostPath.type")),
        "{logs}"
    );
    let said = logs
        .lines()
        .filter(|l| l.contains("noport") && l.contains("metrics") && l.contains("probe"))
        .count();
    assert_eq!(said, 1, "the missing port is said exactly once:\n{logs}");
}
