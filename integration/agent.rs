//! The real `crilet run` binary against the agent tests' own containerd.
//!
//! An agent owns every kubelet-labelled pod on its runtime, so these tests
//! run one at a time (AGENT_LOCK) on a containerd that no other test uses,
//! and each starts from an empty runtime.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crilet::cm::cgroup::{CGROUP_ROOT, pod_cgroup_dirs};
use crilet::cri::*;
use crilet::kuberuntime::labels::{ContainerLabels, PodSandboxLabels};

use crate::support::{eventually, runtime_kind};

pub const NODE: &str = "crilet-node";
pub const CGROUP_ROOT_NAME: &str = "crilet-agent-test";

/// The agents' `--cgroup-root` (without the slash):
/// CRILET_AGENT_TEST_CGROUP_ROOT, or [`CGROUP_ROOT_NAME`], so that a second
/// agent-test run on the machine keeps to its own cgroups.
pub fn cgroup_root_name() -> String {
    std::env::var("CRILET_AGENT_TEST_CGROUP_ROOT").unwrap_or_else(|_| CGROUP_ROOT_NAME.into())
}

/// Serialises the agent tests.
pub static AGENT_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn agent_endpoint() -> String {
    std::env::var("CRILET_AGENT_TEST_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "CRILET_AGENT_TEST_ENDPOINT is not set: the agent tests need their own private \
             containerd. Run `bash scripts/test.sh`."
        )
    })
}

pub fn agent_runtime() -> CriRuntime {
    CriRuntime::connect_lazy(
        &agent_endpoint(),
        RuntimeOptions {
            request_timeout: Duration::from_secs(30),
            image_pull_timeout: Duration::from_secs(120),
        },
    )
    .unwrap()
}

