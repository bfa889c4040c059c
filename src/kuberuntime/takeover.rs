//! Taking a node over from the kubelet: which pods another agent left
//! running crilet keeps, and under which UID.
//!
//! The kubelet's static pod UID hashes Go's in-memory form of its internal
//! Pod, which crilet cannot reproduce, so the same manifest has another UID
//! under each agent. A pod the runtime runs under a UID no manifest maps to,
//! with the name of a manifest's pod, is *another's*: crilet judges it by
//! what the runtime reports against what crilet would send for that
//! manifest under that UID (the sandbox's labels, annotations and
//! namespaces; each container's labels, annotations (the container hash,
//! the kubelet's, among them), mounts, and, where the runtime reports its
//! OCI process, command and environment). When everything matches, crilet
//! keeps the pod: the static pod takes the running pod's UID
//! ([`AdoptedUids`]), and the containers, the mirror pod and the status are
//! carried on under it. Otherwise the pod is replaced, as the kubelet
//! replaces a pod whose manifest changed, and the reason names the field.
//!
//! Only a pod the kubelet started is judged at all ([`started_by_kubelet`]):
//! a pod crilet itself ran under an older version of the manifest is a
//! pod whose manifest changed, and is replaced as before.
//!
//! Invariant: pure. The driver (`takeover_driver`) reads the runtime and
//! the manifests; nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use super::labels::{
    CONTAINER_NAME_LABEL, CONTAINER_RESTART_COUNT_ANNOTATION, INFRA_CONTAINER_NAME, POD_UID_LABEL,
    TERMINATION_MESSAGE_PATH_ANNOTATION,
};
use crate::cri::Process;
use crate::cri::types::{
    ContainerConfig, ContainerState, ContainerStatus, Labels, Mount, NamespaceOptions,
    PodSandboxConfig, PodSandboxState, PodSandboxStatus,
};
use crate::pod::{CONFIG_HASH_ANNOTATION, CONFIG_SEEN_ANNOTATION};

/// Keys that differ between two agents running the same manifest: the
/// UID, when the pod was seen, and the restart count.
const PER_AGENT_KEYS: [&str; 4] = [
    POD_UID_LABEL,
    CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONTAINER_RESTART_COUNT_ANNOTATION,
];

/// Prefixes of the keys runtimes add themselves.
const RUNTIME_KEY_PREFIXES: [&str; 2] = ["io.cri-containerd.", "io.kubernetes.cri-o."];

/// One container of a running pod, as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundContainer {
    pub status: ContainerStatus,
    /// The OCI process (`args`, `env` as `K=V`) from the runtime's verbose
    /// status; `None` when the runtime does not report it.
    pub process: Option<Process>,
}

/// A pod the runtime runs, as it reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPod {
    pub sandbox: PodSandboxStatus,
    pub containers: Vec<FoundContainer>,
}

/// What crilet would send for the manifest, computed under the found pod's
/// UID.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedPod {
    pub sandbox: PodSandboxConfig,
    pub containers: Vec<ContainerConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Same as the manifest: crilet keeps it under its UID.
    Keep,
    /// Differs: crilet replaces it; why, naming the first field found.
    Replace(String),
}

/// Whether the pod was started by the kubelet: a container's
/// termination-message file is named as the kubelet names it (8 random hex
/// digits; crilet names it by the attempt, in decimal).
pub fn started_by_kubelet(found: &FoundPod) -> bool {
    found.containers.iter().any(|c| {
        let path = c
            .status
            .annotations
            .get(TERMINATION_MESSAGE_PATH_ANNOTATION);
        c.status
            .mounts
            .iter()
            .filter(|m| Some(&m.container_path) == path)
            .any(|m| {
                let file = m.host_path.rsplit('/').next().unwrap_or_default();
                file.len() == 8 && file.bytes().all(|b| b.is_ascii_hexdigit())
            })
    })
}

/// Judges a running pod against what crilet would send for the manifest.
pub fn judge(expected: &ExpectedPod, found: &FoundPod) -> Verdict {
    match first_difference(expected, found) {
        None => Verdict::Keep,
        Some(why) => Verdict::Replace(why),
    }
}

fn first_difference(expected: &ExpectedPod, found: &FoundPod) -> Option<String> {
    let sandbox = &found.sandbox;
    if sandbox.state != PodSandboxState::Ready {
        return Some("its sandbox is not ready".into());
    }
    // CRI-O names a sandbox's infra container on its labels.
    let mut labels = sandbox.labels.clone();
    if labels.get(CONTAINER_NAME_LABEL).map(String::as_str) == Some(INFRA_CONTAINER_NAME) {
        labels.remove(CONTAINER_NAME_LABEL);
    }
    if let Some(d) = map_difference(&expected.sandbox.labels, &labels) {
        return Some(format!("sandbox label {d}"));
    }
    if let Some(d) = map_difference(&expected.sandbox.annotations, &sandbox.annotations) {
        return Some(format!("sandbox annotation {d}"));
    }
    let want = &expected.sandbox.security.namespace_options;
    if !same_namespaces(want, &sandbox.namespace_options) {
        return Some(format!(
            "sandbox namespaces: {:?} on the node, {:?} in the manifest",
            sandbox.namespace_options, want
        ));
    }
    let names: BTreeSet<&str> = expected
        .containers
        .iter()
        .map(|c| c.metadata.name.as_str())
        .collect();
    if let Some(stranger) = found
        .containers
        .iter()
        .find(|c| !names.contains(c.status.metadata.name.as_str()))
    {
        return Some(format!(
            "container {} is not in the manifest",
            stranger.status.metadata.name
        ));
    }
    for want in &expected.containers {
        let newest = found
            .containers
            .iter()
            .filter(|c| c.status.metadata.name == want.metadata.name)
            .max_by_key(|c| (c.status.metadata.attempt, c.status.created_at));
        // None: never created, or removed; crilet starts it as usual.
        if let Some(c) = newest {
            if let Some(d) = container_difference(want, c) {
                return Some(format!("container {}: {d}", want.metadata.name));
            }
        }
    }
    None
}

