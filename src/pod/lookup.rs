//! Finds a managed pod from whatever a client holds: its static UID, its
//! mirror pod's UID, or namespace + name. Every public lookup goes through
//! here, and so through the pod manager's mirror-to-static translation.
//! Pure: it reads a pod manager snapshot, so the stats API, the kubelet
//! server and the log reader all resolve pods the same way.

use std::sync::Arc;

use crate::pod::manager::PodManager;
use crate::pod::{self, Pod};

/// What a client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodRef {
    Uid(String),
    Name { namespace: String, name: String },
}

impl PodRef {
    /// Parses the CLI's form: `NAMESPACE/NAME`, `NAME` (namespace default)
    /// or a UID (32 hex digits, or the API server's 8-4-4-4-12 form).
    pub fn parse(s: &str) -> Result<PodRef, LookupError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(LookupError::Invalid("an empty pod reference".into()));
        }
        if looks_like_uid(s) {
            return Ok(PodRef::Uid(s.to_owned()));
        }
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(PodRef::Name {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                })
            }
            Some(_) => Err(LookupError::Invalid(format!(
                "pod reference {s:?}: expected NAMESPACE/NAME, NAME or a UID"
            ))),
            None => Ok(PodRef::Name {
                namespace: "default".into(),
                name: s.to_owned(),
            }),
        }
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PodRef::Uid(uid) => write!(f, "pod with UID {uid:?}"),
            PodRef::Name { namespace, name } => write!(f, "pod {namespace}/{name}"),
        }
    }
}

fn looks_like_uid(s: &str) -> bool {
    let hex = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit());
    if s.len() == 32 && hex(s) {
        return true;
    }
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| hex(p))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("no pod managed by crilet matches {0}")]
    NotFound(String),
    #[error("invalid pod reference: {0}")]
    Invalid(String),
}

/// A pod found by [`resolve`], under every name a reply carries.
#[derive(Debug, Clone)]
pub struct ResolvedPod {
    pub pod: Arc<Pod>,
    pub static_uid: String,
    /// Empty while the pod has no mirror.
    pub mirror_uid: String,
    pub name: String,
    pub namespace: String,
    pub full_name: String,
}

impl ResolvedPod {
    pub fn of(manager: &PodManager, pod: Arc<Pod>) -> ResolvedPod {
        let mirror_uid = manager
            .get_mirror_pod_by_pod(&pod)
            .filter(|m| PodManager::is_mirror_pod_of(m, &pod))
            .map(|m| pod::uid(&m).to_owned())
            .unwrap_or_default();
        ResolvedPod {
            static_uid: pod::uid(&pod).to_owned(),
            mirror_uid,
            name: pod::name(&pod).to_owned(),
            namespace: pod::namespace(&pod).to_owned(),
            full_name: pod::full_name(&pod),
            pod,
        }
    }
}

