//! The mirror driver's passes against the recording fake API server.

use super::*;
use crate::kubeapi::fake::FakeMirrorClient;
use crate::pod::defaults::{PodSource, apply_static_defaults};
use k8s_openapi::api::core::v1::PodStatus;
use std::collections::HashSet;

fn static_pod(command: &str) -> Pod {
    static_pod_named("web", command)
}

fn static_pod_named(name: &str, command: &str) -> Pod {
    let mut p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": [command]}]}
    }))
    .unwrap();
    let t = jiff::Timestamp::from_second(1).unwrap();
    apply_static_defaults(&mut p, "node-a", &PodSource::File("/m/web.yaml"), t);
    p
}

fn manager(client: Arc<FakeMirrorClient>, statuses: StatusCache) -> MirrorManager {
    let (_, view) = watch::channel(Arc::new(AgentView::default()));
    let (mirrors_tx, _) = mpsc::channel(1);
    let (_, status_changed) = watch::channel(());
    MirrorManager {
        client,
        node_name: "node-a".into(),
        node: Default::default(),
        status_policy: crate::nodestatus::node_sync::tests::policy(),
        node_inputs: NodeInputs {
            observation: watch::channel(None).1,
            runtime: None,
        },
        events: Arc::new(crate::events::recorder::NoopRecorder),
        view,
        statuses,
        status_changed,
        mirrors_tx,
        pod_starts: Default::default(),
    }
}

fn view(statics: &[Pod]) -> AgentView {
    let mut pm = PodManager::new();
    for p in statics {
        pm.add_pod(p.clone());
    }
    AgentView {
        manager: Arc::new(pm),
        terminating: HashSet::new(),
        unseen_sources: Default::default(),
    }
}

#[tokio::test]
async fn creates_writes_status_replaces_and_survives_failures() {
    let client = Arc::new(FakeMirrorClient::new());
    let statuses: StatusCache = Default::default();
    let m = manager(client.clone(), statuses.clone());
    let node = NodeRef {
        name: "node-a".into(),
        uid: "node-uid".into(),
    };
    let v1 = static_pod("sleep");

    // No node yet: nothing is created.
    reconcile_once(&m, None, &[], &view(std::slice::from_ref(&v1)))
        .await
        .unwrap();
    assert!(client.calls().is_empty());

    // A node: the mirror is created, owned by it.
    reconcile_once(&m, Some(&node), &[], &view(std::slice::from_ref(&v1)))
        .await
        .unwrap();
    assert_eq!(client.calls(), ["create_pod default/web-node-a"]);
    let mirrors = client.pods();
    assert_eq!(
        mirrors[0].metadata.owner_references.as_ref().unwrap()[0].uid,
        "node-uid"
    );

    // The static pod's status reaches its mirror, once.
    statuses.write().unwrap().insert(
        crate::pod::uid(&v1).to_string(),
        Arc::new(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        }),
    );
    reconcile_once(
        &m,
        Some(&node),
        &arcs(&mirrors),
        &view(std::slice::from_ref(&v1)),
    )
    .await
    .unwrap();
    assert_eq!(
        client.calls().last().unwrap(),
        "patch_pod_status default/web-node-a"
    );
    let mirrors = client.pods();
    let n = client.calls().len();
    reconcile_once(
        &m,
        Some(&node),
        &arcs(&mirrors),
        &view(std::slice::from_ref(&v1)),
    )
    .await
    .unwrap();
    assert_eq!(
        client.calls().len(),
        n,
        "an unchanged status is not written again"
    );

    // Readiness came: the status loses the reasons it had, and the
    // mirror loses them too (a two-way patch, not a merge).
    let cond = |status: &str, reason: Option<&str>| k8s_openapi::api::core::v1::PodCondition {
        type_: "Ready".into(),
        status: status.into(),
        reason: reason.map(Into::into),
        message: reason.map(|_| "containers with unready status: [c]".into()),
        ..Default::default()
    };
    let with_ready = |c| PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![c]),
        ..Default::default()
    };
    let set = |status: PodStatus| {
        statuses
            .write()
            .unwrap()
            .insert(crate::pod::uid(&v1).to_string(), Arc::new(status));
    };
    set(with_ready(cond("False", Some("ContainersNotReady"))));
    reconcile_once(
        &m,
        Some(&node),
        &arcs(&client.pods()),
        &view(std::slice::from_ref(&v1)),
    )
    .await
    .unwrap();
    set(with_ready(cond("True", None)));
    reconcile_once(
        &m,
        Some(&node),
        &arcs(&client.pods()),
        &view(std::slice::from_ref(&v1)),
    )
    .await
    .unwrap();
    let ready = client.pods()[0].status.clone().unwrap().conditions.unwrap();
    assert_eq!(ready, [cond("True", None)], "no stale reason or message");
    let mirrors = client.pods();
    let n = client.calls().len();

    // The manifest changed: the outdated mirror is deleted and recreated.
    let v2 = static_pod("true");
    reconcile_once(
        &m,
        Some(&node),
        &arcs(&mirrors),
        &view(std::slice::from_ref(&v2)),
    )
    .await
    .unwrap();
    let calls = client.calls();
    assert_eq!(
        calls[n..],
        [
            "delete_pod default/web-node-a",
            "create_pod default/web-node-a"
        ]
    );

    // A failing API server: an error comes back, nothing panics, the
    // next pass does the work.
    let mirrors = client.pods();
    let v3 = static_pod("false");
    client.fail_next("delete_pod");
    assert!(
        reconcile_once(
            &m,
            Some(&node),
            &arcs(&mirrors),
            &view(std::slice::from_ref(&v3))
        )
        .await
        .is_err()
    );
    reconcile_once(
        &m,
        Some(&node),
        &arcs(&mirrors),
        &view(std::slice::from_ref(&v3)),
    )
    .await
    .unwrap();
    assert_eq!(
        crate::mirror::decide::mirror_hash(&client.pods()[0]),
        crate::pod::annotation(&v3, crate::pod::CONFIG_HASH_ANNOTATION)
    );

    // The static pod is gone: its orphaned mirror is deleted.
    let mirrors = client.pods();
    reconcile_once(&m, Some(&node), &arcs(&mirrors), &view(&[]))
        .await
        .unwrap();
    assert!(client.pods().is_empty());
}

