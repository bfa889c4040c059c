//! Pods as crilet knows them: the manifest model and its validation, the
//! kubelet's defaulting of static pods, and the pod manager.
//!
//! Invariant: nothing here does I/O or reads a clock; callers pass the
//! bytes they read and the time they observed.
//! The ground floor: imports nothing from the crate but `units`.

pub mod containers;
pub mod defaults;
pub mod document;
pub mod field_validation;
pub mod lookup;
pub mod manager;
pub mod model;
mod mount_validation;
mod probe_validation;
pub mod problems;
pub mod spec_validation;
pub mod typed;
pub mod view;

pub use k8s_openapi::api::core::v1::Pod;

/// `kubernetes.io/config.source`: which source a static pod came from.
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// `kubernetes.io/config.hash`: the static pod's hash (its UID).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// `kubernetes.io/config.seen`: when the agent first saw this version.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// `kubernetes.io/config.mirror`: on a mirror pod, its static pod's hash.
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The CRI labels that name a pod and container on the runtime (the
/// kubelet's `pkg/kubelet/types/labels.go`): every subsystem that reads a
/// runtime listing uses them; `kuberuntime::labels` builds and parses them.
/// Label holding the pod name.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label holding the pod namespace.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label holding the pod UID.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label holding the container name (containers only).
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";

/// Values of `kubernetes.io/config.source`.
pub const FILE_SOURCE: &str = "file";
pub const HTTP_SOURCE: &str = "http";
pub const API_SOURCE: &str = "api";

/// The kubelet's pod full name, `<name>_<namespace>`.
pub fn full_name(pod: &Pod) -> String {
    format!("{}_{}", name(pod), namespace(pod))
}

pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

pub fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// An annotation of the pod, if set.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// True for a mirror pod (one the API server holds for a static pod).
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION).is_some()
}

/// True for a static pod (one from a file or URL source).
pub fn is_static_pod(pod: &Pod) -> bool {
    matches!(
        annotation(pod, CONFIG_SOURCE_ANNOTATION),
        Some(FILE_SOURCE) | Some(HTTP_SOURCE)
    )
}

/// `restartPolicy` of an init container that makes it a sidecar.
pub const CONTAINER_RESTART_POLICY_ALWAYS: &str = "Always";

/// True for an init container with `restartPolicy: Always`: a sidecar
/// (the kubelet's `IsRestartableInitContainer`). Validation allows the
/// field on init containers only, so an app container never is one.
pub fn is_restartable_init_container(c: &k8s_openapi::api::core::v1::Container) -> bool {
    c.restart_policy.as_deref() == Some(CONTAINER_RESTART_POLICY_ALWAYS)
}

/// True when the pod has at least one sidecar (its termination is then
/// ordered: app containers first, sidecars after, in reverse).
pub fn has_restartable_init_container(pod: &Pod) -> bool {
    let inits = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref());
    inits.is_some_and(|cs| cs.iter().any(is_restartable_init_container))
}
