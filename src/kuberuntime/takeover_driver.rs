//! The takeover's reads: every pod the runtime runs, against the static pods
//! of the manifests, judged by `kuberuntime::takeover`. `crilet takeover
//! --dry-run` prints the findings; `crilet run` keeps what they keep.
//!
//! Invariant: read-only; it never changes the runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::Pod;

use super::mapping::{self, NodeContext};
use super::takeover::{
    AdoptedUids, ExpectedPod, FoundContainer, FoundPod, Verdict, judge, started_by_kubelet,
};
use crate::cri::types::{ContainerFilter, PodSandboxFilter, PodSandboxState};
use crate::cri::{Result, Runtime};
use crate::pod::{self, CONFIG_SOURCE_ANNOTATION};
use crate::volume::etc_hosts::mounts_hosts_file;

/// What crilet does with one static pod of the manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// crilet already runs it under its own UID.
    Own,
    /// Nothing runs it: crilet starts it.
    Start,
    /// The kubelet runs it as the manifest says: crilet keeps it, under the
    /// kubelet's UID, with these containers (name, ID).
    Keep {
        uid: String,
        sandbox_id: String,
        containers: Vec<(String, String)>,
    },
    /// The kubelet runs another version of it: crilet stops that and starts
    /// its own.
    Replace {
        uid: String,
        sandbox_id: String,
        reason: String,
    },
    /// crilet cannot say what it would send (the manifest maps to no CRI
    /// config); it starts it as usual and reports the error there.
    Unjudged(String),
}

/// One static pod's finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `namespace/name`.
    pub pod: String,
    /// The UID crilet computes for the manifest.
    pub uid: String,
    pub outcome: Outcome,
}

/// A ready sandbox no manifest names: the orphan cleanup stops it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stranger {
    pub pod: String,
    pub uid: String,
    pub sandbox_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    pub findings: Vec<Finding>,
    pub strangers: Vec<Stranger>,
}

impl Survey {
    /// The UIDs to keep: crilet's UID for a manifest → the kubelet's.
    pub fn adopted(&self) -> AdoptedUids {
        AdoptedUids(
            (self.findings.iter())
                .filter_map(|f| match &f.outcome {
                    Outcome::Keep { uid, .. } => Some((f.uid.clone(), uid.clone())),
                    _ => None,
                })
                .collect(),
        )
    }
}

impl fmt::Display for Survey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            let pod = &finding.pod;
            match &finding.outcome {
                Outcome::Own => writeln!(f, "own      {pod}: crilet runs it already")?,
                Outcome::Start => writeln!(f, "start    {pod}: nothing runs it")?,
                Outcome::Keep {
                    uid,
                    sandbox_id,
                    containers,
                } => {
                    let ids: Vec<String> = (containers.iter())
                        .map(|(name, id)| format!("{name} {}", short(id)))
                        .collect();
                    writeln!(
                        f,
                        "keep     {pod}: uid {uid}, sandbox {}, containers [{}]",
                        short(sandbox_id),
                        ids.join(", ")
                    )?
                }
                Outcome::Replace {
                    uid,
                    sandbox_id,
                    reason,
                } => writeln!(
                    f,
                    "replace  {pod}: uid {uid}, sandbox {}: {reason}",
                    short(sandbox_id)
                )?,
                Outcome::Unjudged(error) => {
                    writeln!(f, "start    {pod}: cannot be compared: {error}")?
                }
            }
        }
        for s in &self.strangers {
            writeln!(
                f,
                "stop     {}: uid {}, sandbox {}: no manifest names it",
                s.pod,
                s.uid,
                short(&s.sandbox_id)
            )?;
        }
        Ok(())
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(13)]
}

/// Every static pod of `pods` (as the sources made them, with crilet's UIDs)
/// against what the runtime runs.
pub async fn survey(rt: &dyn Runtime, node: &NodeContext, pods: &[Pod]) -> Result<Survey> {
    let ready = PodSandboxFilter {
        state: Some(PodSandboxState::Ready),
        ..Default::default()
    };
    let all = ContainerFilter::default();
    let (sandboxes, containers) =
        tokio::try_join!(rt.list_pod_sandbox(&ready), rt.list_containers(&all))?;
    let own: BTreeSet<&str> = pods.iter().map(pod::uid).collect();
    let mut by_name: BTreeMap<(String, String), Vec<_>> = BTreeMap::new();
    for s in &sandboxes {
        let key = (s.metadata.namespace.clone(), s.metadata.name.clone());
        by_name.entry(key).or_default().push(s);
    }
    let mut out = Survey::default();
    let mut named = BTreeSet::new();
    for p in pods {
        let key = (pod::namespace(p).to_owned(), pod::name(p).to_owned());
        named.insert(key.clone());
        let uid = pod::uid(p).to_owned();
        let found = by_name.get(&key).map(Vec::as_slice).unwrap_or_default();
        let outcome = if found.iter().any(|s| s.metadata.uid == uid) {
            Outcome::Own
        } else {
            // The newest sandbox of another agent's static pod of this name.
            let theirs = (found.iter())
                .filter(|s| !own.contains(s.metadata.uid.as_str()))
                .filter(|s| s.annotations.contains_key(CONFIG_SOURCE_ANNOTATION))
                .max_by_key(|s| (s.metadata.attempt, s.created_at));
            match theirs {
                None => Outcome::Start,
                Some(sandbox) => {
                    let ids = containers.iter().filter(|c| c.pod_sandbox_id == sandbox.id);
                    let ids: Vec<String> = ids.map(|c| c.id.clone()).collect();
                    judge_one(rt, node, p, &sandbox.id, &ids).await?
                }
            }
        };
        out.findings.push(Finding {
            pod: format!("{}/{}", key.0, key.1),
            uid,
            outcome,
        });
    }
    for ((namespace, name), list) in &by_name {
        if named.contains(&(namespace.clone(), name.clone())) {
            continue;
        }
        for s in list
            .iter()
            .filter(|s| !own.contains(s.metadata.uid.as_str()))
        {
            out.strangers.push(Stranger {
                pod: format!("{namespace}/{name}"),
                uid: s.metadata.uid.clone(),
                sandbox_id: s.id.clone(),
            });
        }
    }
    Ok(out)
}

