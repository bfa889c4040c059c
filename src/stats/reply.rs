//! Builds the replies of the stats API from the cached sample and the pod
//! manager, and reads the pod a request names (for the stats and the debug
//! services alike). Pure: the servers only fetch the snapshots and send
//! what these functions return.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PodStatus;

use super::assemble::Sample;
use super::types::{self, Summary};
use crate::api::stats::v1 as pb;
use crate::pod::lookup::{LookupError, PodRef, ResolvedPod};
use crate::pod::manager::PodManager;
use crate::pod::{self, Pod};
use tonic::Status;

pub fn identity(r: &ResolvedPod) -> pb::PodIdentity {
    pb::PodIdentity {
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        full_name: r.full_name.clone(),
        static_uid: r.static_uid.clone(),
        mirror_uid: r.mirror_uid.clone(),
    }
}

/// The pod's stats in `sample`; `None` when the sample has no entry for it
/// (not started yet, or sampled before it started).
pub fn pod_stats(r: &ResolvedPod, sample: &Sample) -> Option<pb::PodStats> {
    let s = sample.pods.get(&r.static_uid)?;
    Some(pod_message(identity(r), sample, s))
}

fn pod_message(identity: pb::PodIdentity, sample: &Sample, s: &types::PodStats) -> pb::PodStats {
    pb::PodStats {
        pod: Some(identity),
        sample_time_unix_nano: sample.time.0,
        start_time_unix_nano: s.start_time.0,
        cpu: s.cpu.as_ref().map(cpu),
        memory: s.memory.as_ref().map(memory),
        network: s.network.as_ref().map(network),
        ephemeral_storage: s.ephemeral_storage.as_ref().map(fs),
        process_count: s.process_stats.as_ref().and_then(|p| p.process_count),
        containers: s.containers.iter().map(container).collect(),
    }
}

/// Every managed pod that the sample has, sorted by full name.
pub fn list_pod_stats(manager: &PodManager, sample: &Sample) -> pb::ListPodStatsResponse {
    let pods = manager
        .get_pods()
        .into_iter()
        .filter_map(|p| pod_stats(&ResolvedPod::of(manager, p), sample))
        .collect();
    pb::ListPodStatsResponse {
        sample_time_unix_nano: sample.time.0,
        pods,
    }
}

/// The Summary API document: every pod crilet sampled, as the kubelet lists
/// them (podRef carries the UID on the sandbox, i.e. the static UID).
pub fn summary(sample: &Sample, only_cpu_and_memory: bool) -> Summary {
    let mut s = Summary {
        node: sample.node.clone(),
        pods: sample.pods.values().cloned().collect(),
    };
    if only_cpu_and_memory {
        s.node.fs = None;
        s.node.runtime = None;
        for p in &mut s.pods {
            p.network = None;
            p.ephemeral_storage = None;
            p.process_stats = None;
            for c in &mut p.containers {
                c.rootfs = None;
                c.logs = None;
            }
        }
    }
    s
}

/// [`summary`] in the gRPC shape, with mirror UIDs from the pod manager.
pub fn summary_message(manager: &PodManager, sample: &Sample, only: bool) -> pb::Summary {
    let s = summary(sample, only);
    let pods = s
        .pods
        .iter()
        .map(|p| {
            let identity = match manager.get_pod_by_uid(&p.pod_ref.uid) {
                Some(pod) => identity(&ResolvedPod::of(manager, pod)),
                None => pb::PodIdentity {
                    name: p.pod_ref.name.clone(),
                    namespace: p.pod_ref.namespace.clone(),
                    full_name: format!("{}_{}", p.pod_ref.name, p.pod_ref.namespace),
                    static_uid: p.pod_ref.uid.clone(),
                    mirror_uid: String::new(),
                },
            };
            pod_message(identity, sample, p)
        })
        .collect();
    pb::Summary {
        sample_time_unix_nano: sample.time.0,
        node: Some(pb::NodeStats {
            node_name: s.node.node_name.clone(),
            start_time_unix_nano: s.node.start_time.0,
            cpu: s.node.cpu.as_ref().map(cpu),
            memory: s.node.memory.as_ref().map(memory),
            fs: s.node.fs.as_ref().map(fs),
            image_fs: s
                .node
                .runtime
                .as_ref()
                .and_then(|r| r.image_fs.as_ref())
                .map(fs),
        }),
        pods,
    }
}

/// The managed static pods with their phases and restart counts, from the
/// workers' statuses; sorted by full name.
pub fn list_pods(
    manager: &PodManager,
    statuses: &HashMap<String, Arc<PodStatus>>,
) -> Vec<pb::PodInfo> {
    manager
        .get_pods()
        .into_iter()
        .map(|p| pod_info(manager, p, statuses))
        .collect()
}

