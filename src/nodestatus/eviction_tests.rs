use super::*;
use proptest::prelude::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn q(signal: Signal, value: i64) -> Threshold {
    Threshold {
        signal,
        value: ThresholdValue::Quantity(value),
    }
}

fn pct(signal: Signal, percent: f32) -> Threshold {
    Threshold {
        signal,
        value: ThresholdValue::Percentage(percent / 100.0),
    }
}

#[test]
fn the_flag_splits_as_the_kubelets_langle_map() {
    let rows: &[(&str, &[(&str, &str)])] = &[
        (
            "memory.available<100Mi,nodefs.available<10%",
            &[("memory.available", "100Mi"), ("nodefs.available", "10%")],
        ),
        // Empty items are skipped, both sides trimmed, a later key wins.
        (
            " memory.available < 1Gi ,,memory.available<2Gi,",
            &[("memory.available", "2Gi")],
        ),
        // Split at the first '<': the rest is the value (and then refused).
        ("memory.available<<1Gi", &[("memory.available", "<1Gi")]),
        ("", &[]),
    ];
    for &(text, want) in rows {
        assert_eq!(parse_eviction_hard_flag(text), Ok(map(want)), "{text:?}");
    }
    for (text, entry) in [
        ("memory.available>100Mi", "memory.available>100Mi"),
        ("memory.available=100Mi", "memory.available=100Mi"),
        ("nodefs.available<10%,imagefs", "imagefs"),
    ] {
        let err = parse_eviction_hard_flag(text).unwrap_err();
        assert_eq!(
            err,
            ThresholdError::MalformedPair {
                entry: entry.into()
            }
        );
        assert!(err.to_string().contains(entry), "{err}");
    }
}

#[test]
fn statements_parse_to_quantities_and_percentages() {
    let rows: &[(&str, &str, Option<Threshold>)] = &[
        (
            "memory.available",
            "100Mi",
            Some(q(Signal::MemoryAvailable, 100 << 20)),
        ),
        (
            "nodefs.available",
            "10%",
            Some(pct(Signal::NodeFsAvailable, 10.0)),
        ),
        (
            "nodefs.inodesFree",
            "5%",
            Some(pct(Signal::NodeFsInodesFree, 5.0)),
        ),
        (
            "imagefs.available",
            "15%",
            Some(pct(Signal::ImageFsAvailable, 15.0)),
        ),
        (
            "imagefs.inodesFree",
            "1k",
            Some(q(Signal::ImageFsInodesFree, 1000)),
        ),
        (
            "pid.available",
            "2.5%",
            Some(pct(Signal::PidAvailable, 2.5)),
        ),
        (
            "allocatableMemory.available",
            "1Gi",
            Some(q(Signal::AllocatableMemoryAvailable, 1 << 30)),
        ),
        (
            "containerfs.available",
            "10%",
            Some(pct(Signal::ContainerFsAvailable, 10.0)),
        ),
        // Fractions of a unit round up; larger than i64 saturates.
        (
            "memory.available",
            "0.5",
            Some(q(Signal::MemoryAvailable, 1)),
        ),
        (
            "memory.available",
            "9Ei",
            Some(q(Signal::MemoryAvailable, i64::MAX)),
        ),
        // 0% and 100% written so are ignored; 0.0% is a real (never met) one.
        ("memory.available", "0%", None),
        ("nodefs.available", "100%", None),
        (
            "nodefs.available",
            "0.0%",
            Some(pct(Signal::NodeFsAvailable, 0.0)),
        ),
        (
            "nodefs.available",
            "100.0%",
            Some(pct(Signal::NodeFsAvailable, 100.0)),
        ),
    ];
    for &(signal, value, want) in rows {
        assert_eq!(parse_threshold(signal, value), Ok(want), "{signal}<{value}");
    }
}