async fn judge_one(
    rt: &dyn Runtime,
    node: &NodeContext,
    manifest: &Pod,
    sandbox_id: &str,
    container_ids: &[String],
) -> Result<Outcome> {
    let sandbox = rt.pod_sandbox_status(sandbox_id).await?;
    let uid = sandbox.metadata.uid.clone();
    let mut found = FoundPod {
        sandbox,
        containers: Vec::new(),
    };
    for id in container_ids {
        let (status, process) = match rt.container_status_verbose(id).await {
            Ok(s) => s,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        found.containers.push(FoundContainer { status, process });
    }
    let replace = |reason: String| Outcome::Replace {
        uid: uid.clone(),
        sandbox_id: sandbox_id.to_owned(),
        reason,
    };
    if !started_by_kubelet(&found) {
        return Ok(replace(
            "not started by the kubelet (an older version of this pod, or no container to tell by)"
                .into(),
        ));
    }
    let expected = match expected_pod(node, manifest, &found) {
        Ok(e) => e,
        Err(e) => return Ok(Outcome::Unjudged(e.to_string())),
    };
    Ok(match judge(&expected, &found) {
        Verdict::Keep => {
            let mut containers: Vec<(String, String)> = (found.containers.iter())
                .map(|c| (c.status.metadata.name.clone(), c.status.id.clone()))
                .collect();
            containers.sort();
            Outcome::Keep {
                uid,
                sandbox_id: sandbox_id.to_owned(),
                containers,
            }
        }
        Verdict::Replace(reason) => replace(reason),
    })
}

/// What crilet would send for `manifest` under the found pod's UID, with
/// its IP, and no service variables (the runtime's environment may hold
/// more than crilet's; see `takeover`).
fn expected_pod(
    node: &NodeContext,
    manifest: &Pod,
    found: &FoundPod,
) -> std::result::Result<ExpectedPod, mapping::MappingError> {
    let mut pod = manifest.clone();
    let uid = found.sandbox.metadata.uid.clone();
    AdoptedUids(BTreeMap::from([(
        pod::uid(manifest).to_owned(),
        uid.clone(),
    )]))
    .apply(&mut pod);
    let sandbox = mapping::sandbox_config(node, &pod, found.sandbox.metadata.attempt)?;
    let ip = found.sandbox.ip.clone();
    let mut pod_ips: Vec<String> = Vec::new();
    pod_ips.extend(std::iter::once(ip.clone()).filter(|i| !i.is_empty()));
    pod_ips.extend(found.sandbox.additional_ips.iter().cloned());
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let hosts_file = mapping::etc_hosts_file(node, &uid);
    let mut containers = Vec::new();
    for c in mapping::all_containers(&pod) {
        let newest = (found.containers.iter())
            .filter(|f| f.status.metadata.name == c.name)
            .max_by_key(|f| (f.status.metadata.attempt, f.status.created_at));
        let (attempt, restart_count) = newest.map_or((0, 0), |f| {
            let count = f
                .status
                .annotations
                .get(super::labels::CONTAINER_RESTART_COUNT_ANNOTATION);
            (
                f.status.metadata.attempt,
                count.and_then(|c| c.parse().ok()).unwrap_or(0),
            )
        });
        let etc_hosts =
            mounts_hosts_file(host_network, &pod_ips, c).then_some(hosts_file.as_path());
        let start = mapping::ContainerStart {
            restart_count,
            attempt,
            pod_ip: &ip,
            image_ref: "",
            image_user: None,
            etc_hosts,
            service_env: &[],
        };
        containers.push(mapping::container_config(node, &pod, c, &start)?);
    }
    Ok(ExpectedPod {
        sandbox,
        containers,
    })
}

#[cfg(test)]
#[path = "takeover_driver_tests.rs"]
pub(crate) mod tests;
