//! The API server's `ValidatePodCreate` rules for DNS, security contexts,
//! volume sources, emptyDir size limits and env `valueFrom`, plus what a
//! static pod cannot use (objects from the API server, ephemeral
//! containers). Messages use the API server's wording where it has one.
//!
//! Invariant: pure; every problem is added as (field path, message), at
//! most one per field, and a pod that passes never fails later in the
//! runtime mapping on these fields (unsupported volume kinds, `valueFrom`
//! sources, `fieldRef` paths and `resourceFieldRef` resources and divisors
//! are refused here, at read time, rather than at every sync). The one
//! exception is the API server's own: a `resourceFieldRef` naming a
//! container the pod lacks passes here and fails when the container
//! starts (CreateContainerConfigError), as under the kubelet.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, PodDNSConfig, PodSecurityContext, PodSpec, ResourceFieldSelector,
    SecurityContext, Volume,
};

use super::field_validation::{invalid, quantity_problem, unsupported};
use super::problems::Problems;
use crate::units::quantity;

/// The dnsPolicy values, sorted as the API server lists them.
const DNS_POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
/// The API server's `MaxDNSNameservers`.
pub const MAX_DNS_NAMESERVERS: usize = 3;
/// The API server's `MaxDNSSearchPaths`.
pub const MAX_DNS_SEARCH_PATHS: usize = 32;
/// The API server's `MaxDNSSearchListChars`.
pub const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;
/// The `fieldRef` paths the API server allows in env (subscripted labels and
/// annotations aside); crilet resolves each of them.
const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];
/// The `resourceFieldRef` resources the API server allows (hugepages
/// aside), sorted as it lists them.
const ENV_RESOURCE_FIELDS: [&str; 6] = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];
/// The divisors of cpu, in canonical form.
const CPU_DIVISORS: [&str; 2] = ["1m", "1"];
/// The divisors of memory, ephemeral storage and hugepages.
const BYTE_DIVISORS: [&str; 13] = [
    "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
];
const PROC_MOUNTS: [&str; 2] = ["Default", "Unmasked"];
const FS_GROUP_CHANGE_POLICIES: [&str; 2] = ["Always", "OnRootMismatch"];
const NO_API: &str = "static pods cannot use it: it needs objects from the API server";

/// dnsPolicy and dnsConfig, the pod's securityContext, volume sources and
/// emptyDir size limits, ephemeral containers.
pub fn validate_pod_spec(spec: &PodSpec, out: &mut Problems) {
    let policy = spec.dns_policy.as_deref();
    if let Some(p) = policy.filter(|p| !DNS_POLICIES.contains(p)) {
        out.push(("spec.dnsPolicy".into(), unsupported(p, &DNS_POLICIES)));
    }
    validate_dns_config(policy == Some("None"), spec.dns_config.as_ref(), out);
    if let Some(sc) = &spec.security_context {
        validate_pod_security_context(sc, out);
    }
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        validate_volume_source(&format!("spec.volumes[{i}]"), volume, out);
    }
    super::mount_validation::validate_pod_names(spec, out);
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        out.push((
            "spec.ephemeralContainers".into(),
            "Forbidden: cannot be set on create".into(),
        ));
    }
}

/// A container's securityContext, envFrom and env `valueFrom`, volume
/// mount paths, termination message policy, restartPolicy and host IPs.
pub fn validate_container_spec(path: &str, c: &Container, is_init: bool, out: &mut Problems) {
    if let Some(sc) = &c.security_context {
        validate_security_context(&format!("{path}.securityContext"), sc, out);
    }
    super::mount_validation::validate_container_misc(path, c, is_init, out);
    if c.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        out.push((format!("{path}.envFrom"), format!("Forbidden: {NO_API}")));
    }
    for (j, env) in c.env.iter().flatten().enumerate() {
        validate_value_from(&format!("{path}.env[{j}].valueFrom"), env, out);
    }
}

