//! The kubelet's events for the decisions crilet makes too: reason, type
//! and message wording as the kubelet records them
//! (`pkg/kubelet/events/event.go` for the reasons; the messages from their
//! call sites in `pkg/kubelet/images/image_manager.go`,
//! `pkg/kubelet/kuberuntime/kuberuntime_container.go`,
//! `kuberuntime_manager.go` and the node status setters; the probes' are
//! in `prober::probe_events`, beside `ProbeType`), so `kubectl describe` reads as it does on a kubelet.
//!
//! The kubelet sends core/v1 Events, which have no `action`; events.k8s.io/v1
//! requires one. crilet names the step that was taken or failed (PullImage,
//! InspectImage, CreateContainer, StartContainer, KillContainer, the probe,
//! the hook), and where one step's outcome has several messages under one
//! reason (a `Failed` start), the outcome itself (ErrImagePull,
//! ImagePullBackOff, ...), so that distinct messages never share a series.
//! The action is written with the Event: the API server requires one on an
//! Event with an eventTime, which kube-runtime's Recorder always sets (the
//! kubelet writes the older form, without either; see
//! docs/kubelet-differences.md).
//!
//! Invariant: pure; every message is built here and nowhere else, but the
//! probes' (`prober::probe_events`).

use std::time::Duration;

use super::recorder::{Event, EventType};
use crate::units::go_duration;

fn event(type_: EventType, reason: &'static str, action: &'static str, message: String) -> Event {
    Event {
        type_,
        reason,
        action,
        message,
    }
}

use EventType::{Normal, Warning};

// ---------------------------------------------------------------- images

/// Before PullImage.
pub fn pulling(image: &str) -> Event {
    event(
        Normal,
        "Pulling",
        "PullImage",
        format!("Pulling image {image:?}"),
    )
}

/// After a PullImage that succeeded: `pulled` is the pull itself, `waited`
/// the time since the worker asked for the image (the same here: crilet
/// does not queue pulls), `size` the image's size as the runtime reports it.
pub fn pulled(image: &str, pulled: Duration, waited: Duration, size: u64) -> Event {
    let ms = |d: Duration| go_duration(Duration::from_millis(d.as_millis() as u64));
    let message = format!(
        "Successfully pulled image {image:?} in {} ({} including waiting). Image size: {size} bytes.",
        ms(pulled),
        ms(waited)
    );
    event(Normal, "Pulled", "PullImage", message)
}

/// The image is there and the policy does not ask for a pull.
pub fn already_present(image: &str) -> Event {
    let message = format!("Container image {image:?} already present on machine");
    event(Normal, "Pulled", "InspectImage", message)
}

/// A PullImage that failed, with the runtime's error.
pub fn failed_to_pull(image: &str, error: &str) -> Event {
    let message = format!("Failed to pull image {image:?}: {error}");
    event(Warning, "Failed", "PullImage", message)
}

/// A pull held back by the pull back-off.
pub fn back_off_pulling(image: &str) -> Event {
    let message = format!("Back-off pulling image {image:?}");
    event(Normal, "BackOff", "PullImage", message)
}

/// `imagePullPolicy: Never` and the image is missing.
pub fn never_pull(image: &str) -> Event {
    let message = format!("Container image {image:?} is not present with pull policy of Never");
    event(Warning, "ErrImageNeverPull", "InspectImage", message)
}

/// ImageStatus failed.
pub fn failed_to_inspect(image: &str, error: &str) -> Event {
    let message = format!("Failed to inspect image {image:?}: {error}");
    event(Warning, "InspectFailed", "InspectImage", message)
}

// ------------------------------------------------------------------ pods

/// A hostPath check that failed before the sandbox (the message is the
/// kubelet's `MountVolume.SetUp failed for volume ...`), on the pod.
pub fn failed_mount(message: &str) -> Event {
    event(Warning, "FailedMount", "MountVolume", message.to_string())
}

/// The kubelet's words when a pod's dnsPolicy wants the cluster's DNS and
/// none is configured (crilet has no `--cluster-dns`): it falls back to
/// the node's resolver (pkg/kubelet/network/dns, GetPodDNS).
const MISSING_CLUSTER_DNS: &str = "kubelet does not have ClusterDNS IP configured and cannot create \
     Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";

/// On the Node, each time a pod's DNS falls back from the cluster's.
pub fn missing_cluster_dns_node() -> Event {
    let message = MISSING_CLUSTER_DNS.to_string();
    event(Warning, "MissingClusterDNS", "ConfigureDNS", message)
}

