//! The pod manager: the agent's current set of static pods and the mirror
//! pods the API server holds for them, indexed by UID and by full name
//! (`<name>_<namespace>`), with the mirror-to-static UID translation every
//! public lookup goes through.
//!
//! Invariant: only the sync loop writes here; readers get clones (values are
//! `Arc<Pod>`, so a clone copies the indexes, not the pods). Within each kind
//! (static, mirror) the two indexes hold exactly the same pods: a full name
//! belongs to one pod at a time, and storing a pod under a taken full name or
//! a known UID replaces the previous holder entirely, so nothing dangles.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{
    CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION, Pod, annotation, full_name, is_mirror_pod,
    is_static_pod, name, namespace, uid,
};

/// One kind of pod (static or mirror) under both keys.
#[derive(Debug, Clone, Default)]
struct Index {
    by_uid: HashMap<String, Arc<Pod>>,
    /// Ordered so listings come out sorted by full name without a sort.
    by_full_name: BTreeMap<String, Arc<Pod>>,
}

impl Index {
    fn insert(&mut self, pod: Arc<Pod>) {
        let key = uid(&pod).to_owned();
        let full = full_name(&pod);
        // Drop whatever held this UID or this full name before, under both
        // keys, so that the two maps keep describing the same set of pods.
        self.remove_uid(&key);
        if let Some(previous) = self.by_full_name.get(&full) {
            let previous_uid = uid(previous).to_owned();
            self.remove_uid(&previous_uid);
        }
        self.by_full_name.insert(full, Arc::clone(&pod));
        self.by_uid.insert(key, pod);
    }

    /// Removes the pod stored under `key` and its full-name entry, the latter
    /// only while it still points at that UID.
    fn remove_uid(&mut self, key: &str) -> bool {
        let Some(old) = self.by_uid.remove(key) else {
            return false;
        };
        let full = full_name(&old);
        if self.by_full_name.get(&full).is_some_and(|p| uid(p) == key) {
            self.by_full_name.remove(&full);
        }
        true
    }

    fn sorted(&self) -> Vec<Arc<Pod>> {
        self.by_full_name.values().cloned().collect()
    }
}

/// The desired static pods and the observed mirror pods. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct PodManager {
    pods: Index,
    mirrors: Index,
}

