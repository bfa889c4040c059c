//! The CRI calls of `FakeRuntime`: each records itself, may fail as the
//! test asked, then changes the in-memory state as the runtime would (and
//! reports the change on the event streams).

use std::time::Duration;

use super::*;

#[async_trait::async_trait]
impl Runtime for FakeRuntime {
    async fn version(&self) -> Result<VersionInfo> {
        drop(self.enter("Version", "").await?);
        Ok(VersionInfo {
            runtime_name: "fake".into(),
            runtime_version: "0.0.0".into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn status(&self) -> Result<RuntimeStatus> {
        drop(self.enter("Status", "").await?);
        let cond = |kind: &str| RuntimeCondition {
            kind: kind.into(),
            status: true,
            reason: String::new(),
            message: String::new(),
        };
        Ok(RuntimeStatus {
            conditions: vec![cond(RUNTIME_READY), cond(NETWORK_READY)],
            handlers: Vec::new(),
        })
    }

    async fn runtime_config(&self) -> Result<Option<CgroupDriver>> {
        let s = self.enter("RuntimeConfig", "").await?;
        Ok(s.runtime_config.unwrap_or(Some(CgroupDriver::Cgroupfs)))
    }

    async fn sandbox_image(&self) -> Result<Option<String>> {
        let s = self.enter("Status", "verbose").await?;
        Ok(s.sandbox_image.clone())
    }

    async fn get_container_events(&self) -> Result<ContainerEventStream> {
        use futures::StreamExt;
        let mut stream = self
            .enter("GetContainerEvents", "")
            .await?
            .events
            .subscribe()?;
        // As containerd and CRI-O: no answer before the first event, and an
        // error before it is the call's.
        match stream.next().await {
            Some(Ok(first)) => Ok(futures::stream::iter([Ok(first)]).chain(stream).boxed()),
            Some(Err(e)) => Err(e),
            None => Ok(stream),
        }
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<String> {
        let mut s = self.enter("RunPodSandbox", &config.metadata.name).await?;
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
        s.sandbox_event(&id, ContainerEventType::Created);
        s.sandbox_event(&id, ContainerEventType::Started);
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        let mut s = self.enter("StopPodSandbox", id).await?;
        let now = s.now;
        let Some(sb) = s.sandboxes.get_mut(id) else {
            return Err(not_found("StopPodSandbox", id));
        };
        sb.1 = PodSandboxState::NotReady;
        let mut stopped = Vec::new();
        for (cid, c) in s.containers.iter_mut().filter(|(_, c)| c.sandbox_id == id) {
            if c.state == ContainerState::Running {
                c.state = ContainerState::Exited;
                c.finished_at = now;
                c.exit_code = 137;
                stopped.push(cid.clone());
            }
        }
        for cid in stopped {
            s.container_event(&cid, ContainerEventType::Stopped);
        }
        s.sandbox_event(id, ContainerEventType::Stopped);
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        let mut s = self.enter("RemovePodSandbox", id).await?;
        // Reported before they go: an event names a known sandbox.
        let gone: Vec<String> = (s.containers.iter())
            .filter(|(_, c)| c.sandbox_id == id)
            .map(|(cid, _)| cid.clone())
            .collect();
        for cid in &gone {
            s.container_event(cid, ContainerEventType::Deleted);
        }
        s.sandbox_event(id, ContainerEventType::Deleted);
        s.sandboxes.remove(id);
        s.containers.retain(|_, c| c.sandbox_id != id);
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<PodSandboxStatus> {
        let s = self.enter("PodSandboxStatus", id).await?;
        let (config, state, created_at) = s
            .sandboxes
            .get(id)
            .ok_or_else(|| not_found("PodSandboxStatus", id))?;
        let node_network = config.security.namespace_options.network == NamespaceMode::Node;
        let mut ips = if node_network {
            vec![]
        } else {
            s.pod_ips.clone()
        };
        let ip = if ips.is_empty() {
            String::new()
        } else {
            ips.remove(0)
        };
        Ok(PodSandboxStatus {
            id: id.to_string(),
            metadata: config.metadata.clone(),
            state: *state,
            created_at: *created_at,
            ip,
            additional_ips: ips,
            namespace_options: config.security.namespace_options.clone(),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            runtime_handler: config.runtime_handler.clone(),
        })
    }

    async fn list_pod_sandbox(&self, filter: &PodSandboxFilter) -> Result<Vec<PodSandbox>> {
        let s = self
            .enter("ListPodSandbox", &selector_arg(&filter.label_selector))
            .await?;
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
        let mut s = self.enter("CreateContainer", &config.metadata.name).await?;
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
        s.container_event(&id, ContainerEventType::Created);
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        let mut s = self.enter("StartContainer", id).await?;
        let now = s.now;
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found("StartContainer", id))?;
        c.state = ContainerState::Running;
        c.started_at = now;
        s.container_event(id, ContainerEventType::Started);
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()> {
        let mut s = self.enter("StopContainer", id).await?;
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
            s.container_event(id, ContainerEventType::Stopped);
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut s = self.enter("RemoveContainer", id).await?;
        s.container_event(id, ContainerEventType::Deleted);
        s.containers.remove(id);
        Ok(())
    }

    async fn list_containers(&self, filter: &ContainerFilter) -> Result<Vec<Container>> {
        let s = self
            .enter("ListContainers", &selector_arg(&filter.label_selector))
            .await?;
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

    async fn container_status_verbose(
        &self,
        id: &str,
    ) -> Result<(ContainerStatus, Option<Process>)> {
        let status = self.container_status(id).await?;
        let s = self.state.lock().unwrap();
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| not_found("ContainerStatus", id))?;
        // As a runtime builds it from an image with no entrypoint or env.
        let args = c.config.command.iter().chain(&c.config.args).cloned();
        let env = c.config.envs.iter().map(|(k, v)| format!("{k}={v}"));
        Ok((status, Some((args.collect(), env.collect()))))
    }

    async fn container_status(&self, id: &str) -> Result<ContainerStatus> {
        let s = self.enter("ContainerStatus", id).await?;
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
            // As CRI-O reports them: what the container was created with.
            resources: c.config.resources.clone(),
        })
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncResult> {
        let mut s = self.enter("ExecSync", id).await?;
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

    /// Answers a `fake://` URL naming the container; the fake serves no
    /// stream.
    async fn exec(&self, req: &ExecRequest) -> Result<String> {
        let s = self.enter("Exec", &req.container_id).await?;
        match s.containers.get(&req.container_id) {
            Some(c) if c.state == ContainerState::Running => {
                Ok(format!("fake://exec/{}", req.container_id))
            }
            Some(_) => Err(rpc_error(
                "Exec",
                tonic::Status::failed_precondition("container is not running"),
            )),
            None => Err(not_found("Exec", &req.container_id)),
        }
    }

    async fn attach(&self, req: &AttachRequest) -> Result<String> {
        let s = self.enter("Attach", &req.container_id).await?;
        match s.containers.get(&req.container_id) {
            Some(c) if c.state == ContainerState::Running => {
                Ok(format!("fake://attach/{}", req.container_id))
            }
            Some(_) => Err(rpc_error(
                "Attach",
                tonic::Status::failed_precondition("container is not running"),
            )),
            None => Err(not_found("Attach", &req.container_id)),
        }
    }

    async fn port_forward(&self, pod_sandbox_id: &str, _ports: &[i32]) -> Result<String> {
        let s = self.enter("PortForward", pod_sandbox_id).await?;
        if s.sandboxes.contains_key(pod_sandbox_id) {
            Ok(format!("fake://portforward/{pod_sandbox_id}"))
        } else {
            Err(not_found("PortForward", pod_sandbox_id))
        }
    }

    async fn reopen_container_log(&self, id: &str) -> Result<()> {
        let s = self.enter("ReopenContainerLog", id).await?;
        match s.containers.get(id) {
            Some(c) if c.state == ContainerState::Running => Ok(()),
            Some(_) => Err(rpc_error(
                "ReopenContainerLog",
                tonic::Status::failed_precondition("container is not running"),
            )),
            None => Err(not_found("ReopenContainerLog", id)),
        }
    }

    async fn container_stats(&self, id: &str) -> Result<ContainerStats> {
        let s = self.enter("ContainerStats", id).await?;
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
        let s = self.enter("ListContainerStats", "").await?;
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
        let s = self.enter("PodSandboxStats", id).await?;
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
        let s = self.enter("ListPodSandboxStats", "").await?;
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
        let s = self.enter("ListImages", "").await?;
        Ok(s.images.values().cloned().collect())
    }

    async fn image_status(&self, image: &str) -> Result<Option<Image>> {
        let s = self.enter("ImageStatus", image).await?;
        Ok(s.resolve_image(image).cloned())
    }

    async fn pull_image(
        &self,
        image: &str,
        _auth: Option<&AuthConfig>,
        _sandbox: Option<&PodSandboxConfig>,
    ) -> Result<String> {
        drop(self.enter("PullImage", image).await?);
        Ok(self.add_image(image, 1 << 20))
    }

    async fn remove_image(&self, image: &str) -> Result<()> {
        let mut s = self.enter("RemoveImage", image).await?;
        if let Some(id) = s.resolve_image(image).map(|i| i.id.clone()) {
            s.images.remove(&id);
        }
        Ok(())
    }

    async fn image_fs_info(&self) -> Result<ImageFsInfo> {
        let s = self.enter("ImageFsInfo", "").await?;
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