/// On the pod, beside [`missing_cluster_dns_node`]; `pod` is the kubelet's
/// `format.Pod` ([`pod_desc`]).
pub fn missing_cluster_dns_pod(pod: &str) -> Event {
    let message = format!("pod: {pod:?}. {MISSING_CLUSTER_DNS}");
    event(Warning, "MissingClusterDNS", "ConfigureDNS", message)
}

/// RunPodSandbox failed, on the pod.
pub fn failed_create_pod_sandbox(error: &str) -> Event {
    let message = format!("Failed to create pod sandbox: {error}");
    event(Warning, "FailedCreatePodSandBox", "RunPodSandbox", message)
}

// ------------------------------------------------------------ containers

/// A start that failed before the container ran: `outcome` is what the
/// container waits with (ErrImagePull, ImagePullBackOff,
/// CreateContainerConfigError, CreateContainerError, RunContainerError) and
/// `detail` what the kubelet prints after "Error: " (the outcome itself for
/// an image error, else the error's message).
pub fn failed(outcome: &'static str, detail: &str) -> Event {
    event(Warning, "Failed", outcome, format!("Error: {detail}"))
}

pub fn created(container: &str) -> Event {
    let message = format!("Created container: {container}");
    event(Normal, "Created", "CreateContainer", message)
}

pub fn started(container: &str) -> Event {
    let message = format!("Started container {container}");
    event(Normal, "Started", "StartContainer", message)
}

/// Before StopContainer: `message` says why (a failed probe, a changed
/// definition), the kubelet's default is "Stopping container NAME".
pub fn killing(container: &str, message: Option<&str>) -> Event {
    let message = match message {
        Some(m) => m.to_string(),
        None => format!("Stopping container {container}"),
    };
    event(Normal, "Killing", "KillContainer", message)
}

/// The Killing message for a container whose spec changed.
pub fn definition_changed(container: &str) -> String {
    format!("Container {container} definition changed, will be restarted")
}

/// The Killing message for a sidecar whose spec changed (restarted
/// whatever the pod's restartPolicy, so the kubelet says nothing of it).
pub fn init_definition_changed(container: &str) -> String {
    format!("Init container {container} definition changed")
}

/// The Killing message after a failed postStart hook (the kubelet passes
/// the reason as the message).
pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";

/// A restart held back by the crash back-off. `pod` is the kubelet's
/// `format.Pod`: `NAME_NAMESPACE(UID)`.
pub fn back_off_restarting(container: &str, pod: &str) -> Event {
    let message = format!("Back-off restarting failed container {container} in pod {pod}");
    event(Warning, "BackOff", "StartContainer", message)
}

/// The kubelet's `format.Pod`.
pub fn pod_desc(name: &str, namespace: &str, uid: &str) -> String {
    format!("{name}_{namespace}({uid})")
}

/// The hook's own error is left out, as the kubelet leaves it out (it may
/// hold secrets); the log has it.
pub fn failed_post_start_hook() -> Event {
    let message = "PostStartHook failed".to_string();
    event(Warning, "FailedPostStartHook", "PostStartHook", message)
}

pub fn failed_pre_stop_hook() -> Event {
    let message = "PreStopHook failed".to_string();
    event(Warning, "FailedPreStopHook", "PreStopHook", message)
}

/// Replaces the container's ID in a runtime's error with its name, as the
/// kubelet's `recordContainerEvent` does: an ID would make every instance's
/// event distinct.
pub fn without_id(message: &str, id: &str, container: &str) -> String {
    if id.is_empty() {
        return message.to_string();
    }
    message.replace(id, container)
}

// ----------------------------------------------------------------- nodes

/// When the agent starts (on the Node).
pub fn starting() -> Event {
    event(Normal, "Starting", "Starting", "Starting kubelet.".into())
}

/// On the Node at start, when the host runs cgroup v1 (kubelet.go, the
/// CgroupV1 reason of pkg/kubelet/events).
pub fn cgroup_v1() -> Event {
    let message =
        "cgroup v1 support is in maintenance mode, please migrate to cgroup v2".to_string();
    event(Warning, "CgroupV1", "Starting", message)
}

/// A node condition that changed (NodeReady, NodeNotReady,
/// NodeHasDiskPressure, NodeHasNoDiskPressure, NodeHasSufficientMemory, ...),
/// always Normal, as the kubelet's status setters record them.
pub fn node_status(node: &str, reason: &'static str) -> Event {
    let message = format!("Node {node} status is now: {reason}");
    event(Normal, reason, "NodeStatus", message)
}

// ------------------------------------------------------------- admission

/// A pod the node refuses to run (admission), on the API pod itself.
pub fn rejected(reason: &'static str, message: String) -> Event {
    event(Warning, reason, "Admit", message)
}

#[cfg(test)]
#[path = "kubelet_events_tests.rs"]
pub(crate) mod tests;
