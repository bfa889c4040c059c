//! Parsing and validating one Pod manifest.
//!
//! Invariant: every `Pod` this module hands out has passed [`validate_pod`],
//! so later stages (defaulting, the pod manager, the runtime plan) may rely on
//! a name, a spec, at least one container with a non-empty image, volume
//! mounts that resolve, and hostPath types from [`HOST_PATH_TYPES`]. Nothing here reads files or clocks: callers pass the
//! bytes and an `origin` (path or URL) that only ever appears in messages.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde_json::Value;

use super::document::Document;
pub use super::document::{
    MAX_MANIFEST_BYTES, MAX_NESTING_DEPTH, MAX_YAML_ALIAS_EVENTS, MAX_YAML_ALIASES,
    MAX_YAML_DOCUMENTS,
};
use super::probe_validation::{HookContext, validate_probes_and_hooks};
pub use super::problems::{ManifestError, Problems};
use super::problems::{
    dns1123_label_problem, dns1123_subdomain_problem, iana_svc_name_problem, json_type,
};

/// Parses a manifest holding exactly one Pod (JSON or YAML) and validates it.
pub fn parse_pod(origin: &str, bytes: &[u8]) -> Result<Pod, ManifestError> {
    let doc = Document::decode(origin, bytes)?;
    if check_kind(origin, &doc.value, false)? == Kind::PodList {
        return Err(ManifestError::new(
            origin,
            Some("kind".into()),
            "\"PodList\" holds several pods; this source accepts a single Pod",
        ));
    }
    let pod = doc.typed_pod(origin)?;
    validate_pod(origin, &pod)?;
    Ok(pod)
}

/// Parses a manifest holding a Pod or a v1 PodList (what a URL source may
/// serve) and validates every pod. An empty PodList gives an empty vector.
pub fn parse_pods(origin: &str, bytes: &[u8]) -> Result<Vec<Pod>, ManifestError> {
    let doc = Document::decode(origin, bytes)?;
    if check_kind(origin, &doc.value, true)? == Kind::Pod {
        let pod = doc.typed_pod(origin)?;
        validate_pod(origin, &pod)?;
        return Ok(vec![pod]);
    }
    let items = match doc.value {
        Value::Object(mut map) => map.remove("items").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let items = match items {
        Value::Null => Vec::new(),
        Value::Array(items) => items,
        other => {
            return Err(ManifestError::new(
                origin,
                Some("items".into()),
                format!("must be a list, found {}", json_type(&other)),
            ));
        }
    };
    let mut pods = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let prefix = format!("items[{i}]");
        check_item(&item).map_err(|(f, m)| ManifestError::new(origin, f, m).within(&prefix))?;
        let pod: Pod = super::typed::pod_from_value(item).map_err(|e| {
            let message = format!("invalid Pod: {e}");
            ManifestError::new(origin, e.path, message).within(&prefix)
        })?;
        validate_pod(origin, &pod).map_err(|e| e.within(&prefix))?;
        pods.push(pod);
    }
    Ok(pods)
}

/// What a manifest's `kind` says it holds, once `apiVersion` checked out.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Pod,
    PodList,
}

/// Checks `apiVersion: v1` and `kind: Pod` (or `PodList` when `allow_list`).
fn check_kind(origin: &str, value: &Value, allow_list: bool) -> Result<Kind, ManifestError> {
    let expected = if allow_list {
        "\"Pod\" or \"PodList\""
    } else {
        "\"Pod\""
    };
    let fail =
        |field: &str, message: String| Err(ManifestError::new(origin, Some(field.into()), message));
    let kind = match value.get("kind") {
        None | Some(Value::Null) => return fail("kind", format!("missing; expected {expected}")),
        Some(Value::String(kind)) => match kind.as_str() {
            "Pod" => Kind::Pod,
            // Reported even where lists are refused: the caller says why.
            "PodList" => Kind::PodList,
            other => {
                return fail(
                    "kind",
                    format!("{other:?} is not supported; expected {expected}"),
                );
            }
        },
        Some(other) => {
            return fail(
                "kind",
                format!("must be a string, found {}", json_type(other)),
            );
        }
    };
    match value.get("apiVersion") {
        Some(Value::String(v)) if v == "v1" => Ok(kind),
        None | Some(Value::Null) => fail("apiVersion", "missing; expected \"v1\"".into()),
        Some(other) => fail(
            "apiVersion",
            format!("{other} is not supported; expected \"v1\""),
        ),
    }
}