#[tokio::test]
async fn a_stale_copy_is_read_again_and_the_patch_made_from_what_is_stored() {
    let client = Arc::new(FakeMirrorClient::new());
    let statuses: StatusCache = Default::default();
    let m = manager(client.clone(), statuses.clone());
    let node = NodeRef {
        name: "node-a".into(),
        uid: "node-uid".into(),
    };
    let web = static_pod("sleep");
    let views = || view(std::slice::from_ref(&web));
    reconcile_once(&m, Some(&node), &[], &views())
        .await
        .unwrap();
    let seen = client.pods(); // the watch's copy, soon stale
    // Someone else writes a message after the watch's copy.
    client.write_status(
        "default",
        "web-node-a",
        PodStatus {
            message: Some("written by someone else".into()),
            ..Default::default()
        },
    );
    let running = PodStatus {
        phase: Some("Running".into()),
        ..Default::default()
    };
    statuses
        .write()
        .unwrap()
        .insert(crate::pod::uid(&web).to_string(), Arc::new(running.clone()));
    let n = client.calls().len();
    reconcile_once(&m, Some(&node), &arcs(&seen), &views())
        .await
        .unwrap();
    assert_eq!(
        client.calls()[n..],
        [
            "patch_pod_status default/web-node-a",
            "get_pod default/web-node-a",
            "patch_pod_status default/web-node-a",
        ],
        "the stale write is refused (409), the pod read again"
    );
    // The message the stale copy did not have is removed all the same.
    assert_eq!(client.pods()[0].status, Some(running));

    // A mirror replaced under the same name (another uid): nothing is
    // written to the new pod from the old one's copy.
    let replaced = {
        let mut p = client.pods()[0].clone();
        p.metadata.uid = Some("another".into());
        p.metadata.resource_version = None;
        p
    };
    let n = client.calls().len();
    let seen = vec![replaced];
    statuses
        .write()
        .unwrap()
        .insert(crate::pod::uid(&web).to_string(), Arc::default());
    reconcile_once(&m, Some(&node), &arcs(&seen), &views())
        .await
        .unwrap();
    assert!(client.calls()[n..].contains(&"get_pod default/web-node-a".to_string()));
    assert!(
        client.calls()[n..]
            .iter()
            .filter(|c| c.starts_with("patch_pod_status"))
            .count()
            == 1
    );
}

/// A pass waits while a pod starts (`kubeapi::call_count`), and goes once the
/// start is over, or after [`START_YIELD`] if starts go on.
#[tokio::test(start_paused = true)]
async fn a_pass_waits_for_the_pod_starts_in_flight_at_most_a_second() {
    use std::time::Duration;
    let client = Arc::new(FakeMirrorClient::new());
    let mut m = manager(client.clone(), Default::default());
    let (view_tx, view_rx) = watch::channel(Arc::new(view(&[static_pod("sleep")])));
    let (_status_tx, status_rx) = watch::channel(());
    (m.view, m.status_changed) = (view_rx, status_rx);
    let starts = m.pod_starts.clone();
    let node = NodeRef {
        name: "node-a".into(),
        uid: "node-uid".into(),
    };
    let (_node_tx, node_rx) = watch::channel(Some(node));
    let (_seen_tx, seen_rx) = watch::channel(BTreeMap::new());
    let cancel = CancellationToken::new();
    let created = |name: &str| {
        let call = format!("create_pod default/{name}-node-a");
        client.calls().contains(&call)
    };

    let start = starts.begin();
    let task = tokio::spawn(reconcile_loop(m, node_rx, seen_rx, cancel.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(client.calls().is_empty(), "no write while a pod starts");
    drop(start);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(created("web"), "written once the start ended");

    // Starts that go on hold a pass back for a second, no longer.
    let _starts_go_on = starts.begin();
    let two = [static_pod("sleep"), static_pod_named("db", "sleep")];
    view_tx.send_replace(Arc::new(view(&two)));
    tokio::time::sleep(START_YIELD - Duration::from_millis(1)).await;
    assert!(!created("db"));
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert!(created("db"));
    cancel.cancel();
    task.await.unwrap();
}

/// The watch's pods as the reconcile loop holds them: shared.
fn arcs(pods: &[Pod]) -> Vec<Arc<Pod>> {
    pods.iter().cloned().map(Arc::new).collect()
}
