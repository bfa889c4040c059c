//! Sidecar init containers (`restartPolicy: Always`) with the real binary and
//! the real runtime: a sleeping sidecar does not hold the pod back, its
//! readiness probe decides the pod's, it restarts when its process dies
//! while main runs on, a Never pod ends Succeeded with its sidecar stopped,
//! and removing the manifest stops main first, then the sidecars last to
//! first. The statuses are read on `/pods` and on the mirror pod of the
//! real kube-apiserver.

use std::time::{Duration, Instant};

use crilet::cri::{ContainerState, PodSandboxState, Runtime};
use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};

use crate::agent::*;
use crate::events::kill_named_outside_cri;
use crate::kube::Lab;
use crate::probes::{agent_with_api, agent_with_http, condition, served_status, wait_status};
use crate::support::{eventually, free_port};

const LIMIT: Duration = Duration::from_secs(40);
const BUSYBOX: &str = "image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent";

fn init_status<'s>(s: &'s PodStatus, name: &str) -> Option<&'s ContainerStatus> {
    let list = s.init_container_statuses.iter().flatten();
    list.into_iter().find(|c| c.name == name)
}

fn app_status<'s>(s: &'s PodStatus, name: &str) -> Option<&'s ContainerStatus> {
    let list = s.container_statuses.iter().flatten();
    list.into_iter().find(|c| c.name == name)
}

