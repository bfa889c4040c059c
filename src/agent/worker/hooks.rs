//! Killing one container as the kubelet's `killContainer` does (its
//! preStop hook first, its time taken out of the grace period, then
//! StopContainer with at least 2 s; a pod's termination waits for each
//! container's turn in between), killing the containers a liveness or
//! startup probe failed, and running a postStart hook. Part of the pod
//! worker.
//!
//! Invariant: a hook never outlives the grace period it was given, and a
//! failing hook never stops the stop: preStop failures are logged and
//! recorded as `FailedPreStopHook` and the container is stopped all the
//! same. Each kill of a known pod's container records `Killing` first.

use k8s_openapi::api::core::v1::LifecycleHandler;

use super::*;
use crate::prober::LifecycleAction;
use crate::prober::manager::kill_message;
use crate::prober::resolve::{PodAddress, hook_action};

/// StopContainer gets at least this, whatever preStop took (the kubelet's
/// minimumGracePeriodInSeconds).
pub const MINIMUM_GRACE_PERIOD_SECONDS: i64 = 2;

fn address<'a>(ctx: &'a WorkerContext, pod: &Pod, pod_ip: &'a str) -> PodAddress<'a> {
    PodAddress {
        pod_ip,
        node_ip: &ctx.node.host_ip,
        host_network: pod.spec.as_ref().and_then(|s| s.host_network) == Some(true),
    }
}

/// The container instance a hook runs for.
struct HookTarget<'a> {
    pod: &'a Pod,
    container: &'a Container,
    /// Empty for host-network pods (the node IP stands in).
    pod_ip: &'a str,
    /// Bare CRI container ID.
    id: &'a str,
}

/// Runs one hook of the target; `Err` says why it failed.
async fn run_hook(
    ctx: &WorkerContext,
    target: &HookTarget<'_>,
    hook: &LifecycleHandler,
    exec_timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<(), String> {
    let addr = address(ctx, target.pod, target.pod_ip);
    let action = LifecycleAction::from_handler(hook)
        .and_then(|a| hook_action(&a, target.container, &addr))?;
    ctx.hooks
        .run_hook(target.id, &action, exec_timeout, cancel)
        .await
}

/// Stops container `id` (named `name`) of `pod` within `grace` seconds: its
/// preStop hook (if any, and if there is a grace period) first, bounded by
/// the grace period, then StopContainer with what is left, at least 2 s.
/// `why` is the `Killing` event's message (the kubelet's default, "Stopping
/// container NAME", when None). `pod` is `None` for an orphan: no spec, so
/// no hook and no event (there is no pod to record it on).
pub async fn kill_container(
    ctx: &WorkerContext,
    pod: Option<&Pod>,
    pod_ip: &str,
    id: &str,
    name: &str,
    why: Option<&str>,
    grace: i64,
) -> Result<(), RuntimeError> {
    let grace = begin_kill(ctx, pod, pod_ip, id, name, why, grace).await;
    stop_container(ctx, id, grace).await
}

/// The first half of a kill: the `Killing` event, then the preStop hook
/// (bounded by the grace period). Returns the whole seconds of grace left.
/// A pod's termination runs this for every container at once, then stops
/// each in its turn ([`stop_container`]).
pub async fn begin_kill(
    ctx: &WorkerContext,
    pod: Option<&Pod>,
    pod_ip: &str,
    id: &str,
    name: &str,
    why: Option<&str>,
    grace: i64,
) -> i64 {
    if let Some(p) = pod {
        ctx.container_event(p, name, kubelet_events::killing(name, why));
    }
    let mut grace = grace.max(0);
    let hook = pod.and_then(|p| {
        let c = mapping::all_containers(p).find(|c| c.name == name)?;
        let pre_stop = c.lifecycle.as_ref()?.pre_stop.as_ref()?;
        Some((p, c, pre_stop))
    });
    if let (Some((pod, container, pre_stop)), true) = (hook, grace > 0) {
        // tokio's clock, which the timeout below runs on (paused in tests).
        let started = tokio::time::Instant::now();
        let limit = Duration::from_secs(grace as u64);
        // Bounded by the grace period only, as in the kubelet.
        let never = CancellationToken::new();
        let target = HookTarget {
            pod,
            container,
            pod_ip,
            id,
        };
        let run = run_hook(ctx, &target, pre_stop, Some(limit), &never);
        let full_name = pod::full_name(pod);
        match tokio::time::timeout(limit, run).await {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                tracing::warn!(pod = %full_name, container = name, error = %message, "FailedPreStopHook: PreStopHook failed; stopping the container all the same");
                ctx.container_event(pod, name, kubelet_events::failed_pre_stop_hook());
            }
            Err(_) => {
                tracing::warn!(pod = %full_name, container = name, grace, "FailedPreStopHook: PreStopHook did not finish within the grace period")
            }
        }
        grace -= started.elapsed().as_secs() as i64;
    }
    grace
}

