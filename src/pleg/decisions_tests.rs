//! The PLEG's decisions as tables: modes and periods per stream outcome,
//! notices said once, the back-off, the pod of an event, missed events.

use super::*;
use crate::cri::{BriefKeys, Container, PodSandbox, PodSandboxState};
use crate::cri::{ContainerEventType, ContainerMetadata, Labels, PodSandboxMetadata};
use crate::pod::POD_UID_LABEL;

fn labels(uid: &str) -> Labels {
    Labels::from([(POD_UID_LABEL.to_string(), uid.to_string())])
}

fn sandbox(id: &str, uid: &str) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        metadata: PodSandboxMetadata::default(),
        state: PodSandboxState::Ready,
        created_at: 0,
        labels: labels(uid),
        annotations: Labels::new(),
        runtime_handler: String::new(),
    }
}

fn container(id: &str, sandbox: &str, uid: &str, state: ContainerState) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: sandbox.into(),
        metadata: ContainerMetadata::default(),
        image: String::new(),
        image_ref: String::new(),
        state,
        created_at: 0,
        labels: labels(uid),
        annotations: Labels::new(),
    }
}

fn event(id: &str, sandbox: Option<&str>, uid: Option<&str>) -> ContainerEvent {
    ContainerEvent {
        container_id: id.into(),
        event_type: ContainerEventType::Stopped,
        created_at: 0,
        pod_sandbox_id: sandbox.map(str::to_string),
        pod_uid: uid.map(str::to_string),
    }
}

use ContainerState::{Created, Exited, Running};

/// Sandbox sb1 of pod u1 with c1 in `state`; an unlabelled container too.
fn snapshot(containers: &[(&str, ContainerState)]) -> RelistSnapshot {
    let mut list: Vec<Container> = (containers.iter())
        .map(|(id, state)| container(id, "sb1", "u1", *state))
        .collect();
    let mut foreign = container("other", "sbx", "", Running);
    foreign.labels.clear();
    list.push(foreign);
    let mut foreign_sandbox = sandbox("sbx", "");
    foreign_sandbox.labels.clear();
    let keys = BriefKeys {
        label: POD_UID_LABEL,
        annotation: crate::pod::CONFIG_SOURCE_ANNOTATION,
    };
    let sandboxes = [sandbox("sb1", "u1"), foreign_sandbox].map(|s| SandboxBrief::of(&s, keys));
    let list: Vec<ContainerBrief> = list.iter().map(|c| ContainerBrief::of(c, keys)).collect();
    RelistSnapshot::new(&sandboxes, &list)
}

#[test]
fn an_event_wakes_the_pod_it_names_or_the_owner_of_its_object() {
    let known = snapshot(&[("c1", Running)]);
    let pod = |uid: &str| EventTarget::Pod(uid.to_string());
    let cases = [
        // The UID the runtime sent wins (containerd 2, CRI-O).
        (event("c9", Some("sb9"), Some("u7")), pod("u7")),
        // No sandbox status: by the sandbox id, then the container id.
        (event("c9", Some("sb1"), None), pod("u1")),
        (event("c1", None, None), pod("u1")),
        // A sandbox event without status.
        (event("sb1", None, None), pod("u1")),
        // Something the relist has not seen.
        (event("c9", Some("sb9"), None), EventTarget::Unknown),
        // Objects listed without kubelet labels, with or without a UID.
        (event("other", None, None), EventTarget::NotOurs),
        (
            event("other", Some("sbx"), Some("u9")),
            EventTarget::NotOurs,
        ),
        (event("c9", Some("sbx"), Some("u9")), EventTarget::NotOurs),
    ];
    for (e, want) in cases {
        assert_eq!(event_target(&e, &known), want, "{e:?}");
    }
    assert_eq!(known.uid_of("sbx"), None);
}