#[test]
fn bad_statements_are_refused_naming_the_input() {
    use ThresholdError as E;
    let s = Signal::MemoryAvailable;
    let rows: &[(&str, &str, ThresholdError)] = &[
        (
            "memory.free",
            "1Gi",
            E::UnsupportedSignal {
                signal: "memory.free".into(),
            },
        ),
        (
            "Memory.Available",
            "1Gi",
            E::UnsupportedSignal {
                signal: "Memory.Available".into(),
            },
        ),
        (
            "swap.available",
            "1Gi",
            E::UnsupportedSignal {
                signal: "swap.available".into(),
            },
        ),
        (
            "memory.available",
            "-1%",
            E::NegativePercentage {
                signal: s,
                value: "-1%".into(),
            },
        ),
        (
            "memory.available",
            "101%",
            E::PercentageOver100 {
                signal: s,
                value: "101%".into(),
            },
        ),
        (
            "memory.available",
            "abc%",
            E::BadPercentage {
                signal: s,
                value: "abc%".into(),
            },
        ),
        (
            "memory.available",
            "NaN%",
            E::BadPercentage {
                signal: s,
                value: "NaN%".into(),
            },
        ),
        (
            "memory.available",
            "0",
            E::NotPositive {
                signal: s,
                value: "0".into(),
            },
        ),
        (
            "memory.available",
            "0Mi",
            E::NotPositive {
                signal: s,
                value: "0Mi".into(),
            },
        ),
        (
            "memory.available",
            "-100Mi",
            E::NotPositive {
                signal: s,
                value: "-100Mi".into(),
            },
        ),
    ];
    for (signal, value, want) in rows {
        let err = parse_threshold(signal, value).unwrap_err();
        assert_eq!(&err, want, "{signal}<{value}");
        let text = err.to_string();
        assert!(text.contains(signal) || text.contains(value), "{text}");
    }
    for value in ["", "100MB", "1 Gi", "Mi"] {
        match parse_threshold("memory.available", value) {
            Err(E::BadQuantity {
                signal, value: v, ..
            }) => {
                assert_eq!((signal, v.as_str()), (s, value));
            }
            other => panic!("{value:?}: {other:?}"),
        }
    }
    // The first bad statement of a map (in key order) is the error.
    let err = parse_thresholds(&map(&[
        ("memory.available", "100Mi"),
        ("nodefs.available", "200%"),
    ]))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "eviction percentage threshold nodefs.available must be <= 100%: 200%"
    );
}

#[test]
fn defaults_apply_only_when_nothing_was_given() {
    let defaults = default_eviction_hard();
    assert_eq!(
        defaults,
        map(&[
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%"),
            ("imagefs.available", "15%"),
            ("imagefs.inodesFree", "5%"),
        ])
    );
    assert_eq!(eviction_hard(None, false), defaults);
    assert_eq!(eviction_hard(None, true), defaults);
    // A partial map replaces the defaults (v1.33): nodefs etc. have none.
    let partial = map(&[("memory.available", "1Gi")]);
    assert_eq!(eviction_hard(Some(&partial), false), partial);
    // An empty map is a map: no hard thresholds at all.
    assert!(eviction_hard(Some(&BTreeMap::new()), false).is_empty());
    // mergeDefaultEvictionSettings (v1.34): given signals win, the rest default.
    let merged = eviction_hard(Some(&partial), true);
    assert_eq!(merged["memory.available"], "1Gi");
    assert_eq!(merged["imagefs.available"], "15%");
    assert_eq!(merged.len(), 5);

    let parsed = parse_thresholds(&defaults).unwrap();
    assert_eq!(
        parsed,
        [
            pct(Signal::ImageFsAvailable, 15.0),
            pct(Signal::ImageFsInodesFree, 5.0),
            q(Signal::MemoryAvailable, 100 << 20),
            pct(Signal::NodeFsAvailable, 10.0),
            pct(Signal::NodeFsInodesFree, 5.0),
        ]
    );
}

