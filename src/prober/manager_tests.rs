//! The probe driver on tokio's paused clock: [`FakeHandlers`] answer the
//! probes, a recording [`ProbeRecorder`] counts the runs, and a
//! [`TokioClock`] makes probe schedules follow tokio's time. Every probe
//! here has a 10 s period and the agent started long ago (no start-up
//! jitter), so runs happen at 0 s, 10 s, 20 s, ... after `start`; tests
//! look in between, at 5 s, 15 s, ...

use super::*;
use crate::cri::{ContainerMetadata, ContainerState};
use crate::events::recorder::FakeRecorder;
use crate::pod::defaults::apply_api_defaults;
use crate::prober::clock::TokioClock;
use crate::prober::handlers::ProbeAction as Run;
use crate::prober::handlers::fake::{FakeHandlers, HandlerCall};
use serde_json::json;

/// (container, probe type, result label) of each recorded run.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, &'static str, String)>>);

impl ProbeRecorder for Recorder {
    fn record(&self, _: &Pod, container: &str, probe_type: ProbeType, result: &str, _: Duration) {
        let run = (container.to_owned(), probe_type.as_str(), result.to_owned());
        self.0.lock().unwrap().push(run);
    }
}

impl Recorder {
    /// The result labels of one probe type, in order.
    fn results(&self, probe_type: &str) -> Vec<String> {
        let runs = self.0.lock().unwrap();
        let of_type = runs.iter().filter(|(_, t, _)| *t == probe_type);
        of_type.map(|(_, _, r)| r.clone()).collect()
    }
}

struct Harness {
    handlers: Arc<FakeHandlers>,
    recorder: Arc<Recorder>,
    events: Arc<FakeRecorder>,
    ctx: Arc<ProberContext>,
    wake: Arc<Notify>,
    base: tokio::time::Instant,
}

/// Call inside a paused runtime: the clock follows its time.
fn harness() -> Harness {
    let handlers = Arc::new(FakeHandlers::new());
    let recorder = Arc::new(Recorder::default());
    let events = Arc::new(FakeRecorder::new());
    let start = Timestamp::from_second(1_700_000_000).unwrap();
    let ctx = Arc::new(ProberContext {
        runner: handlers.clone(),
        recorder: Some(recorder.clone()),
        agent_started: start - jiff::SignedDuration::from_hours(24),
        node_ip: "10.0.0.1".into(),
        clock: Arc::new(TokioClock::new(start)),
        events: events.clone(),
    });
    Harness {
        handlers,
        recorder,
        events,
        ctx,
        wake: Arc::new(Notify::new()),
        base: tokio::time::Instant::now(),
    }
}

impl Harness {
    fn start(&self, pod: &Pod) -> PodProber {
        let cancel = CancellationToken::new();
        PodProber::start(
            self.ctx.clone(),
            &Arc::new(pod.clone()),
            self.wake.clone(),
            cancel,
        )
    }

    /// Lets tokio's time (and every task due meanwhile) run to `secs`
    /// after the harness was made.
    async fn until(&self, secs: u64) {
        tokio::time::sleep_until(self.base + Duration::from_secs(secs)).await;
    }

    /// (container ID, command) of every probe run so far.
    fn probes(&self) -> Vec<(String, String)> {
        let calls = self.handlers.calls().into_iter();
        calls
            .filter_map(|c| match c {
                HandlerCall::Probe {
                    container_id,
                    action: Run::Exec { command },
                    ..
                } => Some((container_id, command.join(" "))),
                HandlerCall::Probe { action, .. } => panic!("not an exec probe: {action:?}"),
                HandlerCall::Hook { .. } => None,
            })
            .collect()
    }

    /// The commands run against `id`, in order.
    fn commands_on(&self, id: &str) -> Vec<String> {
        let probes = self.probes().into_iter();
        probes
            .filter(|(c, _)| c == id)
            .map(|(_, cmd)| cmd)
            .collect()
    }

    /// Whether the worker was woken since the last look (takes the wake).
    async fn woken(&self) -> bool {
        let notified = self.wake.notified();
        tokio::time::timeout(Duration::ZERO, notified).await.is_ok()
    }
}

/// A pod "web" with one container "app" that has `fields` (its probes).
fn pod(fields: serde_json::Value) -> Pod {
    let mut c = json!({"name": "app", "image": "busybox"});
    for (k, v) in fields.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [c]}
    }))
    .unwrap();
    apply_api_defaults(&mut pod);
    pod
}

