//! Table tests of the rejection decision.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::pod::CONFIG_MIRROR_ANNOTATION;

fn ts(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(seconds).unwrap()
}

fn api_pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            qos_class: Some("BestEffort".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn with_phase(mut p: Pod, phase: &str, reason: Option<&str>) -> Pod {
    let status = p.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.into());
    status.reason = reason.map(Into::into);
    p
}

fn mirror(name: &str) -> Pod {
    let mut p = api_pod(name);
    p.metadata.annotations = Some(BTreeMap::from([(
        CONFIG_MIRROR_ANNOTATION.to_string(),
        "hash".to_string(),
    )]));
    p
}

fn deleting(name: &str) -> Pod {
    let mut p = api_pod(name);
    p.metadata.deletion_timestamp = Some(Time(ts(5)));
    p
}

fn no_status(name: &str) -> Pod {
    let mut p = api_pod(name);
    p.status = None;
    p
}

fn set(uids: &[&str]) -> BTreeSet<String> {
    uids.iter().map(|u| u.to_string()).collect()
}

#[test]
fn which_pods_are_rejected() {
    struct Case {
        what: &'static str,
        pods: Vec<Pod>,
        written: &'static [&'static str],
        waiting: &'static [&'static str],
        want: &'static [&'static str],
    }
    let cases = [
        Case {
            what: "a pending API pod is rejected",
            pods: vec![api_pod("a")],
            written: &[],
            waiting: &[],
            want: &["uid-a"],
        },
        Case {
            what: "one without any status yet too",
            pods: vec![no_status("a")],
            written: &[],
            waiting: &[],
            want: &["uid-a"],
        },
        Case {
            what: "a Running one too (another kubelet ran it before)",
            pods: vec![with_phase(api_pod("a"), "Running", None)],
            written: &[],
            waiting: &[],
            want: &["uid-a"],
        },
        Case {
            what: "mirror pods are never rejected",
            pods: vec![mirror("m"), api_pod("a")],
            written: &[],
            waiting: &[],
            want: &["uid-a"],
        },
        Case {
            what: "a pod being deleted is left alone",
            pods: vec![deleting("d")],
            written: &[],
            waiting: &[],
            want: &[],
        },
        Case {
            what: "written once: not again, though the watch still shows it Pending",
            pods: vec![api_pod("a"), api_pod("b")],
            written: &["uid-a"],
            waiting: &[],
            want: &["uid-b"],
        },
        Case {
            what: "a failed write waits for its retry",
            pods: vec![api_pod("a"), api_pod("b")],
            written: &[],
            waiting: &["uid-b"],
            want: &["uid-a"],
        },
        Case {
            what: "already Failed with our reason (a restarted crilet): not rewritten",
            pods: vec![with_phase(api_pod("a"), "Failed", Some(REJECT_REASON))],
            written: &[],
            waiting: &[],
            want: &[],
        },
        Case {
            what: "terminal for another reason: left as it is",
            pods: vec![
                with_phase(api_pod("a"), "Failed", Some("Evicted")),
                with_phase(api_pod("b"), "Succeeded", None),
            ],
            written: &[],
            waiting: &[],
            want: &[],
        },
        Case {
            what: "nothing bound: nothing to do",
            pods: vec![],
            written: &["uid-gone"],
            waiting: &["uid-gone-too"],
            want: &[],
        },
    ];
    for c in cases {
        let got = pods_to_reject(&c.pods, &set(c.written), &set(c.waiting), ts(100));
        let uids: Vec<&str> = got.iter().map(|r| r.uid.as_str()).collect();
        assert_eq!(uids, c.want, "{}", c.what);
    }
}

#[test]
fn the_rejection_says_why_as_the_kubelet_words_it() {
    let got = pods_to_reject(&[api_pod("web")], &set(&[]), &set(&[]), ts(100));
    let r = &got[0];
    assert_eq!(
        (r.namespace.as_str(), r.name.as_str(), r.full_name.as_str()),
        ("default", "web", "web_default")
    );
    let s = &r.status;
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("NodeRunsStaticPodsOnly"));
    let message = s.message.as_deref().unwrap();
    assert!(message.starts_with("Pod was rejected: "), "{message}");
    assert!(message.contains("static pods only"), "{message}");
    assert_eq!(
        s.start_time,
        Some(Time(ts(100))),
        "a start time, as the kubelet's"
    );
    assert_eq!(s.qos_class, None, "the server's QoS class is kept");
    // The written status reads back as rejected: a fixed point.
    let mut after = api_pod("web");
    after.status = Some(s.clone());
    assert!(is_rejected(&after));
    assert!(pods_to_reject(&[after], &set(&[]), &set(&[]), ts(200)).is_empty());
    assert!(!is_rejected(&api_pod("web")));
}

#[test]
fn a_start_time_the_pod_has_is_kept() {
    let mut p = api_pod("web");
    p.status.as_mut().unwrap().start_time = Some(Time(ts(7)));
    assert_eq!(rejected_status(&p, ts(100)).start_time, Some(Time(ts(7))));
}

#[test]
fn which_pods_being_deleted_are_finished() {
    let mut mirror_deleting = mirror("m");
    mirror_deleting.metadata.deletion_timestamp = Some(Time(ts(5)));
    let pods = [
        deleting("d"),
        deleting("done"),
        deleting("later"),
        api_pod("a"),
        mirror_deleting,
    ];
    let got: Vec<String> = pods_to_finish(&pods, &set(&["uid-done"]), &set(&["uid-later"]))
        .into_iter()
        .map(|f| f.uid)
        .collect();
    assert_eq!(
        got,
        ["uid-d"],
        "not a mirror, not done, not waiting, not a live pod"
    );
}
