//! An in-memory `Runtime` for unit tests of the layers above it.
//!
//! It keeps sandboxes, containers and images the way CRI describes them,
//! records every call in order, and can be told to fail a given operation.
//! Invariant: it never touches the host; time is a counter the test sets.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::*;

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
    sandbox_image: Option<String>,
    /// RuntimeConfig's answer once set; unset answers CGROUPFS.
    runtime_config: Option<Option<CgroupDriver>>,
    exec_results: VecDeque<ExecSyncResult>,
    exec_timeouts: Vec<Duration>,
    stop_timeouts: Vec<(String, Duration)>,
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

#[derive(Debug, Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
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

    fn enter(&self, op: &'static str, arg: &str) -> Result<std::sync::MutexGuard<'_, State>> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(Call {
            op,
            arg: arg.to_string(),
        });
        if let Some(status) = s.failures.get_mut(op).and_then(|q| q.pop_front()) {
            return Err(rpc_error(op, status));
        }
        Ok(s)
    }
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
        ContainerStats {
            id: id.to_string(),
            metadata: c.config.metadata.clone(),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
            cpu: Some(CpuUsage {
                timestamp: self.now,
                usage_core_nano_seconds: Some(0),
                usage_nano_cores: None,
            }),
            memory: Some(MemoryUsage {
                timestamp: self.now,
                working_set_bytes: Some(0),
                ..Default::default()
            }),
            writable_layer: None,
        }
    }
}

