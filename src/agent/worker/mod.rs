//! One task per pod UID: it drives the runtime towards the pod's spec and
//! writes the pod's status.
//!
//! Invariants: the worker acts only on runtime state it read after its own
//! last action (it observes, plans, acts, and observes again); a newer
//! update replaces a pending one (a watch channel); the status is generated
//! from the worker's own copy of the pod, never from a shared lookup.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, PodStatus};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::kuberuntime::observe_driver::observe_pod;
use crate::kuberuntime::termination_files::read_message;

mod hooks;
mod start;
mod startup;
mod stop;
mod write_status;

use crate::cri::wait::RuntimeWait;
use crate::cri::{ContainerState, PodSandboxState, Runtime, RuntimeError};
use crate::events::kubelet_events;
use crate::events::recorder::{Event, EventObject, EventRecorder};
use crate::kubeapi::service_watch::ServiceLister;
use crate::kuberuntime::backoff::BackOff;
use crate::kuberuntime::mapping::{self, NodeContext};
use crate::kuberuntime::observe::Observation;
use crate::kuberuntime::plan::{
    self, Action, ContainerKind, DesiredContainer, DesiredPod, RestartPolicy,
};
use crate::kuberuntime::startup_trace::{Phase, StartupTrace};
use crate::kuberuntime::status::{
    CONTAINER_CREATING, POD_INITIALIZING, StatusInput, WaitingReason, pod_status,
};
use crate::kuberuntime::termination::message_source;
use crate::pod::view::StatusCache;
use crate::pod::{self, Pod};
use crate::prober::handlers::HookRunner;
use crate::prober::manager::{PodProber, ProberContext};
use hooks::kill_container;
use start::pull_key;
#[cfg(test)]
pub(crate) use stop::CONTAINER_REMOVAL_WAIT;
use stop::kill_all;

/// What a worker is asked to do.
#[derive(Debug, Clone)]
pub enum PodWork {
    /// Make the runtime match this pod.
    Sync(Arc<Pod>),
    /// Stop and remove everything of the pod. `pod` is None for an orphan
    /// found on the runtime (then the grace period comes from its labels).
    Terminate {
        uid: String,
        full_name: String,
        pod: Option<Arc<Pod>>,
    },
}

/// What a terminating worker tells the sync loop, in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerDone {
    /// Every container and sandbox of the pod is stopped: the pod is
    /// terminated as the kubelet counts it, so its mirror pod may go and a
    /// pod of its full name may start. The worker goes on removing.
    Terminated { uid: String },
    /// Its runtime objects, cgroup and directories are removed too, and
    /// the worker has exited.
    Removed { uid: String },
}

/// What every worker shares.
pub struct WorkerContext {
    pub runtime: Arc<dyn Runtime>,
    pub runtime_name: String,
    pub node: NodeContext,
    pub statuses: StatusCache,
    /// Bumped whenever a worker writes a changed status (the mirror
    /// manager writes it to the API server without waiting for a resync).
    pub status_changed: watch::Sender<()>,
    /// cgroupfs mount (normally /sys/fs/cgroup); pod cgroups are removed here.
    pub cgroup_fs: PathBuf,
    pub done: mpsc::UnboundedSender<WorkerDone>,
    /// The StopPodSandbox calls in flight (the stats collector reads it).
    pub sandbox_stops: crate::kubeapi::call_count::CallCount,
    /// The sandbox and container starts in flight (the API writers yield
    /// to them).
    pub pod_starts: crate::kubeapi::call_count::CallCount,
    /// What every pod's probers share (handlers, metrics, agent start).
    pub prober: Arc<ProberContext>,
    /// Runs postStart and preStop hooks.
    pub hooks: Arc<dyn HookRunner>,
    /// Image pulls in the air: workers needing the same image share one.
    pub image_pulls: crate::images::pulls::PullFlights,
    /// Where the pod's events go (Pulled, Created, Started, Killing, ...).
    pub events: Arc<dyn EventRecorder>,
    /// The Services the node knows of, for the containers' service
    /// variables (none on a node without an API server).
    pub services: ServiceLister,
    /// The RuntimeClasses, for the sandboxes' runtime handler.
    pub runtime_classes: crate::kubeapi::runtime_class::RuntimeClassLookup,
}

impl WorkerContext {
    /// Records `event` on container `container` of `pod`.
    fn container_event(&self, pod: &Pod, container: &str, event: Event) {
        self.events
            .event(&EventObject::container(pod, container), event);
    }

