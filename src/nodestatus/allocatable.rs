//! Node capacity and allocatable as the kubelet reports them in
//! `status.capacity` and `status.allocatable`, and the `--kube-reserved` /
//! `--system-reserved` reservations that go into them.
//!
//! Invariant: pure; every allocatable amount lies in `0..=capacity`, and the
//! quantities print exactly as the kubelet's.
//!
//! What this follows, file by file (kubernetes/kubernetes):
//! - `cmd/kubelet/app/server.go` `parseResourceList`: only `cpu`, `memory`,
//!   `ephemeral-storage` and `pid` can be reserved ("cannot reserve %q
//!   resource"), a quantity must parse and must not be negative ("resource
//!   quantity for %q cannot be negative"). The flags are
//!   `staging/src/k8s.io/component-base/cli/flag/map_string_string.go`
//!   (`k=v,k=v`: empty items skipped, split at the first `=`, both sides
//!   trimmed, a later key wins; "malformed pair, expect string=string").
//! - `pkg/kubelet/cadvisor/util.go` `CapacityFromMachineInfo` and
//!   `EphemeralStorageCapacityFromFsInfo`: cpu is
//!   `NewMilliQuantity(cores*1000, DecimalSI)`, memory
//!   `NewQuantity(MemTotal bytes, BinarySI)`, each hugepage size
//!   `hugepages-<NewQuantity(page bytes, BinarySI)>` =
//!   `NewQuantity(page bytes × pages, BinarySI)`, ephemeral-storage the
//!   rootfs capacity in BinarySI; `pkg/kubelet/nodestatus/setters.go`
//!   `MachineInfo`: pods = `maxPods` (110 by default,
//!   `pkg/kubelet/apis/config/v1beta1/defaults.go`), or
//!   `min(cores × podsPerCore, maxPods)` when `podsPerCore > 0`.
//! - `pkg/kubelet/cm/node_container_manager_linux.go`
//!   `GetNodeAllocatableReservation` and `pkg/kubelet/cm/helpers.go`
//!   `hardEvictionReservation`: reserved = system-reserved + kube-reserved +
//!   the hard eviction threshold, where only `memory.available` (of memory
//!   capacity) and `nodefs.available` (of ephemeral-storage capacity) count.
//! - `setters.go` `MachineInfo` again: allocatable = capacity − reserved,
//!   clamped at 0, then allocatable memory loses every hugepage size's
//!   *capacity*, clamped at 0. A `Quantity.Sub` keeps the capacity's format,
//!   so allocatable memory prints as `24502648Ki` and allocatable storage
//!   (capacity less 10%) as a plain byte count.
//! - `getNodeAllocatableAbsoluteImpl` (same file as the reservation): the
//!   pid limit of the pods cgroup is capacity − system − kube reserved, no
//!   eviction; `pid` is internal capacity, never in the node's status.
//!
//! Choices: reservations are kept in millicores for cpu and whole units
//! otherwise, rounded up (`MilliValue`/`Value`). The kubelet subtracts exact
//! decimals, so a reservation finer than that (`cpu=0.0001`, `memory=0.5`)
//! would give it a fractional allocatable (`1999900u`) where this gives the
//! next unit down; no real configuration writes one. An amount larger than
//! an i64 saturates, which clamps allocatable to 0 as the kubelet's does.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::eviction::{Signal, Threshold};
use crate::units::quantity::{self, Format};

/// The kubelet's default `maxPods`.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// Why a `--kube-reserved` / `--system-reserved` entry was refused; each
/// names the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    #[error("malformed pair {entry:?}, expect string=string")]
    MalformedPair { entry: String },
    #[error("cannot reserve {resource:?} resource")]
    UnknownResource { resource: String },
    #[error("failed to parse quantity {value:?} for {resource:?} resource: {reason}")]
    BadQuantity {
        resource: String,
        value: String,
        reason: String,
    },
    #[error("resource quantity for {resource:?} cannot be negative: {value}")]
    Negative { resource: String, value: String },
}

