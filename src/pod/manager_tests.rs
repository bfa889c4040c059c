use super::*;
use crate::pod::{CONFIG_SOURCE_ANNOTATION, FILE_SOURCE};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

/// A static pod as the sources produce it: UID = config.hash.
fn static_pod(name: &str, namespace: &str, uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some(uid.into()),
            annotations: Some(BTreeMap::from([
                (CONFIG_SOURCE_ANNOTATION.into(), FILE_SOURCE.into()),
                (CONFIG_HASH_ANNOTATION.into(), uid.into()),
            ])),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// A mirror pod of the static pod whose hash is `hash`.
fn mirror_pod(name: &str, namespace: &str, uid: &str, hash: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some(uid.into()),
            annotations: Some(BTreeMap::from([(
                CONFIG_MIRROR_ANNOTATION.into(),
                hash.into(),
            )])),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn uids(pods: &[Arc<Pod>]) -> Vec<&str> {
    pods.iter().map(|p| uid(p)).collect()
}

fn uid_of(pod: Option<Arc<Pod>>) -> Option<String> {
    pod.map(|p| uid(&p).to_owned())
}

/// web (static s1 + mirror m1), db (static s2, no mirror), old (mirror m3, orphaned).
fn populated() -> PodManager {
    let mut pm = PodManager::new();
    pm.set_pods(vec![
        static_pod("web-n", "default", "s1"),
        mirror_pod("web-n", "default", "m1", "s1"),
        static_pod("db-n", "default", "s2"),
        mirror_pod("old-n", "default", "m3", "s0"),
    ]);
    pm
}

#[test]
fn set_pods_splits_static_and_mirror_and_sorts() {
    let pm = populated();
    assert_eq!(uids(&pm.get_pods()), ["s2", "s1"]);
    assert_eq!(uids(&pm.get_mirror_pods()), ["m3", "m1"]);
}

#[test]
fn set_pods_replaces_everything() {
    let mut pm = populated();
    pm.set_pods(vec![static_pod("new-n", "default", "s9")]);
    assert_eq!(uids(&pm.get_pods()), ["s9"]);
    assert!(pm.get_mirror_pods().is_empty());
    assert_eq!(pm.get_pod_by_uid("s1"), None);
    pm.set_pods(Vec::<Pod>::new());
    assert!(pm.get_pods().is_empty());
}

#[test]
fn add_and_update_route_by_mirror_annotation() {
    let mut pm = PodManager::new();
    pm.add_pod(static_pod("a", "ns", "s1"));
    pm.update_pod(mirror_pod("a", "ns", "m1", "s1"));
    assert_eq!(uids(&pm.get_pods()), ["s1"]);
    assert_eq!(uids(&pm.get_mirror_pods()), ["m1"]);
    // An update replaces the stored pod in place.
    let mut changed = static_pod("a", "ns", "s1");
    changed.metadata.labels = Some(BTreeMap::from([("v".into(), "2".into())]));
    pm.update_pod(changed.clone());
    assert_eq!(pm.get_pod_by_uid("s1").as_deref(), Some(&changed));
    assert_eq!(pm.get_pod_by_full_name("a_ns").as_deref(), Some(&changed));
    assert_eq!(pm.get_pods().len(), 1);
}

#[test]
fn new_uid_under_same_full_name_replaces_old_pod() {
    // An edited manifest: same name, new hash.
    let mut pm = PodManager::new();
    pm.add_pod(static_pod("a", "ns", "s1"));
    pm.add_pod(static_pod("a", "ns", "s2"));
    assert_eq!(pm.get_pod_by_uid("s1"), None);
    assert_eq!(
        uid_of(pm.get_pod_by_full_name("a_ns")).as_deref(),
        Some("s2")
    );
    assert_eq!(uids(&pm.get_pods()), ["s2"]);
}

#[test]
fn renamed_pod_with_same_uid_leaves_no_stale_name() {
    let mut pm = PodManager::new();
    pm.add_pod(static_pod("a", "ns", "s1"));
    pm.add_pod(static_pod("b", "ns", "s1"));
    assert_eq!(pm.get_pod_by_full_name("a_ns"), None);
    assert_eq!(
        uid_of(pm.get_pod_by_full_name("b_ns")).as_deref(),
        Some("s1")
    );
}

#[test]
fn remove_pod_by_uid_from_the_right_index() {
    let mut pm = populated();
    pm.remove_pod(&static_pod("web-n", "default", "s1"));
    assert_eq!(pm.get_pod_by_uid("s1"), None);
    assert_eq!(pm.get_pod_by_full_name("web-n_default"), None);
    // The mirror of the same name is untouched.
    assert_eq!(
        uid_of(pm.get_mirror_pod_by_pod(&static_pod("web-n", "default", "x"))).as_deref(),
        Some("m1")
    );
    pm.remove_pod(&mirror_pod("old-n", "default", "m3", "s0"));
    assert_eq!(uids(&pm.get_mirror_pods()), ["m1"]);
    // Unknown UIDs are a no-op.
    pm.remove_pod(&static_pod("db-n", "default", "nope"));
    assert_eq!(uids(&pm.get_pods()), ["s2"]);
}

#[test]
fn remove_pod_finds_the_uid_whatever_the_copy_says() {
    let mut pm = populated();
    // The caller's copy of the mirror lost its annotation: still removed.
    let mut copy = mirror_pod("web-n", "default", "m1", "s1");
    copy.metadata.annotations = None;
    pm.remove_pod(&copy);
    assert_eq!(uids(&pm.get_mirror_pods()), ["m3"]);
}

#[test]
fn remove_stale_uid_keeps_current_holder_of_the_name() {
    let mut pm = PodManager::new();
    pm.add_pod(static_pod("a", "ns", "s1"));
    pm.add_pod(static_pod("a", "ns", "s2"));
    // Removing the superseded version must not evict its successor.
    pm.remove_pod(&static_pod("a", "ns", "s1"));
    assert_eq!(
        uid_of(pm.get_pod_by_full_name("a_ns")).as_deref(),
        Some("s2")
    );
    assert_eq!(uid_of(pm.get_pod_by_uid("s2")).as_deref(), Some("s2"));
}

#[test]
fn lookups() {
    let pm = populated();
    assert_eq!(uid_of(pm.get_pod_by_uid("s1")).as_deref(), Some("s1"));
    assert_eq!(
        pm.get_pod_by_uid("m1"),
        None,
        "mirrors are not returned by UID"
    );
    assert_eq!(
        uid_of(pm.get_pod_by_full_name("db-n_default")).as_deref(),
        Some("s2")
    );
    assert_eq!(
        pm.get_pod_by_full_name("old-n_default"),
        None,
        "nor by full name"
    );
    assert_eq!(
        uid_of(pm.get_pod_by_name("default", "web-n")).as_deref(),
        Some("s1")
    );
    assert_eq!(pm.get_pod_by_name("kube-system", "web-n"), None);
}

#[test]
fn static_and_mirror_lookups_by_each_other() {
    let pm = populated();
    let web = static_pod("web-n", "default", "s1");
    let web_mirror = mirror_pod("web-n", "default", "m1", "s1");
    assert_eq!(
        uid_of(pm.get_mirror_pod_by_pod(&web)).as_deref(),
        Some("m1")
    );
    assert_eq!(
        uid_of(pm.get_pod_by_mirror_pod(&web_mirror)).as_deref(),
        Some("s1")
    );
    assert_eq!(
        pm.get_mirror_pod_by_pod(&static_pod("db-n", "default", "s2")),
        None
    );
    assert_eq!(
        pm.get_pod_by_mirror_pod(&mirror_pod("old-n", "default", "m3", "s0")),
        None
    );
}

#[test]
fn pod_and_mirror_given_either() {
    let pm = populated();
    let both = (Some("s1".to_owned()), Some("m1".to_owned()));
    let of = |(p, m): (Option<Arc<Pod>>, Option<Arc<Pod>>)| (uid_of(p), uid_of(m));
    assert_eq!(
        of(pm.get_pod_and_mirror_pod(&static_pod("web-n", "default", "s1"))),
        both
    );
    assert_eq!(
        of(pm.get_pod_and_mirror_pod(&mirror_pod("web-n", "default", "m1", "s1"))),
        both
    );
    assert_eq!(
        of(pm.get_pod_and_mirror_pod(&static_pod("db-n", "default", "s2"))),
        (Some("s2".into()), None)
    );
    assert_eq!(
        of(pm.get_pod_and_mirror_pod(&mirror_pod("old-n", "default", "m3", "s0"))),
        (None, Some("m3".into()))
    );
    assert_eq!(
        of(pm.get_pod_and_mirror_pod(&static_pod("zz", "default", "x"))),
        (None, None)
    );
}

#[test]
fn translate_pod_uid_table() {
    let pm = populated();
    for (input, want) in [
        ("m1", "s1"),
        ("s1", "s1"),
        ("s2", "s2"),
        ("m3", "m3"),
        ("unknown", "unknown"),
        ("", ""),
    ] {
        assert_eq!(pm.translate_pod_uid(input), want, "{input}");
    }
}

#[test]
fn uid_translations_cover_pairs_only() {
    let (static_to_mirror, mirror_to_static) = populated().get_uid_translations();
    assert_eq!(
        static_to_mirror,
        HashMap::from([("s1".into(), "m1".into())])
    );
    assert_eq!(
        mirror_to_static,
        HashMap::from([("m1".into(), "s1".into())])
    );
}

#[test]
fn orphaned_mirrors() {
    let mut pm = populated();
    pm.add_pod(mirror_pod("a-n", "default", "m4", "s0"));
    assert_eq!(
        pm.orphaned_mirror_pod_full_names(),
        ["a-n_default", "old-n_default"]
    );
    // A non-static pod under the name does not adopt the mirror.
    let mut not_static = static_pod("a-n", "default", "x1");
    not_static.metadata.annotations = None;
    pm.add_pod(not_static);
    assert_eq!(
        pm.orphaned_mirror_pod_full_names(),
        ["a-n_default", "old-n_default"]
    );
    pm.add_pod(static_pod("a-n", "default", "s4"));
    assert_eq!(pm.orphaned_mirror_pod_full_names(), ["old-n_default"]);
}

#[test]
fn mirror_pod_of() {
    let pod = static_pod("web-n", "default", "s1");
    assert!(PodManager::is_mirror_pod_of(
        &mirror_pod("web-n", "default", "m1", "s1"),
        &pod
    ));
    assert!(
        !PodManager::is_mirror_pod_of(&mirror_pod("web-n", "default", "m1", "s0"), &pod),
        "stale hash"
    );
    assert!(
        !PodManager::is_mirror_pod_of(&mirror_pod("web-n", "other", "m1", "s1"), &pod),
        "namespace"
    );
    assert!(
        !PodManager::is_mirror_pod_of(&mirror_pod("api-n", "default", "m1", "s1"), &pod),
        "name"
    );
    let mut unhashed = pod.clone();
    unhashed.metadata.annotations = None;
    assert!(!PodManager::is_mirror_pod_of(
        &mirror_pod("web-n", "default", "m1", ""),
        &unhashed
    ));
    assert!(
        !PodManager::is_mirror_pod_of(&pod, &pod),
        "no mirror annotation"
    );
}

#[test]
fn clones_are_independent_snapshots() {
    let mut pm = populated();
    let snapshot = pm.clone();
    pm.remove_pod(&static_pod("web-n", "default", "s1"));
    assert_eq!(uid_of(snapshot.get_pod_by_uid("s1")).as_deref(), Some("s1"));
    assert!(
        Arc::ptr_eq(&snapshot.get_pods()[0], &pm.get_pods()[0]),
        "pods are shared, not copied"
    );
}

#[derive(Debug, Clone)]
enum Op {
    AddStatic {
        name: usize,
        ns: usize,
        uid: usize,
    },
    AddMirror {
        name: usize,
        ns: usize,
        uid: usize,
        hash: usize,
    },
    Remove {
        mirror: bool,
        uid: usize,
    },
    Set(Vec<Op>),
}

const NAMES: [&str; 3] = ["a", "b", "c"];
const NAMESPACES: [&str; 2] = ["default", "kube-system"];
const UIDS: usize = 6;

fn static_uid(i: usize) -> String {
    format!("s{i}")
}

fn mirror_uid(i: usize) -> String {
    format!("m{i}")
}

fn pod_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NAMES.len(), 0..NAMESPACES.len(), 0..UIDS)
            .prop_map(|(name, ns, uid)| Op::AddStatic { name, ns, uid }),
        3 => (0..NAMES.len(), 0..NAMESPACES.len(), 0..UIDS, 0..UIDS)
            .prop_map(|(name, ns, uid, hash)| Op::AddMirror { name, ns, uid, hash }),
        2 => (any::<bool>(), 0..UIDS).prop_map(|(mirror, uid)| Op::Remove { mirror, uid }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => pod_op(),
        1 => prop::collection::vec(pod_op(), 0..6).prop_map(Op::Set),
    ]
}

