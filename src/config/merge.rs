//! The merge of pod sources, kubelet style: each source reports SETs, and a
//! SET replaces everything that source reported before.
//!
//! Invariant: the merged view never holds two pods with the same full name
//! or the same UID, and every pod in it comes from the last SET of some
//! source. A pod that loses a conflict stays pending with its source and is
//! admitted as soon as the pod that blocked it goes away, so the view never
//! depends on a source re-sending an unchanged SET. Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::pod::defaults::pod_content_equal;
use crate::pod::view::UnseenSources;
use crate::pod::{self, Pod};

/// One pod as a source reported it, with where it came from (a file path or
/// a URL), so that conflicts can name both sides. The pod is shared: the
/// source's last SET, the merge, the pod manager and the pod's worker all
/// hold this one object rather than copies of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePod {
    pub origin: String,
    pub pod: Arc<Pod>,
}

impl SourcePod {
    pub fn new(origin: impl Into<String>, pod: Pod) -> Self {
        SourcePod {
            origin: origin.into(),
            pod: Arc::new(pod),
        }
    }
}

/// What one SET changed in the merged view. Every list is sorted by full
/// name (then UID), so equal inputs give equal outputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    pub adds: Vec<Arc<Pod>>,
    pub updates: Vec<Arc<Pod>>,
    pub removes: Vec<Arc<Pod>>,
    /// Conflicts of the reporting source that its previous SET did not
    /// already have: the same SET sent twice warns only once.
    pub rejected: Vec<Rejected>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.adds.is_empty()
            && self.updates.is_empty()
            && self.removes.is_empty()
            && self.rejected.is_empty()
    }
}

/// A pod refused because another pod already holds its full name (or UID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub origin: String,
    pub full_name: String,
    pub kept_origin: String,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: pod {} is already defined by {}; ignoring this one",
            self.origin, self.full_name, self.kept_origin
        )
    }
}

#[derive(Debug, Default)]
struct SourceState {
    seen: bool,
    /// The last SET as reported, kept so that pods rejected for a conflict
    /// with another source can be admitted once that conflict is gone.
    last_set: Vec<SourcePod>,
    /// The admitted pods of this source, by UID.
    admitted: BTreeMap<String, SourcePod>,
    /// The (origin, full name, UID) of the pods rejected from the last
    /// SET. The holder is left out of the key on purpose: admitting pending
    /// pods of other sources can change who blocks a pod without anything
    /// changing in this source, and that must not warn again.
    rejected: BTreeSet<(String, String, String)>,
}

/// The merged desired pods of all sources.
#[derive(Debug, Default)]
pub struct PodConfig {
    sources: BTreeMap<String, SourceState>,
}

/// Who holds which full names and UIDs while admitting a SET.
#[derive(Default)]
struct Taken {
    names: HashMap<String, String>,
    uids: HashMap<String, String>,
}

impl Taken {
    /// The origin that already holds this pod's full name or UID, if any.
    fn holder(&self, full_name: &str, uid: &str) -> Option<&str> {
        self.names
            .get(full_name)
            .or_else(|| self.uids.get(uid))
            .map(String::as_str)
    }

    fn take(&mut self, sp: &SourcePod) {
        self.names
            .insert(pod::full_name(&sp.pod), sp.origin.clone());
        self.uids
            .insert(pod::uid(&sp.pod).to_string(), sp.origin.clone());
    }
}

