//! The API server's `ValidatePodCreate` rules for the fields crilet reads
//! beyond names and ports (which `model` checks): labels and annotations,
//! grace periods, image pull policies, env names, hostPath paths and
//! resource quantities. Messages use the API server's wording where it has
//! one, so an operator can search for them.
//!
//! Invariant: pure; each check adds every problem it finds as (field path,
//! message), at most one per field, and a pod that passes them never fails later on these fields
//! (a quantity that parses here parses in the mapping).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::problems::Problems;
use crate::units::quantity;

/// The API server's cap on all annotations of an object, keys and values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

/// Labels (qualified-name keys, label values) and annotations
/// (qualified-name keys, a total size).
pub fn validate_metadata(meta: &ObjectMeta, out: &mut Problems) {
    for (key, value) in meta.labels.iter().flatten() {
        if let Some(problem) = qualified_name_problem(key) {
            out.push(("metadata.labels".into(), invalid(key, &problem)));
        }
        if let Some(problem) = label_value_problem(value) {
            out.push((format!("metadata.labels[{key}]"), invalid(value, &problem)));
        }
    }
    let mut total = 0;
    for (key, value) in meta.annotations.iter().flatten() {
        if let Some(problem) = qualified_name_problem(&key.to_lowercase()) {
            out.push(("metadata.annotations".into(), invalid(key, &problem)));
        }
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        out.push((
            "metadata.annotations".into(),
            format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
}

/// Grace periods and hostPath paths.
pub fn validate_spec_fields(spec: &PodSpec, out: &mut Problems) {
    if let Some(n) = spec.termination_grace_period_seconds.filter(|n| *n < 0) {
        out.push((
            "spec.terminationGracePeriodSeconds".into(),
            format!("Invalid value: {n}: must be greater than or equal to 0"),
        ));
    }
    if let Some(n) = spec.active_deadline_seconds.filter(|n| *n < 1) {
        out.push((
            "spec.activeDeadlineSeconds".into(),
            format!("Invalid value: {n}: must be between 1 and 2147483647, inclusive"),
        ));
    }
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let Some(host) = &volume.host_path else {
            continue;
        };
        let field = format!("spec.volumes[{i}].hostPath.path");
        if host.path.is_empty() {
            out.push((field, "Required value".into()));
        } else if host.path.split('/').any(|part| part == "..") {
            out.push((field, invalid(&host.path, "must not contain '..'")));
        } else if !host.path.starts_with('/') {
            // The API server takes a relative path; the runtime would then
            // fail every start, so crilet refuses it up front.
            out.push((field, invalid(&host.path, "must be an absolute path")));
        }
    }
}

/// imagePullPolicy, env names and resources of one container at `path`.
pub fn validate_container_fields(path: &str, c: &Container, out: &mut Problems) {
    if let Some(policy) = c.image_pull_policy.as_deref() {
        if !PULL_POLICIES.contains(&policy) {
            out.push((
                format!("{path}.imagePullPolicy"),
                unsupported(policy, &PULL_POLICIES),
            ));
        }
    }
    for (j, env) in c.env.iter().flatten().enumerate() {
        let field = format!("{path}.env[{j}].name");
        if env.name.is_empty() {
            out.push((field, "Required value".into()));
        } else if !env
            .name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
        {
            out.push((
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
        return;
    };
    let limits = quantities(
        &format!("{path}.resources.limits"),
        resources.limits.as_ref(),
        out,
    );
    let requests = quantities(
        &format!("{path}.resources.requests"),
        resources.requests.as_ref(),
        out,
    );
    for (name, (text, request)) in &requests {
        if let Some((limit_text, limit)) = limits.get(name) {
            if request > limit {
                out.push((
                    format!("{path}.resources.requests"),
                    invalid(
                        text,
                        &format!("must be less than or equal to {name} limit of {limit_text}"),
                    ),
                ));
            }
        }
    }
}

/// Each valid quantity, in milli-units for comparison; one that does not
/// parse, or is negative, is a problem (and left out).
fn quantities(
    field: &str,
    map: Option<&BTreeMap<String, KubeQuantity>>,
    out: &mut Problems,
) -> BTreeMap<String, (String, i128)> {
    let mut parsed = BTreeMap::new();
    for (name, KubeQuantity(text)) in map.into_iter().flatten() {
        let field = format!("{field}[{name}]");
        match quantity_problem(text) {
            Some(problem) => out.push((field, problem)),
            None => {
                let q = quantity::parse(text).expect("checked by quantity_problem");
                let milli = q.milli_value().map_or(i128::MAX, i128::from);
                parsed.insert(name.clone(), (text.clone(), milli));
            }
        }
    }
    parsed
}

/// Why `text` is not a non-negative quantity, in the API server's words.
pub(super) fn quantity_problem(text: &str) -> Option<String> {
    match quantity::parse(text) {
        Err(_) => Some(invalid(
            text,
            "quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )),
        Ok(q) if q.is_negative() => Some(invalid(text, "must be greater than or equal to 0")),
        Ok(_) => None,
    }
}

pub(super) fn invalid(value: &str, why: &str) -> String {
    format!("Invalid value: {value:?}: {why}")
}

pub(super) fn unsupported(value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "Unsupported value: {value:?}: supported values: {}",
        list.join(", ")
    )
}

/// A qualified name (`[prefix/]name`): the name 1..=63 of alphanumerics,
/// '-', '_', '.', starting and ending alphanumeric; the prefix a DNS-1123
/// subdomain.
pub fn qualified_name_problem(key: &str) -> Option<String> {
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

/// A label value: empty, or up to 63 alphanumerics, '-', '_', '.',
/// starting and ending alphanumeric.
pub fn label_value_problem(value: &str) -> Option<String> {
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
pub(crate) mod tests;