fn to_pod(op: &Op) -> Option<Pod> {
    match *op {
        Op::AddStatic { name, ns, uid } => {
            Some(static_pod(NAMES[name], NAMESPACES[ns], &static_uid(uid)))
        }
        Op::AddMirror {
            name,
            ns,
            uid,
            hash,
        } => Some(mirror_pod(
            NAMES[name],
            NAMESPACES[ns],
            &mirror_uid(uid),
            &static_uid(hash),
        )),
        _ => None,
    }
}

fn apply(pm: &mut PodManager, op: &Op) {
    match op {
        Op::Remove { mirror, uid } => {
            let uid = if *mirror {
                mirror_uid(*uid)
            } else {
                static_uid(*uid)
            };
            pm.remove_pod(&static_pod("whatever", "ns", &uid));
        }
        Op::Set(ops) => pm.set_pods(ops.iter().filter_map(to_pod).collect()),
        Op::AddStatic { .. } => pm.add_pod(to_pod(op).unwrap()),
        Op::AddMirror { .. } => pm.update_pod(to_pod(op).unwrap()),
    }
}

fn assert_index_consistent(index: &Index) -> Result<(), TestCaseError> {
    prop_assert_eq!(index.by_uid.len(), index.by_full_name.len());
    for (key, pod) in &index.by_uid {
        prop_assert_eq!(key.as_str(), uid(pod));
        let by_name = index.by_full_name.get(&full_name(pod));
        prop_assert!(
            by_name.is_some_and(|p| Arc::ptr_eq(p, pod)),
            "{} unreachable by name",
            key
        );
    }
    for (full, pod) in &index.by_full_name {
        prop_assert_eq!(full, &full_name(pod));
        let by_uid = index.by_uid.get(uid(pod));
        prop_assert!(
            by_uid.is_some_and(|p| Arc::ptr_eq(p, pod)),
            "{} unreachable by UID",
            full
        );
    }
    Ok(())
}

