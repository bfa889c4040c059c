//! The `Runtime` calls of `CriRuntime`: each builds the CRI request, makes
//! the call through `rpc!` (its deadline and error mapping) and converts
//! the answer to crilet's domain types.

use std::time::Duration;

use super::super::convert::*;
use super::super::*;
use super::CriRuntime;
use crate::proto::runtime::v1 as pb;

/// ExecSync's gRPC deadline when it has no timeout (the kubelet sends 0
/// and waits as long as the command runs).
const NO_EXEC_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

#[async_trait::async_trait]
impl Runtime for CriRuntime {
    async fn version(&self) -> Result<VersionInfo> {
        let r = rpc!(
            self,
            "Version",
            runtime.version(pb::VersionRequest {
                version: "v1".into()
            })
        )?;
        Ok(VersionInfo {
            runtime_name: r.runtime_name,
            runtime_version: r.runtime_version,
            runtime_api_version: r.runtime_api_version,
        })
    }

    async fn status(&self) -> Result<RuntimeStatus> {
        let r = rpc!(
            self,
            "Status",
            runtime.status(pb::StatusRequest { verbose: false })
        )?;
        let status = r
            .status
            .ok_or_else(|| self.malformed("Status", "no status"))?;
        Ok(runtime_status_from(status, r.runtime_handlers))
    }

