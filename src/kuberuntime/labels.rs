//! Labels and annotations that tie CRI runtime objects back to pods.
//!
//! Every sandbox and container created through the CRI carries a small set of
//! `io.kubernetes.*` labels and annotations, written in the same format the
//! kubelet uses. After an agent restart these are the only record of which
//! pod and container a runtime object belongs to, so this module provides a
//! typed value for each set together with the conversions in both directions.
//!
//! Invariants:
//!
//! * Round trip: `from_labels(to_labels(x)) == x` for every valid value `x`;
//!   spelled out, `T::from_labels(&x.to_labels(), &x.to_annotations())`
//!   returns `Ok(x)`.
//!   "Valid" means the required identity strings are non-empty, the
//!   termination message policy is one of the two known values, and no pod
//!   label uses a reserved key (one of the three `io.kubernetes.pod.*` keys,
//!   whose generated value wins in `to_labels`) or the runtime prefix
//!   `io.cri-containerd.` (such keys are dropped as runtime-owned on parse).
//! * Parsing never panics: any pair of maps yields either a value or a
//!   [`LabelError`] naming the offending key. Keys this module does not know
//!   (for instance those containerd adds) are ignored.

use std::collections::BTreeMap;
use std::str::FromStr;

pub use crate::pod::{CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL};

/// The container name CRI-O (and dockershim before it) puts on a sandbox.
pub const INFRA_CONTAINER_NAME: &str = "POD";
/// Annotation holding the container spec hash as lowercase hex.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// Annotation holding the container restart count in decimal.
pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// Annotation holding the termination message path.
pub const TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// Annotation holding the termination message policy.
pub const TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// Annotation holding the pod's termination grace period in seconds.
/// The container's ports as JSON (the kubelet's `containerPortsLabel`).
pub const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";

/// The container's preStop handler as JSON (`containerPreStopHandlerLabel`).
pub const CONTAINER_PRESTOP_HANDLER_ANNOTATION: &str = "io.kubernetes.container.preStopHandler";

pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
/// Annotation holding the pod's deletion grace period in seconds.
pub const POD_DELETION_GRACE_PERIOD_ANNOTATION: &str = "io.kubernetes.pod.deletionGracePeriod";

/// Prefix of labels that containerd adds on its own account.
pub const RUNTIME_LABEL_PREFIX: &str = "io.cri-containerd.";
/// Termination message path used when none is recorded.
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// Policy: read the termination message from the file only.
pub const TERMINATION_MESSAGE_POLICY_FILE: &str = "File";
/// Policy: fall back to the container log tail when the file is empty on error.
pub const TERMINATION_MESSAGE_POLICY_FALLBACK: &str = "FallbackToLogsOnError";

pub use crate::cri::types::Labels;

const LABEL: &str = "label";
const ANNOTATION: &str = "annotation";

/// Why a set of labels or annotations could not be interpreted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// A required key is absent. `kind` is `"label"` or `"annotation"`.
    #[error("missing {kind} {key:?}")]
    Missing {
        kind: &'static str,
        key: &'static str,
    },
    /// A key is present but its value cannot be used.
    #[error("{kind} {key:?} has invalid value {value:?}: {reason}")]
    Invalid {
        kind: &'static str,
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// Identity recorded on a pod sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSandboxLabels {
    pub pod_name: String,
    pub pod_namespace: String,
    pub pod_uid: String,
    /// The pod's own labels.
    pub pod_labels: BTreeMap<String, String>,
    /// The pod's own annotations.
    pub pod_annotations: BTreeMap<String, String>,
}

impl PodSandboxLabels {
    /// The pod's labels plus the three identity labels. An identity label
    /// replaces any pod label that uses the same key.
    pub fn to_labels(&self) -> Labels {
        let mut out: Labels = copy_map(&self.pod_labels);
        out.insert(POD_NAME_LABEL.to_owned(), self.pod_name.clone());
        out.insert(POD_NAMESPACE_LABEL.to_owned(), self.pod_namespace.clone());
        out.insert(POD_UID_LABEL.to_owned(), self.pod_uid.clone());
        out
    }

