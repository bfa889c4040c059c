//! The kubelet's defaulting of a static pod: first what the API server's
//! defaulting would have filled in (the kubelet decodes manifests through the
//! same defaulting code), then the static-pod specifics (UID, name suffix,
//! namespace, node, config annotations, NoExecute toleration).
//!
//! Invariant: the UID is a pure function of the node name, the source and the
//! API-defaulted pod, so re-reading an unchanged manifest yields the same UID
//! and any edit yields a new one. The time a pod was seen is passed in, never
//! read here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, HTTPGetAction, LifecycleHandler, Pod, PodSecurityContext,
    Probe, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use md5::{Digest, Md5};

use super::{
    CONFIG_HASH_ANNOTATION, CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION, FILE_SOURCE,
    HTTP_SOURCE,
};

/// Where a static pod came from: the manifest's path or the URL serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSource<'a> {
    File(&'a str),
    Url(&'a str),
}

impl PodSource<'_> {
    /// The `kubernetes.io/config.source` value for this source.
    pub fn config_source(&self) -> &'static str {
        match self {
            PodSource::File(_) => FILE_SOURCE,
            PodSource::Url(_) => HTTP_SOURCE,
        }
    }
}

pub const DEFAULT_TERMINATION_GRACE_SECONDS: i64 = 30;
const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// Fills in what the API server's defaulting would, for the fields the agent
/// relies on. Only absent values are filled (and, in probes, zeros; see
/// below), so applying it twice is the same as applying it once. A pod without a spec is left alone (validation
/// refuses it).
///
/// Beyond the pod-level and per-container defaults, two more API-server
/// defaults are applied because later stages depend on them: resource requests
/// default to the limits (they decide the QoS class and cgroup sizes), and in
/// a hostNetwork pod an unset hostPort defaults to the containerPort.
///
/// Probes and lifecycle handlers get `SetDefaults_Probe` and
/// `SetDefaults_HTTPGetAction` (see [`default_probe`]). There, and only
/// there, an explicit zero or empty string counts as absent: those Go fields
/// are plain values, not pointers, so the API server cannot tell `0` from
/// "not given" and defaults both. `initialDelaySeconds` has no default.
pub fn apply_api_defaults(pod: &mut Pod) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_SECONDS);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".into());
    spec.enable_service_links.get_or_insert(true);
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    let host_network = spec.host_network == Some(true);
    let init = spec.init_containers.iter_mut().flatten();
    for container in init.chain(spec.containers.iter_mut()) {
        default_container(container, host_network);
    }
    for volume in spec.volumes.iter_mut().flatten() {
        if has_no_source(volume) {
            volume.empty_dir = Some(EmptyDirVolumeSource::default());
        }
    }
}

fn default_container(c: &mut Container, host_network: bool) {
    if c.image_pull_policy.is_none() {
        let image = c.image.as_deref().unwrap_or_default();
        c.image_pull_policy = Some(default_pull_policy(image).into());
    }
    c.termination_message_path
        .get_or_insert_with(|| TERMINATION_MESSAGE_PATH.into());
    c.termination_message_policy
        .get_or_insert_with(|| "File".into());
    for port in c.ports.iter_mut().flatten() {
        port.protocol.get_or_insert_with(|| "TCP".into());
        if host_network && port.host_port.unwrap_or(0) == 0 {
            port.host_port = Some(port.container_port);
        }
    }
    let probes = [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ];
    for probe in probes.into_iter().flatten() {
        default_probe(probe);
    }
    if let Some(lifecycle) = c.lifecycle.as_mut() {
        let hooks = [&mut lifecycle.post_start, &mut lifecycle.pre_stop];
        for hook in hooks.into_iter().flatten() {
            default_lifecycle_handler(hook);
        }
    }
    if let Some(resources) = c.resources.as_mut() {
        if let Some(limits) = &resources.limits {
            let requests = resources.requests.get_or_insert_with(BTreeMap::new);
            for (name, quantity) in limits {
                requests
                    .entry(name.clone())
                    .or_insert_with(|| quantity.clone());
            }
        }
    }
}

