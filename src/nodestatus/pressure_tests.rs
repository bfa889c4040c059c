use super::*;
use crate::nodestatus::eviction::{Observed, default_eviction_hard, parse_thresholds};
use proptest::prelude::*;

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

fn t(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(seconds).unwrap()
}

fn defaults() -> Vec<Threshold> {
    parse_thresholds(&default_eviction_hard()).unwrap()
}

/// Memory with `mem_free` bytes available of 8 GiB; every disk roomy.
fn observation(mem_free: i64) -> Observation {
    let roomy = Some(Observed {
        available: 90 * GI,
        capacity: 100 * GI,
    });
    Observation {
        memory: Some(Observed {
            available: mem_free,
            capacity: 8 * GI,
        }),
        nodefs: roomy,
        imagefs: roomy,
        ..Default::default()
    }
}

fn statuses(conditions: &[NodeCondition]) -> Vec<(&str, &str)> {
    conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect()
}

#[test]
fn signals_map_to_the_kubelets_conditions() {
    use PressureCondition::*;
    let rows = [
        (Signal::MemoryAvailable, MemoryPressure),
        (Signal::AllocatableMemoryAvailable, MemoryPressure),
        (Signal::NodeFsAvailable, DiskPressure),
        (Signal::NodeFsInodesFree, DiskPressure),
        (Signal::ImageFsAvailable, DiskPressure),
        (Signal::ImageFsInodesFree, DiskPressure),
        (Signal::ContainerFsAvailable, DiskPressure),
        (Signal::ContainerFsInodesFree, DiskPressure),
        (Signal::PidAvailable, PIDPressure),
    ];
    for (signal, condition) in rows {
        assert_eq!(PressureCondition::of_signal(signal), condition, "{signal}");
    }
    let types: Vec<_> = PressureCondition::ALL.iter().map(|c| c.type_()).collect();
    assert_eq!(types, ["MemoryPressure", "DiskPressure", "PIDPressure"]);
}

#[test]
fn a_new_node_gets_all_three_false_with_the_kubelets_words() {
    let c = pressure_conditions(&[], &BTreeSet::new(), t(100));
    let got: Vec<_> = c
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref().unwrap(),
                c.message.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available"
            ),
            (
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure"
            ),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available"
            ),
        ]
    );
    for c in &c {
        assert_eq!(c.last_heartbeat_time, Some(Time(t(100))));
        assert_eq!(c.last_transition_time, Some(Time(t(100))));
    }
    let all = PressureCondition::ALL.into_iter().collect();
    let c = pressure_conditions(&[], &all, t(100));
    let reasons: Vec<_> = c.iter().map(|c| c.reason.as_deref().unwrap()).collect();
    assert_eq!(
        reasons,
        [
            "KubeletHasInsufficientMemory",
            "KubeletHasDiskPressure",
            "KubeletHasInsufficientPID"
        ]
    );
    assert_eq!(
        c[0].message.as_deref(),
        Some("kubelet has insufficient memory available")
    );
    assert_eq!(c[1].message.as_deref(), Some("kubelet has disk pressure"));
    assert_eq!(
        c[2].message.as_deref(),
        Some("kubelet has insufficient PID available")
    );
}

#[test]
fn transition_time_moves_only_with_the_status_and_heartbeat_always() {
    let kind = PressureCondition::MemoryPressure;
    let first = pressure_condition(kind, None, false, t(100));
    let same = pressure_condition(kind, Some(&first), false, t(110));
    assert_eq!(same.last_transition_time, Some(Time(t(100))));
    assert_eq!(same.last_heartbeat_time, Some(Time(t(110))));
    let flipped = pressure_condition(kind, Some(&same), true, t(120));
    assert_eq!(flipped.status, "True");
    assert_eq!(flipped.last_transition_time, Some(Time(t(120))));
    let back = pressure_condition(kind, Some(&flipped), false, t(130));
    assert_eq!(back.last_transition_time, Some(Time(t(130))));
    assert_eq!(back.reason.as_deref(), Some("KubeletHasSufficientMemory"));
    // Unknown (the node controller's, after missed heartbeats) is a change.
    let unknown = NodeCondition {
        status: "Unknown".into(),
        reason: Some("NodeStatusUnknown".into()),
        ..back.clone()
    };
    let after = pressure_condition(kind, Some(&unknown), false, t(140));
    assert_eq!(after.last_transition_time, Some(Time(t(140))));
    assert_eq!(after.reason.as_deref(), Some("KubeletHasSufficientMemory"));
    // Unchanged status keeps the old reason and message, as the kubelet does.
    let odd = NodeCondition {
        reason: Some("SomethingElse".into()),
        ..back.clone()
    };
    let kept = pressure_condition(kind, Some(&odd), false, t(150));
    assert_eq!(kept.reason.as_deref(), Some("SomethingElse"));
    assert_eq!(kept.last_transition_time, Some(Time(t(130))));
    // A same-status condition without a transition time gets one.
    let bare = NodeCondition {
        last_transition_time: None,
        ..back
    };
    let filled = pressure_condition(kind, Some(&bare), false, t(160));
    assert_eq!(filled.last_transition_time, Some(Time(t(160))));
}

