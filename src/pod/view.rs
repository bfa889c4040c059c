//! What the agent publishes for its readers (the mirror manager, the stats
//! servers, the container GC driver): the pod manager with what decides
//! deletions, and the pods' statuses.
//!
//! Invariant: the sync loop alone writes the [`AgentView`] (through a
//! watch channel of snapshots) and each pod worker writes only its own
//! entry of the [`StatusCache`]; readers never hold a lock across `.await`.
//! The types live on the ground floor so that every layer may read them.

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

/// Statuses by static pod UID. Each worker writes only its own entry.
pub type StatusCache = Arc<RwLock<HashMap<String, PodStatus>>>;

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
