//! `crilet run`: sources → merge → pod manager → one worker per pod, plus
//! the PLEG (`pleg`: container events, and the relist as their safety net
//! or in their place) that wakes workers when the runtime changes under
//! them.
//!
//! Invariant: the sync loop is the only writer of the merged config, the
//! pod manager and the worker map; readers get `Arc` snapshots of the
//! manager through a watch channel. Shutdown fans out from one
//! cancellation token and leaves pods running, as the kubelet does.
//!
//! What lives here is the sync loop (this file, and `sync_pleg`: its half
//! of the PLEG, relisting and waking workers), the pod workers (`worker`),
//! the settings (`config`), the process setup (`process`, `sd_notify`),
//! the URL source's wiring (`url_source`), the sweep of orphaned pod
//! leftovers (`orphan_dirs`) and the takeover of the kubelet's pods
//! (`adopt`); each subsystem it drives has a folder of its
//! own (scripts/layers.txt says which may use which).

mod adopt;
pub mod config;
pub mod orphan_dirs;
pub mod process;
pub mod sd_notify;
mod sync_pleg;
pub mod url_source;
pub mod worker;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::file::{self as file_source, FileSourceConfig, SourceSet};
use crate::config::http::UrlSource;
use crate::config::merge::PodConfig;
use crate::cri::Runtime;
use crate::events::recorder::EventRecorder;
use crate::kubeapi::service_watch::ServiceLister;
use crate::kuberuntime::mapping::{NodeContext, admission_requests};
use crate::kuberuntime::status::rejected_pod_status;
use crate::lifecycle::resource_fit::{Allocatable, Requests, admit_static_pod};
use crate::pod::manager::PodManager;
use crate::pod::view::AgentView;
use crate::pod::view::StatusCache;
use crate::pod::{self, Pod};
use crate::prober::handlers::Handlers;
use crate::prober::manager::{ProbeRecorder, ProberContext};
use sync_pleg::PlegState;
use worker::{PodWork, WorkerContext, WorkerDone, WorkerHandle};

/// How often every worker re-checks its pod even when nothing changed.
pub const RESYNC_PERIOD: Duration = Duration::from_secs(60);

/// Handles the agent hands out to readers (stats, the mirror manager).
#[derive(Clone)]
pub struct AgentHandles {
    pub view: watch::Receiver<Arc<AgentView>>,
    pub statuses: StatusCache,
    /// Changes whenever a pod's status changes.
    pub status_changed: watch::Receiver<()>,
    /// Where the mirror manager sends the mirror pods bound to this node.
    pub mirrors: mpsc::Sender<Vec<Arc<Pod>>>,
}

pub struct Agent {
    pub runtime: Arc<dyn Runtime>,
    pub runtime_name: String,
    pub node: NodeContext,
    pub pod_manifest_path: Option<PathBuf>,
    pub file_check_frequency: Duration,
    /// Warn about, or refuse, manifests others than root can change.
    pub manifest_trust: crate::config::trust::ManifestTrust,
    pub cgroup_fs: PathBuf,
    /// Where workers write pod statuses (shared with the API servers).
    pub statuses: StatusCache,
    /// The `--manifest-url` source, if configured.
    pub manifest_url: Option<UrlSource>,
    /// Where probe runs are counted (the `/metrics` registry), if anywhere.
    pub probe_recorder: Option<Arc<dyn ProbeRecorder>>,
    /// Follow the runtime's container events where it serves them
    /// (`EventedPLEG`); otherwise relist every second.
    pub container_events: bool,
    /// What the container event stream brought (exported on `/metrics`).
    pub event_counters: Arc<crate::pleg::container_events::EventCounters>,
    /// Where the pods' Kubernetes Events go (a no-op recorder standalone).
    pub events: Arc<dyn EventRecorder>,
    /// The Services the node knows of, for the containers' service
    /// variables ([`ServiceLister::standalone`] without an API server).
    pub services: ServiceLister,
    /// The RuntimeClasses, for the sandboxes' runtime handler.
    pub runtime_classes: crate::kubeapi::runtime_class::RuntimeClassLookup,
    /// The StopPodSandbox calls in flight, shared with the stats collector.
    pub sandbox_stops: crate::kubeapi::call_count::CallCount,
    /// The pod starts in flight, to which the API writers yield.
    pub pod_starts: crate::kubeapi::call_count::CallCount,
}

