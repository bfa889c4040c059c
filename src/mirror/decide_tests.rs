use super::*;
use crate::pod::{FILE_SOURCE, HTTP_SOURCE};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodCondition, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;

fn node() -> NodeRef {
    NodeRef {
        name: "n1".into(),
        uid: "node-uid".into(),
    }
}

fn ts(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(seconds).unwrap())
}

/// A static pod `<name>` in `default` as the sources produce it: UID =
/// config.hash = `hash`.
fn static_pod(name: &str, hash: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(hash.into()),
            labels: Some(BTreeMap::from([("app".into(), name.into())])),
            annotations: Some(BTreeMap::from([
                (CONFIG_SOURCE_ANNOTATION.into(), FILE_SOURCE.into()),
                (CONFIG_HASH_ANNOTATION.into(), hash.into()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            containers: vec![Container {
                name: "c".into(),
                image: Some(format!("busybox:{hash}")),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The mirror the API server holds for `static_pod(name, hash)`, as we
/// create it, with server fields filled in.
fn mirror(name: &str, mirror_uid: &str, hash: &str) -> Pod {
    let mut pod = mirror_pod_for(&static_pod(name, hash), &node());
    pod.metadata.uid = Some(mirror_uid.into());
    pod.metadata.resource_version = Some("7".into());
    pod.metadata.creation_timestamp = Some(ts(1_700_000_000));
    pod
}

/// The sources not seen yet, in the tables' one-source world.
fn unseen(seen: bool) -> UnseenSources {
    if seen {
        UnseenSources::default()
    } else {
        UnseenSources::new([FILE_SOURCE])
    }
}

#[test]
fn an_unseen_source_keeps_only_its_own_orphaned_mirrors() {
    let from = |source: Option<&str>, name: &str| {
        with(mirror(name, &format!("m-{name}"), "h"), |p| {
            let a = p.metadata.annotations.as_mut().unwrap();
            a.remove(CONFIG_SOURCE_ANNOTATION);
            if let Some(source) = source {
                a.insert(CONFIG_SOURCE_ANNOTATION.into(), source.into());
            }
        })
    };
    let mirrors = [
        from(Some(FILE_SOURCE), "f"),
        from(Some(HTTP_SOURCE), "u"),
        from(None, "x"),
    ];
    let node = node();
    let actions = decide(&MirrorInputs {
        static_pods: &[],
        mirror_pods: &mirrors,
        terminating: &HashSet::new(),
        unseen_sources: &UnseenSources::new([HTTP_SOURCE]),
        node: Some(&node),
    });
    let deleted: Vec<String> = actions.iter().map(|a| a.full_name()).collect();
    assert_eq!(deleted, ["f_default"], "{actions:?}");
}

fn with(mut pod: Pod, edit: impl FnOnce(&mut Pod)) -> Pod {
    edit(&mut pod);
    pod
}

fn being_deleted(pod: &mut Pod) {
    pod.metadata.deletion_timestamp = Some(ts(1_700_000_100));
}

fn owners(refs: Vec<OwnerReference>) -> impl FnOnce(&mut Pod) {
    move |pod| pod.metadata.owner_references = Some(refs)
}

fn api_pod(name: &str, pod_uid: &str) -> Pod {
    with(static_pod(name, "x"), |p| {
        p.metadata.uid = Some(pod_uid.into());
        p.metadata.annotations = None;
    })
}

fn create(name: &str, hash: &str) -> MirrorAction {
    MirrorAction::Create {
        static_uid: hash.into(),
        full_name: format!("{name}_default"),
    }
}

fn del(name: &str, mirror_uid: &str, reason: DeleteReason, again: Option<&str>) -> MirrorAction {
    MirrorAction::Delete {
        namespace: "default".into(),
        name: name.into(),
        mirror_uid: mirror_uid.into(),
        reason,
        recreate_for: again.map(Into::into),
    }
}

struct Row {
    what: &'static str,
    statics: Vec<Pod>,
    mirrors: Vec<Pod>,
    terminating: &'static [&'static str],
    seen: bool,
    node: bool,
    want: Vec<MirrorAction>,
}

fn row(what: &'static str, statics: Vec<Pod>, mirrors: Vec<Pod>) -> Row {
    Row {
        what,
        statics,
        mirrors,
        terminating: &[],
        seen: true,
        node: true,
        want: Vec::new(),
    }
}

impl Row {
    fn terminating(mut self, names: &'static [&'static str]) -> Self {
        self.terminating = names;
        self
    }
    fn unseen(mut self) -> Self {
        self.seen = false;
        self
    }
    fn no_node(mut self) -> Self {
        self.node = false;
        self
    }
    fn want(mut self, want: Vec<MirrorAction>) -> Self {
        self.want = want;
        self
    }
}

fn run(row: &Row) -> Vec<MirrorAction> {
    let terminating = row.terminating.iter().map(|s| s.to_string()).collect();
    let node = node();
    decide(&MirrorInputs {
        static_pods: &row.statics,
        mirror_pods: &row.mirrors,
        terminating: &terminating,
        unseen_sources: &unseen(row.seen),
        node: row.node.then_some(&node),
    })
}

#[test]
fn decide_table() {
    use DeleteReason::*;
    let web = || static_pod("web", "h1");
    let other_node = OwnerReference {
        name: "n2".into(),
        ..owner_reference(&node())
    };
    let stale_node_uid = OwnerReference {
        uid: "old-node-uid".into(),
        ..owner_reference(&node())
    };
    let not_controller = OwnerReference {
        controller: None,
        ..owner_reference(&node())
    };
    let rows = [
        row("nothing at all", vec![], vec![]),
        row("no mirror: create", vec![web()], vec![]).want(vec![create("web", "h1")]),
        row("no mirror, no node: wait", vec![web()], vec![]).no_node(),
        row(
            "no mirror, sources unseen: create anyway",
            vec![web()],
            vec![],
        )
        .unseen()
        .want(vec![create("web", "h1")]),
        row(
            "correct mirror: nothing",
            vec![web()],
            vec![mirror("web", "m1", "h1")],
        ),
        row(
            "correct mirror, no node: nothing",
            vec![web()],
            vec![mirror("web", "m1", "h1")],
        )
        .no_node(),
        row(
            "being deleted: finish the delete, recreate",
            vec![web()],
            vec![with(mirror("web", "m1", "h1"), being_deleted)],
        )
        .want(vec![del("web", "m1", BeingDeleted, Some("h1"))]),
        row(
            "being deleted, no node: delete only",
            vec![web()],
            vec![with(mirror("web", "m1", "h1"), being_deleted)],
        )
        .no_node()
        .want(vec![del("web", "m1", BeingDeleted, None)]),
        row(
            "outdated hash: replace",
            vec![web()],
            vec![mirror("web", "m1", "h0")],
        )
        .want(vec![del("web", "m1", Outdated, Some("h1"))]),
        row(
            "empty hash: replace",
            vec![web()],
            vec![mirror("web", "m1", "")],
        )
        .want(vec![del("web", "m1", Outdated, Some("h1"))]),
        row(
            "outdated, no node: delete only",
            vec![web()],
            vec![mirror("web", "m1", "h0")],
        )
        .no_node()
        .want(vec![del("web", "m1", Outdated, None)]),
        row(
            "no owner: replace",
            vec![web()],
            vec![with(mirror("web", "m1", "h1"), |p| {
                p.metadata.owner_references = None
            })],
        )
        .want(vec![del("web", "m1", NotOwnedByNode, Some("h1"))]),
        row(
            "owned by another node: replace",
            vec![web()],
            vec![with(mirror("web", "m1", "h1"), owners(vec![other_node]))],
        )
        .want(vec![del("web", "m1", NotOwnedByNode, Some("h1"))]),
        row(
            "owned by a previous Node of our name: replace",
            vec![web()],
            vec![with(
                mirror("web", "m1", "h1"),
                owners(vec![stale_node_uid]),
            )],
        )
        .want(vec![del("web", "m1", NotOwnedByNode, Some("h1"))]),
        row(
            "our Node but not as controller: replace",
            vec![web()],
            vec![with(
                mirror("web", "m1", "h1"),
                owners(vec![not_controller]),
            )],
        )
        .want(vec![del("web", "m1", NotOwnedByNode, Some("h1"))]),
        row(
            "extra owner next to ours: keep",
            vec![web()],
            vec![with(
                mirror("web", "m1", "h1"),
                owners(vec![other_node_ref(), owner_reference(&node())]),
            )],
        ),
        row(
            "no owner, no node: cannot tell, keep",
            vec![web()],
            vec![with(mirror("web", "m1", "h1"), |p| {
                p.metadata.owner_references = None
            })],
        )
        .no_node(),
        row(
            "being deleted and outdated: BeingDeleted wins",
            vec![web()],
            vec![with(mirror("web", "m1", "h0"), being_deleted)],
        )
        .want(vec![del("web", "m1", BeingDeleted, Some("h1"))]),
        row(
            "outdated and not owned: Outdated wins",
            vec![web()],
            vec![with(mirror("web", "m1", "h0"), |p| {
                p.metadata.owner_references = None
            })],
        )
        .want(vec![del("web", "m1", Outdated, Some("h1"))]),
        row(
            "edited mirror labels and spec: never replaced",
            vec![web()],
            vec![with(mirror("web", "m1", "h1"), |p| {
                p.metadata.labels = Some(BTreeMap::from([("edited".into(), "yes".into())]));
                p.spec.as_mut().unwrap().containers[0].image = Some("nginx".into());
            })],
        ),
        row("orphan: delete", vec![], vec![mirror("old", "m9", "h9")])
            .want(vec![del("old", "m9", Orphaned, None)]),
        row(
            "orphan, no node: delete",
            vec![],
            vec![mirror("old", "m9", "h9")],
        )
        .no_node()
        .want(vec![del("old", "m9", Orphaned, None)]),
        row(
            "orphan before all sources seen: keep",
            vec![],
            vec![mirror("old", "m9", "h9")],
        )
        .unseen(),
        row(
            "orphan still terminating: keep",
            vec![],
            vec![mirror("old", "m9", "h9")],
        )
        .terminating(&["old_default"]),
        row(
            "orphan being deleted: delete as orphan",
            vec![],
            vec![with(mirror("old", "m9", "h9"), being_deleted)],
        )
        .want(vec![del("old", "m9", Orphaned, None)]),
        row(
            "API pod without static pod: untouched",
            vec![],
            vec![api_pod("api", "p1")],
        ),
        row(
            "API pod holds the static pod's name: no create",
            vec![web()],
            vec![api_pod("web", "p1")],
        ),
        row(
            "edited in place, old version terminating: mirror kept",
            vec![web()],
            vec![mirror("web", "m1", "h0")],
        )
        .terminating(&["web_default"]),
        row(
            "new version waits, no mirror: no create yet",
            vec![web()],
            vec![],
        )
        .terminating(&["web_default"]),
        row(
            "duplicate static pods: the first wins",
            vec![web(), static_pod("web", "h2")],
            vec![mirror("web", "m1", "h1")],
        ),
        row(
            "several names: sorted by full name",
            vec![
                static_pod("c", "hc"),
                static_pod("a", "ha"),
                static_pod("b", "hb"),
            ],
            vec![
                mirror("d", "md", "hd"),
                mirror("b", "mb", "hx"),
                api_pod("z", "pz"),
                mirror("a", "ma", "ha"),
            ],
        )
        .want(vec![
            del("b", "mb", Outdated, Some("hb")),
            create("c", "hc"),
            del("d", "md", Orphaned, None),
        ]),
    ];
    for row in &rows {
        assert_eq!(run(row), row.want, "{}", row.what);
    }
}

fn other_node_ref() -> OwnerReference {
    OwnerReference {
        name: "n2".into(),
        uid: "n2-uid".into(),
        ..owner_reference(&node())
    }
}

#[test]
fn deletes_sort_before_creates_of_the_same_name() {
    let mut actions = [
        create("b", "hb"),
        create("a", "h"),
        del("b", "m", DeleteReason::Outdated, None),
        del("a", "m", DeleteReason::Orphaned, None),
    ];
    sort_actions(&mut actions);
    let order: Vec<_> = actions
        .iter()
        .map(|a| (a.full_name(), matches!(a, MirrorAction::Create { .. })))
        .collect();
    let want = [("a", false), ("a", true), ("b", false), ("b", true)];
    let want: Vec<_> = want.map(|(n, c)| (format!("{n}_default"), c)).into();
    assert_eq!(order, want);
}

#[test]
fn mirror_pod_for_copies_and_marks() {
    let mut pod = static_pod("web", "h1");
    pod.metadata.resource_version = Some("3".into());
    pod.metadata.creation_timestamp = Some(ts(1));
    pod.metadata.deletion_timestamp = Some(ts(2));
    pod.metadata.generation = Some(4);
    pod.metadata.self_link = Some("/api/v1/x".into());
    pod.metadata.managed_fields = Some(vec![Default::default()]);
    pod.metadata.finalizers = Some(vec!["keep".into()]);
    pod.metadata.owner_references = Some(vec![other_node_ref()]);
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    let m = mirror_pod_for(&pod, &node());

    let mut annotations = pod.metadata.annotations.clone().unwrap();
    annotations.insert(CONFIG_MIRROR_ANNOTATION.into(), "h1".into());
    let want = ObjectMeta {
        name: Some("web".into()),
        namespace: Some("default".into()),
        labels: pod.metadata.labels.clone(),
        annotations: Some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            uid: "node-uid".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]),
        ..ObjectMeta::default()
    };
    assert_eq!(m.metadata, want);
    assert_eq!(m.spec, pod.spec);
    assert_eq!(m.status, None);
    assert_eq!(mirror_hash(&m), Some("h1"));
    assert!(is_mirror_pod(&m));
    assert_eq!(m.metadata.uid, None, "the static pod's UID is never sent");
}

#[test]
fn mirror_pod_for_overwrites_a_stray_mirror_annotation_and_falls_back_to_uid() {
    let pod = with(static_pod("web", "h1"), |p| {
        let a = p.metadata.annotations.as_mut().unwrap();
        a.insert(CONFIG_MIRROR_ANNOTATION.into(), "bogus".into());
    });
    assert_eq!(mirror_hash(&mirror_pod_for(&pod, &node())), Some("h1"));
    let unhashed = with(static_pod("web", "h1"), |p| p.metadata.annotations = None);
    let m = mirror_pod_for(&unhashed, &node());
    assert_eq!(mirror_hash(&m), Some("h1"));
    assert_eq!(m.metadata.annotations.unwrap().len(), 1);
}

#[test]
fn mirror_hash_reads_the_annotation() {
    assert_eq!(mirror_hash(&mirror("a", "m", "h7")), Some("h7"));
    assert_eq!(mirror_hash(&static_pod("a", "h7")), None);
    assert_eq!(mirror_hash(&api_pod("a", "p")), None);
}

fn running(restarts: i32) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        host_ip: Some("10.0.0.1".into()),
        start_time: Some(ts(1_700_000_000)),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..PodCondition::default()
        }]),
        container_statuses: Some(vec![ContainerStatus {
            name: "c".into(),
            restart_count: restarts,
            ready: true,
            image: "busybox".into(),
            image_id: String::new(),
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    }
}

#[test]
fn status_differs_table() {
    let on_mirror = |s: Option<PodStatus>| with(mirror("a", "m", "h"), |p| p.status = s);
    let empties = PodStatus {
        init_container_statuses: Some(vec![]),
        message: Some(String::new()),
        pod_ips: Some(vec![]),
        ..running(0)
    };
    let sub_second = PodStatus {
        start_time: Some(Time(
            jiff::Timestamp::from_second(1_700_000_000).unwrap()
                + jiff::SignedDuration::from_millis(300),
        )),
        ..running(0)
    };
    let rows: [(&str, Option<PodStatus>, PodStatus, bool); 7] = [
        ("no status on the mirror", None, running(0), true),
        (
            "no status on the mirror, empty wanted",
            None,
            PodStatus::default(),
            true,
        ),
        ("same", Some(running(0)), running(0), false),
        ("restart count", Some(running(0)), running(1), true),
        (
            "phase",
            Some(running(0)),
            PodStatus {
                phase: Some("Failed".into()),
                ..running(0)
            },
            true,
        ),
        (
            "empty lists and strings are absent",
            Some(running(0)),
            empties,
            false,
        ),
        (
            "times compare at the API's precision",
            Some(running(0)),
            sub_second,
            false,
        ),
    ];
    for (what, current, wanted, differs) in rows {
        assert_eq!(
            status_differs(&on_mirror(current), &wanted),
            differs,
            "{what}"
        );
    }
}

// The property test: a few name slots, each with an optional static pod
// and an optional pod on the server (a mirror in some state, or an API
// pod), random flags.

const SLOTS: [(&str, &str); 4] = [
    ("a", "default"),
    ("b", "default"),
    ("a", "kube-system"),
    ("c", "default"),
];

#[derive(Debug, Clone)]
enum Server {
    Absent,
    ApiPod,
    Mirror {
        /// None: an empty `config.mirror`.
        hash: Option<u8>,
        deleting: bool,
        /// 0: ours, 1: none, 2: another node, 3: our name with an old UID.
        owner: u8,
    },
}

#[derive(Debug, Clone)]
struct Slot {
    static_hash: Option<u8>,
    server: Server,
    terminating: bool,
}

fn slot() -> impl Strategy<Value = Slot> {
    let server = prop_oneof![
        2 => Just(Server::Absent),
        1 => Just(Server::ApiPod),
        5 => (proptest::option::weighted(0.9, 0..3u8), prop::bool::weighted(0.2), 0..4u8)
            .prop_map(|(hash, deleting, owner)| Server::Mirror { hash, deleting, owner }),
    ];
    (
        proptest::option::weighted(0.7, 0..3u8),
        server,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(static_hash, server, terminating)| Slot {
            static_hash,
            server,
            terminating,
        })
}

fn slot_hash(i: usize, h: u8) -> String {
    format!("s{i}-h{h}")
}

fn slot_static(i: usize, h: u8) -> Pod {
    let (name, ns) = SLOTS[i];
    with(static_pod(name, &slot_hash(i, h)), |p| {
        p.metadata.namespace = Some(ns.into())
    })
}

fn slot_server(i: usize, server: &Server) -> Option<Pod> {
    let (name, ns) = SLOTS[i];
    let mut pod = match server {
        Server::Absent => return None,
        Server::ApiPod => api_pod(name, &format!("p{i}")),
        Server::Mirror {
            hash,
            deleting,
            owner,
        } => {
            let hash = hash.map(|h| slot_hash(i, h)).unwrap_or_default();
            let mut pod = mirror(name, &format!("m{i}"), &hash);
            if *deleting {
                being_deleted(&mut pod);
            }
            let stale = OwnerReference {
                uid: "old".into(),
                ..owner_reference(&node())
            };
            match owner {
                1 => pod.metadata.owner_references = None,
                2 => pod.metadata.owner_references = Some(vec![other_node_ref()]),
                3 => pod.metadata.owner_references = Some(vec![stale]),
                _ => {}
            }
            pod
        }
    };
    pod.metadata.namespace = Some(ns.into());
    Some(pod)
}

/// What the API server would hold after the actions, failing the test
/// on a create over a taken name or a delete of a pod it does not have.
fn apply(
    statics: &[Pod],
    server: &[Pod],
    actions: &[MirrorAction],
    node: Option<&NodeRef>,
) -> Result<Vec<Pod>, TestCaseError> {
    let mut next = server.to_vec();
    let mut serial = 0;
    let mut create = |next: &mut Vec<Pod>, static_uid: &str| -> Result<(), TestCaseError> {
        let node = node.ok_or_else(|| TestCaseError::fail("create without a node"))?;
        let pod = statics.iter().find(|p| uid(p) == static_uid);
        let pod = pod.ok_or_else(|| TestCaseError::fail("create for an unknown pod"))?;
        let mut m = mirror_pod_for(pod, node);
        prop_assert!(
            !next.iter().any(|p| full_name(p) == full_name(&m)),
            "name taken"
        );
        prop_assert_eq!(m.metadata.uid.as_deref(), None);
        serial += 1;
        m.metadata.uid = Some(format!("new-{serial}"));
        next.push(m);
        Ok(())
    };
    for action in actions {
        match action {
            MirrorAction::Create { static_uid, .. } => create(&mut next, static_uid)?,
            MirrorAction::Delete {
                mirror_uid,
                recreate_for,
                ..
            } => {
                let before = next.len();
                next.retain(|p| uid(p) != mirror_uid);
                prop_assert_eq!(next.len() + 1, before, "delete of an unknown pod");
                if let Some(static_uid) = recreate_for {
                    create(&mut next, static_uid)?;
                }
            }
        }
    }
    Ok(next)
}

proptest! {
    #[test]
    fn decide_properties(
        slots in prop::collection::vec(slot(), SLOTS.len()),
        seen in any::<bool>(),
        has_node in prop::bool::weighted(0.8),
    ) {
        let node = node();
        let node = has_node.then_some(&node);
        let statics: Vec<Pod> = slots.iter().enumerate()
            .filter_map(|(i, s)| s.static_hash.map(|h| slot_static(i, h)))
            .collect();
        let server: Vec<Pod> = slots.iter().enumerate()
            .filter_map(|(i, s)| slot_server(i, &s.server))
            .collect();
        let terminating: HashSet<String> = slots.iter().enumerate()
            .filter(|(_, s)| s.terminating)
            .map(|(i, _)| format!("{}_{}", SLOTS[i].0, SLOTS[i].1))
            .collect();
        let inputs = |statics: &[Pod], server: &[Pod]| decide(&MirrorInputs {
            static_pods: statics,
            mirror_pods: server,
            terminating: &terminating,
            unseen_sources: &unseen(seen),
            node,
        });
        let actions = inputs(&statics, &server);

        // Sorted, one action per name, independent of input order.
        let names: Vec<String> = actions.iter().map(MirrorAction::full_name).collect();
        prop_assert!(names.windows(2).all(|w| w[0] < w[1]), "{:?}", names);
        let (mut rs, mut rm) = (statics.clone(), server.clone());
        rs.reverse();
        rm.reverse();
        prop_assert_eq!(&inputs(&rs, &rm), &actions);

        let static_of = |full: &str| statics.iter().find(|p| full_name(p) == full);
        for action in &actions {
            let full = action.full_name();
            prop_assert!(!terminating.contains(&full), "acted on terminating {}", full);
            match action {
                MirrorAction::Create { static_uid, .. } => {
                    prop_assert!(node.is_some(), "create without a node");
                    prop_assert!(!server.iter().any(|p| full_name(p) == full), "create over {}", full);
                    prop_assert_eq!(static_of(&full).map(uid), Some(static_uid.as_str()));
                }
                MirrorAction::Delete { mirror_uid, reason, recreate_for, .. } => {
                    let target = server.iter().find(|p| uid(p) == mirror_uid);
                    let target = target.ok_or_else(|| TestCaseError::fail("unknown mirror"))?;
                    prop_assert!(is_mirror_pod(target), "deleted an API pod");
                    prop_assert_eq!(full_name(target), full.clone());
                    match static_of(&full) {
                        None => {
                            prop_assert_eq!(*reason, DeleteReason::Orphaned);
                            prop_assert!(seen, "orphan deleted before all sources were seen");
                            prop_assert_eq!(recreate_for, &None);
                        }
                        Some(pod) => {
                            let correct = target.metadata.deletion_timestamp.is_none()
                                && mirror_hash(target) == annotation(pod, CONFIG_HASH_ANNOTATION)
                                && node.is_none_or(|n| controlled_by(target, n));
                            prop_assert!(!correct, "deleted a correct mirror of {}", full);
                            let want = node.map(|_| uid(pod).to_owned());
                            prop_assert_eq!(recreate_for, &want);
                        }
                    }
                }
            }
        }

        // One round of actions reaches the fixed point.
        let after = apply(&statics, &server, &actions, node)?;
        let again = inputs(&statics, &after);
        prop_assert!(again.is_empty(), "not a fixed point: {:?}", again);

        // With a Node, all sources seen and nothing terminating, the server
        // ends up with exactly one correct mirror per static pod (unless
        // an API pod holds its name) and no other mirror.
        if node.is_some() && seen && terminating.is_empty() {
            for pod in &after {
                let full = full_name(pod);
                if !is_mirror_pod(pod) {
                    continue;
                }
                let owner = static_of(&full);
                let owner = owner.ok_or_else(|| TestCaseError::fail("orphan left"))?;
                prop_assert_eq!(pod.metadata.deletion_timestamp.as_ref(), None);
                prop_assert_eq!(mirror_hash(pod), annotation(owner, CONFIG_HASH_ANNOTATION));
                let ours = pod.metadata.owner_references.iter().flatten().any(|r| {
                    r.kind == "Node"
                        && r.name == "n1"
                        && r.uid == "node-uid"
                        && r.controller == Some(true)
                });
                prop_assert!(ours, "{} not controlled by the node", full);
            }
            for pod in &statics {
                prop_assert!(after.iter().any(|p| full_name(p) == full_name(pod)));
            }
        }
    }
}
