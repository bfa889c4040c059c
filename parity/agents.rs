//! The two agents under comparison, started the same way on the same
//! runtime socket, node name, node IP, ports, cgroup root and manifest
//! directory: the real kubelet v1.32.13 through
//! the lab's `kubelet-up.sh`, and crilet, the binary under test.
//!
//! Invariant: one agent at a time. Each start first stops what the last
//! run left (the kubelet's state is purged, crilet's root removed), and a
//! stop leaves the runtime's pods in place for the caller to remove, as
//! both agents leave them when they stop.

// The harness and the side-by-side bench each use part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::lab::{Lab, run, wait_for};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Kubelet,
    Crilet,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Kubelet => "kubelet",
            Agent::Crilet => "crilet",
        }
    }
}

/// The kernel settings the kubelet changes at start
/// (container_manager_linux.go's setupKernelTunables): restored after its
/// run, so the machine is left as it was found.
const KUBELET_SYSCTLS: [&str; 3] = [
    "/proc/sys/vm/overcommit_memory",
    "/proc/sys/kernel/panic",
    "/proc/sys/kernel/panic_on_oops",
];

/// The same hard eviction thresholds for both agents, low enough that a
/// nearly full shared disk is no pressure: the comparison is of how they
/// run pods, not of a machine's disk.
const EVICTION_HARD: [(&str, &str); 5] = [
    ("memory.available", "100Mi"),
    ("nodefs.available", "1%"),
    ("nodefs.inodesFree", "1%"),
    ("imagefs.available", "1%"),
    ("imagefs.inodesFree", "1%"),
];

pub struct Running {
    pub agent: Agent,
    /// The agent's root directory (`--root-dir`).
    pub root_dir: PathBuf,
    /// Where it writes container logs (`podLogsDir`).
    pub pod_logs_dir: PathBuf,
    /// Its own log.
    pub log: PathBuf,
    crilet: Option<Child>,
    sysctls: Vec<(&'static str, String)>,
    stopped: bool,
    lab: Lab,
}

/// Starts `agent` on the runtime socket `cri` (the harness's recording
/// proxy, or the runtime itself), on a root directory of its own that it
/// starts afresh, and waits until it serves `/pods`.
pub fn start(lab: &Lab, agent: Agent, cri: &Path) -> Running {
    let root_dir = lab.dir.join(agent.name());
    let pod_logs_dir = lab.dir.join(format!("{}-pod-logs", agent.name()));
    start_on(lab, agent, cri, &root_dir, &pod_logs_dir, true)
}

/// Starts `agent` on the node as the other agent left it: the kubelet's
/// root and pod logs directories, kept as they are (a node moving from one
/// agent to the other, `takeover.rs`).
pub fn take_over(lab: &Lab, agent: Agent, cri: &Path) -> Running {
    let (root_dir, pod_logs_dir) = kubelet_dirs(lab);
    start_on(lab, agent, cri, &root_dir, &pod_logs_dir, false)
}

/// The kubelet's root and pod logs directories.
pub fn kubelet_dirs(lab: &Lab) -> (PathBuf, PathBuf) {
    let name = Agent::Kubelet.name();
    (lab.dir.join(name), lab.dir.join(format!("{name}-pod-logs")))
}

fn start_on(
    lab: &Lab,
    agent: Agent,
    cri: &Path,
    root_dir: &Path,
    pod_logs_dir: &Path,
    afresh: bool,
) -> Running {
    let mut running = Running {
        agent,
        log: match agent {
            Agent::Kubelet => root_dir.join("kubelet.log"),
            Agent::Crilet if afresh => lab.dir.join("crilet.log"),
            Agent::Crilet => lab.dir.join("crilet-takeover.log"),
        },
        root_dir: root_dir.to_path_buf(),
        pod_logs_dir: pod_logs_dir.to_path_buf(),
        crilet: None,
        sysctls: Vec::new(),
        stopped: false,
        lab: lab.clone(),
    };
    match agent {
        Agent::Kubelet => running.start_kubelet(cri, afresh),
        Agent::Crilet => running.start_crilet(cri, afresh),
    }
    let healthy = wait_for(Duration::from_secs(60), Duration::from_millis(200), || {
        lab.get("/pods").map(|_| ())
    });
    if healthy.is_none() {
        // The run directory goes with the lab's clean-up: what the agent
        // said, and whether it still runs, go into the failure itself.
        let exited = running
            .crilet
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        let log = std::fs::read_to_string(&running.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        panic!(
            "{} did not serve /pods on 127.0.0.1:{} within 60 s ({}; log {}); its last lines:\n{}",
            agent.name(),
            lab.read_only_port(),
            match exited {
                Some(status) => format!("exited: {status}"),
                None => "still running".to_string(),
            },
            running.log.display(),
            tail.join("\n")
        );
    }
    running
}

impl Running {
    fn start_kubelet(&mut self, cri: &Path, afresh: bool) {
        let lab = &self.lab;
        let mut down = Command::new("bash");
        down.arg(lab.lab_scripts.join("kubelet-down.sh"))
            .arg(&self.root_dir);
        if afresh {
            down.arg("--purge");
        }
        let _ = run(&mut down);
        self.sysctls = KUBELET_SYSCTLS
            .iter()
            .filter_map(|p| Some((*p, std::fs::read_to_string(p).ok()?.trim().to_string())))
            .collect();
        std::fs::create_dir_all(&self.root_dir).unwrap();
        if afresh {
            let _ = std::fs::remove_dir_all(&self.pod_logs_dir);
        }
        // podLogsDir is a config-file field only (no flag in v1.32). The
        // eviction thresholds and image GC are set as crilet's below: the
        // machine's shared disk may be nearly full, and under DiskPressure
        // the kubelet removes every unused image (the lab's own among them).
        let config = lab.dir.join("kubelet-config.yaml");
        let eviction: String = EVICTION_HARD
            .iter()
            .map(|(signal, v)| format!("  {signal}: \"{v}\"\n"))
            .collect();
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                 podLogsDir: {}\nimageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n\
                 evictionHard:\n{eviction}",
                self.pod_logs_dir.display()
            ),
        )
        .unwrap();
        let port = lab.port;
        let up = run(Command::new("bash")
            .arg(lab.lab_scripts.join("kubelet-up.sh"))
            .arg(&self.root_dir)
            .arg("--endpoint")
            .arg(format!("unix://{}", cri.display()))
            .arg("--manifests")
            .arg(lab.manifests())
            .args(["--node", &lab.node, "--node-ip", &lab.node_ip])
            .arg("--kubeconfig")
            .arg(&lab.node_kubeconfig)
            .args(["--port", &port.to_string()])
            .args(["--healthz-port", &(port + 8).to_string()])
            .args(["--read-only-port", &lab.read_only_port().to_string()])
            .arg("--")
            .arg(format!("--cgroup-root=/{}", lab.cgroup_root))
            .arg(format!("--config={}", config.display())));
        if let Err(e) = up {
            panic!("kubelet-up.sh failed: {e} (log {})", self.log.display());
        }
    }

