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
fn runtime_owned_sandbox_labels_are_not_pod_labels() {
    let s = sample_sandbox();
    let mut labels = s.to_labels();
    // CRI-O labels every sandbox as container "POD"; containerd adds its own prefix.
    labels.insert("io.kubernetes.container.name".into(), "POD".into());
    labels.insert("io.cri-containerd.kind".into(), "sandbox".into());
    let back = PodSandboxLabels::from_labels(&labels, &s.to_annotations()).unwrap();
    assert_eq!(back, s);
    // A pod label of that key with another value is the pod's own.
    labels.insert("io.kubernetes.container.name".into(), "mine".into());
    let back = PodSandboxLabels::from_labels(&labels, &s.to_annotations()).unwrap();
    assert_eq!(
        back.pod_labels
            .get("io.kubernetes.container.name")
            .map(String::as_str),
        Some("mine")
    );
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
            |(pod_name, pod_namespace, pod_uid, pod_labels, pod_annotations)| PodSandboxLabels {
                pod_name,
                pod_namespace,
                pod_uid,
                pod_labels,
                pod_annotations,
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
