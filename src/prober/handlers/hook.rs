//! Lifecycle hooks (postStart, preStop): exec, httpGet or sleep, as the
//! kubelet's `pkg/kubelet/lifecycle/handlers.go` runs them.
//!
//! Invariants: a hook has no timeout of its own (the caller bounds it by
//! the grace period, e.g. with `tokio::time::timeout`); `cancel` ends any
//! hook promptly with an `Err`; an httpGet hook's status code never fails
//! it.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::exec::timed_out;
use super::{HookAction, HttpGetClient, capped_text, http_hook};
use crate::cri::Runtime;

/// The kubelet's message for a sleep hook cut short.
pub const HOOK_SLEEP_CANCELLED: &str = "container terminated before sleep hook finished";

/// What ExecSync gets as its timeout when the driver passes `None`: 0,
/// "none", as the kubelet sends it (the CRI client then sets no deadline).
const NO_EXEC_TIMEOUT: Duration = Duration::ZERO;

/// Runs one hook of `container_id`. `Ok` on success; `Err` says why (for
/// the `FailedPostStartHook` / `FailedPreStopHook` event and log).
///
/// - exec: CRI ExecSync, success = exit 0. `exec_timeout` is ExecSync's
///   timeout: the driver passes `None` for postStart (no limit, as the
///   kubelet) and `Some(grace period left)` for preStop, so the runtime
///   ends the hook's process when the container would be killed anyway.
/// - httpGet: `client` should be built with [`super::HOOK_USER_AGENT`].
/// - sleep: returns after `duration`, or at once with
///   [`HOOK_SLEEP_CANCELLED`] when `cancel` fires.
///
/// `cancel` aborts exec and httpGet hooks too (dropping the call; the
/// runtime then stops the exec).
pub async fn run_hook(
    runtime: &dyn Runtime,
    client: &HttpGetClient,
    container_id: &str,
    action: &HookAction,
    exec_timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<(), String> {
    let run = async {
        match action {
            HookAction::Exec { command } => {
                exec_hook(runtime, container_id, command, exec_timeout).await
            }
            HookAction::HttpGet(target) => http_hook(client, target).await,
            HookAction::Sleep { duration } => {
                tokio::time::sleep(*duration).await;
                Ok(())
            }
        }
    };
    tokio::select! {
        result = run => result,
        _ = cancel.cancelled() => Err(match action {
            HookAction::Sleep { .. } => HOOK_SLEEP_CANCELLED.to_string(),
            _ => "hook cancelled before it finished".to_string(),
        }),
    }
}

async fn exec_hook(
    runtime: &dyn Runtime,
    container_id: &str,
    command: &[String],
    timeout: Option<Duration>,
) -> Result<(), String> {
    let timeout = timeout.unwrap_or(NO_EXEC_TIMEOUT);
    match runtime.exec_sync(container_id, command, timeout).await {
        Ok(r) if r.exit_code == 0 => Ok(()),
        Ok(r) => Err(format!(
            "command {:?} exited with {}: {}",
            command.join(" "),
            r.exit_code,
            capped_text(&[&r.stdout, &r.stderr])
        )),
        Err(e) if e.code() == tonic::Code::DeadlineExceeded => Err(timed_out(command)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::exec::tests::{cmd, running_container};
    use super::super::test_server::{TestServer, response};
    use super::super::{HOOK_USER_AGENT, HttpGetTarget, Scheme};
    use super::*;
    use crate::cri::ExecSyncResult;

    fn client() -> HttpGetClient {
        HttpGetClient::new(HOOK_USER_AGENT)
    }

    #[tokio::test]
    async fn exec_hook_succeeds_on_exit_zero_and_fails_with_the_output() {
        let (rt, id) = running_container().await;
        let never = CancellationToken::new();
        let hook = HookAction::Exec {
            command: cmd(&["touch", "/ready"]),
        };
        run_hook(&rt, &client(), &id, &hook, None, &never)
            .await
            .unwrap();
        rt.push_exec_result(ExecSyncResult {
            stdout: b"".to_vec(),
            stderr: b"read-only file system".to_vec(),
            exit_code: 1,
        });
        let grace = Duration::from_secs(30);
        let err = run_hook(&rt, &client(), &id, &hook, Some(grace), &never)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            r#"command "touch /ready" exited with 1: read-only file system"#
        );
        // None: no limit the runtime would enforce; Some: that limit.
        assert_eq!(rt.exec_timeouts(), [NO_EXEC_TIMEOUT, grace]);
        rt.fail_next("ExecSync", tonic::Status::unavailable("runtime down"));
        let err = run_hook(&rt, &client(), &id, &hook, None, &never)
            .await
            .unwrap_err();
        assert!(err.contains("runtime down"), "{err}");
    }

    #[tokio::test]
    async fn http_hook_ignores_the_status_but_not_a_transport_error() {
        let server = TestServer::start(|_| Some(response(500, &[], "boom"))).await;
        let (rt, id) = running_container().await;
        let never = CancellationToken::new();
        let target = HttpGetTarget {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port: server.addr.port(),
            path: "/shutdown".into(),
            headers: vec![],
        };
        let hook = HookAction::HttpGet(target.clone());
        run_hook(&rt, &client(), &id, &hook, None, &never)
            .await
            .unwrap();
        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        assert!(
            seen[0].starts_with("GET /shutdown HTTP/1.1\r\n"),
            "{}",
            seen[0]
        );
        assert!(
            seen[0].contains("\r\nUser-Agent: kube-lifecycle/1.32\r\n"),
            "{}",
            seen[0]
        );
        drop(server);
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let hook = HookAction::HttpGet(HttpGetTarget { port, ..target });
        let err = run_hook(&rt, &client(), &id, &hook, None, &never)
            .await
            .unwrap_err();
        assert!(
            err.starts_with(&format!(
                "Get \"http://127.0.0.1:{port}/shutdown\": dial tcp"
            )),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_runs_its_time_or_ends_when_cancelled() {
        let (rt, id) = running_container().await;
        let never = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let hook = HookAction::Sleep {
            duration: Duration::from_secs(5),
        };
        run_hook(&rt, &client(), &id, &hook, None, &never)
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(5));

        let cancel = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            trigger.cancel();
        });
        let long = HookAction::Sleep {
            duration: Duration::from_secs(3600),
        };
        let err = run_hook(&rt, &client(), &id, &long, None, &cancel)
            .await
            .unwrap_err();
        assert_eq!(err, HOOK_SLEEP_CANCELLED);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert!(rt.exec_timeouts().is_empty());
    }
}
