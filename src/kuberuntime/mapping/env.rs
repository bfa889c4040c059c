//! Container environment and mounts: env values (`$(VAR)`-expanded by
//! `units::expansion`), the downward API and the service variables
//! (`service_env`) merged as the kubelet's `makeEnvironmentVariables`
//! merges them; hostPath and emptyDir mounts. Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. `status.podIP` and
//! `status.podIPs` read the pod IP crilet reports in the pod's status
//! ([`reported_pod_ip`]), for every network mode.

use super::downward::resource_field_value;
use super::*;
use crate::units::expansion::expand;

/// The container's env in spec order (a repeated name keeps its first slot,
/// last value wins), then the service variables it does not set itself
/// (`service_env`, in their order). A literal value is expanded against the
/// entries before it, then the service variables.
pub(super) fn environment(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
    pod_ip: &str,
    service_env: &[(String, String)],
    field: &str,
) -> Result<Vec<(String, String)>, MappingError> {
    if c.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(unsupported(
            pod,
            format!("{field}.envFrom"),
            "needs ConfigMaps or Secrets from the API server",
        ));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    // What `$(VAR)` finds: the container's own entries so far, which
    // `expand` prefers as they come last, then the service variables.
    let mut scope: Vec<(String, String)> = service_env.to_vec();
    for var in c.env.iter().flatten() {
        let value = match (&var.value_from, non_empty(&var.value)) {
            (Some(src), None) => {
                let field = format!("{field}.env{{{}}}.valueFrom", var.name);
                value_from(ctx, pod, c, src, pod_ip, &field)?
            }
            (_, value) => expand(value.unwrap_or(""), &scope),
        };
        scope.push((var.name.clone(), value.clone()));
        match out.iter_mut().find(|(n, _)| *n == var.name) {
            Some(slot) => slot.1 = value,
            None => out.push((var.name.clone(), value)),
        }
    }
    let own = out.len();
    for (name, value) in service_env {
        if !out[..own].iter().any(|(n, _)| n == name) {
            out.push((name.clone(), value.clone()));
        }
    }
    Ok(out)
}

/// One `valueFrom`; `pod_ip` is the sandbox's IP as the runtime reports
/// it (empty for host network).
pub(super) fn value_from(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
    src: &EnvVarSource,
    pod_ip: &str,
    field: &str,
) -> Result<String, MappingError> {
    let no_api = "static pods cannot read objects from the API server";
    if src.config_map_key_ref.is_some() {
        return Err(unsupported(pod, format!("{field}.configMapKeyRef"), no_api));
    }
    if src.secret_key_ref.is_some() {
        return Err(unsupported(pod, format!("{field}.secretKeyRef"), no_api));
    }
    if let Some(selector) = &src.resource_field_ref {
        let field = format!("{field}.resourceFieldRef");
        return resource_field_value(ctx, pod, c, selector, &field);
    }
    let Some(path) = src.field_ref.as_ref().map(|f| f.field_path.as_str()) else {
        return Err(invalid(pod, field, "", "no source set"));
    };
    let spec = spec(pod);
    let subscript = |prefix: &str| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        Some(key.to_owned())
    };
    let map_value = |map: &Option<BTreeMap<String, String>>, key: String| {
        map.as_ref()
            .and_then(|m| m.get(&key))
            .cloned()
            .unwrap_or_default()
    };
    Ok(match path {
        "metadata.name" => name(pod).to_owned(),
        "metadata.namespace" => namespace(pod).to_owned(),
        "metadata.uid" => uid(pod).to_owned(),
        "spec.nodeName" => non_empty(&spec.node_name)
            .unwrap_or(&ctx.node_name)
            .to_owned(),
        "spec.serviceAccountName" => spec.service_account_name.clone().unwrap_or_default(),
        "status.podIP" | "status.podIPs" => reported_pod_ip(pod, pod_ip, &ctx.host_ip).to_owned(),
        "status.hostIP" | "status.hostIPs" => ctx.host_ip.clone(),
        _ => match (
            subscript("metadata.labels"),
            subscript("metadata.annotations"),
        ) {
            (Some(key), _) => map_value(&pod.metadata.labels, key),
            (_, Some(key)) => map_value(&pod.metadata.annotations, key),
            _ => {
                return Err(unsupported(
                    pod,
                    format!("{field}.fieldRef"),
                    format!("fieldPath {path:?}"),
                ));
            }
        },
    })
}

/// A subPath mount's bind (the kubelet's `prepareSubpathTarget`): the
/// worker bind-mounts `volume_path`/`sub_path`, opened without leaving the
/// volume, on `target`, `<root>/pods/<uid>/volume-subpaths/<volume>/
/// <container>/<index of the mount in volumeMounts>`, and the container
/// mounts `target`. A symlink swapped into the volume after the check then
/// cannot lead the runtime out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPathBind {
    pub volume_path: PathBuf,
    /// Relative, without "..".
    pub sub_path: PathBuf,
    pub target: PathBuf,
}