    fn start_crilet(&mut self, cri: &Path, afresh: bool) {
        if afresh {
            let _ = std::fs::remove_dir_all(&self.root_dir);
            let _ = std::fs::remove_dir_all(&self.pod_logs_dir);
        }
        std::fs::create_dir_all(&self.root_dir).unwrap();
        let log = std::fs::File::create(&self.log).unwrap();
        let child = crilet_command("run", &self.lab, cri, &self.root_dir, &self.pod_logs_dir)
            .env("CRILET_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start crilet run");
        self.crilet = Some(child);
    }

    /// The agent's process (the kubelet's from kubelet-up.sh's pid file).
    pub fn pid(&self) -> Option<u32> {
        match (&self.crilet, self.agent) {
            (Some(child), _) => Some(child.id()),
            (None, Agent::Kubelet) => {
                let pid = std::fs::read_to_string(self.root_dir.join("kubelet.pid")).ok()?;
                pid.trim().parse().ok()
            }
            (None, Agent::Crilet) => None,
        }
    }

    /// Stops the agent (its pods keep running), and puts back what it
    /// changed on the machine. Dropping a running agent stops it too.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        match self.agent {
            Agent::Kubelet => {
                let down = self.lab.lab_scripts.join("kubelet-down.sh");
                // Without --purge: its root dir stays for the snapshot's
                // paths and its log; the next start purges it.
                let _ = run(Command::new("bash").arg(&down).arg(&self.root_dir));
                for (path, value) in &self.sysctls {
                    let _ = std::fs::write(path, value);
                }
            }
            Agent::Crilet => {
                if let Some(mut child) = self.crilet.take() {
                    let _ = Command::new("kill").arg(child.id().to_string()).status();
                    let stopped =
                        wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
                            child.try_wait().ok().flatten()
                        });
                    if stopped.is_none() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                }
            }
        }
    }
}

/// `crilet <command>` (`run`, or `takeover --dry-run`) with the flags the
/// harness runs crilet with, on `root_dir` and `pod_logs_dir`.
pub fn crilet_command(
    command: &str,
    lab: &Lab,
    cri: &Path,
    root_dir: &Path,
    pod_logs_dir: &Path,
) -> Command {
    let port = lab.port;
    // CRILET_BIN: the shipped release binary (bench.sh sets it), not
    // this harness's own build, whose profile unwinds and is linked
    // without the release binary's code order.
    let bin = std::env::var_os("CRILET_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_crilet").into());
    let mut crilet = Command::new(bin);
    crilet.args(command.split(' '));
    crilet
        .arg("--container-runtime-endpoint")
        .arg(format!("unix://{}", cri.display()))
        .arg("--pod-manifest-path")
        .arg(lab.manifests())
        .args(["--hostname-override", &lab.node, "--node-ip", &lab.node_ip])
        .arg("--kubeconfig")
        .arg(&lab.node_kubeconfig)
        .arg("--root-dir")
        .arg(root_dir)
        // The test command runs one lab per runtime at once: crilet's
        // default /run/crilet/crilet.sock would be taken by the other's.
        .arg("--socket")
        .arg(lab.dir.join("crilet.sock"))
        .args(["--cgroup-root", &format!("/{}", lab.cgroup_root)])
        .args(["--address", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--http-address",
            &format!("127.0.0.1:{}", lab.read_only_port()),
        ])
        .arg("--pod-logs-dir")
        .arg(pod_logs_dir)
        // The kubelet's links go to /var/log/containers (it has no
        // setting for them); crilet's to a directory of the run's.
        .arg("--container-logs-dir")
        .arg(lab.dir.join("crilet-container-logs"))
        .args([
            "--image-gc-high-threshold",
            "100",
            "--image-gc-low-threshold",
            "99",
        ])
        .arg("--eviction-hard")
        .arg(
            EVICTION_HARD
                .map(|(signal, v)| format!("{signal}<{v}"))
                .join(","),
        );
    crilet
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}
