//! Turns one round of raw runtime and host readings into a [`Sample`]: the
//! node's and every pod's stats in the Summary shape, keyed by static UID.
//!
//! Pure: no I/O, no clock. `usageNanoCores` comes from crilet's own previous
//! sample (the cumulative CPU time of the same sandbox, container or node,
//! and when it was read), never from a value the runtime derived for some
//! other client's calls.

use std::collections::{BTreeMap, HashMap};

use super::types::*;
use crate::cri::{self, Container, ContainerState, FilesystemUsage, PodSandbox, PodSandboxState};
use crate::images::disk::FsStats as FsCapacity;
use crate::kuberuntime::labels::{ContainerLabels, PodSandboxLabels};

/// A cumulative CPU reading: (when, core-nanoseconds so far).
pub type CpuReading = (i64, u64);

/// Rate between two cumulative readings, in nanocores. `None` on the first
/// reading, when time did not advance, or when the counter went backwards
/// (a restarted container or a reused key).
pub fn usage_nano_cores(previous: Option<CpuReading>, current: CpuReading) -> Option<u64> {
    let (t0, c0) = previous?;
    let (t1, c1) = current;
    if t1 <= t0 || c1 < c0 {
        return None;
    }
    let rate = u128::from(c1 - c0) * 1_000_000_000 / (t1 - t0) as u128;
    Some(u64::try_from(rate).unwrap_or(u64::MAX))
}

/// Host readings of one round (from /proc and statvfs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeReadings {
    pub node_name: String,
    /// Boot time.
    pub start_time: Time,
    pub cpu_usage_core_nano_seconds: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub memory_inactive_file_bytes: Option<u64>,
    pub memory_anon_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    /// The filesystem of crilet's root directory.
    pub root_fs: Option<FsCapacity>,
}

/// Everything one round read; the collector fills it, [`assemble`] reads it.
#[derive(Debug, Clone, Default)]
pub struct RawRound {
    pub time: Time,
    pub node: NodeReadings,
    pub sandboxes: Vec<PodSandbox>,
    pub containers: Vec<Container>,
    /// `None` when the runtime does not implement ListPodSandboxStats: pod
    /// CPU and memory are then the sums over the pod's containers.
    pub sandbox_stats: Option<Vec<cri::PodSandboxStats>>,
    pub container_stats: Vec<cri::ContainerStats>,
    /// Bytes and files under each container's log directory, by container id.
    pub log_usage: HashMap<String, (u64, u64)>,
    /// The filesystem holding the log directories.
    pub log_fs: Option<FsCapacity>,
    /// ImageFsInfo's image filesystem, and statvfs of its mountpoint.
    pub image_fs_usage: Option<FilesystemUsage>,
    pub image_fs: Option<FsCapacity>,
}

/// One assembled sample; kept whole in the cache, replaced every period.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub time: Time,
    pub node: NodeStats,
    /// By static pod UID.
    pub pods: BTreeMap<String, PodStats>,
    /// Cumulative CPU readings by sandbox id, container id or "node", for
    /// the next round's rates.
    pub cpu_readings: HashMap<String, CpuReading>,
    /// crilet's containers by state (`created`, `running`, `exited`,
    /// `unknown`), for `kubelet_running_containers`.
    pub container_states: BTreeMap<String, u64>,
}

const NODE_KEY: &str = "node";

