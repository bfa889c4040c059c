use super::*;
use crate::cri::types::ContainerMetadata;
use crate::prober::ProbeAction;
use ProbeOutcome::{Error, Failure, Success, Warning};
use ProbeType::{Liveness, Readiness, Startup};

const PERIOD: u64 = 10;

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

fn ms(millis: i64) -> Timestamp {
    Timestamp::from_millisecond(millis).unwrap()
}

fn spec(initial_delay: u64, success: u32, failure: u32) -> ProbeSpec {
    ProbeSpec {
        initial_delay: Duration::from_secs(initial_delay),
        period: Duration::from_secs(PERIOD),
        timeout: Duration::from_secs(1),
        success_threshold: success,
        failure_threshold: failure,
        termination_grace_period_seconds: None,
        action: ProbeAction::Exec {
            command: vec!["true".into()],
        },
    }
}

/// A running, started container `id` that started at second 0.
fn running(id: &str) -> ProbeTarget {
    ProbeTarget {
        container_id: id.into(),
        running: true,
        started_at: Some(ts(0)),
        started: true,
    }
}

fn out(kind: fn(String) -> ProbeOutcome) -> ProbeOutcome {
    kind("output".into())
}

/// A worker whose agent started long ago (no jitter), ticked once per
/// period starting at second 1000.
struct Harness {
    state: ProbeState,
    now: Timestamp,
}

impl Harness {
    fn new(kind: ProbeType, spec: &ProbeSpec) -> Self {
        let now = ts(1_000);
        Harness {
            state: ProbeState::new(kind, spec, now, ts(0), 0.5),
            now,
        }
    }

    /// One due tick against `target`.
    fn tick(&mut self, target: Option<&ProbeTarget>) -> Tick {
        let tick = self.state.tick(self.now, target);
        self.now = add(self.now, Duration::from_secs(PERIOD));
        tick
    }

    /// A due tick that must probe `target`, then `outcome` recorded.
    fn probe(&mut self, target: &ProbeTarget, outcome: ProbeOutcome) -> Recorded {
        assert_eq!(self.tick(Some(target)), Tick::Probe);
        self.state.record(&outcome)
    }
}

#[test]
fn initial_results_per_probe_type() {
    let cases = [
        (Liveness, ProbeResult::Success),
        (Readiness, ProbeResult::Failure),
        (Startup, ProbeResult::Unknown),
    ];
    for (kind, want) in cases {
        let mut h = Harness::new(kind, &spec(0, 1, 3));
        assert_eq!(h.state.result(), want, "{kind:?}");
        assert_eq!(h.state.reading().container_id, None);
        // Startup idles on a started container; the others probe it.
        let target = ProbeTarget {
            started: kind != Startup,
            ..running("c1")
        };
        assert_eq!(h.tick(Some(&target)), Tick::Probe, "{kind:?}");
        assert_eq!(h.state.result(), want, "{kind:?}");
        assert_eq!(h.state.container_id(), Some("c1"));
    }
}

#[test]
fn a_wall_clock_stepping_back_does_not_hold_the_probes() {
    let mut h = Harness::new(Readiness, &spec(0, 1, 3));
    assert_eq!(
        h.probe(&running("c1"), out(Success)).result,
        ProbeResult::Success
    );
    // Not due again within the period.
    assert_eq!(
        h.state
            .tick(add(ts(1_000), Duration::from_secs(5)), Some(&running("c1"))),
        Tick::Skip(SkipReason::NotDue)
    );
    // The clock steps back 500 s (still after the container started): the
    // probe runs at once, then every period.
    let back = ts(1_000 - 500);
    assert_eq!(h.state.tick(back, Some(&running("c1"))), Tick::Probe);
    h.state.record(&out(Success));
    assert_eq!(h.state.next_due(), add(back, Duration::from_secs(PERIOD)));
    assert_eq!(
        h.state
            .tick(add(back, Duration::from_secs(1)), Some(&running("c1"))),
        Tick::Skip(SkipReason::NotDue)
    );
}

