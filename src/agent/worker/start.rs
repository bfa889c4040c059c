//! Starting a pod: its volumes (hostPath checks, emptyDirs given to the
//! pod's fsGroup) and directories, the sandbox, image pulls (with the pull
//! back-off) and each container with its managed hosts file,
//! termination-message file and service variables. Part of the pod worker.
//!
//! Invariant: every step acts on the sandbox the sync observed or just
//! created; failures are returned to the sync, which records and retries.

use super::*;
use crate::kuberuntime::termination_files::create_message_file;
use crate::logs::layout::legacy_log_symlink;
use crate::logs::symlinks::{POD_LOG_DIR_MODE, link_started_container, make_dir};
use crate::volume::empty_dir::{self, EmptyDir};
use crate::volume::etc_hosts::mounts_hosts_file;
use crate::volume::etc_hosts_file::{HostsFile, NODE_HOSTS_FILE, ensure_hosts_file};
use crate::volume::hostpath::check_volumes;
use crate::volume::subpath;

impl Worker {
    pub(super) async fn create_sandbox(
        &mut self,
        pod: &Pod,
        attempt: u32,
    ) -> Result<String, RuntimeError> {
        let rt = self.ctx.runtime.clone();
        // The kubelet sets up volumes before the sandbox; a failed check
        // leaves the pod Pending and is retried with the sync.
        let volumes = check_volumes(pod)
            .map_err(|e| e.to_string())
            .and_then(|()| set_up_empty_dirs(&self.ctx.node, pod).map_err(|e| e.to_string()));
        if let Err(message) = volumes {
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
        if mapping::wants_cluster_dns(pod) {
            let node = EventObject::node(&self.ctx.node.node_name);
            self.ctx
                .events
                .event(&node, kubelet_events::missing_cluster_dns_node());
            let desc = kubelet_events::pod_desc(pod::name(pod), pod::namespace(pod), pod::uid(pod));
            let event = kubelet_events::missing_cluster_dns_pod(&desc);
            self.ctx.events.event(&EventObject::pod(pod), event);
        }
        prepare_dirs(&self.ctx.node, pod).map_err(|e| RuntimeError::Refused {
            op: "RunPodSandbox",
            message: e.to_string(),
        })?;
        // After the config and the log directory, as the kubelet's
        // createPodSandbox looks the handler up.
        let mut config = config;
        let class = (pod.spec.as_ref()).and_then(|s| s.runtime_class_name.as_deref());
        match self.ctx.runtime_classes.handler(class).await {
            Ok(handler) => config.runtime_handler = handler,
            Err(message) => {
                let event = kubelet_events::failed_create_pod_sandbox(&message);
                self.ctx.events.event(&EventObject::pod(pod), event);
                return Err(RuntimeError::Refused {
                    op: "RunPodSandbox",
                    message,
                });
            }
        }
        self.mark(Phase::SandboxRequested);
        match rt.run_pod_sandbox(&config).await {
            Ok(id) => {
                self.mark(Phase::SandboxReady);
                Ok(id)
            }
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
                    let _ = self.ctx.stop_pod_sandbox(&s.id).await;
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
            ContainerKind::Init | ContainerKind::Sidecar => {
                spec.init_containers.unwrap_or_default()
            }
            ContainerKind::App => spec.containers,
        };
        let Some(container) = list.into_iter().find(|c| c.name == name) else {
            return Ok(());
        };
        // The same config the sandbox was run with (containerd needs it whole).
        let sandbox_config =
            mapping::sandbox_config(&self.ctx.node, pod, sandbox.attempt).map_err(refused)?;
        let known_ips = sandbox.ips.clone();
        let ips_read = async {
            match known_ips {
                Some(ips) => Ok(ips),
                None => rt.pod_sandbox_status(&sandbox.id).await.map(|status| {
                    std::iter::once(status.ip)
                        .chain(status.additional_ips)
                        .filter(|ip| !ip.is_empty())
                        .collect::<Vec<String>>()
                }),
            }
        };
        let now = now_nanos();
        // The sandbox's IPs (read once after RunPodSandbox) and the image
        // do not depend on each other: both are asked at once, which takes
        // one runtime round trip off a new pod's start.
        let (ips, image) = tokio::join!(
            ips_read,
            self.ensure_image(pod, &container, &sandbox_config, now)
        );
        let pod_ips = ips?;
        sandbox.ips = Some(pod_ips.clone());
        let pod_ip = pod_ips.first().cloned().unwrap_or_default();
        let image = match image {
            Ok(image) => {
                self.mark(Phase::ImageResolved);
                image
            }
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
        let hosts_file = match write_hosts_file(&self.ctx.node, pod, &container, &pod_ips) {
            Ok(file) => file,
            Err(e) => return Err(self.config_error(pod, name, e.to_string())),
        };
        // As the kubelet, every container instance gets the Services known
        // when it is created; a later change does not restart it.
        let services = self.ctx.services.wait_for_first_list().await;
        let service_env = mapping::service_env(pod, services.services());
        drop(services);
        let start = mapping::ContainerStart {
            restart_count,
            attempt,
            pod_ip: &pod_ip,
            image_ref: &image.id,
            image_user: (image.user.as_ref())
                .map(|(uid, name)| mapping::ImageUser::from_status(*uid, name)),
            etc_hosts: hosts_file.as_deref(),
            service_env: &service_env,
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
        // The subPath binds, as the kubelet's makeMounts makes them (a
        // failure is a CreateContainerConfigError).
        let binds =
            mapping::subpath_binds(&self.ctx.node, pod, &container, &start).map_err(refused)?;
        for bind in binds {
            let made = subpath::prepare(&bind.volume_path, &bind.sub_path, &bind.target);
            if let Err(e) = made {
                let what = format!(
                    "failed to prepare subPath for volumeMount of container {name:?}: {}: {e}",
                    bind.sub_path.display()
                );
                return Err(self.config_error(pod, name, what));
            }
        }
        // The kubelet makes <pod log dir>/<container> before CreateContainer:
        // containerd creates it itself, CRI-O's conmon does not and fails
        // with "Failed to open log file".
        let log_dir = mapping::pod_log_dir(&self.ctx.node, pod).join(name);
        if let Err(e) = make_dir(&log_dir, POD_LOG_DIR_MODE) {
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
        self.mark(Phase::CreateRequested);
        let id = match rt
            .create_container(&sandbox.id, &config, &sandbox_config)
            .await
        {
            Ok(id) => {
                self.mark(Phase::Created);
                id
            }
            Err(e) => {
                let message = e.runtime_message();
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
        self.mark(Phase::StartRequested);
        if let Err(e) = rt.start_container(&id).await {
            let message = e.runtime_message();
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
        self.mark(Phase::Started);
        self.ctx
            .container_event(pod, name, kubelet_events::started(name));
        self.waiting.remove(name);
        self.link_log(&sandbox_config, &config, &id).await;
        self.post_start(pod, &container, &pod_ip, &id).await
    }

    /// The container's symlink in the container logs directory, made
    /// between the start and the postStart hook as the kubelet makes it; a
    /// failure is only logged (the container runs either way).
    async fn link_log(
        &self,
        sandbox: &crate::cri::PodSandboxConfig,
        config: &crate::cri::ContainerConfig,
        id: &str,
    ) {
        let dirs = &self.ctx.node.log_dirs;
        let link = legacy_log_symlink(
            &dirs.container_logs_dir,
            &sandbox.metadata.name,
            &sandbox.metadata.namespace,
            &config.metadata.name,
            id,
        );
        let log = std::path::Path::new(&sandbox.log_directory).join(&config.log_path);
        let rt = self.ctx.runtime.as_ref();
        if let Err(e) = link_started_container(rt, &link, log, id, &dirs.pod_logs_dir).await {
            tracing::warn!(error = %e, "could not create the container log symlink");
        }
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

/// The pod's log directory, made before the sandbox.
pub(super) fn prepare_dirs(node: &NodeContext, pod: &Pod) -> std::io::Result<()> {
    make_dir(&mapping::pod_log_dir(node, pod), POD_LOG_DIR_MODE)
}

/// Sets up each emptyDir of the pod (defaulting made every volume without
/// a source one), given to the pod's fsGroup if it has one.
pub(super) fn set_up_empty_dirs(
    node: &NodeContext,
    pod: &Pod,
) -> Result<(), empty_dir::EmptyDirError> {
    let spec = pod.spec.as_ref();
    let fs_group = spec
        .and_then(|s| s.security_context.as_ref()?.fs_group)
        .and_then(|g| u32::try_from(g).ok());
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    for v in volumes.iter().filter(|v| v.empty_dir.is_some()) {
        let dir = mapping::empty_dir_path(node, pod, &v.name);
        let meta_dir = mapping::empty_dir_plugin_dir(node, pod, &v.name);
        let volume = EmptyDir {
            volume: &v.name,
            dir: &dir,
            meta_dir: &meta_dir,
        };
        if empty_dir::set_up(&volume, fs_group)? {
            tracing::debug!(pod = %pod::full_name(pod), volume = v.name, ?fs_group, "emptyDir set up");
        }
    }
    Ok(())
}

/// Writes the pod's managed hosts file when `container` gets it (the
/// kubelet's `makeMounts`: the pod has an IP or is on the host network,
/// and the container mounts nothing at /etc/hosts), and names it. The
/// kubelet writes it anew for every container it starts.
fn write_hosts_file(
    node: &NodeContext,
    pod: &Pod,
    container: &Container,
    pod_ips: &[String],
) -> Result<Option<PathBuf>, crate::volume::etc_hosts_file::EtcHostsError> {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network) == Some(true);
    if !mounts_hosts_file(host_network, pod_ips, container) {
        return Ok(None);
    }
    let (hostname, host_domain) = mapping::host_name_and_domain(pod);
    let file = mapping::etc_hosts_file(node, pod::uid(pod));
    let hosts = HostsFile {
        host_network,
        pod_ips,
        hostname: &hostname,
        host_domain: &host_domain,
        aliases: spec
            .and_then(|s| s.host_aliases.as_deref())
            .unwrap_or_default(),
    };
    ensure_hosts_file(&file, std::path::Path::new(NODE_HOSTS_FILE), &hosts)?;
    Ok(Some(file))
}
