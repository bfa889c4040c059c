//! Prometheus metrics under the kubelet's names where the kubelet has one:
//! `kubelet_running_pods`, `kubelet_running_containers{container_state}`,
//! `kubelet_mirror_pods`, `kubelet_runtime_operations_total`,
//! `kubelet_runtime_operations_errors_total` and
//! `kubelet_runtime_operations_duration_seconds` (by `operation_type`).
//!
//! Probes: `prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`
//! and `prober_probe_duration_seconds{probe_type,container,pod,namespace}`,
//! as the kubelet's prober names them.
//!
//! The process: `process_*`, as every Kubernetes component (see
//! [`super::process_stats`]), and `crilet_tokio_alive_tasks`, the async
//! tasks alive (a leak shows as growth).
//!
//! The container event stream: `crilet_container_events_total` (received),
//! `crilet_container_events_coalesced_total` (replaced one still waiting
//! for the sync loop) and `crilet_container_events_missed_total` (changes a
//! relist found that no event announced).
//!
//! Runtime operations are counted as they happen (the CRI adapter reports
//! each call); the gauges are set from the snapshots at scrape time.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use std::sync::Arc;

use super::StatsSources;
use crate::cri::client::OperationObserver;
use crate::images::report::GcCounters;
use crate::images::select::GcReason;
use crate::pleg::container_events::EventCounters;
use crate::pod::{self, Pod};
use crate::prober::ProbeType;
use crate::prober::manager::ProbeRecorder;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Operation {
    operation_type: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContainerState {
    container_state: String,
}

/// The labels of `prober_probe_total` (the kubelet's, with `pod_uid`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeResultLabels {
    probe_type: String,
    result: String,
    container: String,
    pod: String,
    namespace: String,
    pod_uid: String,
}

/// The labels of `prober_probe_duration_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeDurationLabels {
    probe_type: String,
    container: String,
    pod: String,
    namespace: String,
}

/// One probe run, as the prober reports it.
#[derive(Debug, Clone, Copy)]
pub struct ProbeRun<'a> {
    /// `Liveness`, `Readiness` or `Startup`.
    pub probe_type: &'a str,
    /// `successful`, `failed` or `unknown`.
    pub result: &'a str,
    pub container: &'a str,
    /// The pod's name (the static pod's, as on the mirror pod).
    pub pod: &'a str,
    pub namespace: &'a str,
    pub pod_uid: &'a str,
    pub elapsed: Duration,
}