/// Reference model: full name → UID per kind, with the replacement rule
/// spelled out naively.
#[derive(Default)]
struct Model {
    pods: BTreeMap<String, String>,
    mirrors: BTreeMap<String, String>,
}

impl Model {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Remove { mirror, uid } => {
                let (map, uid) = if *mirror {
                    (&mut self.mirrors, mirror_uid(*uid))
                } else {
                    (&mut self.pods, static_uid(*uid))
                };
                map.retain(|_, u| *u != uid);
            }
            Op::Set(ops) => {
                *self = Model::default();
                // set_pods takes pods only; removals in the list are skipped.
                let adds = ops.iter().filter(|op| to_pod(op).is_some());
                adds.for_each(|op| self.apply(op));
            }
            Op::AddStatic { .. } | Op::AddMirror { .. } => {
                let pod = to_pod(op).unwrap();
                let map = if is_mirror_pod(&pod) {
                    &mut self.mirrors
                } else {
                    &mut self.pods
                };
                map.retain(|_, u| u != uid(&pod));
                map.insert(full_name(&pod), uid(&pod).to_owned());
            }
        }
    }
}

fn listing(pods: &[Arc<Pod>]) -> Vec<(String, String)> {
    pods.iter()
        .map(|p| (full_name(p), uid(p).to_owned()))
        .collect()
}

