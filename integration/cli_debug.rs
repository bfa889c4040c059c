//! `crilet exec` and `crilet logs` as an operator runs them: the real
//! binary against a real `crilet run` on the agent tests' containerd.
//! Output and exit status pass through; pods are found by namespace/name,
//! name, static UID and mirror UID (the mirror from the API server double:
//! only its UID matters here); unknown pods and containers are refused
//! naming them, with exit status 1.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::agent::*;
use crate::apiserver::ApiServer;
use crate::support::eventually;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs the crilet binary: (exit status, stdout, stderr).
fn crilet(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `crilet exec POD [flags] --socket S -- CMD...`.
fn exec(
    agent: &AgentProcess,
    pod: &str,
    flags: &[&str],
    cmd: &[&str],
) -> (Option<i32>, String, String) {
    let socket = agent.socket();
    let mut args = vec!["exec", pod, "--socket", socket.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(cmd);
    crilet(&args)
}

/// A pod of two busybox containers, `main` and `side`, whose PID 1s
/// differ (`sleep 100001` and `sleep 100002`), so that output tells which
/// container a command ran in.
fn two_containers(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{annotations}spec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100001\"]\n  - name: side\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"100002\"]\n"
    )
}

const PID1: &[&str] = &["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"];

async fn running(agent: &AgentProcess, name: &str, containers: &[&str]) -> String {
    let rt = agent_runtime();
    let v = wait_for(&rt, agent, name, LIMIT, "its containers running", |v| {
        containers.iter().all(|c| v.running(c).is_some())
    })
    .await;
    v.uid().expect("a sandbox with the pod's UID")
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn exec_passes_output_and_exit_status_and_finds_the_container() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write("dbg.yaml", &two_containers("dbg", ""));
    agent.write(
        "dflt.yaml",
        &two_containers(
            "dflt",
            "  annotations:\n    kubectl.kubernetes.io/default-container: side\n",
        ),
    );
    agent.write(
        "solo.yaml",
        &busybox_pod("solo", "Always", "exec sleep 100003"),
    );
    let uid = running(&agent, "dbg", &["main", "side"]).await;
    running(&agent, "dflt", &["main", "side"]).await;
    running(&agent, "solo", &["main"]).await;
    let dbg = agent.pod_name("dbg");

    // Output on both streams and the exit status, as kubectl exec.
    let (code, out, err) = exec(
        &agent,
        &dbg,
        &["-c", "main"],
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
    );
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(3), "out\n", "err\n")
    );
    let (code, out, err) = exec(&agent, &dbg, &["-c", "main"], &["true"]);
    assert_eq!((code, out.as_str(), err.as_str()), (Some(0), "", ""));
    // A big output comes through whole (past tonic's default 4 MiB).
    let (code, out, err) = exec(
        &agent,
        &dbg,
        &["-c", "main"],
        &["sh", "-c", "head -c 6000000 /dev/zero | tr '\\0' a"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.len() == 6_000_000 && out.bytes().all(|b| b == b'a'),
        "{}",
        out.len()
    );

    // Every way of naming the pod, and each container by name.
    let by_ns = format!("default/{dbg}");
    for pod in [dbg.as_str(), by_ns.as_str(), uid.as_str()] {
        for (c, pid1) in [("main", "sleep 100001 "), ("side", "sleep 100002 ")] {
            let (code, out, err) = exec(&agent, pod, &["-c", c], PID1);
            assert_eq!((code, out.as_str()), (Some(0), pid1), "{pod} -c {c}: {err}");
        }
    }
    // Defaulted: the only container; the annotated one.
    let (code, out, err) = exec(&agent, &agent.pod_name("solo"), &[], PID1);
    assert_eq!((code, out.as_str()), (Some(0), "sleep 100003 "), "{err}");
    let (code, out, err) = exec(&agent, &agent.pod_name("dflt"), &[], PID1);
    assert_eq!((code, out.as_str()), (Some(0), "sleep 100002 "), "{err}");

    // Refusals name what was asked for, and exit 1.
    let (code, out, err) = exec(&agent, &dbg, &[], &["true"]);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert!(
        err.contains(&format!(
            "a container name must be specified for pod \"{dbg}\", choose one of: [main side]"
        )),
        "{err}"
    );
    let (code, _, err) = exec(&agent, &dbg, &["-c", "nope"], &["true"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("container \"nope\" is not in pod default/{dbg}")),
        "{err}"
    );
    let (code, _, err) = exec(&agent, "default/nope", &["-c", "main"], &["true"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no pod managed by crilet matches pod default/nope"),
        "{err}"
    );
    let (code, _, err) = exec(&agent, &"f".repeat(32), &[], &["true"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("pod with UID \"{}\"", "f".repeat(32))),
        "{err}"
    );
    // A command that does not exist: the runtime's answer, not a hang.
    let (code, _, err) = exec(&agent, &dbg, &["-c", "main"], &["/no/such/binary"]);
    assert_ne!(code, Some(0), "{err}");
    // A command that outlives --timeout is cut, and said so.
    let started = std::time::Instant::now();
    let (code, _, err) = exec(
        &agent,
        &dbg,
        &["-c", "main", "--timeout", "1s"],
        &["sleep", "30"],
    );
    assert!(started.elapsed() < Duration::from_secs(20), "not cut");
    // The runtime ends it with DEADLINE_EXCEEDED, which crilet names; but
    // when the command is killed as the deadline passes (containerd 2.1
    // under load), the runtime answers with the killed command's status,
    // which crilet passes on as kubectl would.
    match code {
        Some(1) => assert!(
            err.contains("did not finish within its timeout of 1s"),
            "{err}"
        ),
        Some(0) | None => panic!("a command cut by --timeout exited with {code:?}: {err}"),
        Some(_) => {}
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn exec_finds_a_pod_by_its_mirror_uid() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    let agent = crate::mirror_faults::start(&api);
    agent.write(
        "mirrored.yaml",
        &busybox_pod("mirrored", "Always", "exec sleep 100004"),
    );
    let static_uid = running(&agent, "mirrored", &["main"]).await;
    let mirror =
        crate::mirror_faults::mirror_of(&api, &agent, "mirrored", "created", |_| true).await;
    let mirror_uid = mirror.metadata.uid.clone().expect("a mirror UID");
    assert_ne!(mirror_uid, static_uid);
    // The agent learns the mirror through its watch: wait until the mirror
    // UID resolves.
    let found = eventually(LIMIT, || async {
        let r = exec(&agent, &mirror_uid, &[], PID1);
        (r.0 == Some(0)).then_some(r)
    })
    .await;
    let (_, out, _) = found.unwrap_or_else(|| {
        panic!(
            "mirror UID {mirror_uid} never resolved: {:?}\n{}",
            exec(&agent, &mirror_uid, &[], PID1),
            agent.logs()
        )
    });
    assert_eq!(out, "sleep 100004 ");

    // The Node the agent registered says where its kubelet server is (no
    // `--port` wired yet: 0, sent explicitly) and how to reach the node.
    let node = api
        .nodes()
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some(NODE))
        .expect("the node registered");
    let status = node.status.expect("node status");
    let endpoint = status.daemon_endpoints.and_then(|d| d.kubelet_endpoint);
    assert_eq!(endpoint.map(|e| e.port), Some(0));
    let addresses: Vec<(String, String)> = status
        .addresses
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        [
            ("InternalIP".to_string(), "127.0.0.1".to_string()),
            ("Hostname".to_string(), NODE.to_string())
        ]
    );
}