pub const DEFAULT_PROBE_PERIOD_SECONDS: i32 = 10;
pub const DEFAULT_PROBE_TIMEOUT_SECONDS: i32 = 1;
pub const DEFAULT_PROBE_SUCCESS_THRESHOLD: i32 = 1;
pub const DEFAULT_PROBE_FAILURE_THRESHOLD: i32 = 3;
pub const DEFAULT_HTTP_GET_PATH: &str = "/";
pub const DEFAULT_HTTP_GET_SCHEME: &str = "HTTP";

/// The API server's `SetDefaults_Probe`: periodSeconds 10, timeoutSeconds 1,
/// successThreshold 1, failureThreshold 3, each when absent or 0; then the
/// httpGet defaults. initialDelaySeconds stays absent (0 is its meaning).
pub fn default_probe(probe: &mut Probe) {
    let fields = [
        (&mut probe.period_seconds, DEFAULT_PROBE_PERIOD_SECONDS),
        (&mut probe.timeout_seconds, DEFAULT_PROBE_TIMEOUT_SECONDS),
        (
            &mut probe.success_threshold,
            DEFAULT_PROBE_SUCCESS_THRESHOLD,
        ),
        (
            &mut probe.failure_threshold,
            DEFAULT_PROBE_FAILURE_THRESHOLD,
        ),
    ];
    for (field, default) in fields {
        if field.unwrap_or(0) == 0 {
            *field = Some(default);
        }
    }
    if let Some(http) = probe.http_get.as_mut() {
        default_http_get(http);
    }
}

/// The httpGet defaults also apply to postStart and preStop handlers.
fn default_lifecycle_handler(handler: &mut LifecycleHandler) {
    if let Some(http) = handler.http_get.as_mut() {
        default_http_get(http);
    }
}

/// `SetDefaults_HTTPGetAction`: path "/" and scheme "HTTP" when absent or empty.
fn default_http_get(http: &mut HTTPGetAction) {
    if http.path.as_deref().unwrap_or_default().is_empty() {
        http.path = Some(DEFAULT_HTTP_GET_PATH.into());
    }
    if http.scheme.as_deref().unwrap_or_default().is_empty() {
        http.scheme = Some(DEFAULT_HTTP_GET_SCHEME.into());
    }
}

/// The API defaults that change nothing a pod does, filled in only where
/// the pod is shown as the kubelet shows it (`/pods`): a downward-API
/// field's `apiVersion` "v1", a resource field's divisor "0" and a
/// hostPath's empty `type`. They are kept
/// out of [`apply_api_defaults`] because the UID and the container hash are
/// taken over the defaulted pod: adding them there would give every
/// existing static pod a new UID, and restart it, when crilet is upgraded.
/// (The API server fills both in on a mirror pod itself.)
pub fn apply_display_defaults(pod: &mut Pod) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    for volume in spec.volumes.iter_mut().flatten() {
        if let Some(host_path) = volume.host_path.as_mut() {
            host_path.type_.get_or_insert_with(String::new);
        }
    }
    let init = spec.init_containers.iter_mut().flatten();
    for container in init.chain(spec.containers.iter_mut()) {
        let sources = container
            .env
            .iter_mut()
            .flatten()
            .filter_map(|e| e.value_from.as_mut());
        for source in sources {
            if let Some(field) = source.field_ref.as_mut() {
                field.api_version.get_or_insert_with(|| "v1".into());
            }
            // The divisor is a plain Quantity in Go: an absent one is
            // written as its zero value.
            if let Some(resource) = source.resource_field_ref.as_mut() {
                resource.divisor.get_or_insert_with(|| Quantity("0".into()));
            }
        }
    }
}

/// A volume that names no source at all: the API server makes it an emptyDir.
fn has_no_source(volume: &Volume) -> bool {
    let bare = Volume {
        name: volume.name.clone(),
        ..Volume::default()
    };
    *volume == bare
}

