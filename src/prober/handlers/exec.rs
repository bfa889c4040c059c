//! The exec probe: a command run in the container through CRI ExecSync.
//!
//! Invariant: the runtime enforces the probe's timeout (ExecSync's own
//! `timeout`); `CriRuntime` gives the call a gRPC deadline of the runtime
//! request timeout plus that, as the kubelet does, so the runtime's answer
//! always arrives before our own deadline would cut it.

use std::time::Duration;

use super::{ProbeOutcome, capped_text};
use crate::cri::Runtime;

/// Exit 0 → Success, other exit codes → Failure, both with stdout then
/// stderr (at most 10 KiB) as the output. The runtime's DeadlineExceeded
/// → Failure "command "…" timed out" (the kubelet's text); any other RPC
/// error → Error (the probe could not be run).
pub async fn exec_probe(
    runtime: &dyn Runtime,
    container_id: &str,
    command: &[String],
    timeout: Duration,
) -> ProbeOutcome {
    match runtime.exec_sync(container_id, command, timeout).await {
        Ok(r) => {
            let output = capped_text(&[&r.stdout, &r.stderr]);
            if r.exit_code == 0 {
                ProbeOutcome::Success(output)
            } else {
                ProbeOutcome::Failure(output)
            }
        }
        Err(e) if e.code() == tonic::Code::DeadlineExceeded => {
            ProbeOutcome::Failure(timed_out(command))
        }
        Err(e) => ProbeOutcome::Error(e.to_string()),
    }
}

pub(super) fn timed_out(command: &[String]) -> String {
    format!("command {:?} timed out", command.join(" "))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cri::{
        ContainerConfig, ContainerMetadata, ExecSyncResult, FakeRuntime, PodSandboxConfig,
        PodSandboxMetadata,
    };

    /// A fake runtime holding one running container; returns its id.
    pub async fn running_container() -> (FakeRuntime, String) {
        let rt = FakeRuntime::new();
        rt.add_image("busybox:latest", 1);
        let sandbox = PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: "web".into(),
                uid: "uid-web".into(),
                namespace: "default".into(),
                attempt: 0,
            },
            ..Default::default()
        };
        let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
        let config = ContainerConfig {
            metadata: ContainerMetadata {
                name: "c".into(),
                attempt: 0,
            },
            image: "busybox:latest".into(),
            ..Default::default()
        };
        let id = rt
            .create_container(&sandbox_id, &config, &sandbox)
            .await
            .unwrap();
        rt.start_container(&id).await.unwrap();
        (rt, id)
    }

    pub fn cmd(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[tokio::test]
    async fn exit_zero_succeeds_with_the_output_and_the_timeout_goes_to_the_runtime() {
        let (rt, id) = running_container().await;
        let outcome =
            exec_probe(&rt, &id, &cmd(&["cat", "/tmp/ok"]), Duration::from_secs(15)).await;
        assert_eq!(outcome, ProbeOutcome::Success("cat /tmp/ok".into()));
        assert_eq!(rt.exec_timeouts(), [Duration::from_secs(15)]);
    }

    #[tokio::test]
    async fn nonzero_exit_fails_with_stdout_then_stderr_capped() {
        let (rt, id) = running_container().await;
        rt.push_exec_result(ExecSyncResult {
            stdout: b"not ready; ".to_vec(),
            stderr: b"db down".to_vec(),
            exit_code: 1,
        });
        let outcome = exec_probe(&rt, &id, &cmd(&["check"]), Duration::from_secs(1)).await;
        assert_eq!(outcome, ProbeOutcome::Failure("not ready; db down".into()));
        rt.push_exec_result(ExecSyncResult {
            stdout: vec![b'o'; 8 * 1024],
            stderr: vec![b'e'; 8 * 1024],
            exit_code: 2,
        });
        let ProbeOutcome::Failure(output) =
            exec_probe(&rt, &id, &cmd(&["check"]), Duration::from_secs(1)).await
        else {
            panic!("not a failure")
        };
        assert_eq!(output.len(), 10 * 1024);
        assert!(output.starts_with('o') && output.ends_with('e'));
    }

    #[tokio::test]
    async fn runtime_deadline_is_a_failure_other_errors_are_errors() {
        let (rt, id) = running_container().await;
        rt.fail_next(
            "ExecSync",
            tonic::Status::deadline_exceeded("timeout 1s exceeded: context deadline exceeded"),
        );
        let outcome = exec_probe(&rt, &id, &cmd(&["sleep", "9"]), Duration::from_secs(1)).await;
        assert_eq!(
            outcome,
            ProbeOutcome::Failure(r#"command "sleep 9" timed out"#.into())
        );
        let outcome = exec_probe(&rt, "gone", &cmd(&["true"]), Duration::from_secs(1)).await;
        let ProbeOutcome::Error(reason) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(reason.contains("NotFound"), "{reason}");
    }
}
