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

use crate::pod::defaults::pod_content_equal;
use crate::pod::view::UnseenSources;
use crate::pod::{self, Pod};

/// One pod as a source reported it, with where it came from (a file path or
/// a URL), so that conflicts can name both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePod {
    pub origin: String,
    pub pod: Pod,
}

/// What one SET changed in the merged view. Every list is sorted by full
/// name (then UID), so equal inputs give equal outputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    pub adds: Vec<Pod>,
    pub updates: Vec<Pod>,
    pub removes: Vec<Pod>,
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
    pub fn pods(&self) -> Vec<Pod> {
        let mut pods: Vec<Pod> = self
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

    fn snapshot(&self) -> BTreeMap<String, Pod> {
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
fn diff(before: &BTreeMap<String, Pod>, after: &BTreeMap<String, Pod>) -> Changes {
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

fn by_full_name(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    (pod::full_name(a), pod::uid(a)).cmp(&(pod::full_name(b), pod::uid(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::CONFIG_SEEN_ANNOTATION;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use proptest::prelude::*;

    /// A pod as a source reports it: `version` stands for the manifest
    /// content, `seen` for the config.seen annotation the source stamped.
    fn sp(origin: &str, name: &str, uid: &str, version: u8, seen: &str) -> SourcePod {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some("default".to_string()),
                uid: Some(uid.to_string()),
                labels: Some([("version".to_string(), version.to_string())].into()),
                annotations: Some([(CONFIG_SEEN_ANNOTATION.to_string(), seen.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        SourcePod {
            origin: origin.to_string(),
            pod,
        }
    }

    /// `(origin, name, uid, version)`, all stamped with seen "t0".
    type Spec = (&'static str, &'static str, &'static str, u8);

    fn set_of(specs: &[Spec]) -> Vec<SourcePod> {
        specs
            .iter()
            .map(|&(o, n, u, v)| sp(o, n, u, v, "t0"))
            .collect()
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter().map(pod::full_name).collect()
    }

    fn rej(origin: &str, name: &str, kept: &str) -> Rejected {
        Rejected {
            origin: origin.to_string(),
            full_name: format!("{name}_default"),
            kept_origin: kept.to_string(),
        }
    }

    struct Case {
        name: &'static str,
        /// SETs applied before the one under test.
        before: Vec<(&'static str, Vec<Spec>)>,
        set: (&'static str, Vec<Spec>),
        adds: &'static [&'static str],
        updates: &'static [&'static str],
        removes: &'static [&'static str],
        rejected: Vec<Rejected>,
        pods: &'static [&'static str],
    }

    #[test]
    fn set_rules() {
        let cases = vec![
            Case {
                name: "first SET adds, sorted by full name",
                before: vec![],
                set: ("file", vec![("/m/b", "b", "u2", 0), ("/m/a", "a", "u1", 0)]),
                adds: &["a_default", "b_default"],
                updates: &[],
                removes: &[],
                rejected: vec![],
                pods: &["a_default", "b_default"],
            },
            Case {
                name: "same SET again changes nothing",
                before: vec![("file", vec![("/m/a", "a", "u1", 0)])],
                set: ("file", vec![("/m/a", "a", "u1", 0)]),
                adds: &[],
                updates: &[],
                removes: &[],
                rejected: vec![],
                pods: &["a_default"],
            },
            Case {
                name: "same UID, other content: update",
                before: vec![("file", vec![("/m/a", "a", "u1", 0)])],
                set: ("file", vec![("/m/a", "a", "u1", 1)]),
                adds: &[],
                updates: &["a_default"],
                removes: &[],
                rejected: vec![],
                pods: &["a_default"],
            },
            Case {
                name: "UID missing from the new SET: remove",
                before: vec![("file", vec![("/m/a", "a", "u1", 0), ("/m/b", "b", "u2", 0)])],
                set: ("file", vec![("/m/b", "b", "u2", 0)]),
                adds: &[],
                updates: &[],
                removes: &["a_default"],
                rejected: vec![],
                pods: &["b_default"],
            },
            Case {
                name: "edited manifest (new UID, same name): add and remove",
                before: vec![("file", vec![("/m/a", "a", "u1", 0)])],
                set: ("file", vec![("/m/a", "a", "u9", 1)]),
                adds: &["a_default"],
                updates: &[],
                removes: &["a_default"],
                rejected: vec![],
                pods: &["a_default"],
            },
            Case {
                name: "duplicate full name in one SET: the first in order wins",
                before: vec![],
                set: ("file", vec![("/m/2", "a", "u2", 0), ("/m/1", "a", "u1", 0)]),
                adds: &["a_default"],
                updates: &[],
                removes: &[],
                rejected: vec![rej("/m/1", "a", "/m/2")],
                pods: &["a_default"],
            },
            Case {
                name: "full name held by another source: the holder wins",
                before: vec![("http", vec![("http://x/p", "a", "u1", 0)])],
                set: ("file", vec![("/m/a", "a", "u2", 0), ("/m/b", "b", "u3", 0)]),
                adds: &["b_default"],
                updates: &[],
                removes: &[],
                rejected: vec![rej("/m/a", "a", "http://x/p")],
                pods: &["a_default", "b_default"],
            },
            Case {
                name: "duplicate UID under another name is rejected too",
                before: vec![("http", vec![("http://x/p", "a", "u1", 0)])],
                set: ("file", vec![("/m/b", "b", "u1", 0)]),
                adds: &[],
                updates: &[],
                removes: &[],
                rejected: vec![rej("/m/b", "b", "http://x/p")],
                pods: &["a_default"],
            },
            Case {
                name: "a rejected pod is admitted once its blocker is removed",
                before: vec![
                    ("http", vec![("http://x/p", "a", "u1", 0)]),
                    ("file", vec![("/m/a", "a", "u2", 0)]),
                ],
                set: ("http", vec![]),
                adds: &["a_default"],
                updates: &[],
                removes: &["a_default"],
                rejected: vec![],
                pods: &["a_default"],
            },
            Case {
                name: "a repeated SET does not report its rejection again",
                before: vec![("file", vec![("/m/1", "a", "u1", 0), ("/m/2", "a", "u2", 0)])],
                set: ("file", vec![("/m/1", "a", "u1", 0), ("/m/2", "a", "u2", 0)]),
                adds: &[],
                updates: &[],
                removes: &[],
                rejected: vec![],
                pods: &["a_default"],
            },
            Case {
                name: "a rejected manifest that changed is reported again",
                before: vec![("file", vec![("/m/1", "a", "u1", 0), ("/m/2", "a", "u2", 0)])],
                set: ("file", vec![("/m/1", "a", "u1", 0), ("/m/2", "a", "u3", 1)]),
                adds: &[],
                updates: &[],
                removes: &[],
                rejected: vec![rej("/m/2", "a", "/m/1")],
                pods: &["a_default"],
            },
            Case {
                name: "an empty SET from a new source changes nothing",
                before: vec![("file", vec![("/m/a", "a", "u1", 0)])],
                set: ("http", vec![]),
                adds: &[],
                updates: &[],
                removes: &[],
                rejected: vec![],
                pods: &["a_default"],
            },
        ];
        for case in cases {
            let mut config = PodConfig::new(["file", "http"]);
            for (source, specs) in &case.before {
                config.set(source, set_of(specs));
            }
            let changes = config.set(case.set.0, set_of(&case.set.1));
            assert_eq!(names(&changes.adds), case.adds, "{}: adds", case.name);
            assert_eq!(
                names(&changes.updates),
                case.updates,
                "{}: updates",
                case.name
            );
            assert_eq!(
                names(&changes.removes),
                case.removes,
                "{}: removes",
                case.name
            );
            assert_eq!(changes.rejected, case.rejected, "{}: rejected", case.name);
            assert_eq!(names(&config.pods()), case.pods, "{}: pods", case.name);
        }
    }

    #[test]
    fn unchanged_pod_keeps_its_first_seen_time() {
        let mut config = PodConfig::new(["file"]);
        config.set("file", vec![sp("/m/a", "a", "u1", 0, "t0")]);
        let changes = config.set("file", vec![sp("/m/a", "a", "u1", 0, "t1")]);
        assert!(changes.is_empty());
        let seen = pod::annotation(&config.pods()[0], CONFIG_SEEN_ANNOTATION).map(String::from);
        assert_eq!(seen.as_deref(), Some("t0"));

        // An update carries the new object, with its own seen time.
        let changes = config.set("file", vec![sp("/m/a", "a", "u1", 1, "t2")]);
        assert_eq!(
            pod::annotation(&changes.updates[0], CONFIG_SEEN_ANNOTATION),
            Some("t2")
        );
    }

    #[test]
    fn a_rejection_is_not_repeated_when_only_its_blocker_changed() {
        let mut config = PodConfig::new(["file", "http"]);
        config.set("file", set_of(&[("/m/a", "a", "u2", 0)]));
        config.set(
            "http",
            set_of(&[("h/0", "a", "u2", 0), ("h/1", "b", "u1", 0)]),
        );
        // The file's new pod collides with h/1 by UID; the name it gave up
        // goes to the pending h/0.
        let changes = config.set("file", set_of(&[("/m/a", "a", "u1", 1)]));
        assert_eq!(changes.rejected, [rej("/m/a", "a", "h/1")]);
        assert_eq!(config.origin_of("u2"), Some("h/0"));
        // Now h/0 holds the name as well, but nothing about /m/a changed.
        let again = config.set("file", set_of(&[("/m/a", "a", "u1", 1)]));
        assert_eq!(again, Changes::default());
    }

    #[test]
    fn sources_seen() {
        let mut config = PodConfig::new(["file", "http"]);
        assert!(!config.seen("file"));
        assert!(!config.all_sources_seen());
        config.set("file", vec![]);
        assert!(config.seen("file"));
        assert!(!config.all_sources_seen());
        config.set("http", vec![]);
        assert!(config.all_sources_seen());

        // A source nobody configured is accepted and joins the wait.
        let mut config = PodConfig::new(["file"]);
        config.set("file", vec![]);
        let changes = config.set("api", set_of(&[("api://a", "a", "u1", 0)]));
        assert_eq!(names(&changes.adds), ["a_default"]);
        assert!(config.seen("api") && config.all_sources_seen());
        assert!(PodConfig::new([]).all_sources_seen());
    }

    #[test]
    fn origin_of_and_rejection_message() {
        let mut config = PodConfig::new(["file"]);
        let changes = config.set(
            "file",
            set_of(&[("/m/a.yaml", "a", "u1", 0), ("/m/b.yaml", "a", "u2", 0)]),
        );
        assert_eq!(config.origin_of("u1"), Some("/m/a.yaml"));
        assert_eq!(config.origin_of("u2"), None);
        assert_eq!(
            changes.rejected[0].to_string(),
            "/m/b.yaml: pod a_default is already defined by /m/a.yaml; ignoring this one"
        );
    }

    #[test]
    fn an_unseen_source_holds_back_deletions_of_its_own_pods_only() {
        let mut config = PodConfig::new(["file", "http"]);
        let unseen = config.unseen_sources();
        for source in [Some("file"), Some("http"), None] {
            assert!(!unseen.allows_deletion(source), "{source:?}");
        }
        config.set("file", vec![]);
        let unseen = config.unseen_sources();
        assert!(unseen.allows_deletion(Some("file")));
        assert!(!unseen.allows_deletion(Some("http")));
        assert!(!unseen.allows_deletion(None), "a pod of no known source");
        // A source that is no longer configured waits for nobody.
        assert!(unseen.allows_deletion(Some("api")));
        config.set("http", vec![]);
        let unseen = config.unseen_sources();
        assert_eq!(unseen, UnseenSources::default());
        assert!(unseen.allows_deletion(None));
    }

    const SOURCES: [&str; 2] = ["file", "http"];

    /// A SET over a small universe so that conflicts, updates and edits
    /// happen often: 3 names, 4 UIDs, 2 contents.
    fn arb_set() -> impl Strategy<Value = (usize, Vec<(u8, u8, u8)>)> {
        (
            0..SOURCES.len(),
            prop::collection::vec((0..3u8, 0..4u8, 0..2u8), 0..5),
        )
    }

    fn build(source: usize, specs: &[(u8, u8, u8)]) -> Vec<SourcePod> {
        specs
            .iter()
            .enumerate()
            .map(|(i, &(n, u, v))| {
                let origin = format!("{}/{i}", SOURCES[source]);
                sp(&origin, &format!("n{n}"), &format!("u{u}"), v, "t")
            })
            .collect()
    }

    proptest! {
        #[test]
        fn merged_view_follows_the_last_sets(sets in prop::collection::vec(arb_set(), 1..12)) {
            let mut config = PodConfig::new(SOURCES);
            let mut last: BTreeMap<usize, Vec<SourcePod>> = BTreeMap::new();
            for (source, specs) in sets {
                let before: BTreeMap<String, Pod> =
                    config.pods().into_iter().map(|p| (pod::uid(&p).to_string(), p)).collect();
                let pods = build(source, &specs);
                last.insert(source, pods.clone());
                let changes = config.set(SOURCES[source], pods.clone());
                let merged = config.pods();

                // The changes turn the old view into the new one.
                let mut replayed = before.clone();
                for p in changes.removes.iter() {
                    replayed.remove(pod::uid(p));
                }
                for p in changes.adds.iter().chain(&changes.updates) {
                    replayed.insert(pod::uid(p).to_string(), p.clone());
                }
                let replayed: Vec<Pod> = replayed.into_values().collect();
                let mut sorted = merged.clone();
                sorted.sort_by_key(|p| pod::uid(p).to_string());
                prop_assert_eq!(replayed, sorted);

                // No full name and no UID twice.
                let full: BTreeSet<String> = merged.iter().map(pod::full_name).collect();
                let uids: BTreeSet<&str> = merged.iter().map(pod::uid).collect();
                prop_assert_eq!(full.len(), merged.len());
                prop_assert_eq!(uids.len(), merged.len());

                // Every merged pod is in a last SET, from the origin it names.
                for p in &merged {
                    let origin = config.origin_of(pod::uid(p)).unwrap();
                    let found = last.values().flatten().any(|s| {
                        s.origin == origin && pod::uid(&s.pod) == pod::uid(p)
                            && pod_content_equal(&s.pod, p)
                    });
                    prop_assert!(found, "{} not in any last SET", pod::full_name(p));
                }
                // Every pod of a last SET left out lost to a merged pod.
                for s in last.values().flatten() {
                    let admitted = config.origin_of(pod::uid(&s.pod)) == Some(s.origin.as_str());
                    let blocked = merged.iter().any(|p| {
                        pod::full_name(p) == pod::full_name(&s.pod) || pod::uid(p) == pod::uid(&s.pod)
                    });
                    prop_assert!(admitted || blocked, "{} left out without a conflict", s.origin);
                }

                // The same SET again is a no-op.
                prop_assert_eq!(config.set(SOURCES[source], pods), Changes::default());
                prop_assert_eq!(config.pods(), merged);
            }
        }
    }
}