#[async_trait::async_trait]
impl Runtime for FakeRuntime {
    async fn version(&self) -> Result<VersionInfo> {
        drop(self.enter("Version", "")?);
        Ok(VersionInfo {
            runtime_name: "fake".into(),
            runtime_version: "0.0.0".into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn status(&self) -> Result<RuntimeStatus> {
        drop(self.enter("Status", "")?);
        let cond = |kind: &str| RuntimeCondition {
            kind: kind.into(),
            status: true,
            reason: String::new(),
            message: String::new(),
        };
        Ok(RuntimeStatus {
            conditions: vec![cond(RUNTIME_READY), cond(NETWORK_READY)],
        })
    }

    async fn runtime_config(&self) -> Result<Option<CgroupDriver>> {
        let s = self.enter("RuntimeConfig", "")?;
        Ok(s.runtime_config.unwrap_or(Some(CgroupDriver::Cgroupfs)))
    }

    async fn sandbox_image(&self) -> Result<Option<String>> {
        let s = self.enter("Status", "verbose")?;
        Ok(s.sandbox_image.clone())
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<String> {
        let mut s = self.enter("RunPodSandbox", &config.metadata.name)?;
        let taken = s
            .sandboxes
            .values()
            .any(|(c, _, _)| c.metadata == config.metadata);
        if taken {
            let (name, attempt) = (&config.metadata.name, config.metadata.attempt);
            let msg = format!("name {name:?} attempt {attempt} is reserved");
            return Err(rpc_error("RunPodSandbox", tonic::Status::unknown(msg)));
        }
        let id = s.new_id("sb");
        let now = s.now;
        s.sandboxes
            .insert(id.clone(), (config.clone(), PodSandboxState::Ready, now));
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        let mut s = self.enter("StopPodSandbox", id)?;
        let now = s.now;
        let Some(sb) = s.sandboxes.get_mut(id) else {
            return Err(not_found("StopPodSandbox", id));
        };
        sb.1 = PodSandboxState::NotReady;
        for c in s.containers.values_mut().filter(|c| c.sandbox_id == id) {
            if c.state == ContainerState::Running {
                c.state = ContainerState::Exited;
                c.finished_at = now;
                c.exit_code = 137;
            }
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        let mut s = self.enter("RemovePodSandbox", id)?;
        s.sandboxes.remove(id);
        s.containers.retain(|_, c| c.sandbox_id != id);
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<PodSandboxStatus> {
        let s = self.enter("PodSandboxStatus", id)?;
        let (config, state, created_at) = s
            .sandboxes
            .get(id)
            .ok_or_else(|| not_found("PodSandboxStatus", id))?;
        Ok(PodSandboxStatus {
            id: id.to_string(),
            metadata: config.metadata.clone(),
            state: *state,
            created_at: *created_at,
            ip: String::new(),
            additional_ips: vec![],
            namespace_options: config.security.namespace_options.clone(),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            runtime_handler: config.runtime_handler.clone(),
        })
    }

    async fn list_pod_sandbox(&self, filter: &PodSandboxFilter) -> Result<Vec<PodSandbox>> {
        let s = self.enter("ListPodSandbox", "")?;
        Ok(s.sandboxes
            .iter()
            .filter(|(id, (c, st, _))| {
                filter.id.as_deref().is_none_or(|f| f == id.as_str())
                    && filter.state.is_none_or(|f| f == *st)
                    && matches(&filter.label_selector, &c.labels)
            })
            .map(|(id, (c, st, created_at))| PodSandbox {
                id: id.clone(),
                metadata: c.metadata.clone(),
                state: *st,
                created_at: *created_at,
                labels: c.labels.clone(),
                annotations: c.annotations.clone(),
                runtime_handler: c.runtime_handler.clone(),
            })
            .collect())
    }

    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &ContainerConfig,
        _sandbox: &PodSandboxConfig,
    ) -> Result<String> {
        let mut s = self.enter("CreateContainer", &config.metadata.name)?;
        if !s.sandboxes.contains_key(pod_sandbox_id) {
            return Err(not_found("CreateContainer", pod_sandbox_id));
        }
        if s.resolve_image(&config.image).is_none() {
            return Err(not_found("CreateContainer", &config.image));
        }
        let id = s.new_id("ctr");
        let now = s.now;
        s.containers.insert(
            id.clone(),
            FakeContainer {
                sandbox_id: pod_sandbox_id.to_string(),
                config: config.clone(),
                state: ContainerState::Created,
                created_at: now,
                started_at: 0,
                finished_at: 0,
                exit_code: 0,
            },
        );
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        let mut s = self.enter("StartContainer", id)?;
        let now = s.now;
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found("StartContainer", id))?;
        c.state = ContainerState::Running;
        c.started_at = now;
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()> {
        let mut s = self.enter("StopContainer", id)?;
        s.stop_timeouts.push((id.to_string(), timeout));
        let now = s.now;
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found("StopContainer", id))?;
        if c.state == ContainerState::Running {
            c.state = ContainerState::Exited;
            c.finished_at = now;
            c.exit_code = 143;
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut s = self.enter("RemoveContainer", id)?;
        s.containers.remove(id);
        Ok(())
    }

    async fn list_containers(&self, filter: &ContainerFilter) -> Result<Vec<Container>> {
        let s = self.enter("ListContainers", "")?;
        Ok(s.containers
            .iter()
            .filter(|(id, c)| {
                filter.id.as_deref().is_none_or(|f| f == id.as_str())
                    && filter.state.is_none_or(|f| f == c.state)
                    && filter
                        .pod_sandbox_id
                        .as_deref()
                        .is_none_or(|f| f == c.sandbox_id)
                    && matches(&filter.label_selector, &c.config.labels)
            })
            .map(|(id, c)| Container {
                id: id.clone(),
                pod_sandbox_id: c.sandbox_id.clone(),
                metadata: c.config.metadata.clone(),
                image: c.config.image.clone(),
                image_ref: s
                    .resolve_image(&c.config.image)
                    .map(|i| i.id.clone())
                    .unwrap_or_default(),
                state: c.state,
                created_at: c.created_at,
                labels: c.config.labels.clone(),
                annotations: c.config.annotations.clone(),
            })
            .collect())
    }

    async fn container_status(&self, id: &str) -> Result<ContainerStatus> {
        let s = self.enter("ContainerStatus", id)?;
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| not_found("ContainerStatus", id))?;
        Ok(ContainerStatus {
            id: id.to_string(),
            metadata: c.config.metadata.clone(),
            state: c.state,
            created_at: c.created_at,
            started_at: c.started_at,
            finished_at: c.finished_at,
            exit_code: c.exit_code,
            image: c.config.image.clone(),
            image_ref: s
                .resolve_image(&c.config.image)
                .map(|i| i.id.clone())
                .unwrap_or_default(),
            reason: String::new(),
            message: String::new(),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
            mounts: c.config.mounts.clone(),
            log_path: c.config.log_path.clone(),
        })
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncResult> {
        let mut s = self.enter("ExecSync", id)?;
        s.exec_timeouts.push(timeout);
        match s.containers.get(id) {
            Some(c) if c.state == ContainerState::Running => Ok(s
                .exec_results
                .pop_front()
                .unwrap_or_else(|| ExecSyncResult {
                    stdout: cmd.join(" ").into_bytes(),
                    stderr: vec![],
                    exit_code: 0,
                })),
            Some(_) => Err(rpc_error(
                "ExecSync",
                tonic::Status::failed_precondition("container is not running"),
            )),
            None => Err(not_found("ExecSync", id)),
        }
    }

    async fn container_stats(&self, id: &str) -> Result<ContainerStats> {
        let s = self.enter("ContainerStats", id)?;
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| not_found("ContainerStats", id))?;
        Ok(s.container_stats(id, c))
    }

    async fn list_container_stats(
        &self,
        filter: &ContainerStatsFilter,
    ) -> Result<Vec<ContainerStats>> {
        let s = self.enter("ListContainerStats", "")?;
        Ok(s.containers
            .iter()
            .filter(|(id, c)| {
                filter.id.as_deref().is_none_or(|f| f == id.as_str())
                    && filter
                        .pod_sandbox_id
                        .as_deref()
                        .is_none_or(|f| f == c.sandbox_id)
                    && matches(&filter.label_selector, &c.config.labels)
                    && c.state == ContainerState::Running
            })
            .map(|(id, c)| s.container_stats(id, c))
            .collect())
    }

    async fn pod_sandbox_stats(&self, id: &str) -> Result<PodSandboxStats> {
        let s = self.enter("PodSandboxStats", id)?;
        let (config, _, _) = s
            .sandboxes
            .get(id)
            .ok_or_else(|| not_found("PodSandboxStats", id))?;
        Ok(sandbox_stats(&s, id, config))
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: &PodSandboxStatsFilter,
    ) -> Result<Vec<PodSandboxStats>> {
        let s = self.enter("ListPodSandboxStats", "")?;
        Ok(s.sandboxes
            .iter()
            .filter(|(id, (c, st, _))| {
                *st == PodSandboxState::Ready
                    && filter.id.as_deref().is_none_or(|f| f == id.as_str())
                    && matches(&filter.label_selector, &c.labels)
            })
            .map(|(id, (c, _, _))| sandbox_stats(&s, id, c))
            .collect())
    }

    async fn list_images(&self) -> Result<Vec<Image>> {
        let s = self.enter("ListImages", "")?;
        Ok(s.images.values().cloned().collect())
    }

    async fn image_status(&self, image: &str) -> Result<Option<Image>> {
        let s = self.enter("ImageStatus", image)?;
        Ok(s.resolve_image(image).cloned())
    }

    async fn pull_image(
        &self,
        image: &str,
        _auth: Option<&AuthConfig>,
        _sandbox: Option<&PodSandboxConfig>,
    ) -> Result<String> {
        drop(self.enter("PullImage", image)?);
        Ok(self.add_image(image, 1 << 20))
    }

    async fn remove_image(&self, image: &str) -> Result<()> {
        let mut s = self.enter("RemoveImage", image)?;
        if let Some(id) = s.resolve_image(image).map(|i| i.id.clone()) {
            s.images.remove(&id);
        }
        Ok(())
    }

    async fn image_fs_info(&self) -> Result<ImageFsInfo> {
        let s = self.enter("ImageFsInfo", "")?;
        let used = s.images.values().map(|i| i.size).sum();
        Ok(ImageFsInfo {
            image_filesystems: vec![FilesystemUsage {
                timestamp: s.now,
                mountpoint: "/fake/images".into(),
                used_bytes: Some(used),
                inodes_used: Some(s.images.len() as u64),
            }],
            container_filesystems: vec![],
        })
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
#[path = "fake_tests.rs"]
mod tests;