/// `crilet logs POD [flags] --socket S`.
fn logs(agent: &AgentProcess, pod: &str, flags: &[&str]) -> (Option<i32>, String, String) {
    let socket = agent.socket();
    let mut args = vec!["logs", pod, "--socket", socket.to_str().unwrap()];
    args.extend_from_slice(flags);
    crilet(&args)
}

/// The `tick N` numbers in `text`.
fn ticks(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("tick "))
        .map(|n| n.parse().unwrap())
        .collect()
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn logs_tail_limit_timestamps_follow_previous_and_by_mirror_uid() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    let agent = crate::mirror_faults::start(&api);
    agent.write(
        "chatty.yaml",
        &busybox_pod(
            "chatty",
            "Always",
            "echo first; echo to-stderr >&2; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done",
        ),
    );
    agent.write(
        "crash.yaml",
        &busybox_pod(
            "crash",
            "Always",
            "echo instance $(cat /proc/sys/kernel/random/uuid); sleep 5; exit 1",
        ),
    );
    running(&agent, "chatty", &["main"]).await;
    let chatty = agent.pod_name("chatty");
    // Some ticks first.
    let out = eventually(LIMIT, || async {
        let (code, out, _) = logs(&agent, &chatty, &[]);
        (code == Some(0) && ticks(&out).len() >= 5).then_some(out)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no ticks: {:?}\n{}",
            logs(&agent, &chatty, &[]),
            agent.logs()
        )
    });
    let full = out.clone();
    // Both streams, text only; each stream in its order (the runtime reads
    // the two pipes apart, so they may interleave either way).
    let lines: Vec<&str> = out.lines().filter(|l| *l != "to-stderr").collect();
    assert_eq!(lines[0], "first", "{out}");
    assert_eq!(
        out.lines().filter(|l| *l == "to-stderr").count(),
        1,
        "{out}"
    );
    let t = ticks(&out);
    assert!(t.iter().copied().eq(1..=t.len() as u64), "{out}");
    assert_eq!(lines.len(), t.len() + 1, "nothing else: {out}");

    // --tail: exactly the last N lines; 0 is none.
    let (code, out, err) = logs(&agent, &chatty, &["--tail", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let t = ticks(&out);
    assert_eq!((out.lines().count(), t.len()), (2, 2), "{out}");
    assert_eq!(t[1], t[0] + 1, "{out}");
    assert_eq!(logs(&agent, &chatty, &["--tail", "0"]).1, "");
    // --limit-bytes cuts the output; --timestamps prefixes each line.
    // (The file's first line is `first` or `to-stderr`, whichever pipe the
    // runtime read first.)
    assert_eq!(logs(&agent, &chatty, &["--limit-bytes", "3"]).1, full[..3]);
    let (_, out, _) = logs(&agent, &chatty, &["--timestamps", "--tail", "1"]);
    let (ts, line) = out
        .trim_end()
        .split_once(' ')
        .expect("a timestamp and a line");
    assert!(line.starts_with("tick "), "{out}");
    let ts: jiff::Timestamp = ts.parse().unwrap_or_else(|e| panic!("{ts}: {e}"));
    let age = jiff::Timestamp::now().duration_since(ts);
    assert!(age.as_secs() < 30, "{out}");
    // --since: a window in the past keeps only the newest lines.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, out, err) = logs(&agent, &chatty, &["--since", "1s"]);
    assert_eq!(code, Some(0), "{err}");
    let t = ticks(&out);
    assert!(
        !out.contains("first") && !t.is_empty() && t.len() <= 7,
        "{out}"
    );

    // -f: what is there, then new lines as they are written.
    let socket = agent.socket();
    let mut follower = std::process::Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(["logs", &chatty, "-f", "--tail", "1", "--socket"])
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen.len() < 6 && std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            seen.push(l);
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    let t = ticks(&seen.join("\n"));
    assert!(t.len() >= 6, "follow saw {seen:?}");
    assert!(
        t.windows(2).all(|w| w[1] == w[0] + 1),
        "each line once, in order: {seen:?}"
    );

    // By the mirror pod's UID, once the agent knows the mirror.
    let mirror = crate::mirror_faults::mirror_of(&api, &agent, "chatty", "created", |_| true).await;
    let mirror_uid = mirror.metadata.uid.clone().expect("a mirror UID");
    let by_mirror = eventually(LIMIT, || async {
        let (code, out, _) = logs(&agent, &mirror_uid, &["--tail", "1"]);
        (code == Some(0)).then_some(out)
    })
    .await
    .expect("logs by mirror UID");
    assert_eq!(ticks(&by_mirror).len(), 1, "{by_mirror}");

    // Refusals.
    let (code, _, err) = logs(&agent, &chatty, &["-c", "nope"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            "container \"nope\" is not in pod default/{chatty}"
        )),
        "{err}"
    );
    let (code, _, err) = logs(&agent, "default/nope", &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("pod default/nope"), "{err}");
    let (code, _, err) = logs(&agent, &chatty, &["--previous"]);
    assert_eq!(code, Some(1), "no previous instance yet");
    assert!(err.contains("previous terminated container"), "{err}");

    // --previous after a crash: the instance before the current one. While
    // the container waits out its back-off, the kubelet (and crilet) give
    // the last terminated instance for both, so the two differ only while an
    // instance runs or has just exited: wait for such a moment (each runs 5 s,
    // and a back-off of 10 s or 20 s lies between them).
    let crash = agent.pod_name("crash");
    wait_for(
        &rt,
        &agent,
        "crash",
        Duration::from_secs(90),
        "a restart",
        |v| v.named("main").len() >= 2,
    )
    .await;
    let (prev, current) = eventually(Duration::from_secs(60), || async {
        let (code, prev, _) = logs(&agent, &crash, &["--previous"]);
        let (_, current, _) = logs(&agent, &crash, &[]);
        (code == Some(0)
            && prev.starts_with("instance ")
            && current.starts_with("instance ")
            && prev != current)
            .then_some((prev, current))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no previous log other than the current one: {:?} {:?}\n{}",
            logs(&agent, &crash, &["--previous"]),
            logs(&agent, &crash, &[]),
            agent.logs()
        )
    });
    assert_eq!(prev.lines().count(), 1, "{prev}");
    assert_eq!(current.lines().count(), 1, "{current}");
}
