//! Container events against whichever runtime the agent tests use. Where
//! the runtime serves GetContainerEvents (containerd 2, CRI-O) crilet says
//! it subscribed and a container killed outside CRI is restarted without
//! waiting for a relist (there is none for 300 s); on containerd 1.6 crilet
//! says once that it falls back to relisting every second, and the same
//! kill is caught by the relist.
//!
//! On CRI-O 1.32 crilet does not subscribe unless told to
//! (`--feature-gates EventedPLEG=true`): that CRI-O panics once a
//! subscriber has gone and two events come at once (cri-o/cri-o#9004).
//! These tests subscribe explicitly there, and restart CRI-O after their
//! agent has gone, so that no dead subscription is left for the next test.
//!
//! `..._restarts_runtime` restarts the runtime under a running agent
//! (`scripts/runtime.sh restart`); like every agent test it holds
//! AGENT_LOCK, so no other agent test runs meanwhile.

use std::time::{Duration, Instant};

use crilet::cri::*;

use crate::agent::*;
use crate::support::{RuntimeKind, eventually, runtime_kind};

const SUBSCRIBED: &str = "subscribed to the runtime's container events";
const RESUBSCRIBED: &str = "subscribed to container events again";
const FALLBACK: &str = "the runtime does not serve GetContainerEvents; crilet falls back to relist";
const AVOIDED: &str = "not subscribing to this runtime's container events";

/// The agent's flags: the gate set explicitly on CRI-O (see the header).
fn event_flags(kind: RuntimeKind) -> Vec<String> {
    match kind {
        RuntimeKind::Crio => vec!["--feature-gates".into(), "EventedPLEG=true".into()],
        _ => vec![],
    }
}

/// After the agent has gone: on CRI-O, a restart drops its dead
/// subscription (cri-o/cri-o#9004).
fn forget_subscriptions(kind: RuntimeKind) {
    if kind == RuntimeKind::Crio {
        agent_runtime_ctl("restart");
    }
}

/// A kill must be acted on well before the worker's 60 s resync and the
/// 300 s safety-net relist, yet loosely enough for a loaded machine.
const QUICKLY: Duration = Duration::from_secs(5);

/// The processes of container `id`: those whose cgroup ends in the id
/// (`<id>` under containerd, `crio-<id>` under CRI-O; not CRI-O's
/// `crio-conmon-<id>`).
fn container_pids(id: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cgroups) = std::fs::read_to_string(entry.path().join("cgroup")) else {
            continue;
        };
        let ours = cgroups.lines().any(|l| {
            let last = l.rsplit('/').next().unwrap_or_default();
            last == id || last == format!("crio-{id}")
        });
        if ours {
            pids.push(pid);
        }
    }
    pids
}

/// SIGKILL to every process of the container, behind the runtime's back.
fn kill_outside_cri(id: &str) -> usize {
    kill_pids(container_pids(id))
}

/// SIGKILL to the processes of container `id` whose command is `comm`,
/// from the host: an exec in the container that kills its own init would
/// itself die with the container, at a time of the kernel's choosing.
pub fn kill_named_outside_cri(id: &str, comm: &str) -> usize {
    let named = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == comm)
    };
    kill_pids(container_pids(id).into_iter().filter(named).collect())
}

