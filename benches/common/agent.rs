//! A `crilet run` process for the benches that measure the agent (`probes`,
//! `events`): started on a scratch directory, stopped with SIGTERM (its pods
//! stay, as crilet leaves them), and the sweep of its pods over CRI after.
//!
//! Invariant: it touches only the pods named by the bench (their sandboxes
//! carry `<name>-<node>` as the pod name label) and their cgroups.

// Each bench uses part of it.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crilet::cri::*;
use crilet::kuberuntime::labels;

pub struct AgentProcess {
    child: Child,
    log: PathBuf,
}

impl AgentProcess {
    /// `crilet run` on `scratch/manifests`, with its root, socket and log
    /// (`scratch/<log>`) in `scratch`, and `extra` flags.
    pub fn start(
        bin: &Path,
        endpoint: &str,
        scratch: &Path,
        node: &str,
        cgroup_root: &str,
        extra: &[String],
        log: &str,
    ) -> Self {
        let log = scratch.join(log);
        let child = Command::new(bin)
            .args([
                "run",
                "--port",
                "0",
                "--container-runtime-endpoint",
                endpoint,
            ])
            .arg("--pod-manifest-path")
            .arg(scratch.join("manifests"))
            .args(["--hostname-override", node, "--node-ip", "127.0.0.1"])
            .args(["--cgroup-root", cgroup_root])
            .arg("--root-dir")
            .arg(scratch.join("root"))
            // Its own log directories, not the machine's /var/log.
            .arg("--pod-logs-dir")
            .arg(scratch.join("pod-logs"))
            .arg("--container-logs-dir")
            .arg(scratch.join("containers"))
            .arg("--socket")
            .arg(scratch.join("crilet.sock"))
            .args(extra)
            .env(
                "CRILET_LOG",
                std::env::var("CRILET_BENCH_LOG")
                    .unwrap_or_else(|_| "warn,crilet::agent::sync_pleg=info".into()),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start crilet");
        AgentProcess { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("crilet exited ({status}); log:\n{}", self.log_tail());
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after 10 s. crilet leaves its pods running.
    pub fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The sandboxes (any state) of the named pods on `node`.
pub async fn sandboxes_of(rt: &dyn Runtime, names: &[String], node: &str) -> Vec<PodSandbox> {
    let full: HashSet<String> = names.iter().map(|n| format!("{n}-{node}")).collect();
    rt.list_pod_sandbox(&PodSandboxFilter::default())
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|s| {
            s.labels
                .get(labels::POD_NAME_LABEL)
                .is_some_and(|n| full.contains(n))
        })
        .collect()
}

/// Stops and removes the named pods' sandboxes and their cgroups, for the
/// end of a run with crilet stopped. Containers are stopped first with a
/// short timeout: CRI-O would wait 2 min for each PID 1 that ignores SIGTERM.
pub async fn sweep(rt: &dyn Runtime, names: &[String], node: &str, cgroup_root: &str) -> usize {
    let left = sandboxes_of(rt, names, node).await;
    for sb in &left {
        let filter = ContainerFilter {
            pod_sandbox_id: Some(sb.id.clone()),
            ..Default::default()
        };
        for c in rt.list_containers(&filter).await.unwrap_or_default() {
            let _ = rt.stop_container(&c.id, Duration::from_secs(1)).await;
        }
        if let Err(e) = rt.stop_pod_sandbox(&sb.id).await {
            eprintln!("StopPodSandbox {}: {e}", sb.id);
        }
        if let Err(e) = rt.remove_pod_sandbox(&sb.id).await {
            eprintln!("RemovePodSandbox {}: {e}", sb.id);
        }
        for qos in ["", "burstable/", "besteffort/"] {
            let _ = crilet::cm::cgroup::remove_pod_cgroup(
                Path::new(crilet::cm::cgroup::CGROUP_ROOT),
                &format!("{cgroup_root}/kubepods/{qos}pod{}", sb.metadata.uid),
            );
        }
    }
    left.len()
}