fn validate_dns_config(policy_none: bool, config: Option<&PodDNSConfig>, out: &mut Problems) {
    let field = "spec.dnsConfig";
    let Some(config) = config else {
        if policy_none {
            out.push((
                field.into(),
                "Required value: must provide `dnsConfig` when `dnsPolicy` is None".into(),
            ));
        }
        return;
    };
    let servers = config.nameservers.as_deref().unwrap_or_default();
    if policy_none && servers.is_empty() {
        out.push((
            format!("{field}.nameservers"),
            "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"
                .into(),
        ));
    }
    if servers.len() > MAX_DNS_NAMESERVERS {
        out.push((
            format!("{field}.nameservers"),
            format!("Invalid value: must not have more than {MAX_DNS_NAMESERVERS} nameservers"),
        ));
    }
    for (i, server) in servers.iter().enumerate() {
        if server.parse::<std::net::IpAddr>().is_err() {
            out.push((
                format!("{field}.nameservers[{i}]"),
                invalid(
                    server,
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                ),
            ));
        }
    }
    let searches = config.searches.as_deref().unwrap_or_default();
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        out.push((
            format!("{field}.searches"),
            format!("Invalid value: must not have more than {MAX_DNS_SEARCH_PATHS} search paths"),
        ));
    }
    if searches.join(" ").len() > MAX_DNS_SEARCH_LIST_CHARS {
        out.push((
            format!("{field}.searches"),
            format!(
                "Invalid value: must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters \
                 (including spaces) in the search list"
            ),
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        if search == "." {
            continue;
        }
        let name = search.strip_suffix('.').unwrap_or(search);
        if let Some(problem) = super::problems::dns1123_subdomain_problem(name) {
            out.push((format!("{field}.searches[{i}]"), problem));
        }
    }
    for (i, option) in config.options.iter().flatten().enumerate() {
        if option.name.as_deref().is_none_or(str::is_empty) {
            out.push((
                format!("{field}.options[{i}]"),
                "Required value: Option.Name must not be empty".into(),
            ));
        }
    }
}

fn validate_pod_security_context(sc: &PodSecurityContext, out: &mut Problems) {
    let field = "spec.securityContext";
    id_in_range(&format!("{field}.runAsUser"), sc.run_as_user, out);
    id_in_range(&format!("{field}.runAsGroup"), sc.run_as_group, out);
    id_in_range(&format!("{field}.fsGroup"), sc.fs_group, out);
    if let Some(policy) = sc.fs_group_change_policy.as_deref() {
        if !FS_GROUP_CHANGE_POLICIES.contains(&policy) {
            out.push((
                format!("{field}.fsGroupChangePolicy"),
                unsupported(policy, &FS_GROUP_CHANGE_POLICIES),
            ));
        }
    }
    for (i, gid) in sc.supplemental_groups.iter().flatten().enumerate() {
        id_in_range(&format!("{field}.supplementalGroups[{i}]"), Some(*gid), out);
    }
    for (i, sysctl) in sc.sysctls.iter().flatten().enumerate() {
        if !is_sysctl_name(&sysctl.name) {
            out.push((
                format!("{field}.sysctls[{i}].name"),
                invalid(
                    &sysctl.name,
                    "must have at most 253 characters and match regex \
                     ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
                ),
            ));
        }
    }
}

fn validate_security_context(field: &str, sc: &SecurityContext, out: &mut Problems) {
    id_in_range(&format!("{field}.runAsUser"), sc.run_as_user, out);
    id_in_range(&format!("{field}.runAsGroup"), sc.run_as_group, out);
    if let Some(mount) = sc.proc_mount.as_deref() {
        if !PROC_MOUNTS.contains(&mount) {
            out.push((
                format!("{field}.procMount"),
                unsupported(mount, &PROC_MOUNTS),
            ));
        }
    }
    if sc.allow_privilege_escalation == Some(false) {
        if sc.privileged == Some(true) {
            out.push((
                field.to_owned(),
                "Invalid value: cannot set `allowPrivilegeEscalation` to false and \
                 `privileged` to true"
                    .into(),
            ));
        }
        let adds = sc.capabilities.as_ref().and_then(|c| c.add.as_ref());
        if adds.is_some_and(|a| a.iter().any(|c| c == "CAP_SYS_ADMIN")) {
            out.push((
                field.to_owned(),
                "Invalid value: cannot set `allowPrivilegeEscalation` to false and \
                 `capabilities.Add` CAP_SYS_ADMIN"
                    .into(),
            ));
        }
    }
}

/// A user or group ID: `IsValidUserID` / `IsValidGroupID`.
fn id_in_range(field: &str, id: Option<i64>, out: &mut Problems) {
    if let Some(id) = id.filter(|id| !(0..=i64::from(i32::MAX)).contains(id)) {
        out.push((
            field.to_owned(),
            format!("Invalid value: {id}: must be between 0 and 2147483647, inclusive"),
        ));
    }
}

/// `^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`,
/// at most 253 characters.
fn is_sysctl_name(name: &str) -> bool {
    let segment_ok = |s: &str| {
        let b = s.as_bytes();
        let inner =
            |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_');
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty() && b.iter().all(inner) && edge(&b[0]) && edge(&b[b.len() - 1])
    };
    name.len() <= 253 && name.split(['.', '/']).all(segment_ok)
}

/// hostPath, emptyDir or no source (an emptyDir once defaulted) are what
/// crilet mounts; the others need the API server or a volume plugin.
fn validate_volume_source(path: &str, volume: &Volume, out: &mut Problems) {
    if let Some(limit) = volume
        .empty_dir
        .as_ref()
        .and_then(|e| e.size_limit.as_ref())
    {
        if let Some(problem) = quantity_problem(&limit.0) {
            out.push((format!("{path}.emptyDir.sizeLimit"), problem));
        }
    }
    let kinds: Vec<String> = match serde_json::to_value(volume) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| !matches!(k.as_str(), "name" | "hostPath" | "emptyDir"))
            .collect(),
        _ => Vec::new(),
    };
    for kind in kinds {
        let why = match kind.as_str() {
            "configMap"
            | "secret"
            | "projected"
            | "downwardAPI"
            | "persistentVolumeClaim"
            | "ephemeral" => NO_API,
            _ => "crilet mounts only hostPath and emptyDir volumes",
        };
        out.push((format!("{path}.{kind}"), format!("Forbidden: {why}")));
    }
}