fn container_difference(want: &ContainerConfig, found: &FoundContainer) -> Option<String> {
    let status = &found.status;
    if let Some(d) = map_difference(&want.labels, &status.labels) {
        return Some(format!("label {d}"));
    }
    if let Some(d) = map_difference(&want.annotations, &status.annotations) {
        return Some(format!("annotation {d}"));
    }
    let termination = want.annotations.get(TERMINATION_MESSAGE_PATH_ANNOTATION);
    let mounts = |list: &[Mount]| -> BTreeSet<(String, String, bool)> {
        list.iter()
            .map(|m| {
                // Each agent names the termination-message file its own way.
                let host = match Some(&m.container_path) == termination {
                    true => String::new(),
                    false => m.host_path.clone(),
                };
                (m.container_path.clone(), host, m.readonly)
            })
            .collect()
    };
    let (want_mounts, found_mounts) = (mounts(&want.mounts), mounts(&status.mounts));
    if want_mounts != found_mounts {
        let only = |a: &BTreeSet<_>, b: &BTreeSet<_>| {
            a.difference(b)
                .map(|(path, host, ro): &(String, String, bool)| {
                    format!("{path} from {host:?}{}", if *ro { " (ro)" } else { "" })
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Some(format!(
            "mounts: on the node only [{}], in the manifest only [{}]",
            only(&found_mounts, &want_mounts),
            only(&want_mounts, &found_mounts)
        ));
    }
    let Some((args, env)) = &found.process else {
        return None;
    };
    // The runtime's environment starts with the image's and may hold more
    // (the service variables of an agent with an API server); every entry
    // the manifest gives must be there, with its value.
    let env: BTreeMap<&str, &str> = env.iter().filter_map(|e| e.split_once('=')).collect();
    for (key, value) in &want.envs {
        match env.get(key.as_str()) {
            Some(v) if v == value => {}
            Some(v) => {
                return Some(format!(
                    "env {key}: {v:?} on the node, {value:?} in the manifest"
                ));
            }
            None => {
                return Some(format!(
                    "env {key}: absent on the node, {value:?} in the manifest"
                ));
            }
        }
    }
    // The process is the command and its args; without a command, the
    // image's entrypoint and the args (or the image's cmd).
    let same = match (want.command.is_empty(), want.args.is_empty()) {
        (false, _) => want.command.iter().chain(&want.args).eq(args.iter()),
        (true, false) => args.ends_with(&want.args),
        (true, true) => true,
    };
    if !same && status.state != ContainerState::Unknown {
        let want_args: Vec<&String> = want.command.iter().chain(&want.args).collect();
        return Some(format!(
            "command: {args:?} on the node, {want_args:?} in the manifest"
        ));
    }
    None
}

fn same_namespaces(a: &NamespaceOptions, b: &NamespaceOptions) -> bool {
    (a.network, a.pid, a.ipc) == (b.network, b.pid, b.ipc)
}

/// The first key whose value differs, skipping the per-agent keys and
/// those the runtime adds.
fn map_difference(want: &Labels, found: &Labels) -> Option<String> {
    let keys: BTreeSet<&String> = want.keys().chain(found.keys()).collect();
    keys.into_iter()
        .filter(|k| !PER_AGENT_KEYS.contains(&k.as_str()))
        .filter(|k| !RUNTIME_KEY_PREFIXES.iter().any(|p| k.starts_with(p)))
        .find_map(|k| match (found.get(k), want.get(k)) {
            (a, b) if a == b => None,
            (a, b) => Some(format!(
                "{k}: {} on the node, {} in the manifest",
                shown(a),
                shown(b)
            )),
        })
}

fn shown(value: Option<&String>) -> String {
    value.map_or("absent".into(), |v| format!("{v:?}"))
}

/// The UIDs crilet took over: the UID crilet computes for a manifest →
/// the UID of the running pod it kept for it. An entry holds while the
/// manifest is unchanged (an edited manifest has another UID, so no entry).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdoptedUids(pub BTreeMap<String, String>);

impl AdoptedUids {
    /// Gives a static pod the UID of the running pod crilet kept for it:
    /// `metadata.uid` and `kubernetes.io/config.hash` (the mirror pod's
    /// `config.mirror` is that hash).
    pub fn apply(&self, pod: &mut Pod) -> bool {
        let Some(adopted) = pod.metadata.uid.as_ref().and_then(|u| self.0.get(u)) else {
            return false;
        };
        let adopted = adopted.clone();
        let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(CONFIG_HASH_ANNOTATION.into(), adopted.clone());
        pod.metadata.uid = Some(adopted);
        true
    }
}

#[cfg(test)]
#[path = "takeover_tests.rs"]
mod tests;