impl PodManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces everything with `pods` (static and mirror pods mixed).
    pub fn set_pods(&mut self, pods: Vec<Pod>) {
        *self = Self::default();
        for pod in pods {
            self.add_pod(pod);
        }
    }

    /// Adds or replaces a pod, filed as a mirror pod when it carries the
    /// `config.mirror` annotation.
    pub fn add_pod(&mut self, pod: Pod) {
        if is_mirror_pod(&pod) {
            self.mirrors.insert(Arc::new(pod));
        } else {
            self.pods.insert(Arc::new(pod));
        }
    }

    /// Same as [`add_pod`](Self::add_pod): an update replaces the stored pod.
    pub fn update_pod(&mut self, pod: Pod) {
        self.add_pod(pod);
    }

    /// Removes the pod with `pod`'s UID. Both indexes are searched: the copy
    /// the caller holds may have gained or lost the mirror annotation since it
    /// was stored, but UIDs of static and mirror pods never collide.
    pub fn remove_pod(&mut self, pod: &Pod) {
        let key = uid(pod);
        if !self.pods.remove_uid(key) {
            self.mirrors.remove_uid(key);
        }
    }

    /// The static (non-mirror) pods, sorted by full name.
    pub fn get_pods(&self) -> Vec<Arc<Pod>> {
        self.pods.sorted()
    }

    /// The mirror pods, sorted by full name.
    pub fn get_mirror_pods(&self) -> Vec<Arc<Pod>> {
        self.mirrors.sorted()
    }

    /// A non-mirror pod by UID. Translate a mirror UID first with
    /// [`translate_pod_uid`](Self::translate_pod_uid).
    pub fn get_pod_by_uid(&self, uid: &str) -> Option<Arc<Pod>> {
        self.pods.by_uid.get(uid).cloned()
    }

    /// A non-mirror pod by `<name>_<namespace>`.
    pub fn get_pod_by_full_name(&self, full_name: &str) -> Option<Arc<Pod>> {
        self.pods.by_full_name.get(full_name).cloned()
    }

    pub fn get_pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.get_pod_by_full_name(&format!("{name}_{namespace}"))
    }

    /// The mirror pod with the same full name as `pod`.
    pub fn get_mirror_pod_by_pod(&self, pod: &Pod) -> Option<Arc<Pod>> {
        self.mirrors.by_full_name.get(&full_name(pod)).cloned()
    }

    /// The static pod with the same full name as `mirror`.
    pub fn get_pod_by_mirror_pod(&self, mirror: &Pod) -> Option<Arc<Pod>> {
        self.pods.by_full_name.get(&full_name(mirror)).cloned()
    }

    /// Given either a static pod or its mirror, the stored static pod and the
    /// stored mirror pod sharing its full name. Both come from the indexes,
    /// never the argument itself, so a caller holding an old copy gets the
    /// current ones.
    pub fn get_pod_and_mirror_pod(&self, pod: &Pod) -> (Option<Arc<Pod>>, Option<Arc<Pod>>) {
        let full = full_name(pod);
        (
            self.pods.by_full_name.get(&full).cloned(),
            self.mirrors.by_full_name.get(&full).cloned(),
        )
    }

    /// Maps a mirror pod's UID to the UID of the static pod with the same
    /// full name. Any other UID (a static pod's, an unknown one, an orphaned
    /// mirror's) comes back unchanged, so callers can translate blindly.
    pub fn translate_pod_uid(&self, uid: &str) -> String {
        self.mirrors
            .by_uid
            .get(uid)
            .and_then(|mirror| self.get_pod_by_mirror_pod(mirror))
            .map_or_else(|| uid.to_owned(), |pod| super::uid(&pod).to_owned())
    }

    /// The static-to-mirror and mirror-to-static UID maps, for every static
    /// pod that currently has a mirror of the same full name. Unpaired pods
    /// appear in neither map.
    pub fn get_uid_translations(&self) -> (HashMap<String, String>, HashMap<String, String>) {
        let mut static_to_mirror = HashMap::new();
        let mut mirror_to_static = HashMap::new();
        for (full, mirror) in &self.mirrors.by_full_name {
            if let Some(pod) = self.pods.by_full_name.get(full) {
                let (pod_uid, mirror_uid) = (uid(pod).to_owned(), uid(mirror).to_owned());
                static_to_mirror.insert(pod_uid.clone(), mirror_uid.clone());
                mirror_to_static.insert(mirror_uid, pod_uid);
            }
        }
        (static_to_mirror, mirror_to_static)
    }

    /// Full names of mirror pods with no static pod of the same full name,
    /// sorted. A pod stored under that name without a static source does not
    /// count: only a static pod can own a mirror.
    pub fn orphaned_mirror_pod_full_names(&self) -> Vec<String> {
        self.mirrors
            .by_full_name
            .keys()
            .filter(|full| {
                !self
                    .pods
                    .by_full_name
                    .get(*full)
                    .is_some_and(|pod| is_static_pod(pod))
            })
            .cloned()
            .collect()
    }

    /// True when `mirror` is the current mirror of `pod`: same name and
    /// namespace, and its `config.mirror` equals the pod's `config.hash`.
    /// A mirror left over from an edited manifest fails this and is replaced.
    pub fn is_mirror_pod_of(mirror: &Pod, pod: &Pod) -> bool {
        if name(mirror) != name(pod) || namespace(mirror) != namespace(pod) {
            return false;
        }
        match (
            annotation(mirror, CONFIG_MIRROR_ANNOTATION),
            annotation(pod, CONFIG_HASH_ANNOTATION),
        ) {
            (Some(mirror_hash), Some(hash)) => mirror_hash == hash,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
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
        pm.set_pods(Vec::new());
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
}