/// An exec probe running `cmd` every 10 s, with `more` fields.
fn exec_probe(cmd: &str, more: serde_json::Value) -> serde_json::Value {
    let mut p = json!({"exec": {"command": [cmd]}, "periodSeconds": 10});
    for (k, v) in more.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

fn run(cmd: &str) -> Run {
    Run::Exec {
        command: vec![cmd.into()],
    }
}

/// Container "app" as the runtime reports it, in `state`.
fn app(id: &str, attempt: u32, state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        id: id.into(),
        metadata: ContainerMetadata {
            name: "app".into(),
            attempt,
        },
        state,
        created_at: i64::from(attempt),
        image: "busybox".into(),
        ..Default::default()
    }
}

fn reading(id: Option<&str>, result: ProbeResult) -> ProbeReading {
    ProbeReading {
        container_id: id.map(str::to_owned),
        result,
    }
}

fn readiness(p: &PodProber) -> ProbeReading {
    p.results()["app"]
        .readiness
        .clone()
        .expect("a readiness probe")
}

fn startup(p: &PodProber) -> ProbeReading {
    p.results()["app"].startup.clone().expect("a startup probe")
}

#[tokio::test(start_paused = true)]
async fn readiness_turns_success_after_success_threshold_and_wakes_the_worker() {
    let h = harness();
    h.handlers
        .push_probe(ProbeOutcome::Failure("not yet".into()));
    h.handlers.push_probe(ProbeOutcome::Success("ok".into()));
    let probe = exec_probe("ready", json!({"successThreshold": 2}));
    let prober = h.start(&pod(json!({"readinessProbe": probe})));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "10.0.0.5");
    assert_eq!(readiness(&prober), reading(None, ProbeResult::Failure));

    h.until(5).await; // Failure
    assert_eq!(
        readiness(&prober),
        reading(Some("c1"), ProbeResult::Failure)
    );
    h.woken().await; // the reading now names c1
    h.until(15).await; // Success, 1 of 2
    assert_eq!(
        readiness(&prober),
        reading(Some("c1"), ProbeResult::Failure)
    );
    assert!(!h.woken().await, "nothing changed yet");
    h.until(25).await; // Success, 2 of 2
    assert_eq!(
        readiness(&prober),
        reading(Some("c1"), ProbeResult::Success)
    );
    assert!(h.woken().await, "a readiness change wakes the worker");
    assert_eq!(h.commands_on("c1"), ["ready", "ready", "ready"]);
    let first = &h.handlers.calls()[0];
    assert!(
        matches!(first, HandlerCall::Probe { timeout, .. } if *timeout == Duration::from_secs(1)),
        "timeoutSeconds defaults to 1: {first:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_container_is_probed_for_readiness_at_once_not_a_period_later() {
    let h = harness();
    let prober = h.start(&pod(
        json!({"readinessProbe": exec_probe("ready", json!({}))}),
    ));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "");
    h.until(2).await;
    assert_eq!(h.commands_on("c1"), ["ready"]);
    // Restarted at 2 s: the new instance is probed well before the 10 s tick.
    prober.observe(&[app("c2", 1, ContainerState::Running)], "");
    h.until(3).await;
    assert_eq!(h.commands_on("c2"), ["ready"], "{:?}", h.handlers.calls());
    // And then on the period's schedule, not twice as often.
    h.until(9).await;
    assert_eq!(h.commands_on("c2"), ["ready"]);
    h.until(11).await;
    assert_eq!(h.commands_on("c2"), ["ready", "ready"]);
}

#[tokio::test(start_paused = true)]
async fn liveness_failure_is_reported_once_then_holds_until_a_new_container() {
    let h = harness();
    for output in ["one", "two", "three"] {
        h.handlers.push_probe(ProbeOutcome::Failure(output.into()));
    }
    let grace = json!({"failureThreshold": 3, "terminationGracePeriodSeconds": 7});
    let prober = h.start(&pod(json!({"livenessProbe": exec_probe("live", grace)})));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "");

    h.until(15).await; // two failures: below the threshold
    assert_eq!(prober.take_unhealthy(), []);
    assert!(!h.woken().await, "liveness wakes the worker only to kill");
    h.until(25).await; // the third
    let failure = Unhealthy {
        container: "app".into(),
        container_id: "c1".into(),
        probe_type: ProbeType::Liveness,
        output: "three".into(),
        grace: Some(7),
        sidecar: false,
    };
    assert_eq!(prober.take_unhealthy(), [failure]);
    assert!(h.woken().await);
    assert_eq!(prober.take_unhealthy(), [], "taken once");

    // On hold: c1 is not probed again, even though it still runs.
    h.until(65).await;
    assert_eq!(h.commands_on("c1").len(), 3);
    assert_eq!(prober.take_unhealthy(), []);
    // The restarted instance is probed (and passes: the script is empty).
    let restarted = [
        app("c1", 0, ContainerState::Exited),
        app("c2", 1, ContainerState::Running),
    ];
    prober.observe(&restarted, "");
    h.until(75).await;
    assert_eq!(h.commands_on("c2"), ["live"]);
    assert_eq!(h.commands_on("c1").len(), 3);
    assert_eq!(prober.take_unhealthy(), []);
}

