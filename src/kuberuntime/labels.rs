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

/// Label holding the pod name.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label holding the pod namespace.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label holding the pod UID.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label holding the container name (containers only).
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
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
    /// labels and runtime-owned `io.cri-containerd.*` keys is taken to be a
    /// pod label; every annotation is taken to be a pod annotation.
    pub fn from_labels(labels: &Labels, annotations: &Labels) -> Result<Self, LabelError> {
        let pod_labels = copy_map(
            labels
                .iter()
                .filter(|(k, _)| !is_pod_identity_key(k) && !k.starts_with(RUNTIME_LABEL_PREFIX)),
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Identity labels first (the four container labels), then annotations.
    const KNOWN_KEYS: [&str; 10] = [
        POD_NAME_LABEL,
        POD_NAMESPACE_LABEL,
        POD_UID_LABEL,
        CONTAINER_NAME_LABEL,
        CONTAINER_HASH_ANNOTATION,
        CONTAINER_RESTART_COUNT_ANNOTATION,
        TERMINATION_MESSAGE_PATH_ANNOTATION,
        TERMINATION_MESSAGE_POLICY_ANNOTATION,
        POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
        POD_DELETION_GRACE_PERIOD_ANNOTATION,
    ];

    fn map(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sample_sandbox() -> PodSandboxLabels {
        PodSandboxLabels {
            pod_name: "etcd-node1".into(),
            pod_namespace: "kube-system".into(),
            pod_uid: "0f3c9a7e-1111-2222-3333-444455556666".into(),
            pod_labels: [("component".to_string(), "etcd".to_string())].into(),
            pod_annotations: [(
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            )]
            .into(),
        }
    }

    fn sample_container() -> ContainerLabels {
        ContainerLabels {
            pod_name: "etcd-node1".into(),
            pod_namespace: "kube-system".into(),
            pod_uid: "0f3c9a7e-1111-2222-3333-444455556666".into(),
            container_name: "etcd".into(),
            hash: 0x1a2b,
            restart_count: 3,
            termination_message_path: DEFAULT_TERMINATION_MESSAGE_PATH.into(),
            termination_message_policy: TERMINATION_MESSAGE_POLICY_FALLBACK.into(),
            termination_grace_period: Some(30),
            deletion_grace_period: None,
        }
    }

    #[test]
    fn sandbox_maps_are_exact() {
        let s = sample_sandbox();
        assert_eq!(
            s.to_labels(),
            map(&[
                ("component", "etcd"),
                ("io.kubernetes.pod.name", "etcd-node1"),
                ("io.kubernetes.pod.namespace", "kube-system"),
                (
                    "io.kubernetes.pod.uid",
                    "0f3c9a7e-1111-2222-3333-444455556666"
                ),
            ])
        );
        assert_eq!(
            s.to_annotations(),
            map(&[("kubernetes.io/config.source", "file")])
        );
        assert_eq!(s.full_name(), "etcd-node1_kube-system");
    }

    #[test]
    fn container_maps_are_exact() {
        let c = sample_container();
        assert_eq!(
            c.to_labels(),
            map(&[
                ("io.kubernetes.pod.name", "etcd-node1"),
                ("io.kubernetes.pod.namespace", "kube-system"),
                (
                    "io.kubernetes.pod.uid",
                    "0f3c9a7e-1111-2222-3333-444455556666"
                ),
                ("io.kubernetes.container.name", "etcd"),
            ])
        );
        assert_eq!(
            c.to_annotations(),
            map(&[
                ("io.kubernetes.container.hash", "1a2b"),
                ("io.kubernetes.container.restartCount", "3"),
                (
                    "io.kubernetes.container.terminationMessagePath",
                    "/dev/termination-log"
                ),
                (
                    "io.kubernetes.container.terminationMessagePolicy",
                    "FallbackToLogsOnError"
                ),
                ("io.kubernetes.pod.terminationGracePeriod", "30"),
            ])
        );
        let both = ContainerLabels {
            hash: u64::MAX,
            deletion_grace_period: Some(-5),
            ..c
        };
        let ann = both.to_annotations();
        assert_eq!(ann[CONTAINER_HASH_ANNOTATION], "ffffffffffffffff");
        assert_eq!(ann[POD_DELETION_GRACE_PERIOD_ANNOTATION], "-5");
    }

    #[test]
    fn reserved_keys_win_over_pod_labels() {
        let mut s = sample_sandbox();
        s.pod_labels
            .insert(POD_NAME_LABEL.into(), "impostor".into());
        let labels = s.to_labels();
        assert_eq!(labels[POD_NAME_LABEL], "etcd-node1");
        let back = PodSandboxLabels::from_labels(&labels, &s.to_annotations()).unwrap();
        assert_eq!(back, sample_sandbox());
    }

    #[test]
    fn runtime_and_unknown_keys_are_ignored() {
        let s = sample_sandbox();
        let mut labels = s.to_labels();
        labels.insert("io.cri-containerd.kind".into(), "sandbox".into());
        let back = PodSandboxLabels::from_labels(&labels, &s.to_annotations()).unwrap();
        assert_eq!(back, s);

        let c = sample_container();
        let mut labels = c.to_labels();
        labels.insert("io.cri-containerd.kind".into(), "container".into());
        labels.insert("something.else".into(), "x".into());
        let mut ann = c.to_annotations();
        ann.insert("io.kubernetes.container.ports".into(), "[]".into());
        assert_eq!(ContainerLabels::from_labels(&labels, &ann).unwrap(), c);
    }

    #[test]
    fn absent_termination_settings_take_kubelet_defaults() {
        let c = sample_container();
        let mut ann = c.to_annotations();
        ann.remove(TERMINATION_MESSAGE_PATH_ANNOTATION);
        ann.remove(TERMINATION_MESSAGE_POLICY_ANNOTATION);
        ann.remove(POD_TERMINATION_GRACE_PERIOD_ANNOTATION);
        let back = ContainerLabels::from_labels(&c.to_labels(), &ann).unwrap();
        assert_eq!(back.termination_message_path, "/dev/termination-log");
        assert_eq!(back.termination_message_policy, "File");
        assert_eq!(back.termination_grace_period, None);
        assert_eq!(back.deletion_grace_period, None);
    }

    #[test]
    fn every_missing_key_is_reported() {
        let s = sample_sandbox();
        for key in POD_IDENTITY_KEYS {
            let mut labels = s.to_labels();
            labels.remove(key);
            let err = PodSandboxLabels::from_labels(&labels, &Labels::new()).unwrap_err();
            assert_eq!(err, LabelError::Missing { kind: "label", key });
            assert!(err.to_string().contains(key), "{err}");
        }
        let c = sample_container();
        for key in KNOWN_KEYS[..4].iter().copied() {
            let mut labels = c.to_labels();
            labels.remove(key);
            let err = ContainerLabels::from_labels(&labels, &c.to_annotations()).unwrap_err();
            assert_eq!(err, LabelError::Missing { kind: "label", key });
            assert!(err.to_string().contains(key), "{err}");
        }
        for key in [
            CONTAINER_HASH_ANNOTATION,
            CONTAINER_RESTART_COUNT_ANNOTATION,
        ] {
            let mut ann = c.to_annotations();
            ann.remove(key);
            let err = ContainerLabels::from_labels(&c.to_labels(), &ann).unwrap_err();
            assert_eq!(
                err,
                LabelError::Missing {
                    kind: "annotation",
                    key
                }
            );
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn every_invalid_value_is_reported() {
        let c = sample_container();
        let cases = [
            (CONTAINER_HASH_ANNOTATION, "xyz"),
            (CONTAINER_HASH_ANNOTATION, ""),
            (CONTAINER_HASH_ANNOTATION, "+1a"),
            (CONTAINER_HASH_ANNOTATION, "10000000000000000"),
            (CONTAINER_RESTART_COUNT_ANNOTATION, "-1"),
            (CONTAINER_RESTART_COUNT_ANNOTATION, "4294967296"),
            (CONTAINER_RESTART_COUNT_ANNOTATION, "three"),
            (TERMINATION_MESSAGE_POLICY_ANNOTATION, "Sometimes"),
            (POD_TERMINATION_GRACE_PERIOD_ANNOTATION, "ten"),
            (POD_DELETION_GRACE_PERIOD_ANNOTATION, "ten"),
            (POD_DELETION_GRACE_PERIOD_ANNOTATION, "1.5"),
        ];
        for (key, value) in cases {
            let mut ann = c.to_annotations();
            ann.insert(key.into(), value.into());
            let err = ContainerLabels::from_labels(&c.to_labels(), &ann).unwrap_err();
            match &err {
                LabelError::Invalid {
                    kind,
                    key: k,
                    value: v,
                    ..
                } => assert_eq!((*kind, *k, v.as_str()), ("annotation", key, value)),
                other => panic!("{key}={value:?}: unexpected {other:?}"),
            }
            assert!(err.to_string().contains(key), "{err}");
        }
        for key in KNOWN_KEYS[..4].iter().copied() {
            let mut labels = c.to_labels();
            labels.insert(key.into(), String::new());
            let err = ContainerLabels::from_labels(&labels, &c.to_annotations()).unwrap_err();
            assert!(matches!(err, LabelError::Invalid { key: k, .. } if k == key));
            if key != CONTAINER_NAME_LABEL {
                let err = PodSandboxLabels::from_labels(&labels, &Labels::new()).unwrap_err();
                assert!(matches!(err, LabelError::Invalid { key: k, .. } if k == key));
            }
        }
    }

    fn pod_label_key() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9./-]{0,24}".prop_filter("reserved or runtime key", |k| {
            !is_pod_identity_key(k) && !k.starts_with(RUNTIME_LABEL_PREFIX)
        })
    }

    fn sandbox() -> impl Strategy<Value = PodSandboxLabels> {
        (
            ".{1,20}",
            ".{1,20}",
            ".{1,40}",
            proptest::collection::btree_map(pod_label_key(), ".{0,20}", 0..6),
            proptest::collection::btree_map(".{0,24}", ".{0,20}", 0..6),
        )
            .prop_map(
                |(pod_name, pod_namespace, pod_uid, pod_labels, pod_annotations)| {
                    PodSandboxLabels {
                        pod_name,
                        pod_namespace,
                        pod_uid,
                        pod_labels,
                        pod_annotations,
                    }
                },
            )
    }

    fn container() -> impl Strategy<Value = ContainerLabels> {
        (
            (".{1,20}", ".{1,20}", ".{1,40}", ".{1,20}"),
            any::<u64>(),
            any::<u32>(),
            ".{0,30}",
            prop_oneof![
                Just(TERMINATION_MESSAGE_POLICY_FILE),
                Just(TERMINATION_MESSAGE_POLICY_FALLBACK)
            ],
            any::<Option<i64>>(),
            any::<Option<i64>>(),
        )
            .prop_map(
                |(
                    (pod_name, pod_namespace, pod_uid, container_name),
                    hash,
                    restart_count,
                    termination_message_path,
                    policy,
                    termination_grace_period,
                    deletion_grace_period,
                )| ContainerLabels {
                    pod_name,
                    pod_namespace,
                    pod_uid,
                    container_name,
                    hash,
                    restart_count,
                    termination_message_path,
                    termination_message_policy: policy.to_owned(),
                    termination_grace_period,
                    deletion_grace_period,
                },
            )
    }

    /// Keys the parser knows, mixed with arbitrary ones, so that fuzzed maps
    /// reach the value-checking branches as well as the missing-key ones.
    fn fuzz_map() -> impl Strategy<Value = Labels> {
        let key = prop_oneof![
            3 => prop::sample::select(&KNOWN_KEYS[..]).prop_map(str::to_owned),
            1 => "io.cri-containerd.[a-z]{0,8}",
            1 => ".{0,16}",
        ];
        let value = prop_oneof!["[-+0-9a-fA-F]{0,24}", ".{0,16}"];
        proptest::collection::hash_map(key, value, 0..12)
    }

    proptest! {
        #[test]
        fn sandbox_round_trips(s in sandbox(), runtime in "[a-z]{1,8}") {
            prop_assert_eq!(s.full_name(), format!("{}_{}", s.pod_name, s.pod_namespace));
            let (mut labels, annotations) = (s.to_labels(), s.to_annotations());
            prop_assert_eq!(PodSandboxLabels::from_labels(&labels, &annotations), Ok(s.clone()));
            // A runtime-owned label must not leak into the pod's labels.
            labels.insert(format!("{RUNTIME_LABEL_PREFIX}{runtime}"), "x".into());
            prop_assert_eq!(PodSandboxLabels::from_labels(&labels, &annotations), Ok(s));
        }

        #[test]
        fn sandbox_reserved_collision_keeps_identity(
            s in sandbox(),
            idx in 0usize..3,
            bogus in ".{0,10}",
        ) {
            let key = POD_IDENTITY_KEYS[idx];
            let mut colliding = s.clone();
            colliding.pod_labels.insert(key.to_owned(), bogus);
            let back = PodSandboxLabels::from_labels(
                &colliding.to_labels(),
                &colliding.to_annotations(),
            );
            prop_assert_eq!(back, Ok(s));
        }

        #[test]
        fn container_round_trips(c in container()) {
            let back = ContainerLabels::from_labels(&c.to_labels(), &c.to_annotations());
            prop_assert_eq!(back, Ok(c));
        }

        #[test]
        fn parsing_never_panics(labels in fuzz_map(), annotations in fuzz_map()) {
            let _ = PodSandboxLabels::from_labels(&labels, &annotations);
            let _ = ContainerLabels::from_labels(&labels, &annotations);
            let _ = ContainerLabels::from_labels(&annotations, &labels);
        }
    }
}