/// What `--kube-reserved` or `--system-reserved` holds back; absent
/// resources reserve 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reservation {
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
    pub pid: i64,
}

impl Reservation {
    /// The flag form: `cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000`.
    pub fn parse_flag(text: &str) -> Result<Reservation, ReservationError> {
        Reservation::from_map(&parse_reserved_flag(text)?)
    }

    /// The config form (`kubeReserved: {cpu: 100m, ...}`), checked in key
    /// order so the first bad entry is always the one named.
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Reservation, ReservationError> {
        let mut r = Reservation::default();
        for (resource, value) in map {
            let slot = match resource.as_str() {
                "cpu" => &mut r.cpu_millicores,
                "memory" => &mut r.memory_bytes,
                "ephemeral-storage" => &mut r.ephemeral_storage_bytes,
                "pid" => &mut r.pid,
                _ => {
                    return Err(ReservationError::UnknownResource {
                        resource: resource.clone(),
                    });
                }
            };
            let q = quantity::parse(value).map_err(|reason| ReservationError::BadQuantity {
                resource: resource.clone(),
                value: value.clone(),
                reason,
            })?;
            if q.is_negative() {
                return Err(ReservationError::Negative {
                    resource: resource.clone(),
                    value: value.clone(),
                });
            }
            let amount = if resource == "cpu" {
                q.milli_value()
            } else {
                q.value()
            };
            *slot = amount.unwrap_or(i64::MAX);
        }
        Ok(r)
    }
}

/// The `--kube-reserved` / `--system-reserved` flag's text as its map.
pub fn parse_reserved_flag(text: &str) -> Result<BTreeMap<String, String>, ReservationError> {
    super::eviction::split_map_flag(text, '=')
        .map_err(|entry| ReservationError::MalformedPair { entry })
}

/// A node's resources: its capacity, or what of it is allocatable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeResources {
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
    /// `None` when the root filesystem's size is unknown: then the kubelet
    /// reports no ephemeral-storage at all.
    pub ephemeral_storage_bytes: Option<i64>,
    pub pods: i64,
    /// Page size in bytes → bytes of pages of that size.
    pub hugepages: BTreeMap<i64, i64>,
    /// The PID limit (`pid`): internal, used for the pods cgroup only.
    pub pid: Option<i64>,
}

impl NodeResources {
    /// Capacity as cadvisor's machine info gives it: whole cores and
    /// MemTotal in bytes (hugepages, storage and pid are set after).
    pub fn from_machine(num_cores: u32, memory_capacity_bytes: i64, pods: i64) -> NodeResources {
        NodeResources {
            cpu_millicores: i64::from(num_cores) * 1000,
            memory_bytes: memory_capacity_bytes,
            pods,
            ..Default::default()
        }
    }

    /// Adds one hugepage size as cadvisor reports it: the page size in KiB
    /// and the number of pages.
    pub fn with_hugepages(mut self, page_size_kib: i64, num_pages: i64) -> NodeResources {
        let page = page_size_kib.saturating_mul(1024);
        self.hugepages.insert(page, page.saturating_mul(num_pages));
        self
    }

    /// `status.capacity` / `status.allocatable`: cpu, memory, pods,
    /// ephemeral-storage when known, and a `hugepages-<size>` per size;
    /// never `pid`.
    pub fn to_resource_list(&self) -> BTreeMap<String, Quantity> {
        let q = |s: String| Quantity(s);
        let mut list = BTreeMap::from([
            (
                "cpu".to_string(),
                q(quantity::format_milli_value(
                    self.cpu_millicores,
                    Format::DecimalSi,
                )),
            ),
            (
                "memory".to_string(),
                q(quantity::format_value(self.memory_bytes, Format::BinarySi)),
            ),
            (
                "pods".to_string(),
                q(quantity::format_value(self.pods, Format::DecimalSi)),
            ),
        ]);
        if let Some(bytes) = self.ephemeral_storage_bytes {
            list.insert(
                "ephemeral-storage".into(),
                q(quantity::format_value(bytes, Format::BinarySi)),
            );
        }
        for (&page, &bytes) in &self.hugepages {
            list.insert(
                hugepage_resource_name(page),
                q(quantity::format_value(bytes, Format::BinarySi)),
            );
        }
        list
    }
}

