//! Pod, container and node stats: the collector (CRI stats + host readings
//! into a cached [`Sample`](assemble::Sample)), the lookups every request
//! goes through (static UID, mirror UID or namespace/name, via the pod
//! manager), and the servers: gRPC on a unix socket (and optionally TLS
//! TCP), the kubelet-compatible HTTP endpoints, and the debug service
//! (logs, exec) on the socket.
//! May import `logs`, `images`, `kuberuntime` (labels, log options), `cri`,
//! `pod` and `units`; never `agent`, `cli` or `mirror`.

pub mod assemble;
pub mod collector;
pub mod debug_api;
pub mod grpc;
pub mod host;
pub mod http;
pub mod images_api;
pub mod metrics;
pub mod process_stats;
pub mod reply;
pub mod types;

use std::sync::Arc;

use tokio::sync::watch;

use crate::pod::view::AgentView;
use crate::pod::view::StatusCache;

/// What the servers read: the agent's view (pod manager), the workers'
/// statuses and the latest sample. Each request takes cheap snapshots.
#[derive(Clone)]
pub struct StatsSources {
    pub view: watch::Receiver<Arc<AgentView>>,
    pub statuses: StatusCache,
    pub samples: collector::SampleCache,
}

impl StatsSources {
    pub fn view(&self) -> Arc<AgentView> {
        Arc::clone(&self.view.borrow())
    }

    pub fn sample(&self) -> Option<Arc<assemble::Sample>> {
        self.samples.borrow().clone()
    }

    pub fn statuses(
        &self,
    ) -> std::collections::HashMap<String, Arc<k8s_openapi::api::core::v1::PodStatus>> {
        self.statuses.read().map(|s| s.clone()).unwrap_or_default()
    }
}