#[test]
fn modes_periods_and_notices_follow_the_stream() {
    type Step = fn(&mut Pleg) -> Reaction;
    let subscribed: Step = |p| p.subscribed();
    let unimplemented: Step = |p| p.stream_ended(true, "unknown method");
    let broken: Step = |p| p.stream_ended(false, "connection reset");
    let broke = |was_subscribed| {
        Some(Notice::Broken {
            error: "connection reset".into(),
            was_subscribed,
        })
    };
    // (step, mode after, relist now, notice)
    type Steps = Vec<(Step, Mode, bool, Option<Notice>)>;
    let cases: Vec<(&str, Steps)> = vec![
        (
            "containerd 1.6: relist every second, said once however often asked",
            vec![
                (
                    unimplemented,
                    Mode::Unimplemented,
                    false,
                    Some(Notice::Unimplemented),
                ),
                (unimplemented, Mode::Unimplemented, false, None),
                (unimplemented, Mode::Unimplemented, false, None),
            ],
        ),
        (
            "subscribed: relist at once, then the safety net",
            vec![(
                subscribed,
                Mode::Evented,
                true,
                Some(Notice::Subscribed {
                    after_outage: false,
                }),
            )],
        ),
        (
            "a stream that breaks: relist at once, say it once per outage",
            vec![
                (
                    subscribed,
                    Mode::Evented,
                    true,
                    Some(Notice::Subscribed {
                        after_outage: false,
                    }),
                ),
                (broken, Mode::Broken, true, broke(true)),
                (broken, Mode::Broken, false, None),
                (broken, Mode::Broken, false, None),
                (
                    subscribed,
                    Mode::Evented,
                    true,
                    Some(Notice::Subscribed { after_outage: true }),
                ),
                (broken, Mode::Broken, true, broke(true)),
            ],
        ),
        (
            "a runtime not up yet: cannot subscribe, said once",
            vec![
                (broken, Mode::Broken, false, broke(false)),
                (broken, Mode::Broken, false, None),
            ],
        ),
        (
            "a runtime downgraded under crilet",
            vec![
                (
                    subscribed,
                    Mode::Evented,
                    true,
                    Some(Notice::Subscribed {
                        after_outage: false,
                    }),
                ),
                (
                    unimplemented,
                    Mode::Unimplemented,
                    true,
                    Some(Notice::Unimplemented),
                ),
            ],
        ),
    ];
    for (name, steps) in cases {
        let mut p = Pleg::new(true);
        assert_eq!(p.mode(), Mode::Connecting);
        assert_eq!(p.relist_period(), GENERIC_RELIST_PERIOD);
        for (i, (step, mode, relist_now, notice)) in steps.into_iter().enumerate() {
            let r = step(&mut p);
            assert_eq!(p.mode(), mode, "{name}, step {i}");
            assert_eq!(
                (r.relist_now, r.notice),
                (relist_now, notice),
                "{name}, step {i}"
            );
            let period = if mode == Mode::Evented {
                EVENTED_RELIST_PERIOD
            } else {
                GENERIC_RELIST_PERIOD
            };
            assert_eq!(p.relist_period(), period, "{name}, step {i}");
        }
    }
}

#[test]
fn disabled_events_relist_every_second_whatever_happens() {
    let mut p = Pleg::new(false);
    assert_eq!(p.mode(), Mode::Disabled);
    assert_eq!(p.stream_ended(false, "x"), Reaction::default());
    assert_eq!(p.mode(), Mode::Disabled);
    assert_eq!(p.relist_period(), GENERIC_RELIST_PERIOD);
}

#[test]
fn resubscribe_backs_off_and_resets_after_a_stable_subscription() {
    let s = Duration::from_secs;
    let short = Duration::from_millis(10);
    // (lasted, unimplemented, wait)
    let steps = [
        (short, false, s(1)),
        (short, false, s(2)),
        (short, false, s(4)),
        (short, false, s(8)),
        (short, false, s(16)),
        (short, false, s(30)),
        (short, false, s(30)),
        // A subscription that held: the next failure starts over.
        (STABLE_SUBSCRIPTION, false, s(1)),
        (short, false, s(2)),
        // No GetContainerEvents: ask again rarely, and start over after.
        (short, true, UNIMPLEMENTED_RECHECK),
        (short, false, s(1)),
    ];
    let mut b = Resubscribe::default();
    for (i, (lasted, unimplemented, want)) in steps.into_iter().enumerate() {
        assert_eq!(b.after(lasted, unimplemented), want, "step {i}");
    }
    let mut b = Resubscribe::default();
    for _ in 0..100 {
        assert!(b.after(short, false) <= RESUBSCRIBE_MAX);
    }
}

/// A watched window: subscribed, then one relist (the first compares
/// nothing), then events, then the relist under test.
fn watched(first: &RelistSnapshot) -> Pleg {
    let mut p = Pleg::new(true);
    p.subscribed();
    p.relist_started();
    assert!(!p.relist_done(None, first));
    p
}

fn typed(id: &str, kind: ContainerEventType) -> ContainerEvent {
    ContainerEvent {
        event_type: kind,
        ..event(id, Some("sb1"), Some("u1"))
    }
}