fn kill_pids(pids: Vec<u32>) -> usize {
    for pid in &pids {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    pids.len()
}

fn count(logs: &str, needle: &str) -> usize {
    logs.matches(needle).count()
}

/// Kills the running `main` of pod `name` outside CRI and waits for the
/// next attempt to run: how long that took.
async fn kill_and_time_restart(rt: &CriRuntime, agent: &AgentProcess, name: &str) -> Duration {
    let v = pod_view(rt, name).await;
    let c = v.running("main").expect("main runs").clone();
    let start = Instant::now();
    assert!(
        kill_outside_cri(&c.id) > 0,
        "no process found for container {}",
        c.id
    );
    let attempt = c.metadata.attempt;
    wait_for(
        rt,
        agent,
        name,
        Duration::from_secs(70),
        "the restart",
        |v| {
            v.running("main")
                .is_some_and(|n| n.metadata.attempt > attempt)
        },
    )
    .await;
    start.elapsed()
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn container_events_restart_a_container_killed_outside_cri() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let kind = runtime_kind();
    if kind == RuntimeKind::Crio {
        // Not told to subscribe: CRI-O 1.32's known bug keeps crilet away.
        let agent = AgentProcess::start();
        let said = eventually(Duration::from_secs(20), || async {
            (count(&agent.logs(), AVOIDED) == 1).then_some(())
        })
        .await;
        let logs = agent.logs();
        assert!(said.is_some(), "{logs}");
        assert!(logs.contains("cri-o/cri-o#9004"), "{logs}");
        assert_eq!(count(&logs, SUBSCRIBED), 0, "{logs}");
        drop(agent);
    }
    let agent = AgentProcess::start_with(&event_flags(kind));
    agent.write("ev.yaml", &busybox_pod("ev", "Always", "exec sleep 100000"));
    wait_for(&rt, &agent, "ev", Duration::from_secs(30), "running", |v| {
        v.running("main").is_some()
    })
    .await;
    let logs = agent.logs();
    if kind.serves_events() {
        assert_eq!(count(&logs, SUBSCRIBED), 1, "{kind:?}:\n{logs}");
        assert_eq!(count(&logs, FALLBACK), 0, "{kind:?}:\n{logs}");
    } else {
        assert_eq!(count(&logs, FALLBACK), 1, "{kind:?}:\n{logs}");
        assert_eq!(count(&logs, SUBSCRIBED), 0, "{kind:?}:\n{logs}");
    }

    // With events nothing else would notice the kill within a minute.
    let took = kill_and_time_restart(&rt, &agent, "ev").await;
    assert!(
        took < QUICKLY,
        "{kind:?}: restarted only after {took:?}:\n{}",
        agent.logs()
    );
    let logs = agent.logs();
    for bad in [
        "missed container event",
        "event stream broke",
        "cannot subscribe",
    ] {
        assert_eq!(count(&logs, bad), 0, "{kind:?}: {bad}:\n{logs}");
    }
    assert!(count(&logs, FALLBACK) <= 1, "said more than once:\n{logs}");
    drop(agent);
    forget_subscriptions(kind);
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn container_events_come_back_after_the_runtime_restarts_runtime() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let kind = runtime_kind();
    let agent = AgentProcess::start_with(&event_flags(kind));
    agent.write("rr.yaml", &busybox_pod("rr", "Always", "exec sleep 100000"));
    let v = wait_for(&rt, &agent, "rr", Duration::from_secs(30), "running", |v| {
        v.running("main").is_some()
    })
    .await;
    let before = v.running("main").unwrap().clone();

    // Restart the runtime; while it is down, kill the container, so its
    // exit happens while crilet cannot be subscribed.
    let socket = agent_endpoint().trim_start_matches("unix://").to_string();
    let dir = std::env::var("CRILET_AGENT_TEST_DIR").expect("CRILET_AGENT_TEST_DIR");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/runtime.sh");
    let cmd = std::process::Command::new("bash")
        .args([script, "restart", kind.test_name(), &dir])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run scripts/runtime.sh restart");
    let down = eventually(Duration::from_secs(60), || async {
        std::os::unix::net::UnixStream::connect(&socket)
            .is_err()
            .then_some(())
    })
    .await;
    assert!(down.is_some(), "the runtime never went down");
    let killed = kill_outside_cri(&before.id);
    let out = tokio::task::spawn_blocking(move || cmd.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "runtime.sh restart failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let back = Instant::now();

    // The exit nobody could hear is found by the relist after the
    // resubscription (or the 1 s relist), and the container runs again.
    let v = wait_for(
        &rt,
        &agent,
        "rr",
        Duration::from_secs(60),
        "running again",
        |v| {
            v.running("main").is_some_and(|c| c.id != before.id)
                || (killed == 0 && v.running("main").is_some())
        },
    )
    .await;
    let took = back.elapsed();
    let logs = agent.logs();
    if kind.serves_events() {
        assert_eq!(
            count(&logs, "the container event stream broke"),
            1,
            "{logs}"
        );
        // The 1 s relist may have restarted it before the back-off let
        // crilet subscribe again (1, 2, 4 s after the break).
        let again = eventually(Duration::from_secs(40), || async {
            (count(&agent.logs(), RESUBSCRIBED) >= 1).then_some(())
        })
        .await;
        assert!(
            again.is_some(),
            "{kind:?}: no resubscription:\n{}",
            agent.logs()
        );
        // The relist right after subscribing again: not the 60 s resync.
        assert!(
            took < Duration::from_secs(20),
            "{kind:?}: running again {took:?} after the restart:\n{logs}"
        );
    } else {
        assert_eq!(count(&logs, FALLBACK), 1, "{logs}");
    }
    eprintln!(
        "{kind:?}: killed {killed} process(es) while the runtime was down; running again \
         {took:?} after it came back (container {})",
        v.running("main").unwrap().id
    );

    // And events flow again: a kill is acted on at once. (A new pod: rr's
    // next restart waits out the crash back-off.)
    agent.write(
        "rr2.yaml",
        &busybox_pod("rr2", "Always", "exec sleep 100000"),
    );
    wait_for(
        &rt,
        &agent,
        "rr2",
        Duration::from_secs(30),
        "running",
        |v| v.running("main").is_some(),
    )
    .await;
    let took = kill_and_time_restart(&rt, &agent, "rr2").await;
    assert!(
        took < QUICKLY,
        "{kind:?}: restarted only after {took:?}:\n{}",
        agent.logs()
    );
    drop(agent);
    forget_subscriptions(kind);
}