fn probe_duration_histogram() -> Histogram {
    // Prometheus' default buckets, as the kubelet's prober uses.
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

fn duration_histogram() -> Histogram {
    // 5 ms to ~20 s, like the kubelet's runtime operation buckets.
    Histogram::new(exponential_buckets(0.005, 2.5, 10))
}

pub struct Metrics {
    registry: Registry,
    operations: Family<Operation, Counter>,
    errors: Family<Operation, Counter>,
    durations: Family<Operation, Histogram, fn() -> Histogram>,
    running_pods: Gauge,
    running_containers: Family<ContainerState, Gauge>,
    mirror_pods: Gauge,
    image_gc: std::sync::OnceLock<Arc<GcCounters>>,
    gc_images: Family<Reason, Counter>,
    gc_bytes: Family<Reason, Counter>,
    gc_collections: Counter,
    gc_shortfalls: Counter,
    container_events: std::sync::OnceLock<Arc<EventCounters>>,
    /// Received, coalesced, missed.
    event_counts: [Counter; 3],
    alive_tasks: Gauge,
    /// The client and the serving certificate's pair files, when the
    /// certificate manager keeps them, and their TTL gauges.
    certificates: std::sync::OnceLock<Certificates>,
    certificate_ttls: [Gauge<f64, std::sync::atomic::AtomicU64>; 2],
    /// Gauges, not counters, so that the names are the kubelet's exactly
    /// (a counter's name gets `_total`; the kubelet's has none).
    renew_errors: [Gauge; 2],
    probes: Family<ProbeResultLabels, Counter>,
    probe_durations: Family<ProbeDurationLabels, Histogram, fn() -> Histogram>,
    process: super::process_stats::ProcessMetrics,
}

/// The certificate managers' files and failure counts, client then server.
struct Certificates {
    pairs: [Option<std::path::PathBuf>; 2],
    errors: [Arc<std::sync::atomic::AtomicU64>; 2],
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

/// Raises a counter to `value` (the source counts only ever increase).
fn catch_up(c: &Counter, value: u64) {
    let now = c.get();
    if value > now {
        c.inc_by(value - now);
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let operations = Family::<Operation, Counter>::default();
        let errors = Family::<Operation, Counter>::default();
        let durations = Family::<Operation, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        let running_pods = Gauge::default();
        let running_containers = Family::<ContainerState, Gauge>::default();
        let mirror_pods = Gauge::default();
        registry.register(
            "kubelet_runtime_operations",
            "Cumulative number of runtime operations by operation type.",
            operations.clone(),
        );
        registry.register(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type.",
            errors.clone(),
        );
        registry.register(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations, by operation type.",
            durations.clone(),
        );
        registry.register(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox.",
            running_pods.clone(),
        );
        registry.register(
            "kubelet_running_containers",
            "Number of containers currently running.",
            running_containers.clone(),
        );
        registry.register(
            "kubelet_mirror_pods",
            "Number of mirror pods crilet holds for its static pods.",
            mirror_pods.clone(),
        );
        let gc_images = Family::<Reason, Counter>::default();
        let gc_bytes = Family::<Reason, Counter>::default();
        let gc_collections = Counter::default();
        let gc_shortfalls = Counter::default();
        registry.register(
            "kubelet_image_garbage_collected",
            "Images removed by image GC, by reason (space or age).",
            gc_images.clone(),
        );
        registry.register(
            "crilet_image_gc_freed_bytes",
            "Bytes (image sizes) image GC removed, by reason.",
            gc_bytes.clone(),
        );
        registry.register(
            "crilet_image_gc_collections",
            "Image GC collections run.",
            gc_collections.clone(),
        );
        registry.register(
            "crilet_image_gc_shortfalls",
            "Collections that could not bring usage down to the low threshold.",
            gc_shortfalls.clone(),
        );
        let certificate_ttls: [Gauge<f64, std::sync::atomic::AtomicU64>; 2] = Default::default();
        let ttl_help =
            "seconds until the certificate expires (negative if it has), as the kubelet's";
        for (name, gauge) in [
            (
                "kubelet_certificate_manager_client_ttl_seconds",
                &certificate_ttls[0],
            ),
            (
                "kubelet_certificate_manager_server_ttl_seconds",
                &certificate_ttls[1],
            ),
        ] {
            registry.register(name, ttl_help, gauge.clone());
        }
        let renew_errors: [Gauge; 2] = Default::default();
        for (name, counter) in [
            (
                "kubelet_certificate_manager_client_expiration_renew_errors",
                &renew_errors[0],
            ),
            ("kubelet_server_expiration_renew_errors", &renew_errors[1]),
        ] {
            registry.register(
                name,
                "Counter of certificate renewal errors.",
                counter.clone(),
            );
        }
        let event_counts: [Counter; 3] = Default::default();
        for (name, help, c) in [
            (
                "crilet_container_events",
                "Container events received from the runtime's GetContainerEvents stream.",
                &event_counts[0],
            ),
            (
                "crilet_container_events_coalesced",
                "Container events that replaced an older event of the same container still waiting for the sync loop.",
                &event_counts[1],
            ),
            (
                "crilet_container_events_missed",
                "Container changes a relist found that no event announced.",
                &event_counts[2],
            ),
        ] {
            registry.register(name, help, c.clone());
        }
        let alive_tasks = Gauge::default();
        registry.register(
            "crilet_tokio_alive_tasks",
            "Async tasks alive in crilet's runtime.",
            alive_tasks.clone(),
        );
        let probes = Family::<ProbeResultLabels, Counter>::default();
        let probe_durations =
            Family::<ProbeDurationLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                probe_duration_histogram as fn() -> Histogram,
            );
        registry.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            probes.clone(),
        );
        registry.register(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response.",
            probe_durations.clone(),
        );
        let process = super::process_stats::ProcessMetrics::register(&mut registry);
        Metrics {
            process,
            registry,
            probes,
            probe_durations,
            operations,
            errors,
            durations,
            running_pods,
            running_containers,
            mirror_pods,
            image_gc: std::sync::OnceLock::new(),
            gc_images,
            gc_bytes,
            gc_collections,
            gc_shortfalls,
            container_events: std::sync::OnceLock::new(),
            event_counts,
            alive_tasks,
            certificates: std::sync::OnceLock::new(),
            certificate_ttls,
            renew_errors,
        }
    }

    /// Exports the TTL of the client certificate in `client` and of the
    /// serving certificate in `server` (pair files read at each scrape),
    /// and their managers' failed requests (`errors`: client, server).
    pub fn set_certificates(
        &self,
        client: Option<std::path::PathBuf>,
        server: Option<std::path::PathBuf>,
        errors: [Arc<std::sync::atomic::AtomicU64>; 2],
    ) {
        let _ = self.certificates.set(Certificates {
            pairs: [client, server],
            errors,
        });
    }

    /// Counts one probe run and, unless it errored, its duration.
    pub fn observe_probe(&self, run: &ProbeRun) {
        self.probes
            .get_or_create(&ProbeResultLabels {
                probe_type: run.probe_type.to_owned(),
                result: run.result.to_owned(),
                container: run.container.to_owned(),
                pod: run.pod.to_owned(),
                namespace: run.namespace.to_owned(),
                pod_uid: run.pod_uid.to_owned(),
            })
            .inc();
        if run.result != "unknown" {
            self.probe_durations
                .get_or_create(&ProbeDurationLabels {
                    probe_type: run.probe_type.to_owned(),
                    container: run.container.to_owned(),
                    pod: run.pod.to_owned(),
                    namespace: run.namespace.to_owned(),
                })
                .observe(run.elapsed.as_secs_f64());
        }
    }

    /// Exports image GC's counters from now on.
    pub fn set_image_gc(&self, counters: Arc<GcCounters>) {
        let _ = self.image_gc.set(counters);
    }

    /// Exports the container event stream's counters from now on.
    pub fn set_container_events(&self, counters: Arc<EventCounters>) {
        let _ = self.container_events.set(counters);
    }

    /// The counters kept elsewhere (container events, image GC) and the
    /// live task count, now.
    fn catch_up_counters(&self) {
        if let Some(ev) = self.container_events.get() {
            use std::sync::atomic::Ordering::Relaxed;
            let values = [&ev.received, &ev.coalesced, &ev.missed];
            for (c, v) in self.event_counts.iter().zip(values) {
                catch_up(c, v.load(Relaxed));
            }
        }
        if let Some(c) = self.certificates.get() {
            for (pair, gauge) in c.pairs.iter().zip(&self.certificate_ttls) {
                if let Some(ttl) = pair.as_deref().and_then(certificate_ttl) {
                    gauge.set(ttl);
                }
            }
            for (n, counter) in c.errors.iter().zip(&self.renew_errors) {
                counter.set(n.load(std::sync::atomic::Ordering::Relaxed) as i64);
            }
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            (self.alive_tasks).set(handle.metrics().num_alive_tasks() as i64);
        }
        if let Some(gc) = self.image_gc.get() {
            use std::sync::atomic::Ordering::Relaxed;
            for reason in [GcReason::Space, GcReason::Age] {
                let label = Reason {
                    reason: reason.as_str().to_owned(),
                };
                catch_up(
                    &self.gc_images.get_or_create(&label),
                    gc.images_removed(reason),
                );
                catch_up(&self.gc_bytes.get_or_create(&label), gc.bytes_freed(reason));
            }
            catch_up(&self.gc_collections, gc.collections.load(Relaxed));
            catch_up(&self.gc_shortfalls, gc.space_shortfalls.load(Relaxed));
        }
    }

    /// Sets the gauges from the snapshots and renders the text format.
    pub fn render(&self, sources: &StatsSources) -> String {
        self.catch_up_counters();
        self.process
            .update(&super::process_stats::read_self(std::path::Path::new(
                "/proc",
            )));
        let view = sources.view();
        self.mirror_pods
            .set(view.manager.get_mirror_pods().len() as i64);
        if let Some(sample) = sources.sample() {
            self.running_pods.set(sample.pods.len() as i64);
            for (state, n) in &sample.container_states {
                self.running_containers
                    .get_or_create(&ContainerState {
                        container_state: state.clone(),
                    })
                    .set(*n as i64);
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Seconds from now until the first certificate in `pair` expires,
/// negative once it has; None while there is none.
fn certificate_ttl(pair: &std::path::Path) -> Option<f64> {
    use crate::kubeapi::transport::{first_certificate, validity};
    let (_, not_after) = validity(&first_certificate(pair)?).ok()?;
    let now = std::time::SystemTime::now();
    Some(match not_after.duration_since(now) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    })
}

/// The kubelet's operation_type for a CRI method: `RunPodSandbox` →
/// `run_podsandbox`, `ImageFsInfo` → `image_fs_info`.
pub fn operation_type(op: &str) -> String {
    let op = op.replace("PodSandbox", "Podsandbox");
    let mut out = String::with_capacity(op.len() + 4);
    for (i, ch) in op.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

impl OperationObserver for Metrics {
    fn observe(&self, op: &'static str, elapsed: Duration, ok: bool) {
        let label = Operation {
            operation_type: operation_type(op),
        };
        self.operations.get_or_create(&label).inc();
        if !ok {
            self.errors.get_or_create(&label).inc();
        }
        self.durations
            .get_or_create(&label)
            .observe(elapsed.as_secs_f64());
    }
}

/// The prober records each probe run here (`prober_probe_total`,
/// `prober_probe_duration_seconds`).
impl ProbeRecorder for Metrics {
    fn record(
        &self,
        pod: &Pod,
        container: &str,
        probe_type: ProbeType,
        result: &str,
        took: Duration,
    ) {
        self.observe_probe(&ProbeRun {
            probe_type: probe_type.as_str(),
            result,
            container,
            pod: pod::name(pod),
            namespace: pod::namespace(pod),
            pod_uid: pod::uid(pod),
            elapsed: took,
        });
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
