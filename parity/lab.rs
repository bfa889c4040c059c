//! The harness's surroundings, read from the environment the test command
//! sets, and the tools it drives there: crictl on the runtime, kubectl (as
//! the admin) on the API server, curl on an agent's plain-HTTP port. The
//! side-by-side bench (benches/kubelet_vs_crilet.rs) uses it too, with
//! [`crate::agents`].
//!
//! Invariant: the harness only ever touches its own instance: the runtime
//! socket, cgroup root, node name and directory named here, and nothing
//! else on the machine.

// The harness and the side-by-side bench each use part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

/// Where one harness run happens (the variables `scripts/test.sh` and
/// `scripts/bench.sh` export).
#[derive(Debug, Clone)]
pub struct Lab {
    /// containerd1, containerd2 or crio (CRILET_PARITY_RUNTIME).
    pub runtime: String,
    /// The runtime's own socket (CRILET_PARITY_ENDPOINT, unix://...).
    pub runtime_socket: PathBuf,
    /// The harness's scratch directory (CRILET_PARITY_DIR): manifests, both
    /// agents' root dirs, logs, snapshots and the report.
    pub dir: PathBuf,
    /// The cgroupfs root both agents make pod cgroups under
    /// (CRILET_PARITY_CGROUP_ROOT, made here in every controller).
    pub cgroup_root: String,
    /// The node's IP: the runtime instance's bridge address
    /// (CRILET_PARITY_NODE_IP), not loopback, which the kubelet refuses.
    pub node_ip: String,
    /// The kubelet server's port; healthz is +8, the read-only port +5
    /// (CRILET_PARITY_PORT).
    pub port: u16,
    /// The node name; its credentials are `kubeconfig-<node>` in
    /// CRILET_KUBE_NODE_KUBECONFIG_DIR.
    pub node: String,
    pub admin_kubeconfig: PathBuf,
    pub node_kubeconfig: PathBuf,
    pub crictl: PathBuf,
    pub kubectl: PathBuf,
    /// `../shared/lab` from the project root.
    pub lab_scripts: PathBuf,
}

fn var(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{name} is not set: the parity harness runs against a runtime and an API server \
             that `bash scripts/test.sh` (or `bash scripts/bench.sh parity`) starts for it"
        ),
    }
}

impl Lab {
    pub fn from_env() -> Lab {
        let endpoint = var("CRILET_PARITY_ENDPOINT");
        let socket = endpoint.strip_prefix("unix://").unwrap_or(&endpoint);
        let node = std::env::var("CRILET_PARITY_NODE").unwrap_or_else(|_| "crilet-parity".into());
        let node_dir = PathBuf::from(var("CRILET_KUBE_NODE_KUBECONFIG_DIR"));
        let runtime = var("CRILET_PARITY_RUNTIME");
        assert!(
            ["containerd1", "containerd2", "crio"].contains(&runtime.as_str()),
            "CRILET_PARITY_RUNTIME is {runtime:?}: containerd1, containerd2 or crio"
        );
        Lab {
            runtime,
            runtime_socket: PathBuf::from(socket),
            dir: PathBuf::from(var("CRILET_PARITY_DIR")),
            cgroup_root: var("CRILET_PARITY_CGROUP_ROOT"),
            node_ip: var("CRILET_PARITY_NODE_IP"),
            port: var("CRILET_PARITY_PORT")
                .parse()
                .expect("CRILET_PARITY_PORT: a port"),
            node_kubeconfig: node_dir.join(format!("kubeconfig-{node}")),
            node,
            admin_kubeconfig: PathBuf::from(var("CRILET_KUBE_ADMIN_KUBECONFIG")),
            crictl: PathBuf::from(var("CRILET_CRICTL")),
            kubectl: PathBuf::from(var("CRILET_KUBECTL")),
            lab_scripts: Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/lab"),
        }
    }

    /// Only what comparing saved runs needs: their directory and runtime.
    pub fn offline(dir: PathBuf, runtime: String) -> Lab {
        Lab {
            runtime,
            runtime_socket: PathBuf::new(),
            dir,
            cgroup_root: String::new(),
            node_ip: String::new(),
            port: 0,
            node: String::new(),
            admin_kubeconfig: PathBuf::new(),
            node_kubeconfig: PathBuf::new(),
            crictl: PathBuf::new(),
            kubectl: PathBuf::new(),
            lab_scripts: PathBuf::new(),
        }
    }

    /// The socket both agents take for their runtime: the recording proxy.
    pub fn proxy_socket(&self) -> PathBuf {
        self.dir.join("cri.sock")
    }

    pub fn manifests(&self) -> PathBuf {
        self.dir.join("manifests")
    }

    /// Host paths the corpus's hostPath volumes use (`@@HOST@@`).
    pub fn host_dir(&self) -> PathBuf {
        self.dir.join("host")
    }

    pub fn read_only_port(&self) -> u16 {
        self.port + 5
    }

    /// crictl against the runtime itself (not the proxy): what the
    /// runtime holds, not what an agent asked.
    pub fn crictl(&self, args: &[&str]) -> Result<String, String> {
        let endpoint = format!("unix://{}", self.runtime_socket.display());
        run(Command::new(&self.crictl)
            .args([
                "--runtime-endpoint",
                &endpoint,
                "--image-endpoint",
                &endpoint,
            ])
            .args(["--timeout", "30s"])
            .args(args)
            .env("CRI_CONFIG_FILE", "/dev/null"))
    }