    async fn runtime_config(&self) -> Result<Option<CgroupDriver>> {
        let r = rpc!(
            self,
            "RuntimeConfig",
            runtime.runtime_config(pb::RuntimeConfigRequest {})
        );
        match r {
            Ok(r) => Ok(r.linux.map(|l| cgroup_driver_from(l.cgroup_driver()))),
            Err(e) if e.code() == tonic::Code::Unimplemented => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn sandbox_image(&self) -> Result<Option<String>> {
        let r = rpc!(
            self,
            "Status",
            runtime.status(pb::StatusRequest { verbose: true })
        )?;
        Ok(r.info
            .get("config")
            .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
            .and_then(|c| c.get("sandboxImage")?.as_str().map(str::to_string))
            .filter(|s| !s.is_empty()))
    }

    async fn get_container_events(&self) -> Result<ContainerEventStream> {
        use futures::StreamExt;
        // No deadline: the call lasts as long as the subscription, and a Go
        // runtime sends its response headers only with its first event.
        // Not reported to the observer either: its duration means nothing.
        let mut client = self.runtime.clone();
        let rpc_error = |status| RuntimeError::Rpc {
            endpoint: self.endpoint.to_string(),
            op: "GetContainerEvents",
            status,
        };
        let stream = client
            .get_container_events(pb::GetEventsRequest {})
            .await
            .map_err(rpc_error)?
            .into_inner();
        let endpoint = self.endpoint.to_string();
        let broken = move |status| RuntimeError::StreamBroken {
            endpoint: endpoint.clone(),
            op: "GetContainerEvents",
            status,
        };
        Ok(stream
            .map(move |item| item.map(container_event_from).map_err(&broken))
            .boxed())
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<String> {
        let r = rpc!(
            self,
            "RunPodSandbox",
            runtime.run_pod_sandbox(pb::RunPodSandboxRequest {
                config: Some(sandbox_config_to(config)),
                runtime_handler: config.runtime_handler.clone(),
            })
        )?;
        if r.pod_sandbox_id.is_empty() {
            return Err(self.malformed("RunPodSandbox", "empty pod_sandbox_id"));
        }
        Ok(r.pod_sandbox_id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        rpc!(
            self,
            "StopPodSandbox",
            runtime.stop_pod_sandbox(pb::StopPodSandboxRequest {
                pod_sandbox_id: id.into()
            })
        )?;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        rpc!(
            self,
            "RemovePodSandbox",
            runtime.remove_pod_sandbox(pb::RemovePodSandboxRequest {
                pod_sandbox_id: id.into()
            })
        )?;
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<PodSandboxStatus> {
        let r = rpc!(
            self,
            "PodSandboxStatus",
            runtime.pod_sandbox_status(pb::PodSandboxStatusRequest {
                pod_sandbox_id: id.into(),
                verbose: false,
            })
        )?;
        let status = r
            .status
            .ok_or_else(|| self.malformed("PodSandboxStatus", "no status"))?;
        Ok(sandbox_status_from(status))
    }

    async fn list_pod_sandbox(&self, filter: &PodSandboxFilter) -> Result<Vec<PodSandbox>> {
        let r = rpc!(
            self,
            "ListPodSandbox",
            runtime.list_pod_sandbox(pb::ListPodSandboxRequest {
                filter: Some(sandbox_filter_to(filter)),
            })
        )?;
        Ok(r.items.into_iter().map(sandbox_from).collect())
    }

    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &PodSandboxConfig,
    ) -> Result<String> {
        let r = rpc!(
            self,
            "CreateContainer",
            runtime.create_container(pb::CreateContainerRequest {
                pod_sandbox_id: pod_sandbox_id.into(),
                config: Some(container_config_to(config)),
                sandbox_config: Some(sandbox_config_to(sandbox)),
            })
        )?;
        if r.container_id.is_empty() {
            return Err(self.malformed("CreateContainer", "empty container_id"));
        }
        Ok(r.container_id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        rpc!(
            self,
            "StartContainer",
            runtime.start_container(pb::StartContainerRequest {
                container_id: id.into()
            })
        )?;
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()> {
        // The runtime waits up to `timeout` before it kills: allow for that.
        let t = self.timeout() + timeout;
        let req = self.request(
            pb::StopContainerRequest {
                container_id: id.into(),
                timeout: timeout.as_secs() as i64,
            },
            t,
        );
        let mut client = self.runtime.clone();
        self.call("StopContainer", t, async move {
            client.stop_container(req).await
        })
        .await?;
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        rpc!(
            self,
            "RemoveContainer",
            runtime.remove_container(pb::RemoveContainerRequest {
                container_id: id.into()
            })
        )?;
        Ok(())
    }

    async fn list_containers(&self, filter: &ContainerFilter) -> Result<Vec<Container>> {
        let r = rpc!(
            self,
            "ListContainers",
            runtime.list_containers(pb::ListContainersRequest {
                filter: Some(container_filter_to(filter)),
            })
        )?;
        Ok(r.containers.into_iter().map(container_from).collect())
    }

    async fn list_briefs(
        &self,
        keys: BriefKeys,
    ) -> Result<(Vec<SandboxBrief>, Vec<ContainerBrief>)> {
        self.briefs(keys).await
    }

    async fn container_status(&self, id: &str) -> Result<ContainerStatus> {
        Ok(self.container_status_call(id, false).await?.0)
    }

    async fn container_status_verbose(
        &self,
        id: &str,
    ) -> Result<(ContainerStatus, Option<Process>)> {
        let (status, info) = self.container_status_call(id, true).await?;
        let process = info.get("info").and_then(|info| oci_process(info));
        Ok((status, process))
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncResult> {
        // As the kubelet's remote runtime: a timeout of 0 is "none", sent as
        // 0 with no deadline (a year); otherwise the request timeout on top.
        let t = if timeout.is_zero() {
            NO_EXEC_DEADLINE
        } else {
            self.timeout() + timeout
        };
        let req = self.request(
            pb::ExecSyncRequest {
                container_id: id.into(),
                cmd: cmd.to_vec(),
                timeout: timeout.as_secs() as i64,
            },
            t,
        );
        let mut client = self.runtime.clone();
        let r = self
            .call("ExecSync", t, async move { client.exec_sync(req).await })
            .await?;
        Ok(ExecSyncResult {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
        })
    }

    async fn exec(&self, req: &ExecRequest) -> Result<String> {
        let r = rpc!(
            self,
            "Exec",
            runtime.exec(pb::ExecRequest {
                container_id: req.container_id.clone(),
                cmd: req.cmd.clone(),
                tty: req.tty,
                stdin: req.stdin,
                stdout: req.stdout,
                stderr: req.stderr,
            })
        )?;
        Ok(r.url)
    }

    async fn attach(&self, req: &AttachRequest) -> Result<String> {
        let r = rpc!(
            self,
            "Attach",
            runtime.attach(pb::AttachRequest {
                container_id: req.container_id.clone(),
                stdin: req.stdin,
                tty: req.tty,
                stdout: req.stdout,
                stderr: req.stderr,
            })
        )?;
        Ok(r.url)
    }

    async fn port_forward(&self, pod_sandbox_id: &str, ports: &[i32]) -> Result<String> {
        let r = rpc!(
            self,
            "PortForward",
            runtime.port_forward(pb::PortForwardRequest {
                pod_sandbox_id: pod_sandbox_id.into(),
                port: ports.to_vec(),
            })
        )?;
        Ok(r.url)
    }

    async fn reopen_container_log(&self, id: &str) -> Result<()> {
        rpc!(
            self,
            "ReopenContainerLog",
            runtime.reopen_container_log(pb::ReopenContainerLogRequest {
                container_id: id.into()
            })
        )?;
        Ok(())
    }

    async fn container_stats(&self, id: &str) -> Result<ContainerStats> {
        let r = rpc!(
            self,
            "ContainerStats",
            runtime.container_stats(pb::ContainerStatsRequest {
                container_id: id.into()
            })
        )?;
        let stats = r
            .stats
            .ok_or_else(|| self.malformed("ContainerStats", "no stats"))?;
        Ok(container_stats_from(stats))
    }

    async fn list_container_stats(
        &self,
        filter: &ContainerStatsFilter,
    ) -> Result<Vec<ContainerStats>> {
        let r = rpc!(
            self,
            "ListContainerStats",
            runtime.list_container_stats(pb::ListContainerStatsRequest {
                filter: Some(container_stats_filter_to(filter)),
            })
        )?;
        Ok(r.stats.into_iter().map(container_stats_from).collect())
    }

    async fn pod_sandbox_stats(&self, id: &str) -> Result<PodSandboxStats> {
        let r = rpc!(
            self,
            "PodSandboxStats",
            runtime.pod_sandbox_stats(pb::PodSandboxStatsRequest {
                pod_sandbox_id: id.into()
            })
        )?;
        let stats = r
            .stats
            .ok_or_else(|| self.malformed("PodSandboxStats", "no stats"))?;
        Ok(sandbox_stats_from(stats))
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: &PodSandboxStatsFilter,
    ) -> Result<Vec<PodSandboxStats>> {
        let r = rpc!(
            self,
            "ListPodSandboxStats",
            runtime.list_pod_sandbox_stats(pb::ListPodSandboxStatsRequest {
                filter: Some(sandbox_stats_filter_to(filter)),
            })
        )?;
        Ok(r.stats.into_iter().map(sandbox_stats_from).collect())
    }

    async fn list_images(&self) -> Result<Vec<Image>> {
        let r = rpc!(
            self,
            "ListImages",
            images.list_images(pb::ListImagesRequest { filter: None })
        )?;
        Ok(r.images.into_iter().map(image_from).collect())
    }

    async fn image_status(&self, image: &str) -> Result<Option<Image>> {
        let r = rpc!(
            self,
            "ImageStatus",
            images.image_status(pb::ImageStatusRequest {
                image: Some(image_spec(image, "")),
                verbose: false,
            })
        )?;
        // CRI answers OK with no image when it does not have it.
        Ok(r.image.filter(|i| !i.id.is_empty()).map(image_from))
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&AuthConfig>,
        sandbox: Option<&PodSandboxConfig>,
    ) -> Result<String> {
        let t = self.options.image_pull_timeout;
        let req = self.request(
            pb::PullImageRequest {
                image: Some(image_spec(image, "")),
                auth: auth.map(auth_to),
                sandbox_config: sandbox.map(sandbox_config_to),
            },
            t,
        );
        let mut client = self.images.clone();
        let r = self
            .call("PullImage", t, async move { client.pull_image(req).await })
            .await?;
        if r.image_ref.is_empty() {
            return Err(self.malformed("PullImage", "empty image_ref"));
        }
        Ok(r.image_ref)
    }

    async fn remove_image(&self, image: &str) -> Result<()> {
        rpc!(
            self,
            "RemoveImage",
            images.remove_image(pb::RemoveImageRequest {
                image: Some(image_spec(image, "")),
            })
        )?;
        Ok(())
    }

    async fn image_fs_info(&self) -> Result<ImageFsInfo> {
        let r = rpc!(
            self,
            "ImageFsInfo",
            images.image_fs_info(pb::ImageFsInfoRequest {})
        )?;
        Ok(ImageFsInfo {
            image_filesystems: r.image_filesystems.into_iter().map(fs_usage_from).collect(),
            container_filesystems: r
                .container_filesystems
                .into_iter()
                .map(fs_usage_from)
                .collect(),
        })
    }
}

impl CriRuntime {
    /// ContainerStatus, and the verbose `info` map (empty unless `verbose`).
    async fn container_status_call(
        &self,
        id: &str,
        verbose: bool,
    ) -> Result<(ContainerStatus, std::collections::HashMap<String, String>)> {
        let r = rpc!(
            self,
            "ContainerStatus",
            runtime.container_status(pb::ContainerStatusRequest {
                container_id: id.into(),
                verbose,
            })
        )?;
        let status = r
            .status
            .ok_or_else(|| self.malformed("ContainerStatus", "no status"))?;
        Ok((container_status_from(status), r.info))
    }
}

/// `runtimeSpec.process` of a verbose status's `info` JSON.
fn oci_process(info: &str) -> Option<Process> {
    let info: serde_json::Value = serde_json::from_str(info).ok()?;
    let process = info.get("runtimeSpec")?.get("process")?;
    let strings = |key: &str| -> Vec<String> {
        (process
            .get(key)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
    };
    Some((strings("args"), strings("env")))
}
