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
    SourcePod::new(origin, pod)
}

/// `(origin, name, uid, version)`, all stamped with seen "t0".
type Spec = (&'static str, &'static str, &'static str, u8);

fn set_of(specs: &[Spec]) -> Vec<SourcePod> {
    specs
        .iter()
        .map(|&(o, n, u, v)| sp(o, n, u, v, "t0"))
        .collect()
}

fn names(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter().map(|p| pod::full_name(p)).collect()
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
            let before: BTreeMap<String, Arc<Pod>> =
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
            let replayed: Vec<Arc<Pod>> = replayed.into_values().collect();
            let mut sorted = merged.clone();
            sorted.sort_by_key(|p| pod::uid(p).to_string());
            prop_assert_eq!(replayed, sorted);

            // No full name and no UID twice.
            let full: BTreeSet<String> = merged.iter().map(|p| pod::full_name(p)).collect();
            let uids: BTreeSet<&str> = merged.iter().map(|p| pod::uid(p)).collect();
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

/// One object per pod: what the merge hands on (adds, the merged view)
/// is the source's own `Arc`, and a SET that repeats a pod's content in a
/// new object keeps the object already admitted. A copy here would cost a
/// whole Pod per source pod for as long as the agent runs.
#[test]
fn admitted_pods_are_the_sources_objects_not_copies() {
    let mut config = PodConfig::new(SOURCES);
    let first = sp("a.yaml", "a", "u1", 1, "t0");
    let changes = config.set(SOURCES[0], vec![first.clone()]);
    assert!(Arc::ptr_eq(&changes.adds[0], &first.pod));
    assert!(Arc::ptr_eq(&config.pods()[0], &first.pod));

    let again = SourcePod::new("a.yaml", (*first.pod).clone());
    assert!(config.set(SOURCES[0], vec![again.clone()]).is_empty());
    assert!(Arc::ptr_eq(&config.pods()[0], &first.pod));
    assert!(!Arc::ptr_eq(&config.pods()[0], &again.pod));
}