/// Exactly one source; `value` and `valueFrom` not both; then what a static
/// pod can read: `fieldRef` on the paths the API server allows, and
/// `resourceFieldRef` as the API server checks it.
fn validate_value_from(field: &str, env: &EnvVar, out: &mut Problems) {
    let Some(from) = &env.value_from else {
        return;
    };
    let sources = [
        ("fieldRef", from.field_ref.is_some()),
        ("resourceFieldRef", from.resource_field_ref.is_some()),
        ("configMapKeyRef", from.config_map_key_ref.is_some()),
        ("secretKeyRef", from.secret_key_ref.is_some()),
    ];
    let set: Vec<&str> = sources.iter().filter(|s| s.1).map(|s| s.0).collect();
    let problem = match set.len() {
        0 => Some(
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or \
             `secretKeyRef`",
        ),
        _ if env.value.as_deref().is_some_and(|v| !v.is_empty()) => {
            Some("may not be specified when `value` is not empty")
        }
        1 => None,
        _ => Some("may not have more than one field specified at a time"),
    };
    if let Some(problem) = problem {
        out.push((field.to_owned(), invalid("", problem)));
        return;
    }
    match set[0] {
        "configMapKeyRef" | "secretKeyRef" => {
            out.push((
                format!("{field}.{}", set[0]),
                format!("Forbidden: {NO_API}"),
            ));
        }
        "resourceFieldRef" => {
            if let Some(selector) = &from.resource_field_ref {
                validate_resource_field_ref(&format!("{field}.resourceFieldRef"), selector, out);
            }
        }
        _ => {
            let path = from
                .field_ref
                .as_ref()
                .map_or("", |f| f.field_path.as_str());
            if !is_env_field_path(path) {
                let child = format!("{field}.fieldRef.fieldPath");
                let problem = if path.is_empty() {
                    "Required value".into()
                } else {
                    unsupported(path, &ENV_FIELD_PATHS)
                };
                out.push((child, problem));
            }
        }
    }
}

/// The API server's `validateContainerResourceFieldSelector` for env (no
/// `containerName` needed) and `validateContainerResourceDivisor`: a
/// resource of [`ENV_RESOURCE_FIELDS`] or `requests.`/`limits.hugepages-*`,
/// and a divisor whose canonical form is one the resource allows.
fn validate_resource_field_ref(field: &str, selector: &ResourceFieldSelector, out: &mut Problems) {
    let resource = selector.resource.as_str();
    let hugepages = ["requests.hugepages-", "limits.hugepages-"]
        .iter()
        .any(|p| resource.starts_with(p));
    if resource.is_empty() {
        out.push((format!("{field}.resource"), "Required value".into()));
    } else if !ENV_RESOURCE_FIELDS.contains(&resource) && !hugepages {
        let problem = unsupported(resource, &ENV_RESOURCE_FIELDS);
        out.push((format!("{field}.resource"), problem));
    }
    let Some(divisor) = selector.divisor.as_ref().map(|q| q.0.as_str()) else {
        return;
    };
    let canonical = match quantity::canonical(divisor) {
        Ok(c) => c,
        Err(_) => {
            if let Some(problem) = quantity_problem(divisor) {
                out.push((format!("{field}.divisor"), problem));
            }
            return;
        }
    };
    // An unset divisor is the zero quantity, which the API server skips.
    if canonical == "0" {
        return;
    }
    let (allowed, what): (&[&str], &str) = match resource {
        "limits.cpu" | "requests.cpu" => (&CPU_DIVISORS, "the cpu resource"),
        "limits.memory" | "requests.memory" => (&BYTE_DIVISORS, "the memory resource"),
        "limits.ephemeral-storage" | "requests.ephemeral-storage" => {
            (&BYTE_DIVISORS, "the local ephemeral storage resource")
        }
        _ if hugepages => (&BYTE_DIVISORS, "the hugepages resource"),
        _ => return,
    };
    if !allowed.contains(&canonical.as_str()) {
        let why = format!(
            "only divisor's values {} are supported with {what}",
            match allowed.len() {
                2 => "1m and 1".to_string(),
                _ => allowed.join(", "),
            }
        );
        out.push((format!("{field}.divisor"), invalid(resource, &why)));
    }
}

/// A path of [`ENV_FIELD_PATHS`] or `metadata.labels['k']` /
/// `metadata.annotations['k']`.
fn is_env_field_path(path: &str) -> bool {
    let subscripted = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['"))
            .and_then(|r| r.strip_suffix("']"))
            .is_some_and(|k| !k.is_empty())
    };
    ENV_FIELD_PATHS.contains(&path)
        || subscripted("metadata.labels")
        || subscripted("metadata.annotations")
}

#[cfg(test)]
#[path = "spec_validation_tests.rs"]
mod tests;