    pub fn crictl_json(&self, args: &[&str]) -> Json {
        let text = self
            .crictl(args)
            .unwrap_or_else(|e| panic!("crictl {args:?}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("crictl {args:?}: not JSON: {e}"))
    }

    /// kubectl as the cluster admin.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        run(Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .args(["--request-timeout", "30s"])
            .args(args))
    }

    /// The pods bound to the lab's node (its mirror pods), as `kubectl get
    /// pods -o <output>` prints them.
    pub fn node_pods(&self, output: &str) -> Result<String, String> {
        let selector = format!("spec.nodeName={}", self.node);
        self.kubectl(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            &selector,
            "-o",
            output,
        ])
    }

    /// [`Lab::node_pods`] as JSON; panics when kubectl fails.
    pub fn node_pods_json(&self) -> Json {
        let text = (self.node_pods("json")).unwrap_or_else(|e| panic!("kubectl get pods: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl get pods: not JSON: {e}"))
    }

    pub fn kubectl_json(&self, args: &[&str]) -> Json {
        let text = self
            .kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?}: not JSON: {e}"))
    }

    /// `GET http://127.0.0.1:<read-only port><path>` from the running agent.
    pub fn get(&self, path: &str) -> Option<Json> {
        let url = format!("http://127.0.0.1:{}{path}", self.read_only_port());
        let body = run(Command::new("curl").args(["-fsS", "--max-time", "5", &url])).ok()?;
        serde_json::from_str(&body).ok()
    }

    /// Every sandbox on the runtime stopped and removed (containers with
    /// them), as between the two agents' runs. Fails if any is left.
    pub fn remove_all_pods(&self) {
        for _ in 0..3 {
            let pods = self.crictl(&["pods", "-q"]).unwrap_or_default();
            let ids: Vec<&str> = pods.split_whitespace().collect();
            if ids.is_empty() {
                return;
            }
            for id in &ids {
                let _ = self.crictl(&["stopp", id]);
                let _ = self.crictl(&["rmp", "-f", id]);
            }
        }
        let left = self.crictl(&["pods", "-q"]).unwrap_or_default();
        assert!(
            left.trim().is_empty(),
            "sandboxes left on the runtime after removal: {left}"
        );
    }

    /// The node's objects gone from the API server: its Node, Lease, pods
    /// and the Events it or its pods reported.
    pub fn forget_node(&self) {
        let node = &self.node;
        let _ = self.kubectl(&["delete", "node", node, "--ignore-not-found", "--wait=false"]);
        let _ = self.kubectl(&[
            "-n",
            "kube-node-lease",
            "delete",
            "lease",
            node,
            "--ignore-not-found",
        ]);
        let selector = format!("spec.nodeName={node}");
        let _ = self.kubectl(&[
            "delete",
            "pods",
            "-A",
            "--field-selector",
            &selector,
            "--grace-period=0",
            "--force",
        ]);
        let events = self.kubectl_json(&["get", "events", "-A", "-o", "json"]);
        for e in events["items"].as_array().into_iter().flatten() {
            if event_of_node(e, node) {
                let (ns, name) = (
                    e["metadata"]["namespace"].as_str().unwrap_or_default(),
                    e["metadata"]["name"].as_str().unwrap_or_default(),
                );
                let _ = self.kubectl(&["-n", ns, "delete", "event", name, "--ignore-not-found"]);
            }
        }
    }

    /// The host directory as a shared mount of its own (a bind of itself),
    /// so that mountPropagation HostToContainer and Bidirectional work on
    /// its paths as on a node whose root is shared: this machine's root
    /// mount is private, and the runtime refuses propagation from it.
    pub fn make_host_dir_shared(&self) {
        let dir = self.host_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let target = dir.display().to_string();
        if !mounts
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(target.as_str()))
        {
            run(Command::new("mount").args(["--bind", &target, &target]))
                .unwrap_or_else(|e| panic!("mount --bind {target}: {e}"));
        }
        run(Command::new("mount").args(["--make-rshared", &target]))
            .unwrap_or_else(|e| panic!("mount --make-rshared {target}: {e}"));
    }

    /// The cgroup root in every cgroup v1 controller (cpuset's cpus and
    /// mems copied from the top, which a new cpuset cgroup lacks), as the
    /// kubelet requires it to exist.
    pub fn make_cgroup_root(&self) {
        let top = Path::new("/sys/fs/cgroup");
        let Ok(controllers) = std::fs::read_dir(top) else {
            return;
        };
        for c in controllers.flatten() {
            let dir = c.path().join(&self.cgroup_root);
            if c.path().join("cgroup.procs").exists() || c.path().is_dir() {
                let _ = std::fs::create_dir_all(&dir);
            }
        }
        let cpuset = top.join("cpuset");
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let Ok(value) = std::fs::read_to_string(cpuset.join(file)) else {
                continue;
            };
            let _ = std::fs::write(cpuset.join(&self.cgroup_root).join(file), value.trim());
        }
    }
}

/// Whether an Event was reported by this node or about it.
pub fn event_of_node(e: &Json, node: &str) -> bool {
    e["source"]["host"].as_str() == Some(node)
        || e["reportingInstance"].as_str() == Some(node)
        || (e["involvedObject"]["kind"] == "Node" && e["involvedObject"]["name"] == node)
}

/// Runs a command: stdout on success, stderr (or the spawn error) on failure.
pub fn run(command: &mut Command) -> Result<String, String> {
    match command.output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(format!(
            "{}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{:?}: {e}", command.get_program())),
    }
}

/// Polls `check` every `every` until it returns Some or `limit` passes.
pub fn wait_for<T>(
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}
