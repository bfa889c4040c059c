//! The prober of one pod (the kubelet's prober manager, per pod): one task
//! per (container, probe type), each driving a
//! [`ProbeState`] on its period and
//! running its handler when the machine says so.
//!
//! Invariants: probe tasks never change the runtime (an exec probe only
//! runs ExecSync); they publish readings and liveness or startup failures,
//! and wake the pod worker, which alone kills containers and writes the
//! status. Tasks read the containers the worker last observed (a watch
//! channel), so a probe never acts on an older view than the worker's.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::handlers::{ProbeOutcome, ProbeRunner};
use super::resolve::{PodAddress, probe_action};
use crate::cri::ContainerStatus;
use crate::events::recorder::{EventObject, EventRecorder};
use crate::pod;
use crate::prober::{
    ContainerProbeResults, ProbeReading, ProbeResult, ProbeSpec, ProbeState, ProbeTarget,
    ProbeType, Tick,
};

/// Where probe runs are counted (`/metrics`); `None` in tests.
pub trait ProbeRecorder: Send + Sync {
    fn record(
        &self,
        pod: &Pod,
        container: &str,
        probe_type: ProbeType,
        result: &str,
        took: Duration,
    );
}

/// What every pod's prober shares.
pub struct ProberContext {
    pub runner: Arc<dyn ProbeRunner>,
    pub recorder: Option<Arc<dyn ProbeRecorder>>,
    /// When the agent started: the first probes wait a random part of a
    /// period only within one period of it.
    pub agent_started: Timestamp,
    pub node_ip: String,
    /// Every schedule and tick reads `now` here (the wall clock in the
    /// agent; tests follow tokio's paused time).
    pub clock: Arc<dyn Clock>,
    /// Where `Unhealthy` and `ProbeWarning` go, as the kubelet's prober
    /// records them: on every failed or errored run, not only on a change.
    pub events: Arc<dyn EventRecorder>,
}

/// A liveness or startup failure the worker must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    pub container: String,
    /// The instance that failed (bare CRI ID): a newer one is left alone.
    pub container_id: String,
    pub probe_type: ProbeType,
    pub output: String,
    /// The probe's terminationGracePeriodSeconds, if set.
    pub grace: Option<i64>,
    /// The container is a sidecar (an init container with `restartPolicy:
    /// Always`): the kubelet words its `Killing` event apart.
    pub sidecar: bool,
}

/// What the worker last observed of the pod.
#[derive(Debug, Clone, Default)]
struct Observed {
    containers: Vec<ContainerStatus>,
    pod_ip: String,
}

#[derive(Default)]
struct Shared {
    readings: HashMap<(String, ProbeType), ProbeReading>,
    unhealthy: Vec<Unhealthy>,
}

/// The probers of one pod. Dropping it (or [`PodProber::stop`]) ends its
/// tasks.
pub struct PodProber {
    shared: Arc<Mutex<Shared>>,
    observed: watch::Sender<Arc<Observed>>,
    cancel: CancellationToken,
    /// (container, type) of every probe the pod has.
    probes: Vec<(String, ProbeType)>,
}

