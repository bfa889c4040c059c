//! Node status settings: what the Node's capacity, allocatable and pressure
//! conditions are computed from, and how often its status is written.
//! Flags `--kube-reserved`, `--system-reserved`, `--eviction-hard`,
//! `--eviction-pressure-transition-period`, `--max-pods`, `--pods-per-core`,
//! `--node-status-max-images`, `--node-status-update-frequency`; the
//! KubeletConfiguration fields of the same names (`kubeReserved`, …) and
//! `nodeStatusReportFrequency`, with the kubelet's defaults.
//!
//! Invariant: flag over file over default, every value checked wherever it
//! came from; an error names the flag, or the file and the field. The
//! hard thresholds are the kubelet's Linux defaults only when neither the
//! flag nor the field gives any (a given map replaces them, as in 1.32).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, ConfigFile, RunArgs, file_duration};
use crate::nodestatus::allocatable::{
    DEFAULT_MAX_PODS, NodeResources, Reservation, ReservationError,
};
use crate::nodestatus::eviction::{self, Threshold};
use crate::nodestatus::pressure::DEFAULT_PRESSURE_TRANSITION_PERIOD;
use crate::units::parse_duration;

/// `nodeStatusUpdateFrequency`: how often the status is computed.
pub const DEFAULT_NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// `nodeStatusReportFrequency`: how often an unchanged status is written.
pub const DEFAULT_NODE_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(5 * 60);
/// `nodeStatusMaxImages`: images listed in `status.images` (-1: all).
pub const DEFAULT_NODE_STATUS_MAX_IMAGES: i32 = 50;

/// The node status flags of `crilet run` (names as the kubelet's).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NodeStatusArgs {
    /// Resources held back for Kubernetes daemons (crilet, the runtime):
    /// `cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000`. Subtracted
    /// from capacity in the Node's allocatable.
    #[arg(long, value_name = "RESOURCE=QUANTITY,...")]
    pub kube_reserved: Option<String>,
    /// Resources held back for the OS's daemons, as --kube-reserved.
    #[arg(long, value_name = "RESOURCE=QUANTITY,...")]
    pub system_reserved: Option<String>,
    /// Hard eviction thresholds, `memory.available<100Mi,nodefs.available<10%`
    /// (these and nodefs.inodesFree<5%, imagefs.available<15%,
    /// imagefs.inodesFree<5% by default). crilet evicts nothing: they set
    /// the Node's MemoryPressure, DiskPressure and PIDPressure and come off
    /// its allocatable.
    #[arg(long, value_name = "SIGNAL<QUANTITY,...")]
    pub eviction_hard: Option<String>,
    /// How long a pressure condition stays True after its threshold was
    /// last met (Go duration, default 5m).
    #[arg(long, value_parser = parse_duration)]
    pub eviction_pressure_transition_period: Option<Duration>,
    /// The Node's pods capacity (default 110).
    #[arg(long, allow_negative_numbers = true)]
    pub max_pods: Option<i64>,
    /// Pods per core; when positive, pods capacity is the smaller of this
    /// times the cores and --max-pods (default 0: off).
    #[arg(long, allow_negative_numbers = true)]
    pub pods_per_core: Option<i64>,
    /// At most this many images in the Node's status.images, largest first
    /// (default 50; -1: all).
    #[arg(long, allow_negative_numbers = true)]
    pub node_status_max_images: Option<i32>,
    /// How often the Node's status is computed and, when it changed,
    /// written (Go duration, default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub node_status_update_frequency: Option<Duration>,
}

/// The node status fields of a KubeletConfiguration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatusFile {
    pub kube_reserved: Option<BTreeMap<String, String>>,
    pub system_reserved: Option<BTreeMap<String, String>>,
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub eviction_pressure_transition_period: Option<String>,
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub node_status_max_images: Option<i32>,
    pub node_status_update_frequency: Option<String>,
    pub node_status_report_frequency: Option<String>,
}

/// The resolved node status settings.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStatusSettings {
    pub kube_reserved: Reservation,
    pub system_reserved: Reservation,
    /// The hard thresholds in effect, in signal-name order.
    pub eviction_hard: Vec<Threshold>,
    pub eviction_pressure_transition_period: Duration,
    pub max_pods: i64,
    pub pods_per_core: i64,
    /// -1: no limit.
    pub max_images: i32,
    pub update_frequency: Duration,
    pub report_frequency: Duration,
}

// Thresholds are parsed numbers, never NaN.
impl Eq for NodeStatusSettings {}

fn file_err(origin: &str, field: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::File {
        path: origin.to_string(),
        message: format!("{field}: {e}"),
    }
}

fn flag_err(flag: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Flag {
        message: format!("--{flag}: {e}"),
    }
}