/// `v1helper.HugePageResourceName`: `hugepages-2Mi`, `hugepages-1Gi`.
pub fn hugepage_resource_name(page_size_bytes: i64) -> String {
    format!(
        "hugepages-{}",
        quantity::format_value(page_size_bytes, Format::BinarySi)
    )
}

/// Pods capacity: `maxPods`, or `min(cores × podsPerCore, maxPods)` when
/// `pods_per_core` is positive.
pub fn pods_capacity(max_pods: i64, pods_per_core: i64, num_cores: u32) -> i64 {
    if pods_per_core > 0 {
        (i64::from(num_cores).saturating_mul(pods_per_core)).min(max_pods)
    } else {
        max_pods
    }
}

/// `hardEvictionReservation`: the memory and ephemeral-storage the hard
/// thresholds keep from pods, `(memory bytes, storage bytes)`.
pub fn hard_eviction_reservation(thresholds: &[Threshold], capacity: &NodeResources) -> (i64, i64) {
    let (mut memory, mut storage) = (0, 0);
    for t in thresholds {
        match t.signal {
            Signal::MemoryAvailable => memory = t.value.quantity(capacity.memory_bytes),
            Signal::NodeFsAvailable => {
                storage = t
                    .value
                    .quantity(capacity.ephemeral_storage_bytes.unwrap_or(0))
            }
            _ => {}
        }
    }
    (memory, storage)
}

/// Allocatable as the node's status reports it: capacity − system-reserved −
/// kube-reserved − the hard eviction reservation, each at least 0, and
/// memory also less every hugepage size's capacity. Pods and hugepages are
/// not reservable and stay as they are. Pass no thresholds for
/// `--experimental-allocatable-ignore-eviction`.
pub fn node_allocatable(
    capacity: &NodeResources,
    kube_reserved: &Reservation,
    system_reserved: &Reservation,
    hard_thresholds: &[Threshold],
) -> NodeResources {
    let (evict_memory, evict_storage) = hard_eviction_reservation(hard_thresholds, capacity);
    let hugepages: i128 = capacity.hugepages.values().map(|&b| i128::from(b)).sum();
    let memory = less(
        capacity.memory_bytes,
        &[
            kube_reserved.memory_bytes,
            system_reserved.memory_bytes,
            evict_memory,
        ],
    );
    NodeResources {
        cpu_millicores: less(
            capacity.cpu_millicores,
            &[kube_reserved.cpu_millicores, system_reserved.cpu_millicores],
        ),
        memory_bytes: (i128::from(memory) - hugepages).max(0) as i64,
        ephemeral_storage_bytes: capacity.ephemeral_storage_bytes.map(|bytes| {
            less(
                bytes,
                &[
                    kube_reserved.ephemeral_storage_bytes,
                    system_reserved.ephemeral_storage_bytes,
                    evict_storage,
                ],
            )
        }),
        pods: capacity.pods.max(0),
        hugepages: capacity
            .hugepages
            .iter()
            .map(|(&size, &bytes)| (size, bytes.max(0)))
            .collect(),
        pid: capacity
            .pid
            .map(|pid| less(pid, &[kube_reserved.pid, system_reserved.pid])),
    }
}

/// `capacity − Σ reserved`, at least 0, without overflow.
fn less(capacity: i64, reserved: &[i64]) -> i64 {
    let reserved: i128 = reserved.iter().map(|&r| i128::from(r)).sum();
    (i128::from(capacity) - reserved).max(0) as i64
}

#[cfg(test)]
#[path = "allocatable_tests.rs"]
mod tests;
