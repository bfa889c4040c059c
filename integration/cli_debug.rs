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
            "a container name must be specified for pod default/{dbg}, choose one of: [main side]"
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
    assert_eq!(code, Some(1));
    assert!(started.elapsed() < Duration::from_secs(20), "not cut");
    assert!(
        err.contains("did not finish within its timeout of 1s"),
        "{err}"
    );
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
}