proptest! {
    #[test]
    fn manager_matches_reference_model(ops in prop::collection::vec(op(), 0..40)) {
        let (mut pm, mut model) = (PodManager::new(), Model::default());
        for op in &ops {
            apply(&mut pm, op);
            model.apply(op);
            let want: Vec<_> = model.pods.clone().into_iter().collect();
            prop_assert_eq!(listing(&pm.get_pods()), want);
            let want: Vec<_> = model.mirrors.clone().into_iter().collect();
            prop_assert_eq!(listing(&pm.get_mirror_pods()), want);
        }
    }

    #[test]
    fn indexes_and_translation_agree(ops in prop::collection::vec(op(), 0..40)) {
        let mut pm = PodManager::new();
        for op in &ops {
            apply(&mut pm, op);
            assert_index_consistent(&pm.pods)?;
            assert_index_consistent(&pm.mirrors)?;
        }
        let statics: HashMap<String, String> =
            pm.get_pods().iter().map(|p| (full_name(p), uid(p).to_owned())).collect();
        for i in 0..UIDS {
            let (s, m) = (static_uid(i), mirror_uid(i));
            prop_assert_eq!(pm.translate_pod_uid(&s), s.clone());
            let want = match pm.mirrors.by_uid.get(&m) {
                Some(mirror) => statics.get(&full_name(mirror)).cloned().unwrap_or(m.clone()),
                None => m.clone(),
            };
            prop_assert_eq!(pm.translate_pod_uid(&m), want);
        }
        prop_assert_eq!(pm.translate_pod_uid("unknown"), "unknown");
        let (static_to_mirror, mirror_to_static) = pm.get_uid_translations();
        prop_assert_eq!(static_to_mirror.len(), mirror_to_static.len());
        for (mirror, pod) in &mirror_to_static {
            prop_assert_eq!(&pm.translate_pod_uid(mirror), pod);
            prop_assert_eq!(static_to_mirror.get(pod), Some(mirror));
        }
        let orphans = pm.orphaned_mirror_pod_full_names();
        for mirror in pm.get_mirror_pods() {
            let orphaned = !statics.contains_key(&full_name(&mirror));
            prop_assert_eq!(orphans.contains(&full_name(&mirror)), orphaned);
            prop_assert_eq!(mirror_to_static.contains_key(uid(&mirror)), !orphaned);
        }
    }
}

/// A pod given as an `Arc` is stored as that `Arc`: the worker, the merge
/// and the manager share one object.
#[test]
fn an_arc_is_stored_not_copied() {
    let pod = Arc::new(static_pod("a", "default", "u1"));
    let mut pm = PodManager::new();
    pm.add_pod(Arc::clone(&pod));
    assert!(Arc::ptr_eq(&pm.get_pod_by_uid("u1").unwrap(), &pod));
}