/// Runs `scripts/runtime.sh CMD <kind> $CRILET_AGENT_TEST_DIR` on the agent
/// tests' runtime: `stop` ends the daemon and leaves its pods running, `up`
/// brings it back with the settings of its first start.
pub fn agent_runtime_ctl(cmd: &str) {
    let dir = std::env::var("CRILET_AGENT_TEST_DIR").expect("CRILET_AGENT_TEST_DIR");
    let kind = std::env::var("CRILET_TEST_RUNTIME").expect("CRILET_TEST_RUNTIME");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/runtime.sh");
    let out = Command::new("bash")
        .args([script, cmd, &kind, &dir])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "runtime.sh {cmd} {kind} {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `crilet run` with its own manifest and root directories.
pub struct AgentProcess {
    child: Option<Child>,
    /// `--hostname-override`: the node name in its pods' names.
    node: String,
    extra_args: Vec<String>,
    /// NOTIFY_SOCKET for the next spawn, as systemd sets it.
    pub notify_socket: Option<PathBuf>,
    pub manifests: tempfile::TempDir,
    pub root: tempfile::TempDir,
    log: PathBuf,
}

impl AgentProcess {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts with more flags (e.g. --kubeconfig).
    pub fn start_with(extra_args: &[String]) -> Self {
        Self::start_on(NODE, extra_args)
    }

    /// Starts as node `node`, with more flags.
    pub fn start_on(node: &str, extra_args: &[String]) -> Self {
        let mut a = Self::prepare_on(node, extra_args);
        a.spawn();
        a
    }

    /// Makes the directories of an agent on node `node` but does not start
    /// it: manifests written now are there at its first read.
    pub fn prepare_on(node: &str, extra_args: &[String]) -> Self {
        let manifests = tempfile::Builder::new()
            .prefix("crilet-manifests-")
            .tempdir()
            .unwrap();
        let root = tempfile::Builder::new()
            .prefix("crilet-root-")
            .tempdir()
            .unwrap();
        AgentProcess {
            child: None,
            node: node.to_owned(),
            extra_args: extra_args.to_vec(),
            notify_socket: None,
            log: root.path().join("crilet.log"),
            manifests,
            root,
        }
    }

    /// Starts (again) the binary on the same directories.
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_crilet"));
        command.env_remove("NOTIFY_SOCKET");
        if let Some(socket) = &self.notify_socket {
            command.env("NOTIFY_SOCKET", socket);
        }
        let child = command
            .args(["run", "--container-runtime-endpoint", &agent_endpoint()])
            .arg("--pod-manifest-path")
            .arg(self.manifests.path())
            .args([
                "--file-check-frequency",
                "1s",
                "--hostname-override",
                &self.node,
            ])
            .arg("--root-dir")
            .arg(self.root.path())
            .args(crate::support::private_log_dirs_unless(
                &self.extra_args,
                self.root.path(),
            ))
            .args(["--cgroup-root", &format!("/{}", cgroup_root_name())])
            .args(["--node-ip", "127.0.0.1"])
            .arg("--socket")
            .arg(self.socket())
            .args(&self.extra_args)
            .args(crate::support::no_kubelet_port(&self.extra_args))
            .env("CRILET_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start crilet run");
        self.child = Some(child);
    }

    /// The flags of its next [`spawn`](Self::spawn), besides the ones every
    /// agent of the tests gets.
    pub fn set_extra_args(&mut self, extra_args: &[String]) {
        self.extra_args = extra_args.to_vec();
    }

    /// Its `--pod-logs-dir` (see `support::private_log_dirs`), unless its
    /// flags name another.
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.root.path().join("pod-logs")
    }

    /// Its `--container-logs-dir`.
    pub fn container_logs_dir(&self) -> PathBuf {
        self.root.path().join("containers")
    }

    /// The full pod name of static pod `name` on this node.
    pub fn pod_name(&self, name: &str) -> String {
        format!("{name}-{}", self.node)
    }

    /// The runtime's view of this agent's static pod `name`.
    pub async fn view(&self, rt: &CriRuntime, name: &str) -> PodView {
        pod_view_on(rt, &self.node, name).await
    }

    /// The agent's gRPC socket (in its root directory).
    pub fn socket(&self) -> PathBuf {
        self.root.path().join("crilet.sock")
    }

    pub fn write(&self, file: &str, manifest: &str) {
        // Write then rename, as an operator's tooling would: never half a file.
        let tmp = self.manifests.path().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, manifest).unwrap();
        std::fs::rename(&tmp, self.manifests.path().join(file)).unwrap();
    }

    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.manifests.path().join(file)).unwrap();
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: the agent gets no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, as an init system stops it; waits for the exit.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = c.kill();
        c.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Stops and removes every sandbox, then removes every container left.
pub async fn remove_all_pods(rt: &CriRuntime) {
    // Containers first, at once: CRI-O's StopPodSandbox waits up to 30 s for
    // each container whose PID 1 ignores SIGTERM (a shell's does).
    let running = ContainerFilter {
        state: Some(ContainerState::Running),
        ..Default::default()
    };
    for c in rt.list_containers(&running).await.unwrap() {
        let _ = rt.stop_container(&c.id, Duration::ZERO).await;
    }
    for s in rt
        .list_pod_sandbox(&PodSandboxFilter::default())
        .await
        .unwrap()
    {
        let _ = rt.stop_pod_sandbox(&s.id).await;
        let _ = rt.remove_pod_sandbox(&s.id).await;
    }
    for c in rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap()
    {
        let _ = rt.remove_container(&c.id).await;
    }
}

/// Removes every pod from the agent tests' runtime, so each test starts empty.
/// A runtime that does not answer (one that died in an earlier test: the
/// test that saw it die has failed, and scripts/test.sh keeps the runtime's
/// log) is brought up again first, so it costs no other test.
pub async fn clean_runtime(rt: &CriRuntime) {
    if let Err(e) = rt.version().await {
        eprintln!("the agent tests' runtime does not answer ({e}); bringing it up again");
        agent_runtime_ctl("up");
    }
    remove_all_pods(rt).await;
    let root = Path::new(CGROUP_ROOT);
    for h in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = cgroup_root_name();
        let dir = h.path().join(&name);
        if dir.is_dir() {
            let _ = crilet::cm::cgroup::remove_pod_cgroup(&h.path(), &name);
        }
    }
}