    /// The pod's annotations, unchanged.
    pub fn to_annotations(&self) -> Labels {
        copy_map(&self.pod_annotations)
    }

    /// Recovers the sandbox identity. Every label other than the identity
    /// labels and runtime-owned keys (containerd's `io.cri-containerd.*`,
    /// CRI-O's `io.kubernetes.container.name=POD` on every sandbox) is taken
    /// to be a pod label; every annotation is taken to be a pod annotation.
    pub fn from_labels(labels: &Labels, annotations: &Labels) -> Result<Self, LabelError> {
        let runtime_owned = |k: &str, v: &str| {
            k.starts_with(RUNTIME_LABEL_PREFIX)
                || (k == CONTAINER_NAME_LABEL && v == INFRA_CONTAINER_NAME)
        };
        let pod_labels = copy_map(
            labels
                .iter()
                .filter(|(k, v)| !is_pod_identity_key(k) && !runtime_owned(k, v)),
        );
        Ok(Self {
            pod_name: required(labels, LABEL, POD_NAME_LABEL)?,
            pod_namespace: required(labels, LABEL, POD_NAMESPACE_LABEL)?,
            pod_uid: required(labels, LABEL, POD_UID_LABEL)?,
            pod_labels,
            pod_annotations: copy_map(annotations),
        })
    }

    /// The kubelet's pod full name, `<name>_<namespace>`.
    pub fn full_name(&self) -> String {
        format!("{}_{}", self.pod_name, self.pod_namespace)
    }
}

/// Identity and bookkeeping recorded on a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLabels {
    pub pod_name: String,
    pub pod_namespace: String,
    pub pod_uid: String,
    pub container_name: String,
    /// Hash of the container spec, used to notice spec changes.
    pub hash: u64,
    pub restart_count: u32,
    pub termination_message_path: String,
    /// `File` or `FallbackToLogsOnError`.
    pub termination_message_policy: String,
    /// Seconds; `None` when the pod sets no termination grace period.
    pub termination_grace_period: Option<i64>,
    /// Seconds; `None` unless the pod is being deleted with a grace period.
    pub deletion_grace_period: Option<i64>,
}

