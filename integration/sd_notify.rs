//! systemd's readiness protocol end to end: `crilet run` with NOTIFY_SOCKET
//! pointing at a datagram socket the test binds, as systemd does for
//! `Type=notify`. READY=1 comes once the runtime answers (and the stats
//! socket is bound), STOPPING=1 at SIGTERM; while the runtime is down only
//! STATUS= lines come.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::{AGENT_LOCK, AgentProcess, NODE};

/// The datagrams received within `within`, until one contains `until`.
fn receive_until(socket: &UnixDatagram, until: &str, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        socket
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match socket.recv(&mut buf) {
            Ok(n) => {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                let done = message.contains(until);
                got.push(message);
                if done {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    got
}

fn bound_socket(dir: &tempfile::TempDir) -> (UnixDatagram, std::path::PathBuf) {
    let path = dir.path().join("notify");
    (UnixDatagram::bind(&path).unwrap(), path)
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn ready_once_the_runtime_answers_and_stopping_at_sigterm() {
    let _guard = AGENT_LOCK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (socket, path) = bound_socket(&dir);
    let mut agent = AgentProcess::prepare_on(NODE, &[]);
    agent.notify_socket = Some(path);
    agent.spawn();
    let got = receive_until(&socket, "READY=1", Duration::from_secs(60));
    let ready = got
        .iter()
        .find(|m| m.lines().any(|l| l == "READY=1"))
        .unwrap_or_else(|| panic!("no READY=1 in {got:?}; log:\n{}", agent.logs()));
    assert!(
        ready.lines().any(|l| l.starts_with("STATUS=running on ")),
        "{ready:?}"
    );
    assert!(
        agent.socket().exists(),
        "the stats socket is bound before READY=1"
    );
    assert_eq!(agent.terminate(), Some(0), "log:\n{}", agent.logs());
    let got = receive_until(&socket, "STOPPING=1", Duration::from_secs(5));
    assert!(got.iter().any(|m| m == "STOPPING=1"), "{got:?}");
}

/// No runtime: STATUS lines naming the wait, no READY=1, and crilet keeps
/// waiting (as the kubelet) until stopped. Needs no runtime; always runs.
#[test]
fn a_dead_runtime_gets_status_lines_but_no_ready() {
    let dir = tempfile::Builder::new()
        .prefix("crilet-notify-")
        .tempdir_in("/tmp")
        .unwrap();
    let (socket, path) = bound_socket(&dir);
    let endpoint = format!("unix://{}", dir.path().join("no-runtime.sock").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(["run", "--container-runtime-endpoint", &endpoint])
        .args(["--port", "0", "--runtime-request-timeout", "1s"])
        .arg("--root-dir")
        .arg(dir.path().join("root"))
        .args(crate::support::private_log_dirs(dir.path()))
        .arg("--socket")
        .arg(dir.path().join("crilet.sock"))
        .env("NOTIFY_SOCKET", &path)
        .env("CRILET_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let got = receive_until(&socket, "READY=1", Duration::from_secs(4));
    let _ = child.kill();
    let _ = child.wait();
    assert!(!got.is_empty(), "no STATUS line");
    for m in &got {
        assert!(
            m.starts_with("STATUS=waiting for the container runtime: "),
            "{m:?}"
        );
        assert!(!m.contains("READY=1"), "{m:?}");
    }
    assert!(
        got[0].contains("no-runtime.sock"),
        "names the endpoint: {:?}",
        got[0]
    );
}