/// `<root>/pods/<uid>/volume-subpaths`: every subPath bind of the pod.
pub fn volume_subpaths_dir(ctx: &NodeContext, pod_uid: &str) -> PathBuf {
    ctx.root_dir
        .join("pods")
        .join(pod_uid)
        .join("volume-subpaths")
}

/// The mounts of hostPath and emptyDir volumes (a volume with no source is
/// an emptyDir, as API defaulting makes it), and the subPath binds they need
/// made first: a mount with a subPath (or subPathExpr, after the kubelet's
/// checks: relative, no "..") mounts its bind target ([`SubPathBind`]), as
/// the kubelet's does.
pub(super) fn mounts_and_binds(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
    envs: &[(String, String)],
    privileged: bool,
    field: &str,
) -> Result<(Vec<Mount>, Vec<SubPathBind>), MappingError> {
    let volumes = spec(pod).volumes.iter().flatten();
    let mut out = Vec::new();
    let mut binds = Vec::new();
    for (index, vm) in c.volume_mounts.iter().flatten().enumerate() {
        let field = format!("{field}.volumeMounts{{{}}}", vm.name);
        let Some(volume) = volumes.clone().find(|v| v.name == vm.name) else {
            return Err(invalid(
                pod,
                format!("{field}.name"),
                &vm.name,
                "no such volume in spec.volumes",
            ));
        };
        let kinds = match serde_json::to_value(volume) {
            Ok(serde_json::Value::Object(map)) => map
                .into_iter()
                .map(|(k, _)| k)
                .filter(|k| k != "name")
                .collect(),
            _ => Vec::new(),
        };
        let base = if let Some(host) = &volume.host_path {
            PathBuf::from(&host.path)
        } else if volume.empty_dir.is_some() || kinds.is_empty() {
            empty_dir_path(ctx, pod, &volume.name)
        } else {
            let detail = format!(
                "volume kind {} (only hostPath and emptyDir)",
                kinds.join(", ")
            );
            return Err(unsupported(
                pod,
                format!("spec.volumes{{{}}}", volume.name),
                detail,
            ));
        };
        let sub = match (non_empty(&vm.sub_path), non_empty(&vm.sub_path_expr)) {
            (Some(p), _) => p.to_owned(),
            (None, Some(e)) => expand(e, envs),
            (None, None) => String::new(),
        };
        let sub_path = Path::new(&sub);
        if sub_path.is_absolute() || sub_path.components().any(|c| c == Component::ParentDir) {
            return Err(invalid(
                pod,
                format!("{field}.subPath"),
                &sub,
                "must be relative and not contain '..'",
            ));
        }
        let propagation = match vm.mount_propagation.as_deref() {
            None | Some("None") => MountPropagation::Private,
            Some("HostToContainer") => MountPropagation::HostToContainer,
            Some("Bidirectional") if privileged => MountPropagation::Bidirectional,
            Some(other) => {
                let reason = "expected None, HostToContainer or (privileged only) Bidirectional";
                return Err(invalid(
                    pod,
                    format!("{field}.mountPropagation"),
                    other,
                    reason,
                ));
            }
        };
        let host_path = if sub.is_empty() {
            base
        } else {
            let target = (volume_subpaths_dir(ctx, uid(pod)).join(&volume.name))
                .join(&c.name)
                .join(index.to_string());
            binds.push(SubPathBind {
                volume_path: base,
                sub_path: sub_path.to_path_buf(),
                target: target.clone(),
            });
            target
        };
        let recursive_read_only = recursive_read_only(ctx, pod, vm, &field)?;
        out.push(Mount {
            container_path: vm.mount_path.clone(),
            host_path: host_path.to_string_lossy().into_owned(),
            readonly: vm.read_only.unwrap_or(false),
            selinux_relabel: false,
            recursive_read_only,
            propagation,
        });
    }
    Ok((out, binds))
}

/// The kubelet's `resolveRecursiveReadOnly`: IfPossible is a recursive
/// read-only mount where the runtime makes them, Enabled needs one (an
/// error otherwise, which fails the container), Disabled or unset is not.
/// Validation has checked the mount is read-only without propagation.
fn recursive_read_only(
    ctx: &NodeContext,
    pod: &Pod,
    vm: &k8s_openapi::api::core::v1::VolumeMount,
    field: &str,
) -> Result<bool, MappingError> {
    let supported = ctx.recursive_read_only_mounts;
    match vm.recursive_read_only.as_deref() {
        None | Some("Disabled") => Ok(false),
        Some("IfPossible") => Ok(supported),
        Some("Enabled") if supported => Ok(true),
        Some(mode) => {
            let why = if mode == "Enabled" {
                "requested recursive read-only mode, but it is not supported by the runtime"
            } else {
                "unknown recursive read-only mode"
            };
            Err(invalid(
                pod,
                format!("{field}.recursiveReadOnly"),
                mode,
                why,
            ))
        }
    }
}