/// An item of a PodList: an object whose `kind` and `apiVersion`, usually
/// omitted inside a list, say v1 Pod when present.
fn check_item(item: &Value) -> Result<(), (Option<String>, String)> {
    if !item.is_object() {
        return Err((
            None,
            format!("expected a Pod object, found {}", json_type(item)),
        ));
    }
    for (field, want) in [("kind", "Pod"), ("apiVersion", "v1")] {
        match item.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if v == want => {}
            Some(other) => {
                return Err((
                    Some(field.into()),
                    format!("{other} is not supported; expected {want:?}"),
                ));
            }
        }
    }
    Ok(())
}

/// Checks what the API server would refuse and the rest of crilet relies on,
/// and reports every problem at once, as the API server does: the first in
/// the error's `field` and `message`, the rest in `others`, in field order.
pub fn validate_pod(origin: &str, pod: &Pod) -> Result<(), ManifestError> {
    match ManifestError::from_problems(origin, pod_problems(pod)) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Every problem of `pod`, as (field path, message), in field order; at
/// most one per field.
pub fn pod_problems(pod: &Pod) -> Problems {
    let mut out = Problems::new();
    let push = |out: &mut Problems, field: &str, message: String| {
        out.push((field.to_owned(), message));
    };
    match pod.metadata.name.as_deref() {
        None | Some("") => push(&mut out, "metadata.name", "is required".into()),
        Some(name) => {
            if let Some(problem) = dns1123_subdomain_problem(name) {
                push(&mut out, "metadata.name", problem);
            }
        }
    }
    let namespace = pod
        .metadata
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty());
    if let Some(problem) = namespace.and_then(dns1123_label_problem) {
        push(&mut out, "metadata.namespace", problem);
    }
    super::field_validation::validate_metadata(&pod.metadata, &mut out);
    let Some(spec) = &pod.spec else {
        push(&mut out, "spec", "is required".into());
        return out;
    };
    super::field_validation::validate_spec_fields(spec, &mut out);
    super::spec_validation::validate_pod_spec(spec, &mut out);
    if spec.containers.is_empty() {
        push(
            &mut out,
            "spec.containers",
            "at least one container is required".into(),
        );
    }
    if let Some(policy) = spec.restart_policy.as_deref() {
        if !matches!(policy, "Always" | "OnFailure" | "Never") {
            push(
                &mut out,
                "spec.restartPolicy",
                format!("{policy:?} is not one of \"Always\", \"OnFailure\", \"Never\""),
            );
        }
    }
    let volumes = validate_volumes(spec, &mut out);
    let host_network = spec.host_network == Some(true);
    // Validated before defaulting: an absent grace period is the default 30.
    let pod_grace_seconds = spec
        .termination_grace_period_seconds
        .unwrap_or(super::defaults::DEFAULT_TERMINATION_GRACE_SECONDS);
    let mut names = HashSet::new();
    // Init containers first: they run first, so a clash is reported on the
    // regular container that repeats an init container's name.
    for (path, container, is_init) in all_containers(spec) {
        if !names.insert(container.name.as_str()) {
            push(
                &mut out,
                &format!("{path}.name"),
                format!("duplicate container name {:?}", container.name),
            );
        }
        let hooks = HookContext {
            is_init,
            pod_grace_seconds,
        };
        validate_container(&path, container, &volumes, host_network, hooks, &mut out);
    }
    out
}

/// Init containers then containers, each with its field path and whether it
/// is an init container.
fn all_containers(spec: &PodSpec) -> impl Iterator<Item = (String, &Container, bool)> {
    let init = spec.init_containers.iter().flatten().enumerate();
    let init = init.map(|(i, c)| (format!("spec.initContainers[{i}]"), c, true));
    let regular = spec.containers.iter().enumerate();
    init.chain(regular.map(|(i, c)| (format!("spec.containers[{i}]"), c, false)))
}

