//! An in-memory `Runtime` for unit tests of the subsystems above it.
//!
//! It keeps sandboxes, containers and images the way CRI describes them,
//! records every call in order, can be told to fail a given operation, and
//! streams container events as containerd 2 does (`events`).
//! Invariant: it never touches the host; time is a counter the test sets,
//! unless the fake is paced (`pacing`, for hollow nodes): then time is the
//! wall clock, each call takes about as long as containerd's, calls are not
//! recorded and running containers' stats move.
//! The state and the test controls live here, the CRI calls in `runtime`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::*;
use events::FakeEvents;

mod events;
mod pacing;
mod runtime;

pub use pacing::Pacing;

/// One recorded call: the operation name (as in CRI) and its main argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: &'static str,
    pub arg: String,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    now: i64,
    sandboxes: BTreeMap<String, (PodSandboxConfig, PodSandboxState, i64)>,
    containers: BTreeMap<String, FakeContainer>,
    images: BTreeMap<String, Image>,
    calls: Vec<Call>,
    failures: HashMap<&'static str, VecDeque<tonic::Status>>,
    /// Operations whose calls wait, once recorded, for their token.
    holds: HashMap<&'static str, tokio_util::sync::CancellationToken>,
    sandbox_image: Option<String>,
    /// RuntimeConfig's answer once set; unset answers CGROUPFS.
    runtime_config: Option<Option<CgroupDriver>>,
    exec_results: VecDeque<ExecSyncResult>,
    /// The IPs PodSandboxStatus reports for a pod-network sandbox (the
    /// first as `ip`); none by default, and never for the host network.
    pod_ips: Vec<String>,
    exec_timeouts: Vec<Duration>,
    stop_timeouts: Vec<(String, Duration)>,
    events: FakeEvents,
    /// Paced (a hollow node's runtime): wall clock, no call log, moving stats.
    paced: bool,
}

#[derive(Debug, Clone)]
struct FakeContainer {
    sandbox_id: String,
    config: ContainerConfig,
    state: ContainerState,
    created_at: i64,
    started_at: i64,
    finished_at: i64,
    exit_code: i32,
}

/// A sandbox config for pod `name` (namespace default, UID `uid-<name>`),
/// for tests.
#[cfg(test)]
pub(crate) fn sandbox(name: &str) -> PodSandboxConfig {
    PodSandboxConfig {
        metadata: PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 0,
        },
        ..Default::default()
    }
}