#[test]
fn pressure_holds_for_the_transition_period_then_clears() {
    let period = DEFAULT_PRESSURE_TRANSITION_PERIOD;
    let thresholds = defaults();
    let mut tracker = PressureTracker::default();
    let mut conditions = Vec::new();
    let mut step = |now: i64, mem_free: i64, conditions: &mut Vec<NodeCondition>| {
        let under = tracker.synchronize(&thresholds, &observation(mem_free), t(now), period);
        *conditions = pressure_conditions(conditions, &under, t(now));
        conditions[0].clone()
    };
    let c = step(0, GI, &mut conditions);
    assert_eq!(
        (c.status.as_str(), c.last_transition_time),
        ("False", Some(Time(t(0))))
    );
    // Below 100Mi: True at once (a hard threshold has no grace period).
    let c = step(10, 50 * MI, &mut conditions);
    assert_eq!(
        (c.status.as_str(), c.last_transition_time),
        ("True", Some(Time(t(10))))
    );
    // Still low at 20 s: the clock restarts from the last sighting.
    step(20, 50 * MI, &mut conditions);
    // Clear again, but within 5 minutes of 20 s: still True, nothing moves.
    for now in [30, 100, 319] {
        let c = step(now, GI, &mut conditions);
        assert_eq!(c.status, "True", "at {now}s");
        assert_eq!(c.last_transition_time, Some(Time(t(10))));
        assert_eq!(c.last_heartbeat_time, Some(Time(t(now))));
    }
    // 300 s after the last sighting the period is over: False.
    let c = step(320, GI, &mut conditions);
    assert_eq!(
        (c.status.as_str(), c.last_transition_time),
        ("False", Some(Time(t(320))))
    );
    assert_eq!(c.reason.as_deref(), Some("KubeletHasSufficientMemory"));
    let c = step(330, GI, &mut conditions);
    assert_eq!(c.last_transition_time, Some(Time(t(320))));
    // The other two never moved.
    assert_eq!(
        statuses(&conditions),
        [
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False")
        ]
    );
    assert!(
        conditions[1..]
            .iter()
            .all(|c| c.last_transition_time == Some(Time(t(0))))
    );
}

#[test]
fn disk_pressure_comes_from_nodefs_or_imagefs_bytes_or_inodes() {
    let thresholds = defaults();
    let low = |available: i64, capacity: i64| {
        Some(Observed {
            available,
            capacity,
        })
    };
    let rows = [
        Observation {
            nodefs: low(5 * GI, 100 * GI),
            ..Default::default()
        },
        Observation {
            imagefs: low(10 * GI, 100 * GI),
            ..Default::default()
        },
        Observation {
            nodefs_inodes: low(40, 1000),
            ..Default::default()
        },
        Observation {
            imagefs_inodes: low(0, 1000),
            ..Default::default()
        },
    ];
    for o in rows {
        let under =
            PressureTracker::default().synchronize(&thresholds, &o, t(0), Duration::from_secs(300));
        assert_eq!(
            under,
            BTreeSet::from([PressureCondition::DiskPressure]),
            "{o:?}"
        );
    }
}