/// Assembles a sample from `raw`, taking CPU rates against `previous`.
pub fn assemble(raw: &RawRound, previous: Option<&Sample>) -> Sample {
    let mut readings = HashMap::new();
    let mut rate = |key: &str, reading: Option<CpuReading>| -> Option<u64> {
        let reading = reading?;
        readings.insert(key.to_owned(), reading);
        usage_nano_cores(
            previous.and_then(|p| p.cpu_readings.get(key).copied()),
            reading,
        )
    };

    let node = node_stats(raw, &mut rate);

    // The pod's current sandbox: the newest ready one of each static UID.
    let mut current: HashMap<String, (&PodSandbox, PodSandboxLabels)> = HashMap::new();
    for sb in raw
        .sandboxes
        .iter()
        .filter(|s| s.state == PodSandboxState::Ready)
    {
        let Ok(labels) = PodSandboxLabels::from_labels(&sb.labels, &sb.annotations) else {
            continue;
        };
        match current.get(&labels.pod_uid) {
            Some((old, _)) if old.created_at >= sb.created_at => {}
            _ => {
                current.insert(labels.pod_uid.clone(), (sb, labels));
            }
        }
    }
    let sandbox_stats: HashMap<&str, &cri::PodSandboxStats> = raw
        .sandbox_stats
        .iter()
        .flatten()
        .map(|s| (s.id.as_str(), s))
        .collect();
    let container_stats: HashMap<&str, &cri::ContainerStats> = raw
        .container_stats
        .iter()
        .map(|s| (s.id.as_str(), s))
        .collect();

    let mut pods = BTreeMap::new();
    for (uid, (sandbox, labels)) in &current {
        let mut containers: Vec<ContainerStats> = raw
            .containers
            .iter()
            .filter(|c| c.pod_sandbox_id == sandbox.id && c.state == ContainerState::Running)
            .filter_map(|c| {
                let cl = ContainerLabels::from_labels(&c.labels, &c.annotations).ok()?;
                let stats = container_stats.get(c.id.as_str()).copied();
                Some(container(raw, c, &cl, stats, &mut rate))
            })
            .collect();
        containers.sort_by(|a, b| a.name.cmp(&b.name));

        // Field by field, as the kubelet's CRI stats provider: the pod's
        // own reading where the runtime gives one (the kubelet's is the pod
        // cgroup's), else the sum of its containers'. CRI-O's
        // PodSandboxStats come without CPU and memory, so a whole missing
        // PodSandboxStats is not the only case.
        let sb_stats = sandbox_stats.get(sandbox.id.as_str()).copied();
        let cpu = sb_stats.and_then(|s| s.cpu.as_ref()).map(|c| {
            let t = stamp(c.timestamp, raw.time);
            CpuStats {
                time: t,
                usage_nano_cores: rate(&sandbox.id, c.usage_core_nano_seconds.map(|v| (t.0, v))),
                usage_core_nano_seconds: c.usage_core_nano_seconds,
            }
        });
        let cpu = cpu.or_else(|| sum_cpu(&containers));
        let memory = (sb_stats.and_then(|s| s.memory.as_ref()))
            .map(|m| memory_stats(m, raw.time))
            .or_else(|| sum_memory(&containers));
        let network = sb_stats
            .and_then(|s| s.network.as_ref())
            .map(|n| network_stats(n, raw.time));
        let ephemeral_storage = ephemeral(&containers, raw);
        pods.insert(
            uid.clone(),
            PodStats {
                pod_ref: PodReference {
                    name: labels.pod_name.clone(),
                    namespace: labels.pod_namespace.clone(),
                    uid: uid.clone(),
                },
                start_time: Time(sandbox.created_at),
                containers,
                cpu,
                memory,
                network,
                ephemeral_storage,
                process_stats: sb_stats
                    .and_then(|s| s.process_count)
                    .map(|n| ProcessStats {
                        process_count: Some(n),
                    }),
            },
        );
    }

    let mut container_states = BTreeMap::new();
    for c in &raw.containers {
        if ContainerLabels::from_labels(&c.labels, &c.annotations).is_ok() {
            let state = match c.state {
                ContainerState::Created => "created",
                ContainerState::Running => "running",
                ContainerState::Exited => "exited",
                ContainerState::Unknown => "unknown",
            };
            *container_states.entry(state.to_owned()).or_insert(0) += 1;
        }
    }
    Sample {
        time: raw.time,
        node,
        pods,
        cpu_readings: readings,
        container_states,
    }
}