impl Agent {
    /// Runs until `cancel`; returns the handles as soon as it has started.
    pub fn start(self, cancel: CancellationToken) -> (AgentHandles, tokio::task::JoinHandle<()>) {
        if !crate::cm::cgroup::is_unified(&self.cgroup_fs) {
            let node = crate::events::recorder::EventObject::node(&self.node.node_name);
            (self.events).event(&node, crate::events::kubelet_events::cgroup_v1());
        }
        let (sets_tx, sets_rx) = mpsc::channel(16);
        let mut sources = Vec::new();
        if let Some(path) = self.pod_manifest_path.clone() {
            sources.push(file_source::FILE_SOURCE_NAME);
            tokio::spawn(file_source::run(
                FileSourceConfig {
                    path,
                    check_frequency: self.file_check_frequency,
                    node_name: self.node.node_name.clone(),
                    trust: self.manifest_trust,
                },
                sets_tx.clone(),
                cancel.clone(),
            ));
        }
        if let Some(url) = self.manifest_url.clone() {
            tracing::info!(url = %url.config.url, every = ?url.config.check_frequency, "polling the manifest URL");
            sources.push(crate::config::http::HTTP_SOURCE_NAME);
            tokio::spawn(url.run(sets_tx.clone(), cancel.clone()));
        }
        if sources.is_empty() {
            tracing::warn!(
                "no --pod-manifest-path or --manifest-url: crilet has no pod source and will run nothing"
            );
        }
        drop(sets_tx);
        let statuses = self.statuses.clone();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (status_tx, status_rx) = watch::channel(());
        let handlers = Arc::new(Handlers::new(self.runtime.clone()));
        let ctx = Arc::new(WorkerContext {
            runtime: self.runtime.clone(),
            runtime_name: self.runtime_name.clone(),
            node: self.node.clone(),
            statuses: statuses.clone(),
            status_changed: status_tx,
            cgroup_fs: self.cgroup_fs.clone(),
            done: done_tx,
            sandbox_stops: self.sandbox_stops.clone(),
            pod_starts: self.pod_starts.clone(),
            prober: Arc::new(ProberContext {
                runner: handlers.clone(),
                recorder: self.probe_recorder.clone(),
                agent_started: jiff::Timestamp::now(),
                node_ip: self.node.host_ip.clone(),
                clock: Arc::new(crate::prober::clock::SystemClock),
                events: self.events.clone(),
            }),
            hooks: handlers,
            image_pulls: Default::default(),
            events: self.events.clone(),
            services: self.services.clone(),
            runtime_classes: self.runtime_classes.clone(),
        });
        // Until the sync loop publishes, readers (the mirror manager, the
        // container GC) see every source unseen and delete nothing.
        let initial = AgentView::before_sources(sources.iter().copied());
        let (view_tx, view_rx) = watch::channel(Arc::new(initial));
        tokio::spawn(crate::kuberuntime::container_gc_driver::run(
            self.runtime.clone(),
            view_rx.clone(),
            crate::kuberuntime::container_gc_driver::CONTAINER_GC_PERIOD,
            self.node.log_dirs.clone(),
            cancel.clone(),
        ));
        let (mirrors_tx, mirrors_rx) = mpsc::channel(16);
        let events = self.container_events.then(|| {
            crate::pleg::container_events::spawn(
                self.runtime.clone(),
                self.event_counters.clone(),
                cancel.clone(),
            )
        });
        let sync = SyncLoop::new(
            PodConfig::new(sources.iter().copied()),
            ctx,
            events,
            cancel.clone(),
            view_tx,
        );
        let join = tokio::spawn(sync.run(sets_rx, done_rx, mirrors_rx));
        (
            AgentHandles {
                view: view_rx,
                statuses,
                status_changed: status_rx,
                mirrors: mirrors_tx,
            },
            join,
        )
    }
}

struct SyncLoop {
    config: PodConfig,
    manager: PodManager,
    workers: HashMap<String, WorkerHandle>,
    /// UIDs whose worker is terminating them, with their full names.
    terminating: HashMap<String, String>,
    /// Pods held back until the pod of the same full name has terminated
    /// (an edited manifest): full name → UID. Two pods of one name never run
    /// at once, so a host port or a lock file is free when the new one starts.
    waiting_for_name: HashMap<String, String>,
    /// UIDs refused admission: never run (a new manifest is a new UID).
    refused: HashSet<String>,
    /// The relist and the container events.
    pleg: PlegState,
    /// The kubelet's pods crilet keeps, under their UIDs.
    adoption: adopt::Adoption,
    ctx: Arc<WorkerContext>,
    cancel: CancellationToken,
    view_tx: watch::Sender<Arc<AgentView>>,
}

