//! Events as an operator reads them: a crash-looping static pod's Pulled,
//! Created, Started and BackOff on the real kube-apiserver, found by the
//! real `kubectl describe pod` on its mirror (which searches by the static
//! UID in the `kubernetes.io/config.mirror` annotation) and `kubectl get
//! events`, each repeat counted on one Event, not created again. And an API
//! server that refuses Events (403, on the double: the real one lets nodes
//! create them) changes nothing else: the pod starts, its mirror pod is
//! created and its status written, and crilet says so once.

use std::collections::BTreeMap;
use std::time::Duration;

use crilet::cri::Runtime;
use k8s_openapi::api::core::v1::Event;

use crate::agent::*;
use crate::apiserver::ApiServer;
use crate::kube::Lab;
use crate::kubectl::{run, text};
use crate::mirror::{ann, mirror_of, start_on};
use crate::support::{BUSYBOX, eventually};

const LIMIT: Duration = Duration::from_secs(120);
/// What crilet logs the first time the API server does not take an event.
const REFUSED_LINE: &str = "the API server did not take an event";

/// How many times an Event was seen: its series count, else its count.
fn count(e: &Event) -> i32 {
    match &e.series {
        Some(s) => s.count.unwrap_or(1),
        None => e.count.unwrap_or(1),
    }
}

/// The Events by (reason, fieldPath), each group as the server holds it.
fn by_reason(events: &[Event]) -> BTreeMap<(String, String), Vec<&Event>> {
    let mut out: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for e in events {
        let field = e.involved_object.field_path.clone().unwrap_or_default();
        let key = (e.reason.clone().unwrap_or_default(), field);
        out.entry(key).or_default().push(e);
    }
    out
}