#[test]
fn first_tick_waits_a_random_part_of_a_period_only_right_after_agent_start() {
    let spec = spec(0, 1, 3);
    // (seconds since the agent started, jitter fraction, first tick due after)
    let cases: [(i64, f64, i64); 8] = [
        (0, 0.5, 5_000),
        (3, 0.25, 2_500),
        (9, 0.999, 9_990),
        (10, 0.5, 0), // a full period after start: at once
        (3_600, 0.9, 0),
        (3, 7.0, 10_000), // fractions are clamped to 0..=1
        (3, -1.0, 0),
        (3, f64::NAN, 0),
    ];
    for (since_start, fraction, want_ms) in cases {
        let now = ts(1_000);
        let state = ProbeState::new(Readiness, &spec, now, ts(1_000 - since_start), fraction);
        assert_eq!(
            state.next_due(),
            ms(1_000_000 + want_ms),
            "{since_start} s after start, fraction {fraction}"
        );
    }
}

#[test]
fn ticks_follow_the_period_schedule() {
    let spec = spec(0, 1, 3);
    let mut state = ProbeState::new(Readiness, &spec, ts(100), ts(97), 0.5);
    let c = running("c1");
    // Due at 105; earlier ticks run nothing.
    assert_eq!(
        state.tick(ts(100), Some(&c)),
        Tick::Skip(SkipReason::NotDue)
    );
    assert_eq!(
        state.tick(ms(104_999), Some(&c)),
        Tick::Skip(SkipReason::NotDue)
    );
    assert_eq!(state.tick(ts(105), Some(&c)), Tick::Probe);
    assert_eq!(state.next_due(), ts(115));
    state.record(&out(Success));
    // A tick 2.5 periods late runs once and rejoins the schedule.
    assert_eq!(state.tick(ts(140), Some(&c)), Tick::Probe);
    assert_eq!(state.next_due(), ts(145));
    // A manual trigger runs at once without moving the schedule.
    state.trigger();
    assert_eq!(state.tick(ts(141), Some(&c)), Tick::Probe);
    assert_eq!(state.next_due(), ts(145));
    assert_eq!(
        state.tick(ts(142), Some(&c)),
        Tick::Skip(SkipReason::NotDue)
    );
}

/// Each row: the outcome of one run, then the standing result and whether
/// it changed.
type Steps<'a> = &'a [(fn(String) -> ProbeOutcome, ProbeResult, bool)];

fn run_steps(kind: ProbeType, spec: &ProbeSpec, steps: Steps) {
    let mut h = Harness::new(kind, spec);
    // A startup probe runs only until the container counts as started.
    let c = ProbeTarget {
        started: kind != Startup,
        ..running("c1")
    };
    for (i, (outcome, result, changed)) in steps.iter().enumerate() {
        let r = h.probe(&c, out(*outcome));
        assert_eq!(
            (r.result, r.changed),
            (*result, *changed),
            "{kind:?} step {i}"
        );
        assert_eq!(h.state.result(), *result);
    }
}

#[test]
fn thresholds_count_consecutive_identical_outcomes() {
    use ProbeResult as R;
    // Readiness, success 2, failure 3: from Failure up, then down again.
    run_steps(
        Readiness,
        &spec(0, 2, 3),
        &[
            (Success, R::Failure, false),
            (Failure, R::Failure, false),
            (Success, R::Failure, false),
            (Warning, R::Success, true),
            (Success, R::Success, false),
            (Failure, R::Success, false),
            (Failure, R::Success, false),
            (Success, R::Success, false),
            (Failure, R::Success, false),
            (Failure, R::Success, false),
            (Failure, R::Failure, true),
            (Failure, R::Failure, false),
            (Success, R::Failure, false),
            (Success, R::Success, true),
        ],
    );
    // Liveness, failure 3: interrupted runs never fail it; three in a row do.
    run_steps(
        Liveness,
        &spec(0, 1, 3),
        &[
            (Failure, R::Success, false),
            (Failure, R::Success, false),
            (Success, R::Success, false),
            (Failure, R::Success, false),
            (Warning, R::Success, false),
            (Failure, R::Success, false),
            (Failure, R::Success, false),
            (Failure, R::Failure, true),
        ],
    );
    // Startup, failure 2: Unknown until decided either way.
    run_steps(
        Startup,
        &spec(0, 1, 2),
        &[(Failure, R::Unknown, false), (Success, R::Success, true)],
    );
    run_steps(
        Startup,
        &spec(0, 1, 2),
        &[(Failure, R::Unknown, false), (Failure, R::Failure, true)],
    );
    // Thresholds of 1: every outcome decides at once.
    run_steps(
        Readiness,
        &spec(0, 1, 1),
        &[
            (Success, R::Success, true),
            (Failure, R::Failure, true),
            (Success, R::Success, true),
        ],
    );
}