#[derive(Debug, Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
    pacing: Option<Pacing>,
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake for a hollow node: paced as `pacing` says, serving container
    /// events as containerd 2 does.
    pub fn paced(pacing: Pacing) -> Self {
        let fake = FakeRuntime {
            pacing: Some(pacing),
            ..Self::default()
        };
        {
            let mut s = fake.state.lock().unwrap();
            s.paced = true;
            s.now = wall_clock_nanos();
        }
        fake.serve_container_events();
        fake
    }

    /// Runs a sandbox for pod `name` (namespace default, UID `uid`) with one
    /// running busybox container `container` that logs to `log_path`, as
    /// the worker would; returns the container's ID. For tests and benches
    /// of what reads a running container (logs, exec).
    pub async fn run_container(
        &self,
        name: &str,
        uid: &str,
        container: &str,
        log_path: &str,
    ) -> String {
        self.add_image("busybox:latest", 10);
        let sb = PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: name.into(),
                uid: uid.into(),
                namespace: "default".into(),
                attempt: 0,
            },
            ..Default::default()
        };
        let sid = self.run_pod_sandbox(&sb).await.expect("fake RunPodSandbox");
        let cfg = ContainerConfig {
            metadata: ContainerMetadata {
                name: container.into(),
                attempt: 0,
            },
            image: "busybox:latest".into(),
            log_path: log_path.into(),
            ..Default::default()
        };
        let cid = self
            .create_container(&sid, &cfg, &sb)
            .await
            .expect("fake CreateContainer");
        self.start_container(&cid)
            .await
            .expect("fake StartContainer");
        cid
    }

    /// Gives every pod-network sandbox these IPs from now on, as a CNI
    /// plugin would (the first is the pod IP).
    pub fn set_pod_ips(&self, ips: &[&str]) {
        self.state.lock().unwrap().pod_ips = ips.iter().map(|ip| ip.to_string()).collect();
    }

    /// Adds an image as if it had been pulled; its id is `sha256:<name>`.
    pub fn add_image(&self, reference: &str, size: u64) -> String {
        let mut s = self.state.lock().unwrap();
        let id = format!("sha256:{}", reference.replace([':', '/'], "-"));
        s.images.insert(
            id.clone(),
            Image {
                id: id.clone(),
                repo_tags: vec![reference.to_string()],
                repo_digests: vec![],
                size,
                uid: None,
                username: String::new(),
                pinned: false,
            },
        );
        id
    }

    /// What `sandbox_image` answers (default: nothing, like CRI-O).
    pub fn set_sandbox_image(&self, image: Option<&str>) {
        self.state.lock().unwrap().sandbox_image = image.map(str::to_string);
    }

    /// What `runtime_config` answers: a driver, or `None` as for a runtime
    /// without RuntimeConfig (default: cgroupfs, like containerd 2 and CRI-O).
    pub fn set_runtime_config(&self, driver: Option<CgroupDriver>) {
        self.state.lock().unwrap().runtime_config = Some(driver);
    }

    /// Marks an image as pinned by the runtime.
    pub fn pin_image(&self, id: &str) {
        if let Some(i) = self.state.lock().unwrap().images.get_mut(id) {
            i.pinned = true;
        }
    }

    /// The next call of `op` (a CRI method name, e.g. "RunPodSandbox") fails.
    pub fn fail_next(&self, op: &'static str, status: tonic::Status) {
        let mut s = self.state.lock().unwrap();
        s.failures.entry(op).or_default().push_back(status);
    }

    /// Every call of `op` from now on waits, once recorded, until the
    /// returned token is cancelled: a call the runtime holds (CRI-O 1.32
    /// holds some for minutes, docs/runtimes.md).
    pub fn hold(&self, op: &'static str) -> tokio_util::sync::CancellationToken {
        let token = tokio_util::sync::CancellationToken::new();
        let mut s = self.state.lock().unwrap();
        s.holds.insert(op, token.clone());
        token
    }

    /// The next ExecSync on a running container answers `result` instead of
    /// echoing its command (queued, in order).
    pub fn push_exec_result(&self, result: ExecSyncResult) {
        self.state.lock().unwrap().exec_results.push_back(result);
    }

    /// The timeouts ExecSync was called with, in order.
    pub fn exec_timeouts(&self) -> Vec<Duration> {
        self.state.lock().unwrap().exec_timeouts.clone()
    }

    /// StopContainer's (id, timeout) per call, in order.
    pub fn stop_timeouts(&self) -> Vec<(String, Duration)> {
        self.state.lock().unwrap().stop_timeouts.clone()
    }

    /// Marks a running container as exited with `code`.
    pub fn exit_container(&self, id: &str, code: i32) {
        let mut s = self.state.lock().unwrap();
        let now = s.now;
        if let Some(c) = s.containers.get_mut(id) {
            c.state = ContainerState::Exited;
            c.finished_at = now;
            c.exit_code = code;
            s.container_event(id, ContainerEventType::Stopped);
        }
    }

    /// Sets the fake clock (nanoseconds) used for created/started/finished.
    pub fn set_now(&self, now: i64) {
        self.state.lock().unwrap().now = now;
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The names of the calls so far, in order.
    pub fn ops(&self) -> Vec<&'static str> {
        self.state
            .lock()
            .unwrap()
            .calls
            .iter()
            .map(|c| c.op)
            .collect()
    }

    async fn enter(&self, op: &'static str, arg: &str) -> Result<std::sync::MutexGuard<'_, State>> {
        if let Some(pacing) = &self.pacing {
            tokio::time::sleep(pacing.latency(op)).await;
        }
        let held = {
            let mut s = self.state.lock().unwrap();
            if !s.paced {
                s.calls.push(Call {
                    op,
                    arg: arg.to_string(),
                });
            }
            s.holds.get(op).cloned()
        };
        if let Some(token) = held {
            token.cancelled().await;
        }
        let mut s = self.state.lock().unwrap();
        if s.paced {
            s.now = wall_clock_nanos();
        }
        if let Some(status) = s.failures.get_mut(op).and_then(|q| q.pop_front()) {
            return Err(rpc_error(op, status));
        }
        Ok(s)
    }
}

fn wall_clock_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

fn rpc_error(op: &'static str, status: tonic::Status) -> RuntimeError {
    let endpoint = "fake://".into();
    RuntimeError::Rpc {
        endpoint,
        op,
        status,
    }
}

fn not_found(op: &'static str, what: &str) -> RuntimeError {
    rpc_error(op, tonic::Status::not_found(format!("{what} not found")))
}

/// How a list call's label selector is recorded: `k=v` pairs in order,
/// empty for an unfiltered list (a relist).
fn selector_arg(selector: &Labels) -> String {
    let mut pairs: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.sort();
    pairs.join(",")
}

fn matches(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl State {
    fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:016x}", self.next_id)
    }

    fn resolve_image(&self, image: &str) -> Option<&Image> {
        self.images
            .values()
            .find(|i| i.id == image || i.repo_tags.iter().any(|t| t == image))
    }

    fn container_stats(&self, id: &str, c: &FakeContainer) -> ContainerStats {
        let (cpu, memory) = match self.paced {
            true => {
                let seed = pacing::seed(id);
                let cpu = pacing::cpu_usage_nanos(seed, c.started_at, self.now);
                (cpu, pacing::working_set_bytes(seed, self.now))
            }
            false => (0, 0),
        };
        ContainerStats {
            id: id.to_string(),
            metadata: c.config.metadata.clone(),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
            cpu: Some(CpuUsage {
                timestamp: self.now,
                usage_core_nano_seconds: Some(cpu),
                usage_nano_cores: None,
            }),
            memory: Some(MemoryUsage {
                timestamp: self.now,
                working_set_bytes: Some(memory),
                ..Default::default()
            }),
            writable_layer: None,
        }
    }
}

fn sandbox_stats(s: &State, id: &str, config: &PodSandboxConfig) -> PodSandboxStats {
    PodSandboxStats {
        id: id.to_string(),
        metadata: config.metadata.clone(),
        labels: config.labels.clone(),
        annotations: config.annotations.clone(),
        cpu: Some(CpuUsage {
            timestamp: s.now,
            usage_core_nano_seconds: Some(0),
            usage_nano_cores: None,
        }),
        memory: None,
        network: None,
        process_count: Some(1),
        containers: s
            .containers
            .iter()
            .filter(|(_, c)| c.sandbox_id == id && c.state == ContainerState::Running)
            .map(|(cid, c)| s.container_stats(cid, c))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