fn is_running(c: Option<&ContainerStatus>) -> bool {
    c.and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

fn exit_code(c: Option<&ContainerStatus>) -> Option<i32> {
    let state = c?.state.as_ref()?;
    state.terminated.as_ref().map(|t| t.exit_code)
}

/// Runs `cmd` with sh in the running container `container` of pod `name`.
async fn exec_in(
    rt: &crilet::cri::CriRuntime,
    agent: &AgentProcess,
    name: &str,
    container: &str,
    cmd: &str,
) {
    let v = agent.view(rt, name).await;
    let c = v
        .running(container)
        .unwrap_or_else(|| panic!("{container} of {name} does not run: {v:#?}"));
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

/// A sidecar `side` (sleeping, ready once /tmp/ready exists), a regular
/// init container `setup` after it, and `main`.
fn sidecar_pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 2\n  initContainers:\n  - name: side\n    {BUSYBOX}\n    restartPolicy: Always\n    command: [sh, -c, 'sleep 3600 & wait $!']\n    readinessProbe:\n      exec: {{command: [cat, /tmp/ready]}}\n      periodSeconds: 1\n      failureThreshold: 1\n  - name: setup\n    {BUSYBOX}\n    command: [sh, -c, 'echo set up']\n  containers:\n  - name: main\n    {BUSYBOX}\n    command: [sh, -c, 'exec sleep 3600']\n"
    )
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn a_sleeping_sidecar_runs_beside_main_decides_readiness_and_restarts() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    // Shared with probes::exec_readiness_follows_a_file_everywhere: both
    // hold AGENT_LOCK, so never at once.
    let node = lab.claim("crilet-node-7").await;
    let port = free_port();
    let agent = agent_with_api(&node, port);
    let written = Instant::now();
    agent.write("side.yaml", &sidecar_pod("side"));

    // The sidecar sleeps for an hour; the pod runs within seconds anyway.
    let s = wait_status(&agent, port, "side", LIMIT, "main running", |s| {
        is_running(app_status(s, "main")) && s.phase.as_deref() == Some("Running")
    })
    .await;
    let took = written.elapsed();
    assert!(took < Duration::from_secs(20), "main ran after {took:?}");
    let side = init_status(&s, "side").unwrap();
    assert!(is_running(Some(side)), "{s:#?}");
    assert_eq!((side.started, side.ready), (Some(true), false));
    let setup = init_status(&s, "setup");
    assert_eq!(exit_code(setup), Some(0), "{s:#?}");
    assert!(setup.unwrap().ready);
    assert_eq!(condition(&s, "Initialized").as_deref(), Some("True"));
    // The sidecar's readiness probe fails: the pod is not ready, and says why.
    let ready = s.conditions.iter().flatten().find(|c| c.type_ == "Ready");
    assert_eq!(ready.map(|c| c.status.as_str()), Some("False"), "{s:#?}");
    assert_eq!(
        ready.and_then(|c| c.message.as_deref()),
        Some("containers with unready status: [side]")
    );

    // Its readiness decides the pod's: on /pods and on the mirror pod.
    exec_in(&rt, &agent, "side", "side", "touch /tmp/ready").await;
    let s = wait_status(&agent, port, "side", LIMIT, "Ready", |s| {
        condition(s, "Ready").as_deref() == Some("True")
    })
    .await;
    assert!(init_status(&s, "side").unwrap().ready);
    let full = agent.pod_name("side");
    let mirror = eventually(LIMIT, || async {
        let status = lab.pod("default", &full).await?.status?;
        (condition(&status, "Ready").as_deref() == Some("True")).then_some(status)
    })
    .await
    .unwrap_or_else(|| panic!("the mirror pod never got Ready\n{}", agent.logs()));
    assert_eq!(mirror.phase.as_deref(), Some("Running"));
    let side = init_status(&mirror, "side").unwrap();
    assert_eq!((side.started, side.ready), (Some(true), true));

    // Its process dies: it is restarted, main runs on untouched.
    let v = agent.view(&rt, "side").await;
    let main_id = v.running("main").unwrap().id.clone();
    let side_id = &v.running("side").unwrap().id;
    assert_eq!(kill_named_outside_cri(side_id, "sleep"), 1, "{v:#?}");
    let s = wait_status(&agent, port, "side", LIMIT, "the sidecar restarted", |s| {
        let side = init_status(s, "side");
        side.is_some_and(|c| c.restart_count == 1) && is_running(side)
    })
    .await;
    let last = init_status(&s, "side").unwrap().last_state.as_ref();
    let last = last
        .and_then(|l| l.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(last, Some(137), "{s:#?}");
    let main = app_status(&s, "main").unwrap();
    assert_eq!(main.restart_count, 0);
    assert!(is_running(Some(main)));
    let v = agent.view(&rt, "side").await;
    assert_eq!(
        v.running("main").map(|c| c.id.as_str()),
        Some(main_id.as_str())
    );
    assert_eq!(v.named("main").len(), 1, "main was not restarted: {v:#?}");
    assert_eq!(v.named("setup").len(), 1, "setup was not rerun: {v:#?}");
    assert_eq!(s.phase.as_deref(), Some("Running"));
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn a_never_pod_whose_main_exits_0_succeeds_with_its_sidecar_stopped() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: once\nspec:\n  hostNetwork: true\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 2\n  initContainers:\n  - name: side\n    {BUSYBOX}\n    restartPolicy: Always\n    command: [sh, -c, 'sleep 3600 & wait $!']\n  containers:\n  - name: main\n    {BUSYBOX}\n    command: [sh, -c, 'sleep 2; exit 0']\n"
    );
    agent.write("once.yaml", &manifest);
    let s = wait_status(&agent, port, "once", LIMIT, "Succeeded", |s| {
        s.phase.as_deref() == Some("Succeeded")
    })
    .await;
    assert_eq!(exit_code(app_status(&s, "main")), Some(0), "{s:#?}");
    let side = init_status(&s, "side").unwrap();
    assert!(
        exit_code(Some(side)).is_some(),
        "the sidecar stopped: {s:#?}"
    );
    assert_eq!((side.started, side.ready), (Some(false), false));
    for (kind, reason) in [("Initialized", "True"), ("Ready", "False")] {
        let c = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == kind)
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            (reason, Some("PodCompleted"))
        );
    }
    // Killed with the pod, not restarted, and the sandbox stopped.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let v = agent.view(&rt, "once").await;
    assert_eq!(v.named("side").len(), 1, "the sidecar restarted: {v:#?}");
    assert!(v.named("side")[0].state == ContainerState::Exited);
    assert!(
        v.sandboxes
            .iter()
            .all(|s| s.state == PodSandboxState::NotReady),
        "{v:#?}"
    );
    let s = served_status(port, "once").unwrap();
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn removing_the_manifest_stops_main_first_then_the_sidecars_last_to_first() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let port = free_port();
    let agent = agent_with_http(port);
    let order = agent.root.path().join("order");
    // Each writes when it gets SIGTERM; main takes 2 s to exit.
    let term = |name: &str, then: &str| {
        format!(
            "echo {name}-start >> /order/log; trap 'echo {name}-term >> /order/log; {then} exit 0' TERM; while :; do sleep 0.2; done"
        )
    };
    let container = |name: &str, sidecar: bool, then: &str| {
        let policy = if sidecar {
            "\n    restartPolicy: Always"
        } else {
            ""
        };
        format!(
            "  - name: {name}\n    {BUSYBOX}{policy}\n    command: [sh, -c, \"{}\"]\n    volumeMounts: [{{name: order, mountPath: /order}}]\n",
            term(name, then)
        )
    };
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ordered\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 10\n  initContainers:\n{}{}  containers:\n{}  volumes:\n  - name: order\n    hostPath: {{path: {}, type: DirectoryOrCreate}}\n",
        container("s1", true, ""),
        container("s2", true, ""),
        container("main", false, "sleep 2; echo main-exit >> /order/log;"),
        order.display()
    );
    agent.write("ordered.yaml", &manifest);
    wait_status(&agent, port, "ordered", LIMIT, "main running", |s| {
        is_running(app_status(s, "main"))
    })
    .await;
    let log = order.join("log");
    let started = std::fs::read_to_string(&log).unwrap();
    assert_eq!(started, "s1-start\ns2-start\nmain-start\n");

    agent.remove("ordered.yaml");
    let gone = eventually(LIMIT, || async {
        let v = agent.view(&rt, "ordered").await;
        (v.sandboxes.is_empty() && v.containers.is_empty()).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the pod was not removed\n{}", agent.logs());
    let text = std::fs::read_to_string(&log).unwrap();
    let stops: Vec<&str> = text.lines().skip(3).collect();
    assert_eq!(
        stops,
        ["main-term", "main-exit", "s2-term", "s1-term"],
        "{text}"
    );
}