impl PodConfig {
    /// A merge expecting the given sources: `all_sources_seen` waits for
    /// each of them to report once.
    pub fn new<'a>(sources: impl IntoIterator<Item = &'a str>) -> Self {
        let sources = sources
            .into_iter()
            .map(|s| (s.to_string(), SourceState::default()))
            .collect();
        PodConfig { sources }
    }

    /// Replaces the pods of `source` with `pods` (considered in the given
    /// order: the first of two pods with one full name wins) and returns
    /// what changed in the merged view.
    pub fn set(&mut self, source: &str, pods: Vec<SourcePod>) -> Changes {
        let before = self.snapshot();

        // Names held by the other sources win over this SET: the running pod
        // keeps running rather than being swapped for a later duplicate.
        let mut taken = Taken::default();
        for (name, state) in &self.sources {
            if name != source {
                state.admitted.values().for_each(|sp| taken.take(sp));
            }
        }

        let state = self.sources.entry(source.to_string()).or_default();
        state.seen = true;
        let mut admitted = BTreeMap::new();
        let mut rejected = BTreeSet::new();
        let mut newly_rejected = Vec::new();
        for sp in &pods {
            let full_name = pod::full_name(&sp.pod);
            let uid = pod::uid(&sp.pod);
            if let Some(kept) = taken.holder(&full_name, uid) {
                let key = (sp.origin.clone(), full_name.clone(), uid.to_string());
                if !state.rejected.contains(&key) {
                    newly_rejected.push(Rejected {
                        origin: sp.origin.clone(),
                        full_name,
                        kept_origin: kept.to_string(),
                    });
                }
                rejected.insert(key);
                continue;
            }
            // An unchanged pod keeps its old object, and with it the
            // config.seen of the first time it was seen.
            let kept = match state.admitted.get(uid) {
                Some(old) if pod_content_equal(&old.pod, &sp.pod) => SourcePod {
                    origin: sp.origin.clone(),
                    pod: old.pod.clone(),
                },
                _ => sp.clone(),
            };
            taken.take(&kept);
            admitted.insert(uid.to_string(), kept);
        }
        state.admitted = admitted;
        state.rejected = rejected;
        state.last_set = pods;

        self.admit_pending(source, &mut taken);
        let mut changes = diff(&before, &self.snapshot());
        changes.rejected = newly_rejected;
        changes
            .rejected
            .sort_by(|a, b| (&a.full_name, &a.origin).cmp(&(&b.full_name, &b.origin)));
        changes
    }

    /// Admits pods of the other sources that were rejected earlier and
    /// whose full name and UID are free now. Sources go in name order and
    /// pods in their SET order, so the outcome is deterministic.
    fn admit_pending(&mut self, except: &str, taken: &mut Taken) {
        for (name, state) in self.sources.iter_mut() {
            if name == except {
                continue;
            }
            for sp in &state.last_set {
                let uid = pod::uid(&sp.pod);
                if state.admitted.contains_key(uid) {
                    continue;
                }
                if taken.holder(&pod::full_name(&sp.pod), uid).is_none() {
                    taken.take(sp);
                    state.admitted.insert(uid.to_string(), sp.clone());
                }
            }
        }
    }

    /// Whether `source` has reported at least once.
    pub fn seen(&self, source: &str) -> bool {
        self.sources.get(source).is_some_and(|s| s.seen)
    }

    /// Whether every configured source has reported at least once (an empty
    /// SET counts). True when no source is configured.
    pub fn all_sources_seen(&self) -> bool {
        self.sources.values().all(|s| s.seen)
    }

    /// The configured sources still waiting for their first report.
    pub fn unseen_sources(&self) -> UnseenSources {
        UnseenSources::new(
            self.sources
                .iter()
                .filter(|(_, s)| !s.seen)
                .map(|(name, _)| name.as_str()),
        )
    }

    /// The merged desired pods, sorted by full name.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self
            .sources
            .values()
            .flat_map(|s| s.admitted.values().map(|sp| sp.pod.clone()))
            .collect();
        pods.sort_by(by_full_name);
        pods
    }

    /// The file path or URL the admitted pod with this UID came from.
    pub fn origin_of(&self, uid: &str) -> Option<&str> {
        self.sources
            .values()
            .find_map(|s| s.admitted.get(uid))
            .map(|sp| sp.origin.as_str())
    }

    fn snapshot(&self) -> BTreeMap<String, Arc<Pod>> {
        self.sources
            .values()
            .flat_map(|s| s.admitted.iter())
            .map(|(uid, sp)| (uid.clone(), sp.pod.clone()))
            .collect()
    }
}

/// Adds, updates and removes between two views keyed by UID. A pod that
/// keeps its UID and content is the same pod to the runtime, even when it
/// is now admitted from another origin: nothing to restart.
fn diff(before: &BTreeMap<String, Arc<Pod>>, after: &BTreeMap<String, Arc<Pod>>) -> Changes {
    let mut changes = Changes::default();
    for (uid, pod) in after {
        match before.get(uid) {
            None => changes.adds.push(pod.clone()),
            Some(old) if !pod_content_equal(old, pod) => changes.updates.push(pod.clone()),
            Some(_) => {}
        }
    }
    for (uid, pod) in before {
        if !after.contains_key(uid) {
            changes.removes.push(pod.clone());
        }
    }
    changes.adds.sort_by(by_full_name);
    changes.updates.sort_by(by_full_name);
    changes.removes.sort_by(by_full_name);
    changes
}

fn by_full_name(a: &Arc<Pod>, b: &Arc<Pod>) -> std::cmp::Ordering {
    (pod::full_name(a), pod::uid(a)).cmp(&(pod::full_name(b), pod::uid(b)))
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