#[test]
fn startup_gates_liveness_and_readiness() {
    let not_started = ProbeTarget {
        started: false,
        ..running("c1")
    };
    let started = running("c1");
    // (probe, target, expected tick)
    let cases = [
        (Liveness, &not_started, Tick::Skip(SkipReason::NotStarted)),
        (Readiness, &not_started, Tick::Skip(SkipReason::NotStarted)),
        (Startup, &not_started, Tick::Probe),
        (Liveness, &started, Tick::Probe),
        (Readiness, &started, Tick::Probe),
        (Startup, &started, Tick::Skip(SkipReason::Started)),
    ];
    for (kind, target, want) in cases {
        let mut h = Harness::new(kind, &spec(0, 1, 3));
        assert_eq!(
            h.tick(Some(target)),
            want,
            "{kind:?} started={}",
            target.started
        );
    }
}

#[test]
fn liveness_and_startup_failures_hold_until_a_new_container() {
    for kind in [Liveness, Startup] {
        let mut h = Harness::new(kind, &spec(0, 1, 1));
        let c1 = ProbeTarget {
            started: kind == Liveness,
            ..running("c1")
        };
        let r = h.probe(&c1, out(Failure));
        assert_eq!((r.result, r.changed), (ProbeResult::Failure, true));
        assert!(h.state.on_hold());
        for _ in 0..3 {
            assert_eq!(h.tick(Some(&c1)), Tick::Hold, "{kind:?}");
        }
        // Recording without a Probe tick changes nothing.
        let stray = h.state.record(&out(Success));
        assert_eq!((stray.result, stray.changed), (ProbeResult::Failure, false));
        // The restarted container is probed again from the initial result.
        let c2 = ProbeTarget {
            container_id: "c2".into(),
            ..c1.clone()
        };
        assert_eq!(h.tick(Some(&c2)), Tick::Probe, "{kind:?}");
        assert!(!h.state.on_hold());
        assert_eq!(h.state.result(), kind.initial_result());
        assert_eq!(h.state.container_id(), Some("c2"));
    }
    // Readiness never holds.
    let mut h = Harness::new(Readiness, &spec(0, 1, 1));
    let c1 = running("c1");
    assert_eq!(h.probe(&c1, out(Failure)).result, ProbeResult::Failure);
    assert!(!h.state.on_hold());
    assert_eq!(h.tick(Some(&c1)), Tick::Probe);
}

#[test]
fn errors_change_nothing_and_are_logged_once_per_container() {
    let mut h = Harness::new(Liveness, &spec(0, 1, 2));
    let c1 = running("c1");
    let first = h.probe(&c1, Error("port \"metrics\" not found".into()));
    assert_eq!(
        first,
        Recorded {
            result: ProbeResult::Success,
            changed: false,
            log_error: true
        }
    );
    let again = h.probe(&c1, Error("port \"metrics\" not found".into()));
    assert!(!again.log_error && !again.changed);
    // An error between two failures neither breaks nor extends the run.
    assert!(!h.probe(&c1, out(Failure)).changed);
    assert!(!h.probe(&c1, Error("cri".into())).changed);
    let r = h.probe(&c1, out(Failure));
    assert_eq!((r.result, r.changed), (ProbeResult::Failure, true));
    // A new instance logs its first error again.
    let c2 = running("c2");
    assert!(h.probe(&c2, Error("x".into())).log_error);
    assert!(!h.probe(&c2, Error("x".into())).log_error);
}

#[test]
fn nothing_runs_within_the_initial_delay_of_started_at() {
    let spec = spec(10, 1, 3);
    let c = running("c1"); // started at second 0
    // (now in ms, expected tick): whole seconds, truncated, as the kubelet.
    let cases = [
        (0, Tick::Skip(SkipReason::InitialDelay)),
        (5_000, Tick::Skip(SkipReason::InitialDelay)),
        (9_999, Tick::Skip(SkipReason::InitialDelay)),
        (10_000, Tick::Probe),
        (60_000, Tick::Probe),
    ];
    for (now, want) in cases {
        let mut state = ProbeState::new(Liveness, &spec, ms(now), ts(-100), 0.0);
        assert_eq!(state.tick(ms(now), Some(&c)), want, "at {now} ms");
    }
    // An unknown startedAt does not delay.
    let unknown = ProbeTarget {
        started_at: None,
        ..c
    };
    let mut state = ProbeState::new(Liveness, &spec, ts(1), ts(-100), 0.0);
    assert_eq!(state.tick(ts(1), Some(&unknown)), Tick::Probe);
}