    /// StopPodSandbox, counted in `sandbox_stops` while it runs (the stats
    /// collector leaves ListPodSandboxStats out meanwhile).
    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError> {
        let _stopping = self.sandbox_stops.begin();
        self.runtime.stop_pod_sandbox(id).await
    }
}

/// The sync loop's handle on a worker.
pub struct WorkerHandle {
    work: watch::Sender<PodWork>,
    wake: Arc<Notify>,
    /// Cancelled when the pod is to be terminated: a postStart hook still
    /// running (a `sleep`) stops.
    gone: CancellationToken,
}

impl WorkerHandle {
    /// Replaces whatever the worker has not started yet. False when the
    /// worker has exited (the caller then starts a new one).
    pub fn send(&self, work: PodWork) -> bool {
        if matches!(work, PodWork::Terminate { .. }) {
            self.gone.cancel();
        }
        self.work.send(work).is_ok()
    }

    /// Asks the worker to look at the runtime again (the relist saw a change).
    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// Starts the worker task of one pod.
pub fn spawn(ctx: Arc<WorkerContext>, work: PodWork, cancel: CancellationToken) -> WorkerHandle {
    let (tx, rx) = watch::channel(work);
    let wake = Arc::new(Notify::new());
    let gone = CancellationToken::new();
    let worker = Worker::new(ctx, wake.clone(), cancel.clone(), gone.clone());
    let wait = worker.runtime_wait.clone();
    let run = worker.run(rx, wake.clone(), cancel);
    tokio::spawn(crate::cri::wait::scope(wait, run));
    WorkerHandle {
        work: tx,
        wake,
        gone,
    }
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn nanos_to_instant(at: i64) -> tokio::time::Instant {
    let wait = at.saturating_sub(now_nanos()).max(0) as u64;
    tokio::time::Instant::now() + Duration::from_nanos(wait)
}

/// What the plan needs of a pod spec.
pub fn desired_pod(pod: &Pod) -> DesiredPod {
    let spec = pod.spec.clone().unwrap_or_default();
    let desired = |cs: &[Container]| {
        cs.iter()
            .map(|c| DesiredContainer {
                name: c.name.clone(),
                hash: mapping::container_hash(c),
                legacy_hash: mapping::legacy_container_hash(c),
                restartable: pod::is_restartable_init_container(c),
                startup_probe: c.startup_probe.is_some(),
            })
            .collect()
    };
    DesiredPod {
        restart_policy: RestartPolicy::parse(spec.restart_policy.as_deref()),
        init_containers: desired(spec.init_containers.as_deref().unwrap_or_default()),
        containers: desired(&spec.containers),
    }
}

/// The sandbox a sync starts containers in: the ready one it observed, or
/// the one it just created. The pod IPs (none on the host network) are read
/// once, when first needed.
#[derive(Debug, Clone, Default)]
struct CurrentSandbox {
    id: String,
    attempt: u32,
    ips: Option<Vec<String>>,
}

struct Worker {
    ctx: Arc<WorkerContext>,
    /// Wakes this worker (the relist, a probe result).
    wake: Arc<Notify>,
    cancel: CancellationToken,
    gone: CancellationToken,
    /// The pod's probers, started on its first sync.
    prober: Option<PodProber>,
    /// The pod IP last read (empty for host-network pods), for hooks.
    pod_ip: String,
    backoff: BackOff,
    /// Last failed pull per container name, and its message.
    pull_failures: HashMap<String, (i64, String)>,
    /// Why containers are not running, for the status.
    waiting: HashMap<String, WaitingReason>,
    /// The failed hostPath check that keeps the sandbox from being run
    /// (every container waits on it), until a check passes.
    volume_error: Option<String>,
    /// Termination messages of exited containers, by container ID: each is
    /// read once, and forgotten when the container leaves the observation.
    messages: HashMap<String, String>,
    start_time: Option<jiff::Timestamp>,
    previous: Option<Arc<PodStatus>>,
    /// Consecutive failed syncs, for the retry delay.
    errors: u32,
    /// The start being traced (startup.rs), and this task's runtime clock.
    trace: Option<Box<StartupTrace>>,
    runtime_wait: Arc<RuntimeWait>,
}

/// Retry delay after a failed sync: 1 s doubling to 30 s.
fn retry_delay(errors: u32) -> Duration {
    Duration::from_secs(1u64 << errors.min(5).saturating_sub(1)).min(Duration::from_secs(30))
}

impl Worker {
    fn new(
        ctx: Arc<WorkerContext>,
        wake: Arc<Notify>,
        cancel: CancellationToken,
        gone: CancellationToken,
    ) -> Worker {
        Worker {
            ctx,
            wake,
            cancel,
            gone,
            prober: None,
            pod_ip: String::new(),
            backoff: BackOff::default(),
            pull_failures: HashMap::new(),
            waiting: HashMap::new(),
            volume_error: None,
            messages: HashMap::new(),
            start_time: None,
            previous: None,
            errors: 0,
            trace: None,
            runtime_wait: Arc::default(),
        }
    }

    async fn run(
        mut self,
        mut rx: watch::Receiver<PodWork>,
        wake: Arc<Notify>,
        cancel: CancellationToken,
    ) {
        let mut next_wake: Option<tokio::time::Instant> = None;
        loop {
            let work = rx.borrow_and_update().clone();
            let outcome = match &work {
                PodWork::Sync(pod) => {
                    // `--v=4`: every CRI call and action of the pass, under
                    // the pod's name.
                    let span = tracing::debug_span!("pod_sync", pod = %pod::full_name(pod));
                    // Boxed: a sync's many awaits would otherwise size the
                    // worker's task, which waits between syncs for months.
                    tracing::Instrument::instrument(Box::pin(self.sync(pod)), span).await
                }
                PodWork::Terminate {
                    uid,
                    full_name,
                    pod,
                } => {
                    match Box::pin(self.terminate(uid, full_name, pod.as_deref())).await {
                        Ok(()) => {
                            // Done, unless a new update arrived meanwhile.
                            if !rx.has_changed().unwrap_or(false) {
                                let _ =
                                    self.ctx.done.send(WorkerDone::Removed { uid: uid.clone() });
                                return;
                            }
                            Ok(None)
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            next_wake = match outcome {
                Ok(at) => {
                    self.errors = 0;
                    at.map(nanos_to_instant)
                }
                Err(e) => {
                    self.errors += 1;
                    let delay = retry_delay(self.errors);
                    tracing::warn!(pod = %work_name(&work), error = %e, retry_in = ?delay, "pod sync failed");
                    Some(tokio::time::Instant::now() + delay)
                }
            }
            .or(next_wake.filter(|w| *w > tokio::time::Instant::now()));
            let sleep = async {
                match next_wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                changed = rx.changed() => if changed.is_err() { return },
                _ = wake.notified() => {},
                _ = sleep => { next_wake = None; },
            }
        }
    }

    /// One pass: observe, plan, act, observe, write status. Returns when the
    /// worker should look again on its own (a back-off ending).
    async fn sync(&mut self, pod: &Arc<Pod>) -> Result<Option<i64>, RuntimeError> {
        let uid = pod::uid(pod);
        let rt = self.ctx.runtime.clone();
        if self.start_time.is_none() {
            self.begin_trace(pod);
        }
        let start = *self.start_time.get_or_insert_with(jiff::Timestamp::now);
        if self.prober.is_none() {
            self.prober = Some(PodProber::start(
                self.ctx.prober.clone(),
                pod,
                self.wake.clone(),
                self.cancel.clone(),
            ));
        }
        let mut obs = observe_pod(rt.as_ref(), uid).await?;
        if self.kill_unhealthy(pod, &obs).await? {
            obs = observe_pod(rt.as_ref(), uid).await?;
        }
        let desired = desired_pod(pod);
        let now = now_nanos();
        let mut observed = obs.to_plan_input();
        if let Some(p) = &self.prober {
            observed.startup_succeeded = p.startup_succeeded();
        }
        let planned = plan::plan(&desired, &observed, &self.backoff, now);
        let mut result = Ok(());
        for w in &planned.waiting {
            let desc = kubelet_events::pod_desc(pod::name(pod), pod::namespace(pod), uid);
            let event = kubelet_events::back_off_restarting(&w.name, &desc);
            self.ctx.container_event(pod, &w.name, event);
            self.waiting.insert(
                w.name.clone(),
                WaitingReason {
                    reason: "CrashLoopBackOff".into(),
                    message: format!(
                        "back-off {:?} restarting failed container={} pod={}",
                        self.backoff.delay(&w.name).unwrap_or_default(),
                        w.name,
                        pod::full_name(pod)
                    ),
                },
            );
        }
        // Killing a pod takes up to its grace period (sidecars stop only
        // after the app containers): the status says first what the kill
        // is about, as the kubelet's does (it writes the status before
        // acting), instead of showing the finished containers running.
        if planned
            .actions
            .iter()
            .any(|a| matches!(a, Action::KillPod { .. }))
        {
            self.write_status(pod, &obs, start).await;
        }
        let mut current = obs
            .sandboxes
            .iter()
            .filter(|s| s.state == PodSandboxState::Ready)
            .max_by_key(|s| (s.metadata.attempt, s.created_at))
            .map(|s| CurrentSandbox {
                id: s.id.clone(),
                attempt: s.metadata.attempt,
                ips: None,
            });
        // A start (the sandbox, the containers) is counted while this pass
        // acts: the API writers hold back meanwhile (`kubeapi::call_count`).
        let starting = planned.starts().then(|| self.ctx.pod_starts.begin());
        for action in &planned.actions {
            tracing::info!(pod = %pod::full_name(pod), uid, ?action, "pod action");
            if let Err(e) = self.act(pod, &obs, &mut current, action).await {
                result = Err(e);
                // A sidecar or app container that cannot start holds back
                // none of the others (the kubelet's SyncPod starts each in
                // turn whatever the last one did); anything else stops the
                // pass.
                let kind = match action {
                    Action::StartContainer { kind, .. } => Some(*kind),
                    _ => None,
                };
                if !matches!(kind, Some(ContainerKind::Sidecar | ContainerKind::App)) {
                    break;
                }
            }
        }
        drop(starting);
        let obs = if planned.actions.is_empty() {
            obs
        } else {
            observe_pod(rt.as_ref(), uid).await?
        };
        self.write_status(pod, &obs, start).await;
        self.backoff.gc(now);
        let mut wake = planned.next_wake();
        // A failed pull is retried when its back-off ends.
        for (name, (at, _)) in &self.pull_failures {
            if let Some(until) = self.backoff.blocked_until(&pull_key(name), *at, now) {
                wake = Some(wake.map_or(until, |w: i64| w.min(until)));
            }
        }
        result.map(|()| wake)
    }

    async fn act(
        &mut self,
        pod: &Pod,
        obs: &Observation,
        current: &mut Option<CurrentSandbox>,
        action: &Action,
    ) -> Result<(), RuntimeError> {
        match action {
            Action::KillPod { reason } => {
                tracing::info!(pod = %pod::full_name(pod), reason, "killing pod");
                *current = None;
                kill_all(
                    self.ctx.clone(),
                    Some(pod),
                    &self.pod_ip,
                    obs,
                    mapping::termination_grace_period(pod),
                )
                .await
            }
            Action::RemoveSandbox { id } => self.remove_old_sandbox(&pod::full_name(pod), id).await,
            Action::KillContainer { id, name, reason } => {
                tracing::info!(pod = %pod::full_name(pod), container = name, reason, "killing container");
                let grace = mapping::termination_grace_period(pod);
                let why = match reason.as_str() {
                    plan::SPEC_CHANGED => Some(kubelet_events::definition_changed(name)),
                    plan::SIDECAR_SPEC_CHANGED => {
                        Some(kubelet_events::init_definition_changed(name))
                    }
                    _ => None,
                };
                let (ctx, ip) = (&self.ctx, &self.pod_ip);
                kill_container(ctx, Some(pod), ip, id, name, why.as_deref(), grace).await
            }
            Action::CreateSandbox { attempt } => {
                let id = self.create_sandbox(pod, *attempt).await?;
                *current = Some(CurrentSandbox {
                    id,
                    attempt: *attempt,
                    ips: None,
                });
                Ok(())
            }
            Action::StartContainer {
                kind,
                name,
                attempt,
                restart_count,
                restart,
            } => {
                let Some(sandbox) = current.as_mut() else {
                    return Ok(()); // the plan only starts containers in a ready sandbox
                };
                self.start_container(
                    pod,
                    sandbox,
                    *kind,
                    name,
                    *attempt,
                    *restart_count,
                    *restart,
                )
                .await
            }
        }
    }
}

fn refused(e: mapping::MappingError) -> RuntimeError {
    RuntimeError::Refused {
        op: "mapping",
        message: e.to_string(),
    }
}

fn work_name(w: &PodWork) -> String {
    match w {
        PodWork::Sync(p) => pod::full_name(p),
        PodWork::Terminate { full_name, .. } => full_name.clone(),
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod hooks_tests;

#[cfg(test)]
mod events_tests;

#[cfg(test)]
mod volumes_tests;

#[cfg(test)]
mod sidecar_tests;

#[cfg(test)]
mod startup_tests;
