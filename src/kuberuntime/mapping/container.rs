//! One container's config for CreateContainer: image (the resolved ID,
//! with the spec's name beside it), command, env (its own, then the
//! service variables), mounts (the volumes', then the managed hosts
//! file's, then the termination-message file's), log path, resources and
//! security, with the kubelet's labels and annotations.
//! Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping.

use super::annotations::{ports_annotation, pre_stop_annotation};
use super::*;
use crate::kuberuntime::labels::{
    CONTAINER_PORTS_ANNOTATION, CONTAINER_PRESTOP_HANDLER_ANNOTATION,
};
use crate::volume::etc_hosts::ETC_HOSTS_PATH;

/// One container instance's facts besides its spec, gathered by the worker.
#[derive(Debug, Clone, Copy, Default)]
pub struct ContainerStart<'a> {
    pub restart_count: u32,
    pub attempt: u32,
    /// The sandbox's IP as the runtime reports it (empty for host network).
    pub pod_ip: &'a str,
    /// The image as the runtime resolved it: ImageStatus's ID, or what
    /// PullImage returned. The container is created from it, as the
    /// kubelet does, so that a tag moved later does not change it; empty
    /// means the spec's name.
    pub image_ref: &'a str,
    /// Who the image runs as, from ImageStatus; `None` when not known
    /// (then the runtime picks the image's user and `runAsNonRoot` is
    /// checked only against an explicit `runAsUser`).
    pub image_user: Option<ImageUser<'a>>,
    /// The pod's managed hosts file, when this container gets it
    /// (`volume::etc_hosts`), mounted at /etc/hosts.
    pub etc_hosts: Option<&'a Path>,
    /// The service variables the pod sees ([`super::service_env`]), in
    /// their order; the container's own entries win over them.
    pub service_env: &'a [(String, String)],
}

/// The user an image runs as, as the kubelet's `getImageUser` reads
/// ImageStatus: a numeric uid, else a user name; an image that gives
/// neither runs as root (uid 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageUser<'a> {
    Uid(i64),
    Name(&'a str),
}

impl<'a> ImageUser<'a> {
    pub fn from_status(uid: Option<i64>, username: &'a str) -> Self {
        match (uid, username) {
            (Some(uid), _) => ImageUser::Uid(uid),
            (None, "") => ImageUser::Uid(0),
            (None, name) => ImageUser::Name(name),
        }
    }
}

/// The subPath binds `container` needs made before CreateContainer (see
/// [`SubPathBind`]), with its subPathExpr expanded as [`container_config`]
/// expands it.
pub fn subpath_binds(
    ctx: &NodeContext,
    pod: &Pod,
    container: &Container,
    start: &ContainerStart,
) -> Result<Vec<SubPathBind>, MappingError> {
    let field = container_field(pod, &container.name);
    let envs = environment(ctx, pod, container, start.pod_ip, start.service_env, &field)?;
    let privileged = is_privileged(container);
    Ok(mounts_and_binds(ctx, pod, container, &envs, privileged, &field)?.1)
}

/// `etc_hosts` is the pod's managed hosts file when this container gets
/// it (the worker decides, as the kubelet's `makeMounts`, and writes it);
/// `service_env` the pod's service variables ([`service_env`]), empty on a
/// node without an API server. They are not part of [`container_hash`]: a
/// changed Service does not restart a container, as with the kubelet.
#[allow(clippy::too_many_arguments)]
pub fn container_config(
    ctx: &NodeContext,
    pod: &Pod,
    container: &Container,
    start: &ContainerStart,
) -> Result<ContainerConfig, MappingError> {
    let ContainerStart {
        restart_count,
        attempt,
        pod_ip,
        image_ref,
        image_user,
        etc_hosts,
        service_env,
    } = *start;
    let field = container_field(pod, &container.name);
    let envs = environment(ctx, pod, container, pod_ip, service_env, &field)?;
    let expand_all = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter().flatten().map(|s| expand(s, &envs)).collect()
    };
    let security = container_security(ctx, pod, container, &field, image_user)?;
    let labels = ContainerLabels {
        pod_name: name(pod).to_owned(),
        pod_namespace: namespace(pod).to_owned(),
        pod_uid: uid(pod).to_owned(),
        container_name: container.name.clone(),
        hash: container_hash(container),
        restart_count,
        termination_message_path: non_empty(&container.termination_message_path)
            .unwrap_or(DEFAULT_TERMINATION_MESSAGE_PATH)
            .to_owned(),
        termination_message_policy: non_empty(&container.termination_message_policy)
            .unwrap_or(TERMINATION_MESSAGE_POLICY_FILE)
            .to_owned(),
        termination_grace_period: spec(pod).termination_grace_period_seconds,
        deletion_grace_period: pod.metadata.deletion_grace_period_seconds,
    };
    let mut annotations = labels.to_annotations();
    if let Some(ports) = ports_annotation(container) {
        annotations.insert(CONTAINER_PORTS_ANNOTATION.to_owned(), ports);
    }
    if let Some(handler) = pre_stop_annotation(container) {
        annotations.insert(CONTAINER_PRESTOP_HANDLER_ANNOTATION.to_owned(), handler);
    }
    let (mut all_mounts, _) =
        mounts_and_binds(ctx, pod, container, &envs, security.privileged, &field)?;
    all_mounts.extend(etc_hosts.map(etc_hosts_mount));
    all_mounts.extend(termination_message_mount(ctx, pod, container, attempt));
    let spec_image = container.image.clone().unwrap_or_default();
    Ok(ContainerConfig {
        metadata: ContainerMetadata {
            name: container.name.clone(),
            attempt,
        },
        image: match image_ref {
            "" => spec_image.clone(),
            resolved => resolved.to_owned(),
        },
        user_specified_image: spec_image,
        command: expand_all(&container.command),
        args: expand_all(&container.args),
        working_dir: container.working_dir.clone().unwrap_or_default(),
        mounts: all_mounts,
        envs,
        labels: labels.to_labels(),
        annotations,
        log_path: container_log_path(&container.name, restart_count),
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false),
        resources: Some(resources(ctx, pod, container)?),
        security: Some(security),
    })
}

/// The read-write bind of this instance's termination-message file, after
/// the volume mounts as the kubelet orders them; none for an empty path.
fn termination_message_mount(
    ctx: &NodeContext,
    pod: &Pod,
    container: &Container,
    attempt: u32,
) -> Option<Mount> {
    let path = termination_message_path(container)?;
    let file = termination_message_file(ctx, uid(pod), &container.name, attempt);
    Some(Mount {
        container_path: path.to_owned(),
        host_path: file.to_string_lossy().into_owned(),
        readonly: false,
        selinux_relabel: false,
        recursive_read_only: false,
        propagation: MountPropagation::Private,
    })
}

/// The read-write bind of the pod's hosts file at /etc/hosts. The kubelet
/// asks for an SELinux relabel only on a host with SELinux enabled, which
/// crilet does not support; so none, as the kubelet sends on such a host.
fn etc_hosts_mount(file: &Path) -> Mount {
    Mount {
        container_path: ETC_HOSTS_PATH.to_owned(),
        host_path: file.to_string_lossy().into_owned(),
        readonly: false,
        selinux_relabel: false,
        recursive_read_only: false,
        propagation: MountPropagation::Private,
    }
}