/// The static pod `r` names. A mirror UID is translated first; a name finds
/// the static pod of that full name (its mirror shares it).
pub fn resolve(manager: &PodManager, r: &PodRef) -> Result<ResolvedPod, LookupError> {
    let found = match r {
        PodRef::Uid(uid) if uid.is_empty() => {
            return Err(LookupError::Invalid("an empty UID".into()));
        }
        PodRef::Uid(uid) => manager.get_pod_by_uid(&manager.translate_pod_uid(uid)),
        PodRef::Name { name, .. } if name.is_empty() => {
            return Err(LookupError::Invalid("a pod name is required".into()));
        }
        PodRef::Name { namespace, name } => {
            let ns = if namespace.is_empty() {
                "default"
            } else {
                namespace
            };
            manager.get_pod_by_name(ns, name)
        }
    };
    found
        .map(|pod| ResolvedPod::of(manager, pod))
        .ok_or_else(|| LookupError::NotFound(r.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pod::CONFIG_MIRROR_ANNOTATION;

    /// A pod in namespace default with these annotations (also used by the
    /// API's tests).
    pub(crate) fn pod(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some(uid.into());
        p.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p
    }

    fn manager() -> PodManager {
        let mut m = PodManager::new();
        m.add_pod(pod(
            "web-node1",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            &[
                ("kubernetes.io/config.source", "file"),
                (
                    "kubernetes.io/config.hash",
                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                ),
            ],
        ));
        m.add_pod(pod(
            "web-node1",
            "11111111-2222-3333-4444-555555555555",
            &[
                (CONFIG_MIRROR_ANNOTATION, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
                ("kubernetes.io/config.source", "file"),
                (
                    "kubernetes.io/config.hash",
                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                ),
            ],
        ));
        m.add_pod(pod(
            "db-node1",
            "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            &[("kubernetes.io/config.source", "file")],
        ));
        m
    }

    #[test]
    fn static_uid_mirror_uid_and_name_find_the_same_pod() {
        let m = manager();
        let refs = [
            PodRef::Uid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into()),
            PodRef::Uid("11111111-2222-3333-4444-555555555555".into()),
            PodRef::Name {
                namespace: "default".into(),
                name: "web-node1".into(),
            },
            PodRef::Name {
                namespace: String::new(),
                name: "web-node1".into(),
            },
        ];
        for r in &refs {
            let got = resolve(&m, r).unwrap_or_else(|e| panic!("{r}: {e}"));
            assert_eq!(got.static_uid, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "{r}");
            assert_eq!(
                got.mirror_uid, "11111111-2222-3333-4444-555555555555",
                "{r}"
            );
            assert_eq!(got.full_name, "web-node1_default");
        }
    }

    #[test]
    fn a_pod_without_mirror_has_an_empty_mirror_uid() {
        let got = resolve(&manager(), &PodRef::Uid("b".repeat(32))).unwrap();
        assert_eq!(got.name, "db-node1");
        assert_eq!(got.mirror_uid, "");
    }

    #[test]
    fn a_mirror_whose_hash_differs_is_not_reported_as_the_mirror() {
        let mut m = manager();
        m.add_pod(pod(
            "db-node1",
            "99999999-2222-3333-4444-555555555555",
            &[(CONFIG_MIRROR_ANNOTATION, "stale")],
        ));
        let got = resolve(&m, &PodRef::Uid("b".repeat(32))).unwrap();
        assert_eq!(got.mirror_uid, "");
    }

    #[test]
    fn unknown_and_malformed_references_are_told_apart() {
        let m = manager();
        let err = resolve(&m, &PodRef::Uid("c".repeat(32))).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "no pod managed by crilet matches pod with UID \"{}\"",
                "c".repeat(32)
            )
        );
        let err = resolve(
            &m,
            &PodRef::Name {
                namespace: "kube-system".into(),
                name: "web-node1".into(),
            },
        )
        .unwrap_err();
        assert!(matches!(err, LookupError::NotFound(ref s) if s == "pod kube-system/web-node1"));
        assert!(matches!(
            resolve(&m, &PodRef::Uid(String::new())),
            Err(LookupError::Invalid(_))
        ));
        assert!(matches!(
            resolve(
                &m,
                &PodRef::Name {
                    namespace: "default".into(),
                    name: String::new()
                }
            ),
            Err(LookupError::Invalid(_))
        ));
    }

    #[test]
    fn an_orphaned_mirror_uid_finds_nothing() {
        let mut m = PodManager::new();
        m.add_pod(pod(
            "gone-node1",
            "11111111-2222-3333-4444-555555555555",
            &[(CONFIG_MIRROR_ANNOTATION, "x")],
        ));
        assert!(matches!(
            resolve(
                &m,
                &PodRef::Uid("11111111-2222-3333-4444-555555555555".into())
            ),
            Err(LookupError::NotFound(_))
        ));
    }

    #[test]
    fn cli_references_parse() {
        assert_eq!(
            PodRef::parse("kube-system/etcd-node1").unwrap(),
            PodRef::Name {
                namespace: "kube-system".into(),
                name: "etcd-node1".into()
            }
        );
        assert_eq!(
            PodRef::parse("web-node1").unwrap(),
            PodRef::Name {
                namespace: "default".into(),
                name: "web-node1".into()
            }
        );
        let uid = "0123456789abcdef0123456789abcdef";
        assert_eq!(PodRef::parse(uid).unwrap(), PodRef::Uid(uid.into()));
        let uid = "11111111-2222-3333-4444-555555555555";
        assert_eq!(PodRef::parse(uid).unwrap(), PodRef::Uid(uid.into()));
        for bad in ["", "a/b/c", "/x", "x/"] {
            assert!(PodRef::parse(bad).is_err(), "{bad:?}");
        }
    }
}
