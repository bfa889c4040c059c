//! The pod-level resources of the sandbox config
//! (`pkg/kubelet/kuberuntime/kuberuntime_sandbox_linux.go`:
//! `applySandboxResources`, `calculateSandboxResources`,
//! `convertOverheadToLinuxResources`), over the kubelet's pod sums
//! (`k8s.io/component-helpers/resource`: `PodRequests`, `PodLimits`
//! without overhead). Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. The sums follow the
//! kubelet's: app containers add up; an init container counts as itself
//! plus the sidecars (`restartPolicy: Always` init containers) started
//! before it, and the pod takes the larger of the two; sidecars also add
//! to the app containers' sum. Each container's amount is rounded to a
//! millicore or a byte before summing (the kubelet sums exact decimals, so
//! sub-millicore amounts may round differently; no manifest writes them).

use super::resources::{Amounts, amounts, linux_resources, quantity_of};
use super::*;

/// `linux.resources`: shares from the pod's cpu request (its limit when no
/// container requests cpu), quota from its cpu limit, its memory limit.
pub(super) fn sandbox_resources(
    ctx: &NodeContext,
    pod: &Pod,
) -> Result<LinuxContainerResources, MappingError> {
    let cpu_request = pod_sum(pod, |a| a.cpu_request)?;
    let cpu_limit = pod_sum(pod, |a| a.cpu_limit)?;
    let memory_limit = pod_sum(pod, |a| a.memory_limit)?;
    Ok(linux_resources(
        ctx,
        cpu_request,
        cpu_limit.unwrap_or(0),
        memory_limit.unwrap_or(0),
    ))
}

/// `linux.overhead`: `spec.overhead` as a Guaranteed amount (its cpu both
/// request and limit), or nothing set without one.
pub(super) fn sandbox_overhead(
    ctx: &NodeContext,
    pod: &Pod,
) -> Result<LinuxContainerResources, MappingError> {
    if spec(pod).overhead.is_none() {
        return Ok(LinuxContainerResources::default());
    }
    let [cpu, memory, _] = sandbox_overhead_amounts(pod)?;
    Ok(linux_resources(ctx, Some(cpu), cpu, memory))
}

/// `spec.overhead`'s cpu (millicores), memory and ephemeral storage
/// (bytes), 0 where unset.
fn sandbox_overhead_amounts(pod: &Pod) -> Result<[i64; 3], MappingError> {
    let Some(overhead) = &spec(pod).overhead else {
        return Ok([0; 3]);
    };
    let get = |res: &str| -> Result<i64, MappingError> {
        let Some(text) = overhead.get(res).map(|q| q.0.as_str()) else {
            return Ok(0);
        };
        let field = format!("spec.overhead.{res}");
        let q = quantity::parse(text).map_err(|e| invalid(pod, &field, text, &e))?;
        let v = if res == "cpu" {
            q.milli_value()
        } else {
            q.value()
        };
        v.filter(|v| *v >= 0)
            .ok_or_else(|| invalid(pod, &field, text, "must be 0 or more and fit an int64"))
    };
    Ok([get("cpu")?, get("memory")?, get("ephemeral-storage")?])
}

/// One resource summed over the pod as the kubelet sums it; `None` when no
/// container sets it (which, for the cpu request, makes the shares follow
/// the limit).
fn pod_sum(
    pod: &Pod,
    amount: impl Fn(&Amounts) -> Option<i64>,
) -> Result<Option<i64>, MappingError> {
    pod_sum_of(pod, |c| Ok(amount(&amounts(pod, c)?)))
}

/// What the pod requests of the node, as the kubelet's admission sums it
/// (`PodRequests` with the pod's overhead): cpu in millicores, memory and
/// ephemeral storage in bytes, a request taking its limit when unset.
pub fn admission_requests(pod: &Pod) -> Result<[i64; 3], MappingError> {
    let ephemeral = |c: &Container| -> Result<Option<i64>, MappingError> {
        let limit = quantity_of(pod, c, "limits", "ephemeral-storage")?;
        Ok(quantity_of(pod, c, "requests", "ephemeral-storage")?.or(limit))
    };
    let overhead = sandbox_overhead_amounts(pod)?;
    Ok([
        pod_sum(pod, |a| a.cpu_request)?.unwrap_or(0) + overhead[0],
        pod_sum(pod, |a| a.memory_request)?.unwrap_or(0) + overhead[1],
        pod_sum_of(pod, ephemeral)?.unwrap_or(0) + overhead[2],
    ])
}

/// One resource summed over the pod, from each container's amount.
fn pod_sum_of(
    pod: &Pod,
    amount_of: impl Fn(&Container) -> Result<Option<i64>, MappingError>,
) -> Result<Option<i64>, MappingError> {
    let add = |a: Option<i128>, b: Option<i64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.map_or(0, i128::from)),
    };
    let spec = spec(pod);
    let mut pod_total: Option<i128> = None;
    for c in &spec.containers {
        pod_total = add(pod_total, amount_of(c)?);
    }
    let (mut sidecars, mut init_max): (Option<i128>, Option<i128>) = (None, None);
    for c in spec.init_containers.iter().flatten() {
        let own = amount_of(c)?;
        let while_running = if c.restart_policy.as_deref() == Some("Always") {
            pod_total = add(pod_total, own);
            sidecars = add(sidecars, own);
            sidecars
        } else {
            add(sidecars, own)
        };
        init_max = max_of(init_max, while_running);
    }
    let total = max_of(pod_total, init_max);
    Ok(total.map(|t| t.clamp(0, i64::MAX.into()) as i64))
}

/// The larger, where an unset side counts as absent, not as 0.
fn max_of(a: Option<i128>, b: Option<i128>) -> Option<i128> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