/// One reservation: the flag's text, else the file's map, else nothing.
fn reservation(
    flag: Option<&str>,
    field: Option<&BTreeMap<String, String>>,
    names: (&str, &str),
    origin: &str,
) -> Result<Reservation, ConfigError> {
    match (flag, field) {
        (Some(text), _) => Reservation::parse_flag(text).map_err(|e| flag_err(names.0, e)),
        (None, Some(map)) => {
            Reservation::from_map(map).map_err(|e: ReservationError| file_err(origin, names.1, e))
        }
        (None, None) => Ok(Reservation::default()),
    }
}

/// Flags over file over defaults; the first bad value, in the order the
/// fields are listed above, is the one reported.
pub(super) fn resolve_node_status(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<NodeStatusSettings, ConfigError> {
    let a = &args.node_status;
    let f = &file.node_status;
    let kube_reserved = reservation(
        a.kube_reserved.as_deref(),
        f.kube_reserved.as_ref(),
        ("kube-reserved", "kubeReserved"),
        origin,
    )?;
    let system_reserved = reservation(
        a.system_reserved.as_deref(),
        f.system_reserved.as_ref(),
        ("system-reserved", "systemReserved"),
        origin,
    )?;
    let eviction_hard = match (&a.eviction_hard, &f.eviction_hard) {
        (Some(text), _) => eviction::parse_eviction_hard_flag(text)
            .and_then(|map| eviction::parse_thresholds(&map))
            .map_err(|e| flag_err("eviction-hard", e))?,
        (None, given) => {
            eviction::parse_thresholds(&eviction::eviction_hard(given.as_ref(), false))
                .map_err(|e| file_err(origin, "evictionHard", e))?
        }
    };
    let period = file_duration(
        origin,
        "evictionPressureTransitionPeriod",
        f.eviction_pressure_transition_period.as_deref(),
    )?;
    let max_pods = a.max_pods.or(f.max_pods).unwrap_or(DEFAULT_MAX_PODS);
    if max_pods < 0 {
        return Err(match a.max_pods {
            Some(_) => flag_err("max-pods", format!("must not be negative: {max_pods}")),
            None => file_err(
                origin,
                "maxPods",
                format!("must not be negative: {max_pods}"),
            ),
        });
    }
    let pods_per_core = a.pods_per_core.or(f.pods_per_core).unwrap_or(0);
    if pods_per_core < 0 {
        return Err(match a.pods_per_core {
            Some(_) => flag_err(
                "pods-per-core",
                format!("must not be negative: {pods_per_core}"),
            ),
            None => file_err(
                origin,
                "podsPerCore",
                format!("must not be negative: {pods_per_core}"),
            ),
        });
    }
    let max_images = (a.node_status_max_images)
        .or(f.node_status_max_images)
        .unwrap_or(DEFAULT_NODE_STATUS_MAX_IMAGES);
    if max_images < -1 {
        let message = format!("must be -1 (no limit) or more: {max_images}");
        return Err(match a.node_status_max_images {
            Some(_) => flag_err("node-status-max-images", message),
            None => file_err(origin, "nodeStatusMaxImages", message),
        });
    }
    let file_update = file_duration(
        origin,
        "nodeStatusUpdateFrequency",
        f.node_status_update_frequency.as_deref(),
    )?;
    let file_report = file_duration(
        origin,
        "nodeStatusReportFrequency",
        f.node_status_report_frequency.as_deref(),
    )?;
    let explicit_update = a.node_status_update_frequency.or(file_update);
    let update_frequency = explicit_update.unwrap_or(DEFAULT_NODE_STATUS_UPDATE_FREQUENCY);
    if update_frequency.is_zero() {
        return Err(match a.node_status_update_frequency {
            Some(_) => flag_err("node-status-update-frequency", "must be more than 0"),
            None => file_err(origin, "nodeStatusUpdateFrequency", "must be more than 0"),
        });
    }
    // As the kubelet's defaulting: an explicit update frequency is also the
    // report frequency unless that is given too.
    let report_frequency = file_report
        .or(explicit_update)
        .unwrap_or(DEFAULT_NODE_STATUS_REPORT_FREQUENCY);
    if report_frequency.is_zero() {
        return Err(file_err(
            origin,
            "nodeStatusReportFrequency",
            "must be more than 0",
        ));
    }
    Ok(NodeStatusSettings {
        kube_reserved,
        system_reserved,
        eviction_hard,
        eviction_pressure_transition_period: a
            .eviction_pressure_transition_period
            .or(period)
            .unwrap_or(DEFAULT_PRESSURE_TRANSITION_PERIOD),
        max_pods,
        pods_per_core,
        max_images,
        update_frequency,
        report_frequency,
    })
}

#[cfg(test)]
#[path = "node_status_tests.rs"]
mod tests;

impl NodeStatusSettings {
    /// How the node sync computes and writes the status.
    pub fn policy(&self) -> crate::nodestatus::node_sync::NodeStatusPolicy {
        crate::nodestatus::node_sync::NodeStatusPolicy {
            eviction_hard: self.eviction_hard.clone(),
            transition_period: self.eviction_pressure_transition_period,
            max_images: self.max_images,
            update_frequency: self.update_frequency,
            report_frequency: self.report_frequency,
        }
    }
}

impl super::Settings {
    /// The Node's capacity and allocatable, read from this machine now:
    /// what it reports, and what a `resourceFieldRef` falls back to.
    pub fn node_resources(&self) -> (NodeResources, NodeResources) {
        use crate::nodestatus::allocatable::pods_capacity;
        use crate::nodestatus::machine;
        let ns = &self.node_status;
        let pods = pods_capacity(ns.max_pods, ns.pods_per_core, machine::read_num_cores());
        let capacity = machine::read_node_capacity(&self.root_dir, pods);
        let allocatable = self.allocatable_of(&capacity);
        (capacity, allocatable)
    }

    /// What of `capacity` the pods may have: less the reservations and the
    /// hard eviction thresholds.
    pub fn allocatable_of(&self, capacity: &NodeResources) -> NodeResources {
        let ns = &self.node_status;
        crate::nodestatus::allocatable::node_allocatable(
            capacity,
            &ns.kube_reserved,
            &ns.system_reserved,
            &ns.eviction_hard,
        )
    }

    /// What the Node reports of itself: its IP, runtime, OS, the kubelet
    /// server's port (0 with `--port 0`: where the API server sends logs,
    /// exec, attach and port-forward), capacity and allocatable
    /// ([`Self::node_resources`]).
    pub fn node_facts(
        &self,
        ip: String,
        runtime_version: String,
        capacity: NodeResources,
        allocatable: NodeResources,
        runtime_handlers: Vec<crate::cri::RuntimeHandler>,
    ) -> crate::nodestatus::node_sync::NodeFacts {
        crate::nodestatus::node_sync::NodeFacts {
            name: String::new(),
            ip,
            runtime_version,
            system: crate::nodestatus::machine::read_node_system(),
            kubelet_port: self.kubelet_server.port,
            capacity,
            allocatable,
            register_with_taints: (self.register_with_taints.iter())
                .map(super::NodeTaint::to_api)
                .collect(),
            runtime_handlers,
        }
    }

    /// What the pod workers know of the node, read from this machine now:
    /// its DNS and IP, memory, the cgroup facts the kubelet reads once at
    /// start (v2, swap, hugetlb: without the controller runc cannot apply a
    /// hugepage limit, and CRI-O then fails every container, so none are
    /// sent), the Node's allocatable and whether the runtime's default
    /// handler makes recursive read-only mounts.
    pub fn node_context(
        &self,
        node_name: String,
        allocatable: &NodeResources,
        runtime_handlers: &[crate::cri::RuntimeHandler],
    ) -> crate::kuberuntime::mapping::NodeContext {
        use crate::kuberuntime::mapping::{NodeAllocatable, NodeCgroups, NodeContext};
        use crate::nodestatus::machine;
        use std::path::Path;
        let cgroups = crate::cm::node_cgroups::read_cgroup_facts(
            Path::new(crate::cm::cgroup::CGROUP_ROOT),
            &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
        );
        NodeContext {
            node_name,
            root_dir: self.root_dir.clone(),
            log_dirs: self.log_dirs.clone(),
            cgroup_root: self.cgroup_root.clone(),
            cgroup_driver: self.cgroup_driver,
            host_dns: machine::read_host_dns(Path::new("/etc/resolv.conf")),
            host_ip: machine::node_ip(self.node_ip.as_deref()),
            memory_capacity: machine::read_memory_capacity(),
            oom_score_adj_floor: (self.restrict_oom_score_adj)
                .then(machine::read_own_oom_score_adj),
            hugepage_sizes: match cgroups.hugetlb {
                true => machine::read_hugepage_sizes(Path::new("/sys/kernel/mm/hugepages")),
                false => Vec::new(),
            },
            cgroups: NodeCgroups {
                v2: cgroups.unified,
                swap_controller: cgroups.swap_controller,
            },
            allocatable: NodeAllocatable {
                cpu_millicores: allocatable.cpu_millicores,
                memory_bytes: allocatable.memory_bytes,
                ephemeral_storage_bytes: allocatable.ephemeral_storage_bytes,
                pods: allocatable.pods,
            },
            recursive_read_only_mounts: (runtime_handlers.iter())
                .any(|h| h.name.is_empty() && h.recursive_read_only_mounts),
        }
    }
}