#[tokio::test(start_paused = true)]
async fn every_run_that_fails_or_errors_records_an_event_on_the_container() {
    let h = harness();
    h.handlers
        .push_probe(ProbeOutcome::Failure("exit 1".into()));
    h.handlers
        .push_probe(ProbeOutcome::Error("no such port".into()));
    h.handlers.push_probe(ProbeOutcome::Success(String::new()));
    h.handlers
        .push_probe(ProbeOutcome::Warning("redirect".into()));
    h.handlers
        .push_probe(ProbeOutcome::Failure("exit 2".into()));
    let live = exec_probe("live", json!({"failureThreshold": 5}));
    let prober = h.start(&pod(json!({"livenessProbe": live})));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "");
    h.until(45).await;
    let got: Vec<_> = h.events.events().into_iter().collect();
    let want = [
        ("Unhealthy", "Liveness probe failed: exit 1"),
        (
            "Unhealthy",
            "Liveness probe errored and resulted in unknown state: no such port",
        ),
        ("ProbeWarning", "Liveness probe warning: redirect"),
        ("Unhealthy", "Liveness probe failed: exit 2"),
    ];
    let seen: Vec<_> = got
        .iter()
        .map(|(_, e)| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(seen, want);
    for (object, event) in &got {
        assert_eq!(object.field_path, "spec.containers{app}");
        assert_eq!((object.name.as_str(), object.uid.as_str()), ("web", "u1"));
        assert_eq!(event.type_, crate::events::recorder::EventType::Warning);
    }
}

#[tokio::test(start_paused = true)]
async fn liveness_and_readiness_wait_for_the_startup_probe() {
    let h = harness();
    for _ in 0..2 {
        let starting = ProbeOutcome::Failure("starting".into());
        h.handlers.push_probe_for(run("startup"), starting);
    }
    let prober = h.start(&pod(json!({
        "startupProbe": exec_probe("startup", json!({"failureThreshold": 10})),
        "livenessProbe": exec_probe("live", json!({})),
        "readinessProbe": exec_probe("ready", json!({})),
    })));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "");

    h.until(15).await; // two startup failures, below the threshold
    assert_eq!(h.commands_on("c1"), ["startup", "startup"]);
    assert_eq!(startup(&prober), reading(Some("c1"), ProbeResult::Unknown));
    assert_eq!(
        readiness(&prober),
        reading(Some("c1"), ProbeResult::Failure)
    );

    h.until(45).await; // startup passed at 20 s; the others run from then on
    let commands = h.commands_on("c1");
    let passed = commands.iter().rposition(|c| c == "startup").unwrap();
    assert_eq!(
        passed, 2,
        "the startup probe idles once passed: {commands:?}"
    );
    let after = &commands[passed + 1..];
    assert!(after.contains(&"live".to_string()), "{commands:?}");
    assert!(after.contains(&"ready".to_string()), "{commands:?}");
    assert!(!commands[..passed].iter().any(|c| c != "startup"));
    assert_eq!(startup(&prober), reading(Some("c1"), ProbeResult::Success));
    assert_eq!(
        readiness(&prober),
        reading(Some("c1"), ProbeResult::Success)
    );
    assert_eq!(prober.take_unhealthy(), []);
}

/// Container `name` as the runtime reports it, running.
fn running(name: &str, id: &str) -> ContainerStatus {
    ContainerStatus {
        metadata: ContainerMetadata {
            name: name.into(),
            attempt: 0,
        },
        ..app(id, 0, ContainerState::Running)
    }
}