/// The second half of a kill: StopContainer with `grace` seconds, at least
/// 2 s. A container already gone counts as stopped.
pub async fn stop_container(ctx: &WorkerContext, id: &str, grace: i64) -> Result<(), RuntimeError> {
    let grace = grace.max(MINIMUM_GRACE_PERIOD_SECONDS);
    match ctx
        .runtime
        .stop_container(id, Duration::from_secs(grace as u64))
        .await
    {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl Worker {
    /// Kills the containers whose liveness or startup probe failed (only
    /// the instance that failed); the plan then restarts them per
    /// restartPolicy with back-off. True when something was killed. A kill
    /// that fails keeps its failure (and the ones after it) for the retry.
    pub(super) async fn kill_unhealthy(
        &mut self,
        pod: &Pod,
        obs: &Observation,
    ) -> Result<bool, RuntimeError> {
        let mut unhealthy = self
            .prober
            .as_ref()
            .map(|p| p.take_unhealthy())
            .unwrap_or_default()
            .into_iter();
        let mut killed = false;
        while let Some(u) = unhealthy.next() {
            let running = obs
                .containers
                .iter()
                .any(|c| c.id == u.container_id && c.state == ContainerState::Running);
            if !running {
                continue;
            }
            tracing::info!(pod = %pod::full_name(pod), uid = pod::uid(pod), container = %u.container, probe = u.probe_type.as_str(), output = %u.output, "{}", kill_message(&u));
            let grace = u
                .grace
                .unwrap_or_else(|| mapping::termination_grace_period(pod));
            let why = kill_message(&u);
            let (ctx, ip) = (&self.ctx, &self.pod_ip);
            let (id, name) = (&u.container_id, &u.container);
            let result = kill_container(ctx, Some(pod), ip, id, name, Some(&why), grace).await;
            if let Err(e) = result {
                if let Some(p) = &self.prober {
                    p.return_unhealthy(std::iter::once(u).chain(unhealthy).collect());
                }
                return Err(e);
            }
            killed = true;
        }
        Ok(killed)
    }

    /// Runs the container's postStart hook, if it has one, right after its
    /// start: the pod's next container waits for it. A failure kills the
    /// container (preStop included); the next sync restarts it with
    /// back-off. The hook is cancelled when the pod goes away.
    pub(super) async fn post_start(
        &mut self,
        pod: &Pod,
        container: &Container,
        pod_ip: &str,
        id: &str,
    ) -> Result<(), RuntimeError> {
        let Some(hook) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        else {
            return Ok(());
        };
        let ctx = self.ctx.clone();
        let target = HookTarget {
            pod,
            container,
            pod_ip,
            id,
        };
        let result = run_hook(&ctx, &target, hook, None, &self.gone).await;
        let Err(message) = result else {
            return Ok(());
        };
        tracing::warn!(pod = %pod::full_name(pod), uid = pod::uid(pod), container = %container.name, error = %message, "FailedPostStartHook: PostStartHook failed; killing the container");
        let name = &container.name;
        ctx.container_event(pod, name, kubelet_events::failed_post_start_hook());
        let why = Some(kubelet_events::FAILED_POST_START_HOOK);
        let grace = mapping::termination_grace_period(pod);
        kill_container(&ctx, Some(pod), pod_ip, id, name, why, grace).await
    }
}