#[test]
fn pid_pressure_needs_a_pid_threshold() {
    let o = Observation {
        pid: Some(Observed {
            available: 100,
            capacity: 32_768,
        }),
        ..Default::default()
    };
    let period = Duration::from_secs(300);
    // The Linux defaults have no pid.available threshold.
    assert!(
        PressureTracker::default()
            .synchronize(&defaults(), &o, t(0), period)
            .is_empty()
    );
    let pid = parse_thresholds(&BTreeMap::from([(
        "pid.available".to_string(),
        "10%".to_string(),
    )]))
    .unwrap();
    let under = PressureTracker::default().synchronize(&pid, &o, t(0), period);
    assert_eq!(under, BTreeSet::from([PressureCondition::PIDPressure]));
}

#[test]
fn unknown_readings_never_raise_pressure() {
    let mut tracker = PressureTracker::default();
    let under = tracker.synchronize(
        &defaults(),
        &Observation::default(),
        t(0),
        Duration::from_secs(300),
    );
    assert!(under.is_empty());
    assert_eq!(
        tracker.last_observed_at(PressureCondition::MemoryPressure),
        None
    );
    // An unknown reading after pressure neither raises nor extends it.
    tracker.synchronize(&defaults(), &observation(0), t(0), Duration::from_secs(300));
    let under = tracker.synchronize(
        &defaults(),
        &Observation::default(),
        t(300),
        Duration::from_secs(300),
    );
    assert!(under.is_empty());
}

#[test]
fn a_zero_period_reports_nothing_as_the_kubelets_comparison_does() {
    let mut tracker = PressureTracker::default();
    let under = tracker.synchronize(&defaults(), &observation(0), t(0), Duration::ZERO);
    assert!(under.is_empty());
    assert_eq!(
        tracker.last_observed_at(PressureCondition::MemoryPressure),
        Some(t(0))
    );
}

#[test]
fn setting_conditions_keeps_the_others_and_ready_last() {
    let ready = NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        ..Default::default()
    };
    let other = NodeCondition {
        type_: "NetworkUnavailable".into(),
        status: "False".into(),
        ..Default::default()
    };
    let mut conditions = vec![other.clone(), ready.clone()];
    let under = BTreeSet::from([PressureCondition::DiskPressure]);
    set_pressure_conditions(&mut conditions, &under, t(5));
    assert_eq!(
        statuses(&conditions),
        [
            ("NetworkUnavailable", "False"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "True"),
            ("PIDPressure", "False"),
            ("Ready", "True"),
        ]
    );
    // Updated in place the second time, nothing added.
    set_pressure_conditions(&mut conditions, &BTreeSet::new(), t(6));
    assert_eq!(conditions.len(), 5);
    assert_eq!(conditions[2].status, "False");
    assert_eq!(conditions[2].last_transition_time, Some(Time(t(6))));
    assert_eq!(conditions[1].last_transition_time, Some(Time(t(5))));
    assert_eq!((&conditions[0], &conditions[4]), (&other, &ready));
    // No Ready: appended at the end.
    let mut none = Vec::new();
    set_pressure_conditions(&mut none, &BTreeSet::new(), t(0));
    assert_eq!(none.len(), 3);
}

proptest! {
    /// Whatever the readings, a condition is True exactly when a threshold
    /// raised it less than a period ago, and its transition time is the
    /// time of its last status change.
    #[test]
    fn conditions_follow_the_last_sighting(frees in proptest::collection::vec(0i64..(2 * GI), 1..40)) {
        let period = Duration::from_secs(60);
        let mut tracker = PressureTracker::default();
        let mut conditions = Vec::new();
        let mut last_low: Option<i64> = None;
        let mut last_change = 0;
        let mut last_status = String::new();
        for (i, free) in frees.into_iter().enumerate() {
            let now = i as i64 * 10;
            if free < 100 * MI {
                last_low = Some(now);
            }
            let under = tracker.synchronize(&defaults(), &observation(free), t(now), period);
            conditions = pressure_conditions(&conditions, &under, t(now));
            let want = last_low.is_some_and(|at| now - at < 60);
            let c = &conditions[0];
            prop_assert_eq!(c.status == "True", want);
            if c.status != last_status {
                last_change = now;
                last_status = c.status.clone();
            }
            prop_assert_eq!(c.last_transition_time.clone(), Some(Time(t(last_change))));
            prop_assert_eq!(c.last_heartbeat_time.clone(), Some(Time(t(now))));
        }
    }
}