impl ContainerLabels {
    /// The four identity labels.
    pub fn to_labels(&self) -> Labels {
        [
            (POD_NAME_LABEL, &self.pod_name),
            (POD_NAMESPACE_LABEL, &self.pod_namespace),
            (POD_UID_LABEL, &self.pod_uid),
            (CONTAINER_NAME_LABEL, &self.container_name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect()
    }

    /// Hash, restart count, termination message settings and, when set, the
    /// grace periods.
    pub fn to_annotations(&self) -> Labels {
        let mut out = Labels::new();
        out.insert(
            CONTAINER_HASH_ANNOTATION.to_owned(),
            format!("{:x}", self.hash),
        );
        out.insert(
            CONTAINER_RESTART_COUNT_ANNOTATION.to_owned(),
            self.restart_count.to_string(),
        );
        out.insert(
            TERMINATION_MESSAGE_PATH_ANNOTATION.to_owned(),
            self.termination_message_path.clone(),
        );
        out.insert(
            TERMINATION_MESSAGE_POLICY_ANNOTATION.to_owned(),
            self.termination_message_policy.clone(),
        );
        let graces = [
            (
                POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
                self.termination_grace_period,
            ),
            (
                POD_DELETION_GRACE_PERIOD_ANNOTATION,
                self.deletion_grace_period,
            ),
        ];
        for (key, value) in graces {
            if let Some(secs) = value {
                out.insert(key.to_owned(), secs.to_string());
            }
        }
        out
    }

    /// Recovers the container record; unknown keys are ignored.
    pub fn from_labels(labels: &Labels, annotations: &Labels) -> Result<Self, LabelError> {
        let hash_key = CONTAINER_HASH_ANNOTATION;
        let hash_text = present(annotations, ANNOTATION, hash_key)?;
        // Parsed by hand so that forms like "+1a" or "" are refused.
        let hash = if !hash_text.is_empty() && hash_text.bytes().all(|b| b.is_ascii_hexdigit()) {
            u64::from_str_radix(hash_text, 16)
                .map_err(|e| invalid(ANNOTATION, hash_key, hash_text, e))
        } else {
            Err(invalid(
                ANNOTATION,
                hash_key,
                hash_text,
                "not a hexadecimal number",
            ))
        }?;

        let count_key = CONTAINER_RESTART_COUNT_ANNOTATION;
        let count_text = present(annotations, ANNOTATION, count_key)?;
        let restart_count = parse_num::<u32>(ANNOTATION, count_key, count_text)?;

        let policy_key = TERMINATION_MESSAGE_POLICY_ANNOTATION;
        let policy = annotations
            .get(policy_key)
            .map_or(TERMINATION_MESSAGE_POLICY_FILE, String::as_str);
        if policy != TERMINATION_MESSAGE_POLICY_FILE
            && policy != TERMINATION_MESSAGE_POLICY_FALLBACK
        {
            return Err(invalid(
                ANNOTATION,
                policy_key,
                policy,
                "expected \"File\" or \"FallbackToLogsOnError\"",
            ));
        }

        Ok(Self {
            pod_name: required(labels, LABEL, POD_NAME_LABEL)?,
            pod_namespace: required(labels, LABEL, POD_NAMESPACE_LABEL)?,
            pod_uid: required(labels, LABEL, POD_UID_LABEL)?,
            container_name: required(labels, LABEL, CONTAINER_NAME_LABEL)?,
            hash,
            restart_count,
            termination_message_path: annotations
                .get(TERMINATION_MESSAGE_PATH_ANNOTATION)
                .map_or(DEFAULT_TERMINATION_MESSAGE_PATH, String::as_str)
                .to_owned(),
            termination_message_policy: policy.to_owned(),
            termination_grace_period: optional_num(
                annotations,
                POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
            )?,
            deletion_grace_period: optional_num(annotations, POD_DELETION_GRACE_PERIOD_ANNOTATION)?,
        })
    }
}

const POD_IDENTITY_KEYS: [&str; 3] = [POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL];

fn is_pod_identity_key(key: &str) -> bool {
    POD_IDENTITY_KEYS.contains(&key)
}

fn copy_map<'a, M>(pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> M
where
    M: FromIterator<(String, String)>,
{
    pairs
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn present<'a>(
    map: &'a Labels,
    kind: &'static str,
    key: &'static str,
) -> Result<&'a String, LabelError> {
    map.get(key).ok_or(LabelError::Missing { kind, key })
}

fn invalid(
    kind: &'static str,
    key: &'static str,
    value: &str,
    reason: impl ToString,
) -> LabelError {
    LabelError::Invalid {
        kind,
        key,
        value: value.to_owned(),
        reason: reason.to_string(),
    }
}

/// A key that must be present with a non-empty value.
fn required(map: &Labels, kind: &'static str, key: &'static str) -> Result<String, LabelError> {
    match present(map, kind, key)? {
        v if v.is_empty() => Err(invalid(kind, key, v, "must not be empty")),
        v => Ok(v.clone()),
    }
}

fn parse_num<T>(kind: &'static str, key: &'static str, text: &str) -> Result<T, LabelError>
where
    T: FromStr,
    T::Err: ToString,
{
    text.parse().map_err(|e| invalid(kind, key, text, e))
}

fn optional_num(map: &Labels, key: &'static str) -> Result<Option<i64>, LabelError> {
    map.get(key)
        .map(|text| parse_num(ANNOTATION, key, text))
        .transpose()
}

#[cfg(test)]
#[path = "labels_tests.rs"]
mod tests;