fn pod_info(
    manager: &PodManager,
    p: std::sync::Arc<Pod>,
    statuses: &HashMap<String, Arc<PodStatus>>,
) -> pb::PodInfo {
    let seen = pod::annotation(&p, pod::CONFIG_SEEN_ANNOTATION).and_then(parse_time);
    let r = ResolvedPod::of(manager, p);
    let status = statuses.get(&r.static_uid);
    let containers: Vec<pb::ContainerInfo> = r
        .pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let st = status
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|x| x.name == c.name));
            let state = st.and_then(|s| s.state.as_ref()).map(|s| {
                if s.running.is_some() {
                    "running"
                } else if s.terminated.is_some() {
                    "terminated"
                } else {
                    "waiting"
                }
            });
            pb::ContainerInfo {
                name: c.name.clone(),
                container_id: st.and_then(|s| s.container_id.clone()).unwrap_or_default(),
                image: c.image.clone().unwrap_or_default(),
                state: state.unwrap_or("waiting").to_owned(),
                restart_count: st.map_or(0, |s| u32::try_from(s.restart_count).unwrap_or(0)),
                ready: st.is_some_and(|s| s.ready),
                started: st.is_some_and(|s| s.started == Some(true)),
            }
        })
        .collect();
    pb::PodInfo {
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into()),
        seen_time_unix_nano: seen.unwrap_or(0),
        start_time_unix_nano: status
            .and_then(|s| s.start_time.as_ref())
            .map_or(0, |t| t.0.as_nanosecond() as i64),
        restarts: containers.iter().map(|c| c.restart_count).sum(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True"),
        containers,
        pod: Some(identity(&r)),
    }
}

/// `config.seen` is RFC 3339 with nanoseconds.
fn parse_time(s: &str) -> Option<i64> {
    s.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_nanosecond() as i64)
}

pub fn cpu(c: &types::CpuStats) -> pb::CpuStats {
    pb::CpuStats {
        time_unix_nano: c.time.0,
        usage_nano_cores: c.usage_nano_cores,
        usage_core_nano_seconds: c.usage_core_nano_seconds,
    }
}

pub fn memory(m: &types::MemoryStats) -> pb::MemoryStats {
    pb::MemoryStats {
        time_unix_nano: m.time.0,
        available_bytes: m.available_bytes,
        usage_bytes: m.usage_bytes,
        working_set_bytes: m.working_set_bytes,
        rss_bytes: m.rss_bytes,
        page_faults: m.page_faults,
        major_page_faults: m.major_page_faults,
    }
}

pub fn fs(f: &types::FsStats) -> pb::FsStats {
    pb::FsStats {
        time_unix_nano: f.time.0,
        available_bytes: f.available_bytes,
        capacity_bytes: f.capacity_bytes,
        used_bytes: f.used_bytes,
        inodes_free: f.inodes_free,
        inodes: f.inodes,
        inodes_used: f.inodes_used,
    }
}

fn interface(i: &types::InterfaceStats) -> pb::InterfaceStats {
    pb::InterfaceStats {
        name: i.name.clone(),
        rx_bytes: i.rx_bytes,
        rx_errors: i.rx_errors,
        tx_bytes: i.tx_bytes,
        tx_errors: i.tx_errors,
    }
}

fn network(n: &types::NetworkStats) -> pb::NetworkStats {
    pb::NetworkStats {
        time_unix_nano: n.time.0,
        default_interface: (!n.default_interface.name.is_empty())
            .then(|| interface(&n.default_interface)),
        interfaces: n.interfaces.iter().map(interface).collect(),
    }
}

pub fn container(c: &types::ContainerStats) -> pb::ContainerStats {
    pb::ContainerStats {
        name: c.name.clone(),
        container_id: c.container_id.clone(),
        start_time_unix_nano: c.start_time.0,
        cpu: c.cpu.as_ref().map(cpu),
        memory: c.memory.as_ref().map(memory),
        rootfs: c.rootfs.as_ref().map(fs),
        logs: c.logs.as_ref().map(fs),
    }
}

/// The domain form of a request's pod ref; INVALID_ARGUMENT when malformed.
pub fn pod_ref(r: Option<pb::PodRef>) -> Result<PodRef, Status> {
    match r.and_then(|r| r.r#ref) {
        None => Err(Status::invalid_argument(
            "a pod ref is required: a uid, or namespace and name",
        )),
        Some(pb::pod_ref::Ref::Uid(uid)) if uid.trim().is_empty() => {
            Err(Status::invalid_argument("pod ref: the uid is empty"))
        }
        Some(pb::pod_ref::Ref::Uid(uid)) => Ok(PodRef::Uid(uid)),
        Some(pb::pod_ref::Ref::Name(n)) if n.name.trim().is_empty() => {
            Err(Status::invalid_argument("pod ref: the name is empty"))
        }
        Some(pb::pod_ref::Ref::Name(n)) => Ok(PodRef::Name {
            namespace: if n.namespace.is_empty() {
                "default".into()
            } else {
                n.namespace
            },
            name: n.name,
        }),
    }
}

/// NOT_FOUND or INVALID_ARGUMENT, with the lookup's words.
pub fn lookup_status(e: LookupError) -> Status {
    match e {
        LookupError::NotFound(_) => Status::not_found(e.to_string()),
        LookupError::Invalid(_) => Status::invalid_argument(e.to_string()),
    }
}