/// The runtime's view of one pod by sandbox name (`<name>-<node>`).
#[derive(Debug, Clone)]
pub struct PodView {
    pub sandboxes: Vec<PodSandbox>,
    pub containers: Vec<Container>,
}

impl PodView {
    pub fn ready_sandbox(&self) -> Option<&PodSandbox> {
        self.sandboxes
            .iter()
            .find(|s| s.state == PodSandboxState::Ready)
    }

    pub fn running(&self, name: &str) -> Option<&Container> {
        self.containers
            .iter()
            .find(|c| c.metadata.name == name && c.state == ContainerState::Running)
    }

    pub fn named(&self, name: &str) -> Vec<&Container> {
        let mut v: Vec<&Container> = self
            .containers
            .iter()
            .filter(|c| c.metadata.name == name)
            .collect();
        v.sort_by_key(|c| c.metadata.attempt);
        v
    }

    pub fn uid(&self) -> Option<String> {
        self.sandboxes.first().map(|s| s.metadata.uid.clone())
    }
}

/// As [`pod_view_on`], for an agent on [`NODE`].
pub async fn pod_view(rt: &CriRuntime, name: &str) -> PodView {
    pod_view_on(rt, NODE, name).await
}

/// The runtime's view of one pod by sandbox name (`<name>-<node>`).
pub async fn pod_view_on(rt: &CriRuntime, node: &str, name: &str) -> PodView {
    let full = format!("{name}-{node}");
    let sandboxes: Vec<PodSandbox> = rt
        .list_pod_sandbox(&PodSandboxFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.metadata.name == full)
        .collect();
    let ids: Vec<&str> = sandboxes.iter().map(|s| s.id.as_str()).collect();
    let containers = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|c| ids.contains(&c.pod_sandbox_id.as_str()))
        .collect();
    PodView {
        sandboxes,
        containers,
    }
}

/// Waits until `check` holds for the pod's view, or fails with the view and the agent's log.
pub async fn wait_for(
    rt: &CriRuntime,
    agent: &AgentProcess,
    name: &str,
    limit: Duration,
    what: &str,
    check: impl Fn(&PodView) -> bool,
) -> PodView {
    let found = eventually(limit, || async {
        let v = agent.view(rt, name).await;
        check(&v).then_some(v)
    })
    .await;
    match found {
        Some(v) => v,
        None => panic!(
            "timed out after {limit:?} waiting for {what} of pod {name}\nruntime: {:#?}\ncrilet log:\n{}",
            agent.view(rt, name).await,
            agent.logs()
        ),
    }
}

pub fn busybox_pod(name: &str, policy: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    app: {name}\nspec:\n  hostNetwork: true\n  restartPolicy: {policy}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script:?}]\n"
    )
}

