//! Lifecycle hooks, termination messages and hostPath types with the real
//! binary and real containerd.

use std::time::{Duration, Instant};

use crate::agent::*;
use crate::probes::{agent_with_http, restart_count, served_status, wait_status};
use crate::support::free_port;

const LIMIT: Duration = Duration::from_secs(40);
const BUSYBOX: &str =
    "    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n";

/// A host-network pod with one container `main` and a hostPath volume
/// `host` at `/host` (the test's directory `dir`).
fn pod_with_host_dir(name: &str, grace: u32, dir: &std::path::Path, container: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  restartPolicy: Always\n  terminationGracePeriodSeconds: {grace}\n  volumes:\n  - name: host\n    hostPath:\n      path: {}\n      type: Directory\n  containers:\n  - name: main\n{BUSYBOX}    volumeMounts:\n    - name: host\n      mountPath: /host\n{container}",
        dir.display()
    )
}

fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn post_start_runs_before_the_next_step_and_a_failing_one_restarts() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let dir = tempdir("crilet-hooks-");
    // The main process waits for the file postStart writes.
    agent.write(
        "post.yaml",
        &pod_with_host_dir(
            "post",
            1,
            dir.path(),
            "    command: [sh, -c, 'while [ ! -f /tmp/hooked ]; do sleep 0.1; done; echo main-saw-hook > /host/main; exec sleep 100000']\n    lifecycle:\n      postStart:\n        exec:\n          command: [sh, -c, 'echo hooked > /tmp/hooked; echo hook > /host/hook']\n",
        ),
    );
    wait_status(&agent, port, "post", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    let main = dir.path().join("main");
    let seen = crate::support::eventually(Duration::from_secs(10), || async {
        std::fs::read_to_string(&main).ok()
    })
    .await;
    assert_eq!(seen.as_deref(), Some("main-saw-hook\n"), "{}", agent.logs());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hook")).unwrap(),
        "hook\n"
    );

    // A failing postStart: killed, logged, restarted with back-off.
    agent.write(
        "badpost.yaml",
        &pod_with_host_dir(
            "badpost",
            1,
            dir.path(),
            "    command: [sh, -c, 'exec sleep 100000']\n    lifecycle:\n      postStart:\n        exec:\n          command: [sh, -c, 'exit 7']\n",
        ),
    );
    let t = Instant::now();
    wait_status(&agent, port, "badpost", LIMIT, "two restarts", |s| {
        restart_count(s, "main") >= 2
    })
    .await;
    // The first restart is immediate, the second waits the 10 s back-off.
    assert!(
        t.elapsed() >= Duration::from_secs(9),
        "no back-off: {:?}",
        t.elapsed()
    );
    let logs = agent.logs();
    assert!(logs.contains("FailedPostStartHook"), "{logs}");
    let s = served_status(port, "badpost").unwrap();
    let c = &s.container_statuses.as_ref().unwrap()[0];
    assert!(!c.ready);
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn pre_stop_runs_before_sigterm_within_the_grace_period() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let dir = tempdir("crilet-prestop-");
    // main notes SIGTERM but does not exit on it: the kill after the rest of
    // the grace period ends it. preStop takes 3 s of the 6 s grace period.
    agent.write(
        "stop.yaml",
        &pod_with_host_dir(
            "stop",
            6,
            dir.path(),
            "    command: [sh, -c, 'trap \"echo TERM >> /host/order\" TERM; while true; do sleep 0.2; done']\n    lifecycle:\n      preStop:\n        exec:\n          command: [sh, -c, 'echo preStop >> /host/order; sleep 3']\n",
        ),
    );
    wait_status(&agent, port, "stop", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    let t = Instant::now();
    agent.remove("stop.yaml");
    wait_for(&rt, &agent, "stop", LIMIT, "removal", |v| {
        v.sandboxes.is_empty() && v.containers.is_empty()
    })
    .await;
    let took = t.elapsed();
    let order = std::fs::read_to_string(dir.path().join("order")).unwrap_or_default();
    assert_eq!(order, "preStop\nTERM\n", "{}", agent.logs());
    // preStop (3 s) counts against the 6 s: about 6 s in all, not 3 + 6.
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(8),
        "termination took {took:?}\n{}",
        agent.logs()
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn termination_messages_from_the_file_and_from_the_log() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let pod = |name: &str, container: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  restartPolicy: Never\n  containers:\n  - name: main\n{BUSYBOX}{container}"
        )
    };
    agent.write(
        "file.yaml",
        &pod(
            "file",
            "    command: [sh, -c, 'printf \"bye from the file\" > /dev/termination-log; exit 3']\n",
        ),
    );
    agent.write(
        "custom.yaml",
        &pod(
            "custom",
            "    terminationMessagePath: /tmp/why\n    command: [sh, -c, 'echo custom path > /tmp/why']\n",
        ),
    );
    agent.write(
        "fallback.yaml",
        &pod(
            "fallback",
            "    terminationMessagePolicy: FallbackToLogsOnError\n    command: [sh, -c, 'echo first; echo last words; exit 2']\n",
        ),
    );
    let message = |s: &k8s_openapi::api::core::v1::PodStatus| {
        s.container_statuses.as_ref()?[0]
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .message
            .clone()
    };
    let s = wait_status(&agent, port, "file", LIMIT, "a message", |s| {
        message(s).is_some()
    })
    .await;
    assert_eq!(message(&s).as_deref(), Some("bye from the file"));
    let s = wait_status(&agent, port, "custom", LIMIT, "a message", |s| {
        message(s).is_some()
    })
    .await;
    assert_eq!(message(&s).as_deref(), Some("custom path\n"));
    let s = wait_status(&agent, port, "fallback", LIMIT, "a message", |s| {
        message(s).is_some()
    })
    .await;
    assert_eq!(message(&s).as_deref(), Some("first\nlast words\n"));
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn host_path_types_are_checked_before_the_sandbox() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let dir = tempdir("crilet-hostpath-");
    let kubeconfig = dir.path().join("scheduler.conf");
    let volume_pod = |name: &str, path: &std::path::Path, kind: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: v\n    hostPath:\n      path: {}\n      type: {kind}\n  containers:\n  - name: main\n{BUSYBOX}    command: [sh, -c, 'exec sleep 100000']\n    volumeMounts:\n    - name: v\n      mountPath: /v\n",
            path.display()
        )
    };
    // FileOrCreate: a file, not the directory containerd would make.
    agent.write(
        "file.yaml",
        &volume_pod("file", &kubeconfig, "FileOrCreate"),
    );
    wait_status(&agent, port, "file", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    assert!(
        kubeconfig.is_file(),
        "{} is not a file",
        kubeconfig.display()
    );

    // Socket on a directory: Pending, no sandbox, the reason in the status.
    agent.write("sock.yaml", &volume_pod("sock", dir.path(), "Socket"));
    let s = wait_status(&agent, port, "sock", LIMIT, "a reason", |s| {
        format!("{s:?}").contains("not a socket")
    })
    .await;
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert!(pod_view(&rt, "sock").await.sandboxes.is_empty());
    assert!(agent.logs().contains("not a socket"), "{}", agent.logs());
}