/// The runtime's timestamp when it gave one, else the round's.
fn stamp(ts: i64, round: Time) -> Time {
    if ts > 0 { Time(ts) } else { round }
}

fn node_stats(
    raw: &RawRound,
    rate: &mut impl FnMut(&str, Option<CpuReading>) -> Option<u64>,
) -> NodeStats {
    let n = &raw.node;
    let t = raw.time;
    let cpu = n.cpu_usage_core_nano_seconds.map(|c| CpuStats {
        time: t,
        usage_nano_cores: rate(NODE_KEY, Some((t.0, c))),
        usage_core_nano_seconds: Some(c),
    });
    // The kubelet's node memory: usage = total - free, working set = usage
    // minus inactive file pages, available = total - working set.
    let memory = n.memory_total_bytes.map(|total| {
        let usage = n.memory_free_bytes.map(|f| total.saturating_sub(f));
        let working_set =
            usage.map(|u| u.saturating_sub(n.memory_inactive_file_bytes.unwrap_or(0)));
        MemoryStats {
            time: t,
            available_bytes: working_set.map(|w| total.saturating_sub(w)),
            usage_bytes: usage,
            working_set_bytes: working_set,
            rss_bytes: n.memory_anon_bytes,
            page_faults: n.page_faults,
            major_page_faults: n.major_page_faults,
        }
    });
    let fs = n.root_fs.map(|c| fs_stats(t, &c, None));
    let image_fs = raw.image_fs.map(|c| {
        let usage = raw.image_fs_usage.as_ref();
        FsStats {
            used_bytes: usage.and_then(|u| u.used_bytes),
            inodes_used: usage.and_then(|u| u.inodes_used),
            ..fs_stats(t, &c, None)
        }
    });
    NodeStats {
        node_name: n.node_name.clone(),
        start_time: n.start_time,
        cpu,
        memory,
        fs,
        runtime: Some(RuntimeStats { image_fs }),
    }
}

/// Capacity figures, plus used = capacity - free when no better figure.
fn fs_stats(time: Time, c: &FsCapacity, used: Option<(u64, u64)>) -> FsStats {
    let (used_bytes, inodes_used) = used.unwrap_or((
        c.capacity_bytes.saturating_sub(c.available_bytes),
        c.inodes.saturating_sub(c.inodes_free),
    ));
    FsStats {
        time,
        available_bytes: Some(c.available_bytes),
        capacity_bytes: Some(c.capacity_bytes),
        used_bytes: Some(used_bytes),
        inodes_free: Some(c.inodes_free),
        inodes: Some(c.inodes),
        inodes_used: Some(inodes_used),
    }
}

fn container(
    raw: &RawRound,
    c: &Container,
    labels: &ContainerLabels,
    stats: Option<&cri::ContainerStats>,
    rate: &mut impl FnMut(&str, Option<CpuReading>) -> Option<u64>,
) -> ContainerStats {
    let t = raw.time;
    let cpu = stats.and_then(|s| s.cpu.as_ref()).map(|cpu| {
        let ts = stamp(cpu.timestamp, t);
        CpuStats {
            time: ts,
            usage_nano_cores: rate(&c.id, cpu.usage_core_nano_seconds.map(|v| (ts.0, v))),
            usage_core_nano_seconds: cpu.usage_core_nano_seconds,
        }
    });
    let memory = stats
        .and_then(|s| s.memory.as_ref())
        .map(|m| memory_stats(m, t));
    let rootfs = stats.and_then(|s| s.writable_layer.as_ref()).map(|w| {
        let base = raw
            .image_fs
            .map(|cap| fs_stats(stamp(w.timestamp, t), &cap, None));
        FsStats {
            time: stamp(w.timestamp, t),
            used_bytes: w.used_bytes,
            inodes_used: w.inodes_used,
            ..base.unwrap_or_default()
        }
    });
    let logs = raw
        .log_usage
        .get(&c.id)
        .map(|&(bytes, files)| match raw.log_fs {
            Some(cap) => fs_stats(t, &cap, Some((bytes, files))),
            None => FsStats {
                time: t,
                used_bytes: Some(bytes),
                inodes_used: Some(files),
                ..FsStats::default()
            },
        });
    ContainerStats {
        name: labels.container_name.clone(),
        container_id: c.id.clone(),
        start_time: Time(c.created_at),
        cpu,
        memory,
        rootfs,
        logs,
    }
}

