//! The CRI adapter: the container runtime (containerd, CRI-O) seen through
//! the `Runtime` trait, in crilet's own domain types.
//!
//! Invariant: only this folder (and the generated `crate::proto`) touches
//! CRI protobuf messages; it imports nothing else from the crate. Changes
//! here follow the wire or a runtime, never kubelet behaviour.
//! Implementations: `CriRuntime` (real, over a unix socket) and
//! `FakeRuntime` (in memory, records calls, for unit tests); `BoundedRuntime`
//! wraps either and bounds how many mutating calls run at once.

mod bounded;
pub mod brief;
pub mod client;
mod convert;
pub mod endpoint;
mod error;
pub mod fake;
pub mod types;
pub mod wait;

pub use bounded::BoundedRuntime;
pub use brief::{BriefKeys, ContainerBrief, SandboxBrief};
pub use client::{CriRuntime, RuntimeOptions};
pub use endpoint::{DEFAULT_ENDPOINT, Endpoint};
pub use error::RuntimeError;
pub use fake::FakeRuntime;
pub use types::*;

use std::time::Duration;

pub type Result<T> = std::result::Result<T, RuntimeError>;

/// The GetContainerEvents stream: events until the runtime ends it (then
/// an error, or the end of the stream).
pub type ContainerEventStream = futures::stream::BoxStream<'static, Result<ContainerEvent>>;

/// The CRI RuntimeService and ImageService, in domain types.
///
/// Semantics follow CRI: Remove* of an unknown id succeeds; status calls of
/// an unknown id fail with NotFound, except `image_status`, which answers
/// `None`.
/// A container's OCI process: its args, and its environment as `K=V`.
pub type Process = (Vec<String>, Vec<String>);

#[async_trait::async_trait]
pub trait Runtime: Send + Sync {
    // --- RuntimeService
    async fn version(&self) -> Result<VersionInfo>;
    async fn status(&self) -> Result<RuntimeStatus>;
    /// The cgroup driver the runtime uses (CRI `RuntimeConfig`). `Ok(None)`
    /// when the runtime does not tell: it does not implement the call
    /// (containerd 1.6 answers Unimplemented) or sends no Linux settings.
    async fn runtime_config(&self) -> Result<Option<CgroupDriver>>;
    /// The runtime's own sandbox (pause) image, when its verbose status
    /// tells (containerd reports `config.sandboxImage`); `None` otherwise.
    async fn sandbox_image(&self) -> Result<Option<String>> {
        Ok(None)
    }
    /// Subscribes to the runtime's container events (CRI
    /// GetContainerEvents). Resolves when the runtime answers the call:
    /// runtimes in Go send nothing, headers included, before their first
    /// event, so on a quiet node this waits. There is no deadline: the
    /// stream lives until the runtime or the caller ends it. A runtime
    /// without the call fails with code Unimplemented (containerd 1.6, and
    /// this default).
    async fn get_container_events(&self) -> Result<ContainerEventStream> {
        Err(RuntimeError::Unsupported {
            op: "GetContainerEvents",
        })
    }

    /// Creates and starts a sandbox; returns its id.
    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<String>;
    async fn stop_pod_sandbox(&self, id: &str) -> Result<()>;
    async fn remove_pod_sandbox(&self, id: &str) -> Result<()>;
    async fn pod_sandbox_status(&self, id: &str) -> Result<PodSandboxStatus>;
    async fn list_pod_sandbox(&self, filter: &PodSandboxFilter) -> Result<Vec<PodSandbox>>;

    /// Creates a container in a sandbox. `sandbox` must be the config the
    /// sandbox was run with (containerd 1.6 crashes on an empty one).
    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &PodSandboxConfig,
    ) -> Result<String>;
    async fn start_container(&self, id: &str) -> Result<()>;
    /// Stops a container, killing it after `timeout` (the grace period).
    async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()>;
    async fn remove_container(&self, id: &str) -> Result<()>;
    async fn list_containers(&self, filter: &ContainerFilter) -> Result<Vec<Container>>;
    /// Every sandbox, then every container (ListPodSandbox and
    /// ListContainers, unfiltered), in brief: what a relist compares. The
    /// real runtime reads them off the wire without building each object's
    /// maps (`cri::brief`); this default lists them whole.
    async fn list_briefs(
        &self,
        keys: BriefKeys,
    ) -> Result<(Vec<SandboxBrief>, Vec<ContainerBrief>)> {
        let sandboxes = self.list_pod_sandbox(&PodSandboxFilter::default()).await?;
        let containers = self.list_containers(&ContainerFilter::default()).await?;
        Ok((
            (sandboxes.iter())
                .map(|s| SandboxBrief::of(s, keys))
                .collect(),
            (containers.iter())
                .map(|c| ContainerBrief::of(c, keys))
                .collect(),
        ))
    }
    async fn container_status(&self, id: &str) -> Result<ContainerStatus>;
    /// ContainerStatus, with the container's OCI process as the runtime
    /// built it (`args`, and `env` as `K=V`) from the verbose status
    /// (`info.runtimeSpec.process`, which containerd and CRI-O both
    /// report): one call for both. The process is `None` when the runtime
    /// does not tell (and in this default, which asks for the status only).
    async fn container_status_verbose(
        &self,
        id: &str,
    ) -> Result<(ContainerStatus, Option<Process>)> {
        Ok((self.container_status(id).await?, None))
    }
    /// Runs `cmd` in a container and waits at most `timeout` for it.
    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncResult>;
    /// Prepares a streaming exec (CRI `Exec`); answers the runtime's
    /// streaming-server URL, which is single-use and short-lived.
    async fn exec(&self, req: &ExecRequest) -> Result<String>;
    /// Prepares a streaming attach (CRI `Attach`); answers the URL.
    async fn attach(&self, req: &AttachRequest) -> Result<String>;
    /// Prepares port forwarding into a sandbox (CRI `PortForward`);
    /// answers the URL.
    async fn port_forward(&self, pod_sandbox_id: &str, ports: &[i32]) -> Result<String>;
    /// Reopens a container's log file after it was renamed (CRI
    /// `ReopenContainerLog`).
    async fn reopen_container_log(&self, id: &str) -> Result<()>;

    async fn container_stats(&self, id: &str) -> Result<ContainerStats>;
    async fn list_container_stats(
        &self,
        filter: &ContainerStatsFilter,
    ) -> Result<Vec<ContainerStats>>;
    async fn pod_sandbox_stats(&self, id: &str) -> Result<PodSandboxStats>;
    async fn list_pod_sandbox_stats(
        &self,
        filter: &PodSandboxStatsFilter,
    ) -> Result<Vec<PodSandboxStats>>;

    // --- ImageService
    async fn list_images(&self) -> Result<Vec<Image>>;
    /// `None` when the runtime does not have the image.
    async fn image_status(&self, image: &str) -> Result<Option<Image>>;
    /// Pulls an image; returns its reference (an image ID or digest).
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&AuthConfig>,
        sandbox: Option<&PodSandboxConfig>,
    ) -> Result<String>;
    /// Removes an image with all its tags.
    async fn remove_image(&self, image: &str) -> Result<()>;
    async fn image_fs_info(&self) -> Result<ImageFsInfo>;
}