#[test]
fn percentages_are_of_capacity_truncated_as_go_does() {
    // float32(10)/100 is 0.100000001490116..., so 10% of 1e9 truncates up to
    // 100000001 rather than 100000000: the kubelet's figure exactly.
    let ten = pct(Signal::NodeFsAvailable, 10.0).value;
    assert_eq!(ten.quantity(1_000_000_000), 100_000_001);
    assert_eq!(ten.quantity(105_152_176_128), 10_515_217_769);
    assert_eq!(ten.quantity(0), 0);
    let fifteen = pct(Signal::ImageFsAvailable, 15.0).value;
    assert_eq!(fifteen.quantity(1_000), 150);
    assert_eq!(ThresholdValue::Quantity(7).quantity(1 << 40), 7);
}

#[test]
fn thresholds_are_met_strictly_below_and_only_when_observed() {
    let thresholds = parse_thresholds(&default_eviction_hard()).unwrap();
    let gib = 1i64 << 30;
    let obs = |mem_avail: i64, nodefs_avail: i64| Observation {
        memory: Some(Observed {
            available: mem_avail,
            capacity: 8 * gib,
        }),
        nodefs: Some(Observed {
            available: nodefs_avail,
            capacity: 100 * gib,
        }),
        ..Default::default()
    };
    let signals = |o: &Observation| -> Vec<Signal> {
        thresholds_met(&thresholds, o)
            .iter()
            .map(|t| t.signal)
            .collect()
    };
    assert!(signals(&obs(gib, 50 * gib)).is_empty());
    // Exactly at the threshold is not below it.
    assert!(signals(&obs(100 << 20, 50 * gib)).is_empty());
    assert_eq!(
        signals(&obs((100 << 20) - 1, 50 * gib)),
        [Signal::MemoryAvailable]
    );
    assert_eq!(
        signals(&obs(gib, 9 * gib)),
        [Signal::NodeFsAvailable],
        "9 GiB free of 100 GiB is under 10%"
    );
    // Nothing known: nothing met, even with every default threshold.
    assert!(thresholds_met(&thresholds, &Observation::default()).is_empty());
    // containerfs thresholds never read anything.
    let cfs = [q(Signal::ContainerFsAvailable, i64::MAX)];
    assert!(thresholds_met(&cfs, &obs(0, 0)).is_empty());
    // PIDs and inodes.
    let o = Observation {
        pid: Some(Observed {
            available: 500,
            capacity: 10_000,
        }),
        imagefs_inodes: Some(Observed {
            available: 10,
            capacity: 1000,
        }),
        ..Default::default()
    };
    let t = [
        pct(Signal::PidAvailable, 10.0),
        pct(Signal::ImageFsInodesFree, 5.0),
    ];
    assert_eq!(thresholds_met(&t, &o), t);
}

#[test]
fn allocatable_memory_copies_memory_available() {
    let t = parse_thresholds(&default_eviction_hard()).unwrap();
    let with = add_allocatable_thresholds(&t);
    assert_eq!(with.len(), t.len() + 1);
    assert_eq!(
        with.last(),
        Some(&q(Signal::AllocatableMemoryAvailable, 100 << 20))
    );
    let o = Observation {
        allocatable_memory: Some(Observed {
            available: 1 << 20,
            capacity: 1 << 30,
        }),
        ..Default::default()
    };
    assert_eq!(
        thresholds_met(&with, &o),
        [q(Signal::AllocatableMemoryAvailable, 100 << 20)]
    );
}

#[test]
fn signal_names_round_trip() {
    for s in Signal::ALL {
        assert_eq!(Signal::from_name(s.as_str()), Some(s));
        assert_eq!(s.to_string(), s.as_str());
    }
}

proptest! {
    #[test]
    fn flag_parsing_never_panics(text in ".{0,60}") {
        if let Ok(m) = parse_eviction_hard_flag(&text) {
            let _ = parse_thresholds(&m);
        }
    }

    #[test]
    fn a_percentage_never_exceeds_capacity(p in 0f32..=100.0, cap in 0i64..(1 << 53)) {
        let v = ThresholdValue::Percentage(p / 100.0).quantity(cap);
        prop_assert!((0..=cap).contains(&v));
    }
}
