//! The sync loop's half of taking a node over from the kubelet: the first
//! set of each source is surveyed against the runtime
//! (`kuberuntime::takeover_driver`) before any worker starts, and every
//! set's static pods that crilet keeps are given the UID they run under
//! (`kuberuntime::takeover::AdoptedUids`). The workers, the mirror manager
//! and the status then carry on the kubelet's pods as their own.
//!
//! The UIDs kept are written to `<root-dir>/adopted-uids.json`: the
//! evidence that the kubelet started a pod (its termination-message files)
//! goes with its last container, and a kept pod stays kept for as long as
//! its manifest is unchanged, across crilet's restarts. Entries are few
//! (the pods of one takeover) and stay: one whose manifest was edited never
//! applies again, as the edited manifest has another crilet UID.
//!
//! Invariant: a static pod's UID is replaced only by the UID of a pod the
//! survey kept for that very manifest (the same crilet UID), and only
//! before the merge sees the pod, so every part of crilet sees one UID.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::file::SourceSet;
use crate::config::merge::SourcePod;
use crate::cri::Runtime;
use crate::kuberuntime::mapping::NodeContext;
use crate::kuberuntime::takeover::AdoptedUids;
use crate::kuberuntime::takeover_driver::{Outcome, survey};
use crate::pod;

/// The file under `--root-dir` that keeps the UIDs crilet took over.
pub const ADOPTED_UIDS_FILE: &str = "adopted-uids.json";

pub(super) struct Adoption {
    table: AdoptedUids,
    surveyed: HashSet<&'static str>,
    file: PathBuf,
}

impl Adoption {
    /// The table a previous crilet wrote, if any (an unreadable one is
    /// reported and ignored: its pods are judged again).
    pub fn load(root_dir: &Path) -> Self {
        let file = root_dir.join(ADOPTED_UIDS_FILE);
        let table = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %file.display(), error = %e, "unreadable table of the pods taken over from the kubelet; judging them again");
                AdoptedUids::default()
            }),
            Err(_) => AdoptedUids::default(),
        };
        Adoption {
            table,
            surveyed: HashSet::new(),
            file,
        }
    }

    /// Surveys a source's first set, then renames the set's kept pods.
    pub async fn on_set(&mut self, rt: &dyn Runtime, node: &NodeContext, set: &mut SourceSet) {
        // A survey that could not read the runtime is tried again with the
        // source's next set.
        if !self.surveyed.contains(set.source) && self.survey(rt, node, set).await {
            self.surveyed.insert(set.source);
        }
        // Only a kept pod is copied to be renamed; the rest pass as they are.
        for p in &mut set.pods {
            if self.table.0.contains_key(pod::uid(&p.pod)) {
                let mut renamed = (*p.pod).clone();
                self.table.apply(&mut renamed);
                *p = SourcePod {
                    origin: p.origin.clone(),
                    pod: Arc::new(renamed),
                };
            }
        }
    }

    /// False when the runtime could not be read.
    async fn survey(&mut self, rt: &dyn Runtime, node: &NodeContext, set: &SourceSet) -> bool {
        let pods: Vec<_> = (set.pods.iter())
            .map(|p| (*p.pod).clone())
            .filter(|p| !self.table.0.contains_key(pod::uid(p)))
            .collect();
        let found = match survey(rt, node, &pods).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(source = set.source, error = %e, "could not compare the runtime's pods with the manifests; trying again with the source's next read");
                return false;
            }
        };
        for f in &found.findings {
            match &f.outcome {
                Outcome::Keep {
                    uid, containers, ..
                } => {
                    tracing::info!(pod = %f.pod, uid, containers = containers.len(), "taking over the pod the kubelet runs: it is as the manifest says")
                }
                Outcome::Replace { uid, reason, .. } => {
                    tracing::info!(pod = %f.pod, uid, reason, "replacing the pod another agent runs")
                }
                Outcome::Unjudged(error) => {
                    tracing::warn!(pod = %f.pod, error, "cannot compare the pod with what runs")
                }
                Outcome::Own | Outcome::Start => {}
            }
        }
        let adopted = found.adopted();
        if !adopted.0.is_empty() {
            self.table.0.extend(adopted.0);
            self.save();
        }
        true
    }

    fn save(&self) {
        let result = serde_json::to_vec_pretty(&self.table)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let tmp = self.file.with_extension("json.tmp");
                std::fs::write(&tmp, bytes)?;
                std::fs::rename(&tmp, &self.file)
            });
        if let Err(e) = result {
            tracing::warn!(file = %self.file.display(), error = %e, "could not write the table of the pods taken over from the kubelet");
        }
    }
}