#[tokio::test(start_paused = true)]
async fn sidecars_are_probed_and_plain_init_containers_are_not() {
    let h = harness();
    h.handlers
        .push_probe_for(run("side-live"), ProbeOutcome::Failure("dead".into()));
    let mut pod = pod(json!({}));
    let probes = json!({
        "startupProbe": exec_probe("side-startup", json!({})),
        "livenessProbe": exec_probe("side-live", json!({"failureThreshold": 1})),
    });
    let spec = pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![
        serde_json::from_value(json!({"name": "side", "image": "busybox",
            "restartPolicy": "Always",
            "startupProbe": probes["startupProbe"], "livenessProbe": probes["livenessProbe"]}))
        .unwrap(),
        // Validation refuses this; the prober would not run it either.
        serde_json::from_value(json!({"name": "setup", "image": "busybox",
            "livenessProbe": exec_probe("setup-live", json!({}))}))
        .unwrap(),
    ]);
    let prober = h.start(&pod);
    prober.observe(
        &[
            running("side", "s1"),
            running("setup", "i1"),
            app("c1", 0, ContainerState::Running),
        ],
        "",
    );

    h.until(5).await; // the startup probe passed at 0 s
    assert_eq!(prober.startup_succeeded(), ["s1".to_string()].into());
    assert_eq!(h.commands_on("i1"), Vec::<String>::new());
    h.until(15).await; // liveness ran at 10 s, after the startup probe, and failed
    let failure = Unhealthy {
        container: "side".into(),
        container_id: "s1".into(),
        probe_type: ProbeType::Liveness,
        output: "dead".into(),
        grace: None,
        sidecar: true,
    };
    assert_eq!(
        kill_message(&failure),
        "Init container side failed liveness probe"
    );
    assert_eq!(prober.take_unhealthy(), [failure]);
    assert_eq!(h.commands_on("s1"), ["side-startup", "side-live"]);
    assert_eq!(
        h.commands_on("i1"),
        Vec::<String>::new(),
        "a plain init container is not probed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_named_port_the_container_lacks_is_an_error_that_changes_nothing() {
    let h = harness();
    let prober = h.start(&pod(json!({
        "ports": [{"name": "metrics", "containerPort": 9100}],
        "readinessProbe": {"httpGet": {"port": "http"}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10, "failureThreshold": 1},
    })));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "10.0.0.5");

    h.until(5).await;
    h.woken().await; // the readiness reading now names c1
    h.until(35).await;
    assert_eq!(h.handlers.calls(), [], "nothing to run");
    assert_eq!(
        readiness(&prober),
        reading(Some("c1"), ProbeResult::Failure)
    );
    assert_eq!(
        prober.take_unhealthy(),
        [],
        "a bad liveness probe never kills"
    );
    assert!(!h.woken().await);
    let unknown = vec!["unknown".to_string(); 4];
    assert_eq!(h.recorder.results("Readiness"), unknown);
    assert_eq!(h.recorder.results("Liveness"), unknown);
}

#[tokio::test(start_paused = true)]
async fn every_run_is_counted_with_the_kubelet_s_labels() {
    let h = harness();
    let script = [
        ("live", ProbeOutcome::Success("ok".into())),
        ("live", ProbeOutcome::Failure("down".into())),
        ("ready", ProbeOutcome::Error("exec: rpc error".into())),
        (
            "ready",
            ProbeOutcome::Warning("redirect to another host".into()),
        ),
    ];
    for (cmd, outcome) in script {
        h.handlers.push_probe_for(run(cmd), outcome);
    }
    let prober = h.start(&pod(json!({
        "livenessProbe": exec_probe("live", json!({})),
        "readinessProbe": exec_probe("ready", json!({})),
    })));
    prober.observe(&[app("c1", 0, ContainerState::Running)], "");

    h.until(15).await;
    assert_eq!(h.recorder.results("Liveness"), ["successful", "failed"]);
    assert_eq!(h.recorder.results("Readiness"), ["unknown", "successful"]);
    let runs = h.recorder.0.lock().unwrap();
    assert!(runs.iter().all(|(c, _, _)| c == "app"));
}

#[tokio::test(start_paused = true)]
async fn stop_drop_or_the_agent_s_cancel_end_the_tasks() {
    for how in ["stop", "drop", "agent cancel"] {
        let h = harness();
        let pod = pod(json!({
            "livenessProbe": exec_probe("live", json!({})),
            "readinessProbe": exec_probe("ready", json!({})),
        }));
        let agent = CancellationToken::new();
        let prober = PodProber::start(h.ctx.clone(), &Arc::new(pod), h.wake.clone(), agent.clone());
        prober.observe(&[app("c1", 0, ContainerState::Running)], "");
        h.until(5).await;
        assert_eq!(h.probes().len(), 2, "{how}");
        assert_eq!(
            Arc::strong_count(&h.ctx),
            3,
            "{how}: two tasks hold the context"
        );

        match how {
            "stop" => prober.stop(),
            "drop" => drop(prober),
            _ => agent.cancel(),
        }
        h.until(45).await;
        assert_eq!(h.probes().len(), 2, "{how}: no run after the end");
        assert_eq!(Arc::strong_count(&h.ctx), 1, "{how}: the tasks ended");
    }
}

/// The size of a future returned by a two-argument async fn.
fn future_size<A, B, F: std::future::Future>(_: impl Fn(A, B) -> F) -> usize {
    std::mem::size_of::<F>()
}

#[test]
fn a_probe_task_holds_no_copy_of_its_container() {
    // One task per probe lives as long as its pod: 100 pods with two probes
    // each hold 200. With a Container (2 KiB inline, more on the heap) in
    // each, the task was 5.3 KiB; by name it is about 1.2 KiB.
    let size = future_size(ProbeTask::run);
    assert!(size <= 1536, "a probe task's future is {size} bytes");
}