#[test]
fn a_stopped_container_fails_every_probe_and_an_absent_one_changes_nothing() {
    for kind in ProbeType::ALL {
        let mut h = Harness::new(kind, &spec(0, 1, 3));
        assert_eq!(h.tick(None), Tick::Skip(SkipReason::NoContainer));
        assert_eq!(h.state.result(), kind.initial_result());
        assert_eq!(h.state.container_id(), None);
        let stopped = ProbeTarget {
            running: false,
            started: false,
            ..running("c1")
        };
        assert_eq!(h.tick(Some(&stopped)), Tick::Skip(SkipReason::NotRunning));
        assert_eq!(h.state.result(), ProbeResult::Failure, "{kind:?}");
        assert_eq!(
            h.state.reading(),
            ProbeReading {
                container_id: Some("c1".into()),
                result: ProbeResult::Failure
            }
        );
    }
}

#[test]
fn a_new_container_resets_result_and_counters() {
    let mut h = Harness::new(Readiness, &spec(0, 2, 3));
    let c1 = running("c1");
    h.probe(&c1, out(Success));
    assert!(h.probe(&c1, out(Success)).changed);
    assert_eq!(h.state.result(), ProbeResult::Success);
    h.probe(&c1, out(Failure));
    h.probe(&c1, out(Failure));
    // c2: Failure again (initial), and c1's run of failures is forgotten:
    // one success is not enough, two are.
    let c2 = running("c2");
    let r = h.probe(&c2, out(Success));
    assert_eq!((r.result, r.changed), (ProbeResult::Failure, false));
    assert_eq!(h.state.reading().container_id.as_deref(), Some("c2"));
    let r = h.probe(&c2, out(Success));
    assert_eq!((r.result, r.changed), (ProbeResult::Success, true));
    // And a run of successes does not carry over to the next one either.
    let c3 = running("c3");
    assert_eq!(h.probe(&c3, out(Success)).result, ProbeResult::Failure);
}

#[test]
fn pod_termination_quiets_liveness_and_startup() {
    for (kind, keep) in [(Liveness, false), (Startup, false), (Readiness, true)] {
        let mut h = Harness::new(kind, &spec(0, 1, 3));
        let target = ProbeTarget {
            started: kind != Startup,
            ..running("c1")
        };
        h.tick(Some(&target));
        assert_eq!(h.state.pod_terminating(), keep, "{kind:?}");
        let want = if keep {
            kind.initial_result()
        } else {
            ProbeResult::Success
        };
        assert_eq!(h.state.result(), want, "{kind:?}");
    }
}

#[test]
fn target_is_the_newest_container_of_that_name() {
    let c = |name: &str, id: &str, attempt: u32, state: ContainerState| ContainerStatus {
        id: id.into(),
        metadata: ContainerMetadata {
            name: name.into(),
            attempt,
        },
        state,
        created_at: 100 + i64::from(attempt),
        started_at: 5_000_000_000 + i64::from(attempt),
        ..Default::default()
    };
    let all = [
        c("app", "old", 0, ContainerState::Exited),
        c("app", "new", 1, ContainerState::Running),
        c("other", "x", 5, ContainerState::Running),
    ];
    let t = ProbeTarget::from_runtime(&all, "app", None).unwrap();
    assert_eq!(t.container_id, "new");
    assert!(t.running && t.started);
    assert_eq!(
        t.started_at,
        Some(Timestamp::from_nanosecond(5_000_000_001).unwrap())
    );
    assert_eq!(ProbeTarget::from_runtime(&all, "none", None), None);
    // Started only once the startup probe passed for this very instance.
    let reading = |id: &str, result| ProbeReading {
        container_id: Some(id.into()),
        result,
    };
    let cases = [
        (reading("new", ProbeResult::Success), true),
        (reading("new", ProbeResult::Unknown), false),
        (reading("old", ProbeResult::Success), false),
    ];
    for (startup, want) in cases {
        let t = ProbeTarget::from_runtime(&all, "app", Some(&startup)).unwrap();
        assert_eq!(t.started, want, "{startup:?}");
    }
    let exited = [c("app", "old", 0, ContainerState::Exited)];
    let t = ProbeTarget::from_runtime(&exited, "app", None).unwrap();
    assert!(!t.running && !t.started);
}
