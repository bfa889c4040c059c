//! A `Runtime` that lets at most N of the CRI calls which change a pod's
//! sandbox and containers run at once (`--max-parallel-runtime-mutations`).
//!
//! Why: 50 pod workers starting at once send 50 RunPodSandbox calls, then
//! 50 CreateContainer and 50 StartContainer, and the runtime, which shares
//! the node's few cores with its shims, finishes them later than when it
//! gets a few at a time (`benches/cri_sequence.rs` sweeps the width;
//! docs/footprint.md). The bound is per call, not per pod: a pod's next call waits
//! for a permit again, so pods started together move through their steps
//! side by side.
//!
//! Invariant: at most `limit` of RunPodSandbox, CreateContainer,
//! StartContainer, StopPodSandbox, RemoveContainer and RemovePodSandbox
//! younger than [`SLOT_HOLD_LIMIT`] are in flight through one
//! `BoundedRuntime`; every other call (reads, stats, exec, StopContainer,
//! which waits out a grace period, and PullImage, which has its own
//! flights) passes straight through. A call still running at the limit
//! gives its slot back and goes on: the bound paces bursts, and must not
//! let a few calls the runtime holds stall every other pod (CRI-O 1.32
//! holds a shareProcessNamespace pod's StopPodSandbox for 2 minutes, and
//! RemoveContainer calls of other pods wait behind it).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::*;

/// How long a mutating call holds its slot at most. Runtimes answer these
/// calls in tens to hundreds of milliseconds, a loaded machine in a second
/// or two; a call still running after this is held by the runtime, and
/// waiting behind it gains nothing.
pub const SLOT_HOLD_LIMIT: Duration = Duration::from_secs(2);

/// Bounds the mutating CRI calls of `inner` to `limit` at once.
pub struct BoundedRuntime {
    inner: Arc<dyn Runtime>,
    permits: Semaphore,
}

impl BoundedRuntime {
    /// `limit` must be at least 1 (0, unbounded, means: do not wrap).
    pub fn new(inner: Arc<dyn Runtime>, limit: usize) -> BoundedRuntime {
        BoundedRuntime {
            inner,
            permits: Semaphore::new(limit.max(1)),
        }
    }

    /// Runs one mutating call under a permit, held for at most
    /// [`SLOT_HOLD_LIMIT`].
    async fn bounded<T>(&self, call: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        // The semaphore is never closed, so acquiring cannot fail.
        let queued = super::wait::InFlight::queue();
        let permit = self.permits.acquire().await.ok();
        drop(queued);
        let mut call = std::pin::pin!(call);
        tokio::select! {
            biased;
            result = &mut call => return result,
            _ = tokio::time::sleep(SLOT_HOLD_LIMIT) => {}
        }
        drop(permit);
        tracing::debug!(
            held = ?SLOT_HOLD_LIMIT,
            "a runtime mutation outlived its slot; the next one goes ahead"
        );
        call.await
    }
}

#[async_trait::async_trait]
impl Runtime for BoundedRuntime {
    async fn version(&self) -> Result<VersionInfo> {
        self.inner.version().await
    }
    async fn status(&self) -> Result<RuntimeStatus> {
        self.inner.status().await
    }
    async fn runtime_config(&self) -> Result<Option<CgroupDriver>> {
        self.inner.runtime_config().await
    }
    async fn sandbox_image(&self) -> Result<Option<String>> {
        self.inner.sandbox_image().await
    }
    async fn get_container_events(&self) -> Result<ContainerEventStream> {
        self.inner.get_container_events().await
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<String> {
        self.bounded(self.inner.run_pod_sandbox(config)).await
    }
    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        self.bounded(self.inner.stop_pod_sandbox(id)).await
    }
    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        self.bounded(self.inner.remove_pod_sandbox(id)).await
    }
    async fn pod_sandbox_status(&self, id: &str) -> Result<PodSandboxStatus> {
        self.inner.pod_sandbox_status(id).await
    }
    async fn list_pod_sandbox(&self, filter: &PodSandboxFilter) -> Result<Vec<PodSandbox>> {
        self.inner.list_pod_sandbox(filter).await
    }

    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &PodSandboxConfig,
    ) -> Result<String> {
        self.bounded(self.inner.create_container(pod_sandbox_id, config, sandbox))
            .await
    }
    async fn start_container(&self, id: &str) -> Result<()> {
        self.bounded(self.inner.start_container(id)).await
    }
    async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()> {
        self.inner.stop_container(id, timeout).await
    }
    async fn remove_container(&self, id: &str) -> Result<()> {
        self.bounded(self.inner.remove_container(id)).await
    }
    async fn list_containers(&self, filter: &ContainerFilter) -> Result<Vec<Container>> {
        self.inner.list_containers(filter).await
    }
    async fn list_briefs(
        &self,
        keys: BriefKeys,
    ) -> Result<(Vec<SandboxBrief>, Vec<ContainerBrief>)> {
        self.inner.list_briefs(keys).await
    }
    async fn container_status(&self, id: &str) -> Result<ContainerStatus> {
        self.inner.container_status(id).await
    }
    async fn container_status_verbose(
        &self,
        id: &str,
    ) -> Result<(ContainerStatus, Option<Process>)> {
        self.inner.container_status_verbose(id).await
    }
    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncResult> {
        self.inner.exec_sync(id, cmd, timeout).await
    }
    async fn exec(&self, req: &ExecRequest) -> Result<String> {
        self.inner.exec(req).await
    }
    async fn attach(&self, req: &AttachRequest) -> Result<String> {
        self.inner.attach(req).await
    }
    async fn port_forward(&self, pod_sandbox_id: &str, ports: &[i32]) -> Result<String> {
        self.inner.port_forward(pod_sandbox_id, ports).await
    }
    async fn reopen_container_log(&self, id: &str) -> Result<()> {
        self.inner.reopen_container_log(id).await
    }

    async fn container_stats(&self, id: &str) -> Result<ContainerStats> {
        self.inner.container_stats(id).await
    }
    async fn list_container_stats(
        &self,
        filter: &ContainerStatsFilter,
    ) -> Result<Vec<ContainerStats>> {
        self.inner.list_container_stats(filter).await
    }
    async fn pod_sandbox_stats(&self, id: &str) -> Result<PodSandboxStats> {
        self.inner.pod_sandbox_stats(id).await
    }
    async fn list_pod_sandbox_stats(
        &self,
        filter: &PodSandboxStatsFilter,
    ) -> Result<Vec<PodSandboxStats>> {
        self.inner.list_pod_sandbox_stats(filter).await
    }

    async fn list_images(&self) -> Result<Vec<Image>> {
        self.inner.list_images().await
    }
    async fn image_status(&self, image: &str) -> Result<Option<Image>> {
        self.inner.image_status(image).await
    }
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&AuthConfig>,
        sandbox: Option<&PodSandboxConfig>,
    ) -> Result<String> {
        self.inner.pull_image(image, auth, sandbox).await
    }
    async fn remove_image(&self, image: &str) -> Result<()> {
        self.inner.remove_image(image).await
    }
    async fn image_fs_info(&self) -> Result<ImageFsInfo> {
        self.inner.image_fs_info().await
    }
}

#[cfg(test)]
#[path = "bounded_tests.rs"]
mod tests;