fn memory_stats(m: &cri::MemoryUsage, round: Time) -> MemoryStats {
    MemoryStats {
        time: stamp(m.timestamp, round),
        available_bytes: m.available_bytes,
        usage_bytes: m.usage_bytes,
        working_set_bytes: m.working_set_bytes,
        rss_bytes: m.rss_bytes,
        page_faults: m.page_faults,
        major_page_faults: m.major_page_faults,
    }
}

fn network_stats(n: &cri::NetworkUsage, round: Time) -> NetworkStats {
    let iface = |i: &cri::InterfaceUsage| InterfaceStats {
        name: i.name.clone(),
        rx_bytes: i.rx_bytes,
        rx_errors: i.rx_errors,
        tx_bytes: i.tx_bytes,
        tx_errors: i.tx_errors,
    };
    NetworkStats {
        time: stamp(n.timestamp, round),
        default_interface: n.default_interface.as_ref().map(iface).unwrap_or_default(),
        interfaces: n.interfaces.iter().map(iface).collect(),
    }
}

/// Sums of an optional field over items; `None` when no item has it.
fn sum<T>(items: impl Iterator<Item = T>, f: impl Fn(&T) -> Option<u64>) -> Option<u64> {
    items.fold(None, |acc, item| match f(&item) {
        Some(v) => Some(acc.unwrap_or(0).saturating_add(v)),
        None => acc,
    })
}

fn sum_cpu(containers: &[ContainerStats]) -> Option<CpuStats> {
    let cpus: Vec<&CpuStats> = containers.iter().filter_map(|c| c.cpu.as_ref()).collect();
    let time = cpus.iter().map(|c| c.time).max()?;
    Some(CpuStats {
        time,
        usage_nano_cores: sum(cpus.iter(), |c| c.usage_nano_cores),
        usage_core_nano_seconds: sum(cpus.iter(), |c| c.usage_core_nano_seconds),
    })
}

fn sum_memory(containers: &[ContainerStats]) -> Option<MemoryStats> {
    let mems: Vec<&MemoryStats> = containers
        .iter()
        .filter_map(|c| c.memory.as_ref())
        .collect();
    let time = mems.iter().map(|m| m.time).max()?;
    Some(MemoryStats {
        time,
        available_bytes: None,
        usage_bytes: sum(mems.iter(), |m| m.usage_bytes),
        working_set_bytes: sum(mems.iter(), |m| m.working_set_bytes),
        rss_bytes: sum(mems.iter(), |m| m.rss_bytes),
        page_faults: sum(mems.iter(), |m| m.page_faults),
        major_page_faults: sum(mems.iter(), |m| m.major_page_faults),
    })
}

/// Writable layers plus logs, on the capacity of crilet's root filesystem.
fn ephemeral(containers: &[ContainerStats], raw: &RawRound) -> Option<FsStats> {
    let parts = || {
        containers
            .iter()
            .flat_map(|c| [c.rootfs.as_ref(), c.logs.as_ref()])
            .flatten()
    };
    let used = sum(parts(), |f| f.used_bytes)?;
    let inodes_used = sum(parts(), |f| f.inodes_used).unwrap_or(0);
    Some(match raw.node.root_fs {
        Some(cap) => fs_stats(raw.time, &cap, Some((used, inodes_used))),
        None => FsStats {
            time: raw.time,
            used_bytes: Some(used),
            inodes_used: Some(inodes_used),
            ..FsStats::default()
        },
    })
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