/// The values of `hostPath.type` the kubelet knows; "" (like no type at
/// all) means "no check". The agent checks the host path against the type
/// before the pod's sandbox is run.
pub const HOST_PATH_TYPES: [&str; 8] = [
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
];

/// Checks names and types of the volumes; returns the declared names (valid
/// or not, so that a bad name is not also reported on every mount of it).
fn validate_volumes<'a>(spec: &'a PodSpec, out: &mut Problems) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let field = format!("spec.volumes[{i}].name");
        if volume.name.is_empty() {
            out.push((field, "is required".into()));
        } else if let Some(problem) = dns1123_label_problem(&volume.name) {
            names.insert(volume.name.as_str());
            out.push((field, problem));
        } else if !names.insert(volume.name.as_str()) {
            out.push((field, format!("duplicate volume name {:?}", volume.name)));
        }
        let kind = volume.host_path.as_ref().and_then(|h| h.type_.as_deref());
        if let Some(kind) = kind.filter(|k| !HOST_PATH_TYPES.contains(k)) {
            let expected: Vec<String> = HOST_PATH_TYPES.iter().map(|t| format!("{t:?}")).collect();
            out.push((
                format!("spec.volumes[{i}].hostPath.type"),
                format!("{kind:?} is not one of {}", expected.join(", ")),
            ));
        }
    }
    names
}

fn validate_container(
    path: &str,
    c: &Container,
    volumes: &HashSet<&str>,
    host_network: bool,
    hooks: HookContext,
    out: &mut Problems,
) {
    if c.name.is_empty() {
        out.push((format!("{path}.name"), "is required".into()));
    } else if let Some(problem) = dns1123_label_problem(&c.name) {
        out.push((format!("{path}.name"), problem));
    }
    match c.image.as_deref() {
        None | Some("") => out.push((format!("{path}.image"), "is required".into())),
        Some(image) if image.trim() != image => out.push((
            format!("{path}.image"),
            format!("{image:?} has leading or trailing whitespace"),
        )),
        Some(_) => {}
    }
    let mut port_names = HashSet::new();
    for (j, port) in c.ports.iter().flatten().enumerate() {
        let field = |name: &str| format!("{path}.ports[{j}].{name}");
        if !(1..=65535).contains(&port.container_port) {
            out.push((
                field("containerPort"),
                format!("{} is not in 1..=65535", port.container_port),
            ));
        }
        let host_port = port.host_port.unwrap_or(0);
        if !(0..=65535).contains(&host_port) {
            out.push((
                field("hostPort"),
                format!("{host_port} is not in 0..=65535"),
            ));
        } else if host_network && host_port != 0 && host_port != port.container_port {
            // With the host's network namespace there is no NAT to map one
            // port to another, so the API server insists they match.
            out.push((
                field("hostPort"),
                format!(
                    "{host_port} must equal containerPort ({}) when hostNetwork is true",
                    port.container_port
                ),
            ));
        }
        if let Some(protocol) = port.protocol.as_deref() {
            if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
                out.push((
                    field("protocol"),
                    format!("{protocol:?} is not one of \"TCP\", \"UDP\", \"SCTP\""),
                ));
            }
        }
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            if let Some(problem) = iana_svc_name_problem(name) {
                out.push((field("name"), problem));
            } else if !port_names.insert(name) {
                out.push((field("name"), format!("duplicate port name {name:?}")));
            }
        }
    }
    for (k, mount) in c.volume_mounts.iter().flatten().enumerate() {
        if !volumes.contains(mount.name.as_str()) {
            out.push((
                format!("{path}.volumeMounts[{k}].name"),
                format!("{:?} is not a volume declared in spec.volumes", mount.name),
            ));
        }
        if mount.mount_path.is_empty() {
            out.push((
                format!("{path}.volumeMounts[{k}].mountPath"),
                "is required".into(),
            ));
        }
    }
    super::field_validation::validate_container_fields(path, c, out);
    super::spec_validation::validate_container_spec(path, c, hooks.is_init, out);
    validate_probes_and_hooks(path, c, hooks, out);
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