type Events<'a> = &'a [(&'a str, ContainerEventType)];
type Missed<'a> = Vec<(&'a str, Option<ContainerState>, ContainerState)>;

#[test]
fn a_relist_finds_changes_no_event_announced() {
    use ContainerEventType::{Created as Create, Deleted, Started, Stopped};
    let before = snapshot(&[("c1", Running), ("c2", Running), ("c4", Exited)]);
    let after = snapshot(&[
        ("c1", Exited),
        ("c2", Exited),
        ("c3", Created),
        ("c4", Exited),
    ]);
    // (events before the relist, events while it lists, missed)
    let cases: Vec<(Events, Events, Missed)> = vec![
        (
            &[],
            &[],
            vec![
                ("c1", Some(Running), Exited),
                ("c2", Some(Running), Exited),
                ("c3", None, Created),
            ],
        ),
        (
            &[("c1", Stopped), ("c3", Create)],
            &[],
            vec![("c2", Some(Running), Exited)],
        ),
        // Events that arrive while the relist lists still count.
        (
            &[("c1", Stopped)],
            &[("c2", Stopped), ("c3", Create)],
            vec![],
        ),
        // An event ahead of the list accounts for it.
        (
            &[("c1", Deleted), ("c2", Stopped), ("c3", Started)],
            &[],
            vec![],
        ),
        // The last event is what counts: a STOPPED went missing after these.
        (
            &[
                ("c1", Stopped),
                ("c1", Started),
                ("c2", Create),
                ("c3", Create),
            ],
            &[],
            vec![("c1", Some(Running), Exited), ("c2", Some(Running), Exited)],
        ),
        // Unchanged since the last relist: fine whatever the events say.
        (
            &[("c4", Started)],
            &[("c1", Stopped), ("c2", Stopped), ("c3", Create)],
            vec![],
        ),
    ];
    for (before_events, during, want) in cases {
        let mut p = watched(&before);
        for (id, kind) in before_events {
            p.event(&typed(id, *kind), &before);
        }
        p.relist_started();
        for (id, kind) in during {
            p.event(&typed(id, *kind), &before);
        }
        assert_eq!(p.relist_done(Some(&before), &after), !want.is_empty());
        let missed: Vec<_> = (p.confirm_missed().into_iter())
            .map(|m| {
                assert_eq!(m.pod_uid, "u1");
                (m.container_id, m.was, m.now)
            })
            .collect();
        let want: Vec<_> = (want.into_iter())
            .map(|(id, was, now)| (id.to_string(), was, now))
            .collect();
        assert_eq!(missed, want, "events {before_events:?} + {during:?}");
    }
}

#[test]
fn a_late_event_clears_its_suspect_and_vanished_containers_are_not_suspects() {
    let before = snapshot(&[("c1", Running), ("gone", Running)]);
    let after = snapshot(&[("c1", Exited)]);
    let mut p = watched(&before);
    p.relist_started();
    assert!(p.relist_done(Some(&before), &after));
    // An event that does not account for the state keeps the suspect...
    p.event(&typed("c1", ContainerEventType::Started), &after);
    // ... a STOPPED the runtime published just after the list clears it.
    p.event(&event("c1", None, None), &after);
    assert_eq!(p.confirm_missed(), []);
}

#[test]
fn unwatched_windows_are_not_checked() {
    let before = snapshot(&[("c1", Running)]);
    let after = snapshot(&[("c1", Exited)]);
    type Gap = fn(&mut Pleg);
    let gaps: [(&str, Gap); 3] = [
        ("broken then resubscribed", |p| {
            p.stream_ended(false, "reset");
            p.subscribed();
        }),
        ("unimplemented", |p| {
            p.stream_ended(true, "unknown method");
        }),
        ("no gap, but the first relist after subscribing", |p| {
            p.subscribed();
        }),
    ];
    for (name, gap) in gaps {
        let mut p = watched(&before);
        gap(&mut p);
        p.relist_started();
        assert!(!p.relist_done(Some(&before), &after), "{name}");
        assert_eq!(p.confirm_missed(), [], "{name}");
    }
    // A gap during the grace drops the suspects: the relist it triggers
    // looks again.
    let mut p = watched(&before);
    p.relist_started();
    assert!(p.relist_done(Some(&before), &after));
    p.stream_ended(false, "reset");
    assert_eq!(p.confirm_missed(), []);
    // Relist only: nothing is ever a missed event.
    let mut p = Pleg::new(false);
    p.relist_started();
    p.relist_done(None, &before);
    p.relist_started();
    assert!(!p.relist_done(Some(&before), &after));
}
