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
    pub fn set_pods<P: Into<Arc<Pod>>>(&mut self, pods: Vec<P>) {
        *self = Self::default();
        for pod in pods {
            self.add_pod(pod);
        }
    }

    /// Adds or replaces a pod, filed as a mirror pod when it carries the
    /// `config.mirror` annotation. An `Arc` is kept as it is, not copied.
    pub fn add_pod(&mut self, pod: impl Into<Arc<Pod>>) {
        let pod = pod.into();
        if is_mirror_pod(&pod) {
            self.mirrors.insert(pod);
        } else {
            self.pods.insert(pod);
        }
    }

    /// Same as [`add_pod`](Self::add_pod): an update replaces the stored pod.
    pub fn update_pod(&mut self, pod: impl Into<Arc<Pod>>) {
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
#[path = "manager_tests.rs"]
mod tests;
