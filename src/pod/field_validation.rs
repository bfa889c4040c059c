//! The API server's `ValidatePodCreate` rules for the fields crilet reads
//! beyond names and ports (which `model` checks): labels and annotations,
//! grace periods, image pull policies, env names, hostPath paths and
//! resource quantities. Messages use the API server's wording where it has
//! one, so an operator can search for them.
//!
//! Invariant: pure; each check returns the first problem as (field path,
//! message), and a pod that passes them never fails later on these fields
//! (a quantity that parses here parses in the mapping).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::model::Invalid;
use crate::units::quantity;

/// The API server's cap on all annotations of an object, keys and values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

/// Labels (qualified-name keys, label values) and annotations
/// (qualified-name keys, a total size).
pub fn validate_metadata(meta: &ObjectMeta) -> Result<(), Invalid> {
    for (key, value) in meta.labels.iter().flatten() {
        if let Some(problem) = qualified_name_problem(key) {
            return Err(("metadata.labels".into(), invalid(key, &problem)));
        }
        if let Some(problem) = label_value_problem(value) {
            return Err((format!("metadata.labels[{key}]"), invalid(value, &problem)));
        }
    }
    let mut total = 0;
    for (key, value) in meta.annotations.iter().flatten() {
        if let Some(problem) = qualified_name_problem(&key.to_lowercase()) {
            return Err(("metadata.annotations".into(), invalid(key, &problem)));
        }
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        return Err((
            "metadata.annotations".into(),
            format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
    Ok(())
}

/// Grace periods and hostPath paths.
pub fn validate_spec_fields(spec: &PodSpec) -> Result<(), Invalid> {
    if let Some(n) = spec.termination_grace_period_seconds.filter(|n| *n < 0) {
        return Err((
            "spec.terminationGracePeriodSeconds".into(),
            invalid(&n.to_string(), "must be greater than or equal to 0"),
        ));
    }
    if let Some(n) = spec.active_deadline_seconds.filter(|n| *n < 1) {
        return Err((
            "spec.activeDeadlineSeconds".into(),
            invalid(
                &n.to_string(),
                "must be between 1 and 2147483647, inclusive",
            ),
        ));
    }
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let Some(host) = &volume.host_path else {
            continue;
        };
        let field = format!("spec.volumes[{i}].hostPath.path");
        if host.path.is_empty() {
            return Err((field, "Required value".into()));
        }
        if host.path.split('/').any(|part| part == "..") {
            return Err((field, invalid(&host.path, "must not contain '..'")));
        }
        // The API server takes a relative path; the runtime would then
        // fail every start, so crilet refuses it up front.
        if !host.path.starts_with('/') {
            return Err((field, invalid(&host.path, "must be an absolute path")));
        }
    }
    Ok(())
}

/// imagePullPolicy, env names and resources of one container at `path`.
pub fn validate_container_fields(path: &str, c: &Container) -> Result<(), Invalid> {
    if let Some(policy) = c.image_pull_policy.as_deref() {
        if !PULL_POLICIES.contains(&policy) {
            return Err((
                format!("{path}.imagePullPolicy"),
                unsupported(policy, &PULL_POLICIES),
            ));
        }
    }
    for (j, env) in c.env.iter().flatten().enumerate() {
        let field = format!("{path}.env[{j}].name");
        if env.name.is_empty() {
            return Err((field, "Required value".into()));
        }
        if !env
            .name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
        {
            return Err((
                field,
                invalid(
                    &env.name,
                    "a valid environment variable name must consist only of printable ASCII \
                     characters other than '='",
                ),
            ));
        }
    }
    let Some(resources) = &c.resources else {
        return Ok(());
    };
    let limits = quantities(
        &format!("{path}.resources.limits"),
        resources.limits.as_ref(),
    )?;
    let requests = quantities(
        &format!("{path}.resources.requests"),
        resources.requests.as_ref(),
    )?;
    for (name, (text, request)) in &requests {
        if let Some((limit_text, limit)) = limits.get(name) {
            if request > limit {
                return Err((
                    format!("{path}.resources.requests"),
                    invalid(
                        text,
                        &format!("must be less than or equal to {name} limit of {limit_text}"),
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Each quantity parsed, in milli-units for comparison; the first that does
/// not parse, or is negative, is the error.
fn quantities(
    field: &str,
    map: Option<&BTreeMap<String, KubeQuantity>>,
) -> Result<BTreeMap<String, (String, i128)>, Invalid> {
    let mut out = BTreeMap::new();
    for (name, KubeQuantity(text)) in map.into_iter().flatten() {
        let field = format!("{field}[{name}]");
        let q = quantity::parse(text).map_err(|_| {
            (
                field.clone(),
                invalid(
                    text,
                    "quantities must match the regular expression \
                     '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                ),
            )
        })?;
        if q.is_negative() {
            return Err((field, invalid(text, "must be greater than or equal to 0")));
        }
        let milli = q.milli_value().map_or(i128::MAX, i128::from);
        out.insert(name.clone(), (text.clone(), milli));
    }
    Ok(out)
}

fn invalid(value: &str, why: &str) -> String {
    format!("Invalid value: {value:?}: {why}")
}

fn unsupported(value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "Unsupported value: {value:?}: supported values: {}",
        list.join(", ")
    )
}

/// A qualified name (`[prefix/]name`): the name 1..=63 of alphanumerics,
/// '-', '_', '.', starting and ending alphanumeric; the prefix a DNS-1123
/// subdomain.
fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                let b = l.as_bytes();
                !b.is_empty()
                    && b.len() <= 63
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                    && b[0] != b'-'
                    && b[b.len() - 1] != b'-'
            });
        if !ok {
            return Some(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                 alphanumeric characters, '-' or '.', and must start and end with an \
                 alphanumeric character"
                    .into(),
            );
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > QUALIFIED_NAME_MAX {
        return Some(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    name_chars_problem(name).map(|_| {
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
         and end with an alphanumeric character"
            .into()
    })
}

fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > LABEL_VALUE_MAX {
        return Some(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    name_chars_problem(value).map(|_| {
        "a valid label must be an empty string or consist of alphanumeric characters, '-', \
         '_' or '.', and must start and end with an alphanumeric character"
            .into()
    })
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn name_chars_problem(s: &str) -> Option<()> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric();
    (!ok).then_some(())
}

#[cfg(test)]
#[path = "field_validation_tests.rs"]
mod tests;