fn cgroup_left(uid: &str) -> Vec<PathBuf> {
    ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
        .iter()
        .flat_map(|q| {
            pod_cgroup_dirs(
                Path::new(CGROUP_ROOT),
                &format!("/{}/{q}/pod{uid}", cgroup_root_name()),
            )
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn manifest_added_edited_removed() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    let limit = Duration::from_secs(30);

    // Added: sandbox and container running, named and labelled as the kubelet does.
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    let v = wait_for(&rt, &agent, "web", limit, "a running container", |v| {
        v.running("main").is_some()
    })
    .await;
    assert_eq!(v.sandboxes.len(), 1);
    let sb = &v.sandboxes[0];
    assert_eq!(sb.metadata.name, format!("web-{NODE}"));
    assert_eq!(sb.metadata.namespace, "default");
    assert_eq!(sb.metadata.attempt, 0);
    assert_eq!(
        sb.metadata.uid.len(),
        32,
        "static pod UID is an MD5 hex: {:?}",
        sb.metadata.uid
    );
    let sl = PodSandboxLabels::from_labels(&sb.labels, &sb.annotations).unwrap();
    assert_eq!(sl.pod_name, format!("web-{NODE}"));
    assert_eq!(sl.pod_namespace, "default");
    assert_eq!(sl.pod_uid, sb.metadata.uid);
    assert_eq!(sl.pod_labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        sb.annotations
            .get("kubernetes.io/config.source")
            .map(String::as_str),
        Some("file")
    );
    assert_eq!(
        sb.annotations.get("kubernetes.io/config.hash"),
        Some(&sb.metadata.uid)
    );
    assert!(sb.annotations.contains_key("kubernetes.io/config.seen"));
    let c = v.running("main").unwrap();
    let cl = ContainerLabels::from_labels(&c.labels, &c.annotations).unwrap();
    assert_eq!(cl.container_name, "main");
    assert_eq!(cl.pod_uid, sb.metadata.uid);
    assert_eq!(cl.restart_count, 0);
    assert_eq!(cl.termination_grace_period, Some(1));
    let first_uid = sb.metadata.uid.clone();
    // containerd 1.6 has no RuntimeConfig: crilet says it trusts its flag.
    // containerd 2 and CRI-O report cgroupfs, which is crilet's default.
    let trusted = agent
        .logs()
        .contains("the runtime does not report its cgroup driver; crilet trusts --cgroup-driver");
    assert_eq!(
        trusted,
        !runtime_kind().reports_cgroup_driver(),
        "{}",
        agent.logs()
    );
    assert!(
        !cgroup_left(&first_uid).is_empty(),
        "pod cgroup exists while it runs"
    );
    let log_dir = agent
        .pod_logs_dir()
        .join(format!("default_web-{NODE}_{first_uid}"))
        .join("main/0.log");
    assert!(
        eventually(Duration::from_secs(5), || async {
            log_dir.exists().then_some(())
        })
        .await
        .is_some(),
        "log file {} missing",
        log_dir.display()
    );

    // Edited: a new UID runs, the old pod goes.
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "echo v2; exec sleep 100000"),
    );
    let v = wait_for(&rt, &agent, "web", limit, "the edited pod alone", |v| {
        v.sandboxes.len() == 1
            && v.uid().is_some_and(|u| u != first_uid)
            && v.running("main").is_some()
    })
    .await;
    let second_uid = v.uid().unwrap();
    assert!(
        cgroup_left(&first_uid).is_empty(),
        "old pod cgroup left behind"
    );
    // Two pods of one full name never run at once: the new sandbox is made
    // only after the old pod has stopped (host ports, lock files), as under
    // the kubelet; its removal need not have ended.
    let logs = agent.logs();
    let line_of = |needle: &str, uid: &str| {
        logs.lines()
            .position(|l| l.contains(needle) && l.contains(uid))
            .unwrap_or_else(|| panic!("no {needle:?} line for {uid}:\n{logs}"))
    };
    assert!(
        line_of("pod stopped", &first_uid) < line_of("CreateSandbox", &second_uid),
        "the edited pod started before the old one was gone:\n{logs}"
    );

    // Removed: nothing left, cgroup included.
    agent.remove("web.yaml");
    wait_for(&rt, &agent, "web", limit, "removal", |v| {
        v.sandboxes.is_empty() && v.containers.is_empty()
    })
    .await;
    let cg = eventually(Duration::from_secs(5), || async {
        cgroup_left(&second_uid).is_empty().then_some(())
    })
    .await;
    assert!(
        cg.is_some(),
        "pod cgroup left: {:?}",
        cgroup_left(&second_uid)
    );
}