/// The `(xN over ...)` of the first line of `kubectl describe`'s Events
/// that holds `needle`, if it has one.
fn repeats(describe: &str, needle: &str) -> Option<u32> {
    let line = describe.lines().find(|l| l.contains(needle))?;
    let (_, after) = line.split_once("(x")?;
    after.split_once(" over ")?.0.parse().ok()
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime, the real kube-apiserver and kubectl (scripts/test.sh)"]
async fn a_crash_loops_events_show_on_its_mirror_with_the_repeats_counted() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    // Present from the start on every runtime, so each start says "already
    // present" (a first pull would be a Pulled of its own wording).
    let image = rt.pull_image(BUSYBOX, None, None).await;
    image.unwrap_or_else(|e| panic!("pulling {BUSYBOX}: {e}"));
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-12").await;
    let agent = start_on(&node, &[]);
    agent.write("crash.yaml", &busybox_pod("crash", "Always", "exit 1"));
    let full = agent.pod_name("crash");
    let mirror = mirror_of(&lab, &agent, "crash", "created", |_| true).await;
    let static_uid = ann(&mirror, "kubernetes.io/config.mirror")
        .expect("config.mirror")
        .to_string();
    assert_ne!(mirror.metadata.uid.as_deref(), Some(static_uid.as_str()));

    // Starts at 0 s, 10 s and 30 s (the back-off doubles from 10 s), a
    // back-off after each exit but the first.
    let want = [
        ("Pulled", 3),
        ("Created", 3),
        ("Started", 3),
        ("BackOff", 2),
    ];
    let field = "spec.containers{main}".to_string();
    let settled = eventually(LIMIT, || async {
        let events = lab.events_of("default", &static_uid).await;
        let groups = by_reason(&events);
        let done = want.iter().all(|(reason, n)| {
            let key = (reason.to_string(), field.clone());
            groups
                .get(&key)
                .is_some_and(|g| g.iter().any(|e| count(e) >= *n))
        });
        done.then_some(events)
    })
    .await;
    let Some(events) = settled else {
        let events = lab.events_of("default", &static_uid).await;
        let seen: Vec<_> = events
            .iter()
            .map(|e| {
                (
                    e.reason.clone(),
                    e.involved_object.field_path.clone(),
                    count(e),
                )
            })
            .collect();
        panic!(
            "no {want:?} on {full} within {LIMIT:?}; the server has {seen:?}\ncrilet log:\n{}",
            agent.logs()
        );
    };

    // As the kubelet records them: on the static pod's container, from
    // kubelet/<node>, one Event per reason and container, repeats counted.
    for ((reason, field_path), group) in by_reason(&events) {
        assert_eq!(
            group.len(),
            1,
            "{reason} on {field_path:?} was created again instead of counted: {group:#?}"
        );
        let e = group[0];
        let o = &e.involved_object;
        assert_eq!(o.kind.as_deref(), Some("Pod"), "{e:#?}");
        assert_eq!(o.name.as_deref(), Some(full.as_str()));
        assert_eq!(o.namespace.as_deref(), Some("default"));
        assert_eq!(o.uid.as_deref(), Some(static_uid.as_str()));
        assert_eq!(e.reporting_component.as_deref(), Some("kubelet"));
        assert_eq!(e.reporting_instance.as_deref(), Some(node.name.as_str()));
    }
    let note = |reason: &str| {
        let e = events.iter().find(|e| e.reason.as_deref() == Some(reason));
        e.and_then(|e| e.message.clone()).unwrap_or_default()
    };
    let desc = format!("{full}_default({static_uid})");
    assert_eq!(
        note("BackOff"),
        format!("Back-off restarting failed container main in pod {desc}")
    );
    assert_eq!(note("Started"), "Started container main");
    assert_eq!(note("Created"), "Created container: main");
    assert_eq!(
        note("Pulled"),
        "Container image \"docker.io/library/busybox:latest\" already present on machine"
    );

    // What an operator reads.
    let out = run(&["describe", "pod", &full, "-n", "default"]);
    let describe = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events_part = describe
        .split_once("\nEvents:")
        .map(|(_, e)| e.to_string())
        .unwrap_or_default();
    for (needle, at_least) in [
        ("Started container main", 3),
        ("Created container: main", 3),
        ("already present on machine", 3),
        ("Back-off restarting failed container main", 2),
    ] {
        let n = repeats(&events_part, needle);
        assert!(
            n.is_some_and(|n| n >= at_least),
            "describe shows {needle:?} with (x{n:?} over ...), want at least {at_least}:\n{describe}"
        );
        let line = events_part.lines().find(|l| l.contains(needle)).unwrap();
        assert!(line.contains("kubelet"), "From is not the kubelet: {line}");
    }
    let warning = events_part.lines().find(|l| l.contains("BackOff")).unwrap();
    assert!(warning.trim_start().starts_with("Warning"), "{warning}");

    let selector = format!("involvedObject.name={full}");
    let out = run(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        &selector,
    ]);
    let listed = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for needle in [
        format!("pod/{full}"),
        "Back-off restarting failed container main".to_string(),
        "Started container main".to_string(),
    ] {
        assert!(listed.contains(&needle), "no {needle:?} in:\n{listed}");
    }
    println!("kubectl describe pod {full}:\n{describe}\nkubectl get events:\n{listed}");

    // The Events are deleted (as the server's TTL would): the next repeat's
    // PATCH finds none, and the event is created anew.
    for e in &events {
        let name = e.metadata.name.as_deref().unwrap_or_default();
        lab.delete_event("default", name).await;
    }
    let back = eventually(LIMIT, || async {
        let events = lab.events_of("default", &static_uid).await;
        let again = events
            .iter()
            .any(|e| e.reason.as_deref() == Some("Started"));
        again.then_some(())
    })
    .await;
    assert!(
        back.is_some(),
        "no Event after the old ones went:\n{}",
        agent.logs()
    );
    // Nothing was refused on the way.
    assert_eq!(
        agent.logs().matches(REFUSED_LINE).count(),
        0,
        "{}",
        agent.logs()
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn an_api_server_that_refuses_events_changes_nothing_else() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    api.refuse_events();
    let agent = crate::mirror_faults::start(&api);
    agent.write("crash.yaml", &busybox_pod("crash", "Always", "exit 1"));
    agent.write("up.yaml", &busybox_pod("up", "Always", "exec sleep 100000"));

    // The pods run, their mirrors are created and their status written.
    let phase =
        |p: &k8s_openapi::api::core::v1::Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let up = crate::mirror_faults::mirror_of(&api, &agent, "up", "Running", |p| {
        phase(p).as_deref() == Some("Running")
    })
    .await;
    assert!(up.status.is_some());
    crate::mirror_faults::mirror_of(&api, &agent, "crash", "showing a restart", |p| {
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        statuses
            .and_then(|c| c.first())
            .is_some_and(|c| c.restart_count >= 1)
    })
    .await;
    assert!(pod_view(&rt, "up").await.running("main").is_some());

    // Every event was tried and refused; crilet said so once, not per event.
    let refused = || {
        let requests = api.event_requests().into_iter();
        requests.filter(|r| r.status == 403).count()
    };
    let many = eventually(Duration::from_secs(30), || async {
        (refused() >= 6).then_some(())
    })
    .await;
    assert!(
        many.is_some(),
        "only {} refused Events: {:?}\ncrilet log:\n{}",
        refused(),
        api.event_requests(),
        agent.logs()
    );
    assert!(
        api.event_requests().iter().all(|r| r.status == 403),
        "{:?}",
        api.event_requests()
    );
    let logs = agent.logs();
    assert_eq!(logs.matches(REFUSED_LINE).count(), 1, "{logs}");
    assert!(logs.contains("Refused(403)"), "{logs}");
}