impl Drop for PodProber {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The reading of a probe that has not decided anything yet.
fn initial_reading(probe_type: ProbeType) -> ProbeReading {
    ProbeReading {
        container_id: None,
        result: probe_type.initial_result(),
    }
}

/// A fraction of a period in `0.0..1.0`, from the process's random hasher
/// keys (no random number crate needed for a start-up jitter).
fn jitter_fraction(seed: &str) -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(seed.as_bytes());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl PodProber {
    /// Starts a task for every probe of the pod's app containers and
    /// sidecars (init containers with `restartPolicy: Always`); validation
    /// refuses probes on other init containers, and the kubelet would not
    /// run them. A probe whose spec cannot be read is reported once and not
    /// run (validation refuses such manifests first).
    pub fn start(
        ctx: Arc<ProberContext>,
        pod: &Arc<Pod>,
        wake: Arc<Notify>,
        cancel: CancellationToken,
    ) -> PodProber {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (observed, rx) = watch::channel(Arc::new(Observed::default()));
        let cancel = cancel.child_token();
        let mut probes = Vec::new();
        // The worker's own object, shared rather than copied.
        let pod = Arc::clone(pod);
        let spec = pod.spec.iter();
        let sidecars = spec
            .clone()
            .flat_map(|s| s.init_containers.iter().flatten())
            .filter(|c| pod::is_restartable_init_container(c));
        let containers = spec.flat_map(|s| s.containers.iter()).chain(sidecars);
        for c in containers {
            for probe_type in ProbeType::ALL {
                let Some(probe) = probe_type.probe_of(c) else {
                    continue;
                };
                let spec = match ProbeSpec::from_probe(probe) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(pod = %pod::full_name(&pod), container = %c.name, probe = probe_type.as_str(), error = %e, "probe cannot run");
                        continue;
                    }
                };
                probes.push((c.name.clone(), probe_type));
                let task = ProbeTask {
                    ctx: ctx.clone(),
                    pod: pod.clone(),
                    container: c.name.clone(),
                    has_startup: c.startup_probe.is_some(),
                    sidecar: pod::is_restartable_init_container(c),
                    probe_type,
                    spec,
                    shared: shared.clone(),
                    observed: rx.clone(),
                    wake: wake.clone(),
                };
                tokio::spawn(task.run(cancel.clone()));
            }
        }
        PodProber {
            shared,
            observed,
            cancel,
            probes,
        }
    }

    /// True when the pod has no probe to run.
    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// Hands the probes what the worker observed: the pod's containers and
    /// its IP (empty for a host-network pod).
    pub fn observe(&self, containers: &[ContainerStatus], pod_ip: &str) {
        self.observed.send_replace(Arc::new(Observed {
            containers: containers.to_vec(),
            pod_ip: pod_ip.to_owned(),
        }));
    }

    /// Readiness and startup readings by container, for the status.
    pub fn results(&self) -> HashMap<String, ContainerProbeResults> {
        let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: HashMap<String, ContainerProbeResults> = HashMap::new();
        for (name, probe_type) in &self.probes {
            let entry = out.entry(name.clone()).or_default();
            let reading = shared
                .readings
                .get(&(name.clone(), *probe_type))
                .cloned()
                .unwrap_or_else(|| initial_reading(*probe_type));
            match probe_type {
                ProbeType::Readiness => entry.readiness = Some(reading),
                ProbeType::Startup => entry.startup = Some(reading),
                ProbeType::Liveness => {}
            }
        }
        out
    }

    /// The IDs of the container instances whose startup probe has
    /// succeeded (a sidecar's next init container waits for it).
    pub fn startup_succeeded(&self) -> std::collections::BTreeSet<String> {
        let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared
            .readings
            .iter()
            .filter(|((_, t), r)| *t == ProbeType::Startup && r.result == ProbeResult::Success)
            .filter_map(|(_, r)| r.container_id.clone())
            .collect()
    }

    /// The liveness and startup failures recorded since the last call.
    pub fn take_unhealthy(&self) -> Vec<Unhealthy> {
        std::mem::take(
            &mut self
                .shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .unhealthy,
        )
    }

    /// Puts back failures the worker could not act on (its kill failed),
    /// ahead of newer ones: the probe holds for that instance and will not
    /// report it again, so only this brings the kill back on the retry.
    pub fn return_unhealthy(&self, failures: Vec<Unhealthy>) {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let newer = std::mem::replace(&mut shared.unhealthy, failures);
        shared.unhealthy.extend(newer);
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

struct ProbeTask {
    ctx: Arc<ProberContext>,
    pod: Arc<Pod>,
    /// The container's name: the container itself is read from `pod` when
    /// a probe runs, so that each long-lived task holds no copy of it.
    container: String,
    has_startup: bool,
    sidecar: bool,
    probe_type: ProbeType,
    spec: ProbeSpec,
    shared: Arc<Mutex<Shared>>,
    observed: watch::Receiver<Arc<Observed>>,
    wake: Arc<Notify>,
}

impl ProbeTask {
    async fn run(self, cancel: CancellationToken) {
        let seed = format!(
            "{}/{}/{:?}/{}",
            pod::uid(&self.pod),
            self.container,
            self.probe_type,
            self.ctx.clock.now()
        );
        let mut state = ProbeState::new(
            self.probe_type,
            &self.spec,
            self.ctx.clock.now(),
            self.ctx.agent_started,
            jitter_fraction(&seed),
        );
        let host_network = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let mut observed_rx = self.observed.clone();
        loop {
            let wait = state
                .next_due()
                .duration_since(self.ctx.clock.now())
                .max(jiff::SignedDuration::ZERO);
            // Never sleep past a period: a wall clock that stepped back is
            // caught at the next tick (`ProbeState::tick` restarts the
            // schedule) instead of after the step.
            let wait = Duration::try_from(wait)
                .unwrap_or_default()
                .min(self.spec.period);
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                changed = observed_rx.changed(), if self.probe_type == ProbeType::Readiness => {
                    if changed.is_err() {
                        return;
                    }
                    // A container instance with no readiness result yet is
                    // probed at once, not a period later (the kubelet's
                    // manual trigger from UpdatePodStatus).
                    let observed = observed_rx.borrow_and_update().clone();
                    let fresh = ProbeTarget::from_runtime(&observed.containers, &self.container, None)
                        .is_some_and(|t| t.running && state.container_id() != Some(t.container_id.as_str()));
                    if !fresh {
                        continue;
                    }
                    state.trigger();
                }
            }
            let observed = self.observed.borrow().clone();
            let startup = self.has_startup.then(|| self.reading(ProbeType::Startup));
            let target =
                ProbeTarget::from_runtime(&observed.containers, &self.container, startup.as_ref());
            let before = state.reading();
            let tick = state.tick(self.ctx.clock.now(), target.as_ref());
            if state.reading() != before {
                self.publish(&state);
            }
            if tick != Tick::Probe {
                continue;
            }
            let Some(target) = target else { continue };
            let addr = PodAddress {
                pod_ip: &observed.pod_ip,
                node_ip: &self.ctx.node_ip,
                host_network,
            };
            let started = Instant::now();
            let spec = self.pod.spec.as_ref();
            let container = (spec.into_iter())
                .flat_map(|s| {
                    s.containers
                        .iter()
                        .chain(s.init_containers.iter().flatten())
                })
                .find(|c| c.name == self.container);
            let action = match container {
                Some(c) => probe_action(&self.spec.action, c, &addr),
                None => Err(format!("container {:?} is not in the pod", self.container)),
            };
            let outcome = match action {
                Ok(action) => {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        o = self.ctx.runner.run_probe(&target.container_id, &action, self.spec.timeout) => o,
                    }
                }
                Err(reason) => ProbeOutcome::Error(reason),
            };
            let recorded = state.record(&outcome);
            if let Some(recorder) = &self.ctx.recorder {
                let label = match outcome {
                    ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => ProbeResult::Success,
                    ProbeOutcome::Failure(_) => ProbeResult::Failure,
                    ProbeOutcome::Error(_) => ProbeResult::Unknown,
                }
                .metric_label();
                recorder.record(
                    &self.pod,
                    &self.container,
                    self.probe_type,
                    label,
                    started.elapsed(),
                );
            }
            self.log(&outcome, recorded.log_error);
            self.record_event(&outcome);
            if recorded.changed {
                let output = match &outcome {
                    ProbeOutcome::Success(o)
                    | ProbeOutcome::Warning(o)
                    | ProbeOutcome::Failure(o) => o.as_str(),
                    ProbeOutcome::Error(_) => "",
                };
                tracing::info!(pod = %pod::full_name(&self.pod), container = %self.container, probe = self.probe_type.as_str(), result = recorded.result.as_str(), output, "probe result changed");
                self.publish(&state);
                if recorded.result == ProbeResult::Failure
                    && self.probe_type != ProbeType::Readiness
                {
                    let output = match &outcome {
                        ProbeOutcome::Failure(o) => o.clone(),
                        _ => String::new(),
                    };
                    self.shared
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .unhealthy
                        .push(Unhealthy {
                            container: self.container.clone(),
                            container_id: target.container_id.clone(),
                            probe_type: self.probe_type,
                            output,
                            grace: self.spec.termination_grace_period_seconds,
                            sidecar: self.sidecar,
                        });
                    // The worker kills it; readiness and startup changes
                    // woke it in `publish`.
                    self.wake.notify_one();
                }
            }
        }
    }

    fn reading(&self, probe_type: ProbeType) -> ProbeReading {
        self.shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .readings
            .get(&(self.container.clone(), probe_type))
            .cloned()
            .unwrap_or_else(|| initial_reading(probe_type))
    }

    /// Publishes the machine's reading; a readiness or startup change wakes
    /// the worker so that the status (and the mirror pod) follow at once.
    fn publish(&self, state: &ProbeState) {
        let reading = state.reading();
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let key = (self.container.clone(), self.probe_type);
        let changed = shared.readings.get(&key) != Some(&reading);
        shared.readings.insert(key, reading);
        drop(shared);
        if changed && self.probe_type != ProbeType::Liveness {
            self.wake.notify_one();
        }
    }

    fn record_event(&self, outcome: &ProbeOutcome) {
        let probe = self.probe_type;
        let event = match outcome {
            ProbeOutcome::Success(_) => return,
            ProbeOutcome::Warning(output) => super::probe_events::probe_warning(probe, output),
            ProbeOutcome::Failure(output) => super::probe_events::probe_failed(probe, output),
            ProbeOutcome::Error(reason) => super::probe_events::probe_errored(probe, reason),
        };
        let object = EventObject::container(&self.pod, &self.container);
        self.ctx.events.event(&object, event);
    }

    fn log(&self, outcome: &ProbeOutcome, first_error: bool) {
        let pod = pod::full_name(&self.pod);
        let container = &self.container;
        let probe = self.probe_type.as_str();
        match outcome {
            ProbeOutcome::Success(_) => {}
            ProbeOutcome::Warning(output) => {
                tracing::warn!(pod, container, probe, output = %output, "{probe} probe warning (ProbeWarning)")
            }
            ProbeOutcome::Failure(output) => {
                tracing::debug!(pod, container, probe, output = %output, "{probe} probe failed (Unhealthy)")
            }
            ProbeOutcome::Error(reason) if first_error => {
                tracing::warn!(pod, container, probe, reason = %reason, "{probe} probe errored and changes nothing until it can run")
            }
            ProbeOutcome::Error(_) => {}
        }
    }
}

/// Log wording of a probe kill, as the kubelet's `Killing` event says it
/// (for a sidecar, restarted whatever the pod's restartPolicy, it adds
/// nothing about a restart).
pub fn kill_message(u: &Unhealthy) -> String {
    let probe = u.probe_type.as_str().to_lowercase();
    if u.sidecar {
        format!("Init container {} failed {probe} probe", u.container)
    } else {
        format!(
            "Container {} failed {probe} probe, will be restarted",
            u.container
        )
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
