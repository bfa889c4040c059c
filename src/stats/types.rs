//! The stats of a node and its pods, in the kubelet Summary API's shape
//! (`stats/v1alpha1`): the serde names are the kubelet's JSON names, so
//! `/stats/summary` consumers (metrics-server) read ours unchanged.
//!
//! Every optional value is absent rather than zero when it is unknown.

use serde::{Serialize, Serializer};

/// A point in time, nanoseconds since the Unix epoch. Serialized as the
/// kubelet serializes `metav1.Time`: RFC 3339 in UTC, to the second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

impl Time {
    pub fn rfc3339(self) -> String {
        match jiff::Timestamp::from_nanosecond(i128::from(self.0)) {
            Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            Err(_) => String::from("1970-01-01T00:00:00Z"),
        }
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.rfc3339())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    pub start_time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    pub start_time: Time,
    pub containers: Vec<ContainerStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    /// Not part of the Summary JSON; the gRPC API reports it.
    #[serde(skip)]
    pub container_id: String,
    pub start_time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

/// The kubelet inlines the default interface's fields beside `interfaces`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStats {
    pub time: Time,
    #[serde(flatten)]
    pub default_interface: InterfaceStats,
    pub interfaces: Vec<InterfaceStats>,
}