/// The image pull policy the API server picks when none is given: `Always`
/// for an untagged or `:latest` image, `IfNotPresent` otherwise. An image
/// pinned by digest is immutable, so it is never re-pulled, even when it also
/// carries a `:latest` tag.
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    // A ':' before the last '/' belongs to a registry host:port, not a tag.
    let last_component = image.rsplit('/').next().unwrap_or(image);
    match last_component.rsplit_once(':') {
        None | Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// The static pod UID: lowercase hex MD5 over `host:<node>`, then
/// `file:<path>` or `url:<url>`, then the pod serialized as JSON. The JSON is
/// canonical because k8s-openapi writes struct fields in a fixed order and
/// keeps every map in a `BTreeMap`.
pub fn static_pod_uid(pod: &Pod, node_name: &str, source: &PodSource) -> String {
    let mut hasher = Md5::new();
    hasher.update(b"host:");
    hasher.update(node_name.as_bytes());
    match source {
        PodSource::File(path) => {
            hasher.update(b"file:");
            hasher.update(path.as_bytes());
        }
        PodSource::Url(url) => {
            hasher.update(b"url:");
            hasher.update(url.as_bytes());
        }
    }
    match serde_json::to_vec(pod) {
        Ok(bytes) => hasher.update(&bytes),
        // Serializing these plain data types does not fail in practice; if it
        // ever did, the Debug form is still deterministic, so the UID stays a
        // function of the content instead of collapsing to one value.
        Err(_) => hasher.update(format!("{pod:?}").as_bytes()),
    }
    hex::encode(hasher.finalize())
}

/// Turns a decoded manifest into the static pod the agent runs, in the
/// kubelet's order: API defaults, UID (unless the manifest set one), name
/// `<name>-<node>`, namespace `default` if empty, `spec.nodeName`, the config
/// annotations, and a toleration of every NoExecute taint (a static pod is
/// never evicted by taints: nothing would recreate it elsewhere).
///
/// Not idempotent: the name gets the node suffix again on a second call.
/// Sources call it exactly once on each freshly decoded pod.
pub fn apply_static_defaults(
    pod: &mut Pod,
    node_name: &str,
    source: &PodSource,
    seen: jiff::Timestamp,
) {
    apply_api_defaults(pod);
    let uid = match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_owned(),
        _ => static_pod_uid(pod, node_name, source),
    };
    let meta = &mut pod.metadata;
    meta.uid = Some(uid.clone());
    let name = meta.name.as_deref().unwrap_or_default();
    meta.name = Some(format!("{name}-{}", node_name.to_lowercase()));
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = Some("default".into());
    }
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(
        CONFIG_SOURCE_ANNOTATION.into(),
        source.config_source().into(),
    );
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), uid);
    annotations.insert(CONFIG_SEEN_ANNOTATION.into(), format_seen(seen));
    // Validation has refused spec-less pods; there is nothing to place then.
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.node_name = Some(node_name.to_owned());
    let tolerate_no_execute = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Toleration::default()
    };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    if !tolerations.contains(&tolerate_no_execute) {
        tolerations.push(tolerate_no_execute);
    }
}

/// RFC 3339 in UTC with up to nine fractional digits, trailing zeros
/// dropped: the shape of Go's RFC3339Nano, which the kubelet writes, so tools
/// reading the annotation see the same format from both agents.
fn format_seen(seen: jiff::Timestamp) -> String {
    // Timestamp's Display is exactly that: UTC, 'Z', shortest exact fraction.
    seen.to_string()
}

/// True when the pods are equal apart from the `config.seen` annotation: the
/// file source re-reads unchanged manifests with a new seen time, and that
/// alone must not count as an update.
pub fn pod_content_equal(a: &Pod, b: &Pod) -> bool {
    a.spec == b.spec
        && a.status == b.status
        && metadata_without_seen(&a.metadata) == metadata_without_seen(&b.metadata)
}

fn metadata_without_seen(meta: &ObjectMeta) -> ObjectMeta {
    let mut meta = meta.clone();
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(CONFIG_SEEN_ANNOTATION);
        // "only seen" and "no annotations" are the same content.
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
    meta
}

#[cfg(test)]
#[path = "defaults_tests.rs"]
mod tests;
