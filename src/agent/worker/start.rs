//! Starting a pod: its hostPath checks and directories, the sandbox, image
//! pulls (with the pull back-off) and each container with its
//! termination-message file. Part of the pod worker.
//!
//! Invariant: every step acts on the sandbox the sync observed or just
//! created; failures are returned to the sync, which records and retries.

use super::*;
use crate::kuberuntime::termination_files::create_message_file;
use crate::volume::hostpath::check_volumes;

impl Worker {
    pub(super) async fn create_sandbox(
        &mut self,
        pod: &Pod,
        attempt: u32,
    ) -> Result<String, RuntimeError> {
        let rt = self.ctx.runtime.clone();
        // The kubelet sets up volumes before the sandbox; a failed check
        // leaves the pod Pending and is retried with the sync.
        if let Err(e) = check_volumes(pod) {
            let message = e.to_string();
            let event = kubelet_events::failed_mount(&message);
            self.ctx.events.event(&EventObject::pod(pod), event);
            self.volume_error = Some(message.clone());
            return Err(RuntimeError::Refused {
                op: "volume setup",
                message,
            });
        }
        self.volume_error = None;
        let config = mapping::sandbox_config(&self.ctx.node, pod, attempt).map_err(refused)?;
        prepare_dirs(&self.ctx.node, pod).map_err(|e| RuntimeError::Refused {
            op: "RunPodSandbox",
            message: e.to_string(),
        })?;
        match rt.run_pod_sandbox(&config).await {
            Ok(id) => Ok(id),
            Err(e) => {
                let event = kubelet_events::failed_create_pod_sandbox(&e.to_string());
                self.ctx.events.event(&EventObject::pod(pod), event);
                // A failed run can leave a NOTREADY sandbox that holds the
                // name of this attempt: clear it so the retry can use it.
                let stale = rt
                    .list_pod_sandbox(&crate::cri::PodSandboxFilter {
                        label_selector: crate::kuberuntime::observe::by_uid(pod::uid(pod)),
                        ..Default::default()
                    })
                    .await
                    .unwrap_or_default();
                for s in stale
                    .iter()
                    .filter(|s| s.metadata.attempt == attempt && s.state != PodSandboxState::Ready)
                {
                    let _ = rt.stop_pod_sandbox(&s.id).await;
                    let _ = rt.remove_pod_sandbox(&s.id).await;
                }
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start_container(
        &mut self,
        pod: &Pod,
        sandbox: &mut CurrentSandbox,
        kind: ContainerKind,
        name: &str,
        attempt: u32,
        restart_count: u32,
        restart: bool,
    ) -> Result<(), RuntimeError> {
        let rt = self.ctx.runtime.clone();
        let spec = pod.spec.clone().unwrap_or_default();
        let list = match kind {
            ContainerKind::Init => spec.init_containers.unwrap_or_default(),
            ContainerKind::App => spec.containers,
        };
        let Some(container) = list.into_iter().find(|c| c.name == name) else {
            return Ok(());
        };
        // The same config the sandbox was run with (containerd needs it whole).
        let sandbox_config =
            mapping::sandbox_config(&self.ctx.node, pod, sandbox.attempt).map_err(refused)?;
        let pod_ip = match &sandbox.ip {
            Some(ip) => ip.clone(),
            None => {
                let ip = rt.pod_sandbox_status(&sandbox.id).await?.ip;
                sandbox.ip = Some(ip.clone());
                ip
            }
        };
        let now = now_nanos();
        let image = match self
            .ensure_image(pod, &container, &sandbox_config, now)
            .await
        {
            Ok(image) => image,
            Err((reason, message)) => {
                // The kubelet's "Error: <err>": for an image, the error is the
                // waiting reason itself.
                let event = kubelet_events::failed(image_outcome(&reason), &reason);
                self.ctx.container_event(pod, name, event);
                self.waiting.insert(
                    name.to_string(),
                    WaitingReason {
                        reason,
                        message: message.clone(),
                    },
                );
                return Err(RuntimeError::Refused {
                    op: "PullImage",
                    message,
                });
            }
        };
        let start = mapping::ContainerStart {
            restart_count,
            attempt,
            pod_ip: &pod_ip,
            image_ref: &image.id,
            image_user: (image.user.as_ref())
                .map(|(uid, name)| mapping::ImageUser::from_status(*uid, name)),
        };
        let config =
            mapping::container_config(&self.ctx.node, pod, &container, &start).map_err(|e| {
                let message = e.to_string();
                let event = kubelet_events::failed(CREATE_CONTAINER_CONFIG_ERROR, &message);
                self.ctx.container_event(pod, name, event);
                self.waiting.insert(
                    name.to_string(),
                    WaitingReason {
                        reason: CREATE_CONTAINER_CONFIG_ERROR.into(),
                        message,
                    },
                );
                refused(e)
            })?;
        // The kubelet makes <pod log dir>/<container> before CreateContainer:
        // containerd creates it itself, CRI-O's conmon does not and fails
        // with "Failed to open log file".
        let log_dir = mapping::pod_log_dir(&self.ctx.node, pod).join(name);
        if let Err(e) = std::fs::create_dir_all(&log_dir) {
            let what = format!(
                "creating container log directory {}: {e}",
                log_dir.display()
            );
            return Err(self.config_error(pod, name, what));
        }
        if mapping::termination_message_path(&container).is_some() {
            let file =
                mapping::termination_message_file(&self.ctx.node, pod::uid(pod), name, attempt);
            if let Err(e) = create_message_file(&file) {
                let what = format!("creating termination message file {}: {e}", file.display());
                return Err(self.config_error(pod, name, what));
            }
        }
        if restart {
            self.backoff.next(name, now);
        }
        let id = match rt
            .create_container(&sandbox.id, &config, &sandbox_config)
            .await
        {
            Ok(id) => id,
            Err(e) => {
                let message = e.to_string();
                let event = kubelet_events::failed("CreateContainerError", &message);
                self.ctx.container_event(pod, name, event);
                self.waiting.insert(
                    name.to_string(),
                    WaitingReason {
                        reason: "CreateContainerError".into(),
                        message,
                    },
                );
                return Err(e);
            }
        };
        self.ctx
            .container_event(pod, name, kubelet_events::created(name));
        if let Err(e) = rt.start_container(&id).await {
            let message = e.to_string();
            let detail = kubelet_events::without_id(&message, &id, name);
            let event = kubelet_events::failed("RunContainerError", &detail);
            self.ctx.container_event(pod, name, event);
            self.waiting.insert(
                name.to_string(),
                WaitingReason {
                    reason: "RunContainerError".into(),
                    message,
                },
            );
            return Err(e);
        }
        self.ctx
            .container_event(pod, name, kubelet_events::started(name));
        self.waiting.remove(name);
        self.post_start(pod, &container, &pod_ip, &id).await
    }

    /// Pulls per the container's policy, recording the kubelet's image
    /// events on the container. Ok is the image as the runtime resolved it;
    /// Err is (reason, message) for the status.
    pub(super) async fn ensure_image(
        &mut self,
        pod: &Pod,
        container: &Container,
        sandbox: &crate::cri::PodSandboxConfig,
        now: i64,
    ) -> Result<ResolvedImage, (String, String)> {
        let rt = self.ctx.runtime.clone();
        let image = container.image.clone().unwrap_or_default();
        let ctx = self.ctx.clone();
        let record = |event| ctx.container_event(pod, &container.name, event);
        let policy = container
            .image_pull_policy
            .as_deref()
            .unwrap_or("IfNotPresent");
        if policy != "Always" {
            let present = match rt.image_status(&image).await {
                Ok(status) => status,
                Err(e) => {
                    record(kubelet_events::failed_to_inspect(&image, &e.to_string()));
                    return Err(("ErrImageInspect".to_string(), e.to_string()));
                }
            };
            if let Some(found) = present {
                record(kubelet_events::already_present(&image));
                return Ok(ResolvedImage {
                    id: found.id,
                    user: Some((found.uid, found.username)),
                });
            }
            if policy == "Never" {
                record(kubelet_events::never_pull(&image));
                return Err((
                    "ErrImageNeverPull".into(),
                    format!("container image {image:?} is not present with pull policy of Never"),
                ));
            }
        }
        let key = pull_key(&container.name);
        if let Some((at, last)) = self.pull_failures.get(&container.name) {
            if self.backoff.blocked_until(&key, *at, now).is_some() {
                record(kubelet_events::back_off_pulling(&image));
                return Err((
                    "ImagePullBackOff".into(),
                    format!("Back-off pulling image {image:?}: {last}"),
                ));
            }
        }
        record(kubelet_events::pulling(&image));
        let asked = std::time::Instant::now();
        // One pull per image: the workers of other pods that need it while
        // it runs wait for this one. The leader's sandbox config goes with
        // it; static pods pull without credentials and all run on the
        // default runtime handler, so the pull would be the same for them.
        let pulled = self
            .ctx
            .image_pulls
            .pull(&image, || rt.pull_image(&image, None, Some(sandbox)))
            .await;
        match pulled {
            Ok(image_ref) => {
                tracing::info!(image, image_ref, "pulled image");
                // Waiters share the leader's pull: its time is theirs.
                let took = asked.elapsed();
                let status = rt.image_status(&image_ref).await.ok().flatten();
                let size = status.as_ref().map_or(0, |i| i.size);
                record(kubelet_events::pulled(&image, took, took, size));
                self.pull_failures.remove(&container.name);
                self.backoff.reset(&key);
                // Run what the pull resolved to, whatever ImageStatus says.
                Ok(ResolvedImage {
                    id: image_ref,
                    user: status.map(|i| (i.uid, i.username)),
                })
            }
            Err(e) => {
                self.backoff.next(&key, now);
                let message = e.to_string();
                record(kubelet_events::failed_to_pull(&image, &message));
                self.pull_failures
                    .insert(container.name.clone(), (now, message.clone()));
                Err(("ErrImagePull".into(), message))
            }
        }
    }
}

/// The image a container is created from, as the runtime resolved it.
pub(super) struct ResolvedImage {
    /// ImageStatus's ID, or the reference PullImage returned.
    pub id: String,
    /// The image's (uid, user name) from ImageStatus; `None` when it did
    /// not answer.
    pub user: Option<(Option<i64>, String)>,
}

const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// The `Failed` event's action for an image error (the waiting reason).
fn image_outcome(reason: &str) -> &'static str {
    match reason {
        "ErrImageNeverPull" => "ErrImageNeverPull",
        "ErrImageInspect" => "ErrImageInspect",
        "ImagePullBackOff" => "ImagePullBackOff",
        _ => "ErrImagePull",
    }
}

impl Worker {
    /// Records a host-side failure before CreateContainer as the container's
    /// CreateContainerConfigError, as the kubelet shows it.
    fn config_error(&mut self, pod: &Pod, name: &str, message: String) -> RuntimeError {
        let event = kubelet_events::failed(CREATE_CONTAINER_CONFIG_ERROR, &message);
        self.ctx.container_event(pod, name, event);
        self.waiting.insert(
            name.to_string(),
            WaitingReason {
                reason: CREATE_CONTAINER_CONFIG_ERROR.into(),
                message: message.clone(),
            },
        );
        RuntimeError::Refused {
            op: "CreateContainer",
            message,
        }
    }
}

pub(super) fn pull_key(container: &str) -> String {
    format!("pull:{container}")
}

/// The pod's log directory and emptyDir volumes, made before the sandbox.
pub(super) fn prepare_dirs(node: &NodeContext, pod: &Pod) -> std::io::Result<()> {
    std::fs::create_dir_all(mapping::pod_log_dir(node, pod))?;
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for v in volumes.iter().filter(|v| v.empty_dir.is_some()) {
        std::fs::create_dir_all(mapping::empty_dir_path(node, pod, &v.name))?;
    }
    Ok(())
}
