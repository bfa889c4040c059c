//! What the agent publishes for its readers (the mirror manager, the stats
//! servers, the container GC driver): the pod manager with what decides
//! deletions, and the pods' statuses.
//!
//! Invariant: the sync loop alone writes the [`AgentView`] (through a
//! watch channel of snapshots) and each pod worker writes only its own
//! entry of the [`StatusCache`]; readers never hold a lock across `.await`.
//! The types live on the ground floor so that every subsystem may read them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::PodStatus;

use super::manager::PodManager;

/// What the sync loop publishes for readers.
#[derive(Debug, Clone, Default)]
pub struct AgentView {
    pub manager: Arc<PodManager>,
    /// Full names of static pods still terminating: their mirrors stay.
    pub terminating: HashSet<String>,
    /// Sources not heard from yet: orphaned mirrors of theirs stay.
    pub unseen_sources: UnseenSources,
}

impl AgentView {
    /// The view before any source has reported: no pods, and every source
    /// in `sources` unseen, so a reader allows no deletion yet. (The
    /// `Default` view has no unseen source and would allow them all: a
    /// mirror manager or container GC reading it before the sync loop's
    /// first publish would delete every mirror pod and dead container.)
    pub fn before_sources<'a>(sources: impl IntoIterator<Item = &'a str>) -> Self {
        AgentView {
            unseen_sources: UnseenSources::new(sources),
            ..AgentView::default()
        }
    }
}

/// Statuses by static pod UID. Each worker writes only its own entry, the
/// same object it keeps as its previous status.
pub type StatusCache = Arc<RwLock<HashMap<String, Arc<PodStatus>>>>;

/// The configured sources that have not reported yet. Each holds back the
/// deletion of its own pods only: a URL that never answered must not keep a
/// pod removed from the manifest directory running.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnseenSources(BTreeSet<String>);

impl UnseenSources {
    pub fn new<'a>(sources: impl IntoIterator<Item = &'a str>) -> Self {
        UnseenSources(sources.into_iter().map(String::from).collect())
    }

    /// Whether a pod nobody wants may be deleted, given the source it says
    /// it came from (its `kubernetes.io/config.source`). A pod that names no
    /// source waits for every source.
    pub fn allows_deletion(&self, source: Option<&str>) -> bool {
        match source {
            _ if self.0.is_empty() => true,
            Some(source) => !self.0.contains(source),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_before_sources_allows_no_deletion() {
        let v = AgentView::before_sources(["file", "http"]);
        for source in [None, Some("file"), Some("http")] {
            assert!(!v.unseen_sources.allows_deletion(source), "{source:?}");
        }
        assert!(v.manager.get_pods().is_empty());
        // The default view is the one a reader must never start from.
        assert!(AgentView::default().unseen_sources.allows_deletion(None));
    }
}