impl SyncLoop {
    fn new(
        config: PodConfig,
        ctx: Arc<WorkerContext>,
        events: Option<crate::pleg::container_events::EventReceiver>,
        cancel: CancellationToken,
        view_tx: watch::Sender<Arc<AgentView>>,
    ) -> Self {
        SyncLoop {
            config,
            manager: PodManager::new(),
            workers: HashMap::new(),
            terminating: HashMap::new(),
            waiting_for_name: HashMap::new(),
            refused: HashSet::new(),
            pleg: PlegState::new(events),
            adoption: adopt::Adoption::load(&ctx.node.root_dir),
            ctx,
            cancel,
            view_tx,
        }
    }

    async fn run(
        mut self,
        mut sets: mpsc::Receiver<SourceSet>,
        mut done: mpsc::UnboundedReceiver<WorkerDone>,
        mut mirrors: mpsc::Receiver<Vec<Arc<Pod>>>,
    ) {
        // Know the runtime's pods before the first source set: a pod whose
        // previous version (same full name) still runs from before a
        // restart must wait for it, as for an edited manifest (handle_set).
        self.relist().await;
        let mut resync = tokio::time::interval(RESYNC_PERIOD);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sources_open = true;
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => {
                    tracing::info!("stopping: pods are left running");
                    return;
                }
                set = sets.recv(), if sources_open => match set {
                    Some(mut set) => {
                        let ctx = self.ctx.clone();
                        (self.adoption).on_set(ctx.runtime.as_ref(), &ctx.node, &mut set).await;
                        self.handle_set(set)
                    }
                    None => sources_open = false,
                },
                Some(d) = done.recv() => self.handle_done(d),
                Some(m) = mirrors.recv() => self.handle_mirrors(m),
                _ = tokio::time::sleep_until(self.pleg.next_relist) => self.relist().await,
                msg = sync_pleg::next_message(&mut self.pleg.events) => self.on_stream(msg),
                _ = sleep_until_some(self.pleg.confirm_at) => self.confirm_missed(),
                _ = resync.tick() => self.workers.values().for_each(WorkerHandle::wake),
            }
        }
    }

    fn handle_set(&mut self, set: SourceSet) {
        let changes = self.config.set(set.source, set.pods);
        for r in &changes.rejected {
            tracing::error!(origin = %r.origin, pod = %r.full_name, kept = %r.kept_origin, "pod is already defined by another manifest; ignoring this one");
        }
        // Removes first: an edited manifest is a remove and an add of the
        // same full name, and the add must wait for the remove.
        for p in changes.removes {
            tracing::info!(pod = %pod::full_name(&p), uid = pod::uid(&p), "pod removed from its source");
            self.manager.remove_pod(&p);
            let uid = pod::uid(&p).to_string();
            self.refused.remove(&uid);
            let full_name = pod::full_name(&p);
            self.terminating.insert(uid.clone(), full_name.clone());
            self.dispatch(
                uid.clone(),
                PodWork::Terminate {
                    uid,
                    full_name,
                    pod: Some(p),
                },
            );
        }
        for p in changes.adds.into_iter().chain(changes.updates) {
            tracing::info!(pod = %pod::full_name(&p), uid = pod::uid(&p), "pod added or updated");
            self.manager.add_pod(Arc::clone(&p));
            let (uid, full_name) = (pod::uid(&p).to_string(), pod::full_name(&p));
            self.terminate_stale_of_name(&full_name, &uid);
            if self
                .terminating
                .iter()
                .any(|(u, n)| *n == full_name && *u != uid)
            {
                tracing::info!(pod = %full_name, uid, "waiting for the previous pod of this name to terminate");
                self.waiting_for_name.insert(full_name, uid);
                continue;
            }
            if !self.admit(&p) {
                continue;
            }
            self.dispatch(uid, PodWork::Sync(p));
        }
        self.publish();
    }

    /// Whether `pod` may run: a pod already running (or refused) keeps its
    /// verdict; a new one must fit the node's allocatable beside the pods
    /// admitted before it (the kubelet's `canAdmitPod`). A refused pod is
    /// never run: it gets the kubelet's Failed status and Warning Event.
    fn admit(&mut self, pod: &Pod) -> bool {
        let uid = pod::uid(pod);
        if self.refused.contains(uid) {
            return false;
        }
        // A node context without measured allocatable (none admits 0 pods)
        // admits everything.
        if self.workers.contains_key(uid) || self.ctx.node.allocatable.pods == 0 {
            return true;
        }
        let statuses = self.ctx.statuses.read().unwrap_or_else(|e| e.into_inner());
        let finished = |u: &str| {
            let phase = statuses.get(u).and_then(|s| s.phase.as_deref());
            matches!(phase, Some("Succeeded" | "Failed"))
        };
        let admitted: Vec<Arc<Pod>> = (self.manager.get_pods().into_iter())
            .filter(|p| pod::uid(p) != uid && !self.refused.contains(pod::uid(p)))
            .filter(|p| !finished(pod::uid(p)))
            .collect();
        drop(statuses);
        let used = (admitted.iter()).fold(Requests::default(), |sum, p| sum.plus(requests(p)));
        let node = &self.ctx.node.allocatable;
        let allocatable = Allocatable {
            cpu_millis: node.cpu_millicores,
            memory_bytes: node.memory_bytes,
            ephemeral_storage_bytes: node.ephemeral_storage_bytes,
            pods: node.pods,
        };
        let count = admitted.len() as i64;
        let Err(refusal) = admit_static_pod(requests(pod), used, count, &allocatable) else {
            return true;
        };
        tracing::warn!(pod = %pod::full_name(pod), uid, reason = refusal.reason, message = %refusal.message, "pod rejected: the node has no room for it");
        self.refused.insert(uid.to_string());
        let input = crate::kuberuntime::status::StatusInput {
            pod,
            sandbox_ready: false,
            pod_ip: "",
            host_ip: &self.ctx.node.host_ip,
            containers: &[],
            waiting: &Default::default(),
            probes: &Default::default(),
            messages: &Default::default(),
            start_time: jiff::Timestamp::now(),
            runtime_name: &self.ctx.runtime_name,
            previous: None,
            now: jiff::Timestamp::now(),
        };
        let status = rejected_pod_status(&input, refusal.reason, &refusal.message);
        (self.ctx.statuses.write().unwrap_or_else(|e| e.into_inner()))
            .insert(uid.to_string(), Arc::new(status));
        self.ctx.status_changed.send_replace(());
        let event = crate::events::kubelet_events::rejected(refusal.reason, refusal.message);
        (self.ctx.events).event(&crate::events::recorder::EventObject::pod(pod), event);
        false
    }

    /// The API server's mirror pods replace the ones the manager holds.
    fn handle_mirrors(&mut self, mirrors: Vec<Arc<Pod>>) {
        for old in self.manager.get_mirror_pods() {
            self.manager.remove_pod(&old);
        }
        for m in mirrors {
            self.manager.add_pod(m);
        }
        self.publish();
    }

    fn publish(&self) {
        self.view_tx.send_replace(Arc::new(AgentView {
            manager: Arc::new(self.manager.clone()),
            terminating: self.terminating.values().cloned().collect(),
            unseen_sources: self.config.unseen_sources(),
        }));
    }

    fn handle_done(&mut self, d: WorkerDone) {
        match d {
            WorkerDone::Terminated { uid } => self.terminated(&uid),
            WorkerDone::Removed { uid } => self.finish(&uid),
        }
        self.publish();
    }

    /// The worker has exited: its pod is gone from the runtime.
    fn finish(&mut self, uid: &str) {
        self.workers.remove(uid);
        let full_name = self.terminating.remove(uid);
        // Re-added while it was being terminated: run it again.
        if let Some(p) = self.manager.get_pod_by_uid(uid) {
            if self.admit(&p) {
                self.dispatch(uid.to_owned(), PodWork::Sync(Arc::new((*p).clone())));
            }
        }
        self.name_freed(full_name);
    }

    /// Everything of the pod is stopped (its worker may still be removing
    /// it): its mirror pod may go, and a pod that waited for its name starts.
    fn terminated(&mut self, uid: &str) {
        let full_name = self.terminating.remove(uid);
        self.name_freed(full_name);
    }

    /// A pod that waited for this name may start now.
    fn name_freed(&mut self, full_name: Option<String>) {
        let Some(name) = full_name else { return };
        if self.terminating.values().any(|n| *n == name) {
            return;
        }
        if let Some(uid) = self.waiting_for_name.remove(&name) {
            if let Some(p) = self.manager.get_pod_by_uid(&uid) {
                if self.admit(&p) {
                    self.dispatch(uid, PodWork::Sync(Arc::new((*p).clone())));
                }
            }
        }
    }

    fn dispatch(&mut self, uid: String, work: PodWork) {
        if let PodWork::Sync(_) = &work {
            self.terminating.remove(&uid);
        }
        if let Some(h) = self.workers.get(&uid) {
            if h.send(work.clone()) {
                return;
            }
        }
        let h = worker::spawn(self.ctx.clone(), work, self.cancel.child_token());
        self.workers.insert(uid, h);
    }
}

/// What a pod requests of the node (nothing, for one whose quantities do
/// not parse: validation refuses those before they get here).
fn requests(pod: &Pod) -> Requests {
    let [cpu_millis, memory_bytes, ephemeral_storage_bytes] =
        admission_requests(pod).unwrap_or_default();
    Requests {
        cpu_millis,
        memory_bytes,
        ephemeral_storage_bytes,
    }
}

/// Sleeps until `at`; forever when there is nothing to wait for.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
