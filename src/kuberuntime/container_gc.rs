//! Dead-container garbage collection: exited containers hold their images
//! "in use" and their logs on disk, so surplus ones are removed.
//!
//! Invariants: only exited containers carrying crilet's pod-uid and
//! container-name labels are ever selected. Per (pod UID, container name)
//! the newest container, the one before it and the newest exited one are
//! kept (the kubelet's MaxPerPodContainer = 1; the pod status reads the
//! newest two for state, lastState and restart count). Every exited
//! container of a pod no source wants is removed, but only once every
//! source has reported. `select` is pure; `kuberuntime::container_gc_driver` lists, selects and removes.

use std::collections::HashMap;

use super::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::cri::{Container, ContainerState};

/// Why a container is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadReason {
    /// Older than the newest exited instance of its container.
    Surplus,
    /// Its pod is gone from every source.
    PodGone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadContainer {
    pub id: String,
    pub pod_uid: String,
    pub name: String,
    pub attempt: u32,
    pub reason: DeadReason,
}

/// The exited containers to remove. `live` answers whether a pod UID is
/// still wanted; `None` while not every source has reported (then no pod
/// counts as gone).
pub fn select(containers: &[Container], live: Option<&dyn Fn(&str) -> bool>) -> Vec<DeadContainer> {
    let mut groups: HashMap<(&str, &str), Vec<&Container>> = HashMap::new();
    for c in containers {
        let (Some(uid), Some(name)) = (
            c.labels.get(POD_UID_LABEL),
            c.labels.get(CONTAINER_NAME_LABEL),
        ) else {
            continue;
        };
        groups.entry((uid, name)).or_default().push(c);
    }
    let mut out = Vec::new();
    for ((uid, name), mut list) in groups {
        let gone = live.is_some_and(|live| !live(uid));
        list.sort_unstable_by_key(|c| std::cmp::Reverse((c.metadata.attempt, c.created_at)));
        let newest_exited = list.iter().position(|c| c.state == ContainerState::Exited);
        for (i, c) in list.iter().enumerate() {
            if c.state != ContainerState::Exited {
                continue;
            }
            let reason = if gone {
                DeadReason::PodGone
            } else if i < 2 || Some(i) == newest_exited {
                continue;
            } else {
                DeadReason::Surplus
            };
            out.push(DeadContainer {
                id: c.id.clone(),
                pod_uid: uid.to_string(),
                name: name.to_string(),
                attempt: c.metadata.attempt,
                reason,
            });
        }
    }
    out.sort_by(|a, b| (&a.pod_uid, &a.name, a.attempt).cmp(&(&b.pod_uid, &b.name, b.attempt)));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cri::{ContainerMetadata, Labels};
    use proptest::prelude::*;

    pub(crate) fn c(uid: &str, name: &str, attempt: u32, state: ContainerState) -> Container {
        Container {
            id: format!("{uid}-{name}-{attempt}"),
            pod_sandbox_id: "sb".into(),
            metadata: ContainerMetadata {
                name: name.into(),
                attempt,
            },
            image: "busybox".into(),
            image_ref: "sha256:b".into(),
            state,
            created_at: attempt as i64,
            labels: Labels::from([
                (POD_UID_LABEL.to_string(), uid.to_string()),
                (CONTAINER_NAME_LABEL.to_string(), name.to_string()),
            ]),
            annotations: Labels::new(),
        }
    }

    fn ids(d: &[DeadContainer]) -> Vec<&str> {
        d.iter().map(|d| d.id.as_str()).collect()
    }

    use ContainerState::{Created, Exited, Running};

    #[test]
    fn keeps_the_current_and_the_newest_exited_per_container() {
        let all = |_: &str| true;
        let live: Option<&dyn Fn(&str) -> bool> = Some(&all);
        // Running 3; exited 2 gives lastState: 0 and 1 go.
        let cs = [
            c("u", "a", 0, Exited),
            c("u", "a", 1, Exited),
            c("u", "a", 2, Exited),
            c("u", "a", 3, Running),
        ];
        assert_eq!(ids(&select(&cs, live)), ["u-a-0", "u-a-1"]);
        // Exited 3 is the current state, 2 its lastState: 0 and 1 go.
        let cs = [
            c("u", "a", 0, Exited),
            c("u", "a", 1, Exited),
            c("u", "a", 2, Exited),
            c("u", "a", 3, Exited),
        ];
        assert_eq!(ids(&select(&cs, live)), ["u-a-0", "u-a-1"]);
        // Created 3 over running-less history: 2 (newest exited) stays.
        let cs = [
            c("u", "a", 1, Exited),
            c("u", "a", 2, Exited),
            c("u", "a", 3, Created),
        ];
        assert_eq!(ids(&select(&cs, live)), ["u-a-1"] as [&str; 1]);
        // Per name and per pod: b's single exited one stays.
        let cs = [
            c("u", "a", 0, Exited),
            c("u", "b", 0, Exited),
            c("v", "a", 0, Exited),
        ];
        assert!(select(&cs, live).is_empty());
    }

    #[test]
    fn gone_pods_lose_every_exited_container_once_sources_are_seen() {
        let only_u = |uid: &str| uid == "u";
        let cs = [
            c("u", "a", 0, Exited),
            c("gone", "a", 0, Exited),
            c("gone", "a", 1, Running),
        ];
        let d = select(&cs, Some(&only_u));
        assert_eq!(ids(&d), ["gone-a-0"]);
        assert_eq!(d[0].reason, DeadReason::PodGone);
        // Before every source has reported, nothing counts as gone.
        assert!(select(&cs, None).is_empty());
    }

    #[test]
    fn containers_without_crilet_labels_are_left_alone() {
        let mut foreign = c("u", "a", 0, Exited);
        foreign.labels.remove(CONTAINER_NAME_LABEL);
        assert!(select(&[foreign], Some(&|_: &str| false)).is_empty());
    }

    proptest! {
        #[test]
        fn never_removes_a_non_exited_nor_what_the_status_reads(
            states in proptest::collection::vec((0u8..2, 0u8..3, 0u8..4), 0..40)
        ) {
            let cs: Vec<Container> = states.iter().enumerate().map(|(i, (name, st, _))| {
                let state = [Exited, Running, Created][*st as usize];
                c("u", &format!("n{name}"), i as u32, state)
            }).collect();
            let d = select(&cs, Some(&|_: &str| true));
            for name in ["n0", "n1"] {
                let mut mine: Vec<&Container> = cs.iter().filter(|c| c.metadata.name == name).collect();
                mine.sort_by_key(|c| std::cmp::Reverse(c.metadata.attempt));
                let removed: Vec<&Container> = mine.iter().copied().filter(|c| d.iter().any(|x| x.id == c.id)).collect();
                prop_assert!(removed.iter().all(|c| c.state == Exited));
                for keep in mine.iter().take(2) {
                    prop_assert!(!removed.iter().any(|r| r.id == keep.id));
                }
                if let Some(newest_exited) = mine.iter().find(|c| c.state == Exited) {
                    prop_assert!(!removed.iter().any(|r| r.id == newest_exited.id));
                }
                // At most two exited containers of a name remain.
                let exited_left = mine.iter().filter(|c| c.state == Exited).count() - removed.len();
                prop_assert!(exited_left <= 2);
            }
        }
    }
}
