//! Container resources: requests and limits to the cgroup values the
//! kubelet sends (`pkg/kubelet/kuberuntime/kuberuntime_container_linux.go`:
//! `generateLinuxContainerResources`, `calculateLinuxResources`,
//! `GetHugepageLimitsFromResources`, `configureContainerSwapResources`),
//! and oom_score_adj (`pkg/kubelet/qos/policy.go`). Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. Every container gets the
//! 100 ms CFS period, a hugepage limit per size the node has, and the
//! kubelet's NoSwap limit.

use super::*;
use crate::cri::types::HugepageLimit;

/// cpu in millicores, memory in bytes; `None` when not set. A missing
/// request takes its limit, as API defaulting does.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Amounts {
    pub(super) cpu_request: Option<i64>,
    pub(super) cpu_limit: Option<i64>,
    pub(super) memory_request: Option<i64>,
    pub(super) memory_limit: Option<i64>,
}

pub(super) fn amounts(pod: &Pod, c: &Container) -> Result<Amounts, MappingError> {
    let (cpu_limit, memory_limit) = (
        quantity_of(pod, c, "limits", "cpu")?,
        quantity_of(pod, c, "limits", "memory")?,
    );
    Ok(Amounts {
        cpu_request: quantity_of(pod, c, "requests", "cpu")?.or(cpu_limit),
        cpu_limit,
        memory_request: quantity_of(pod, c, "requests", "memory")?.or(memory_limit),
        memory_limit,
    })
}

/// `resources.<kind>.<res>` of the container: millicores for cpu, whole
/// units (rounded up) otherwise; `None` when not set.
pub(super) fn quantity_of(
    pod: &Pod,
    c: &Container,
    kind: &str,
    res: &str,
) -> Result<Option<i64>, MappingError> {
    let r = c.resources.as_ref();
    let map = if kind == "limits" {
        r.and_then(|r| r.limits.as_ref())
    } else {
        r.and_then(|r| r.requests.as_ref())
    };
    let Some(text) = map.and_then(|m| m.get(res)).map(|q| q.0.as_str()) else {
        return Ok(None);
    };
    let field = || format!("{}.resources.{kind}.{res}", container_field(pod, &c.name));
    let q = quantity::parse(text).map_err(|e| invalid(pod, field(), text, &e))?;
    if q.is_negative() {
        return Err(invalid(pod, field(), text, "must not be negative"));
    }
    let v = if res == "cpu" {
        q.milli_value()
    } else {
        q.value()
    };
    v.map(Some)
        .ok_or_else(|| invalid(pod, field(), text, "too large"))
}

/// The kubelet's `calculateLinuxResources`, shared by containers, the
/// sandbox and the overhead: shares from the cpu request (from the limit
/// when no request is set), the CFS quota from the limit with the 100 ms
/// period always sent (CPU CFS quota is on by default), the memory limit,
/// and on cgroup v2 `memory.oom.group` so an OOM kills the whole
/// container (`singleProcessOOMKill` unset).
pub(super) fn linux_resources(
    ctx: &NodeContext,
    cpu_request: Option<i64>,
    cpu_limit: i64,
    memory_limit: i64,
) -> LinuxContainerResources {
    let mut out = LinuxContainerResources {
        cpu_shares: milli_cpu_to_shares(cpu_request.unwrap_or(cpu_limit)),
        cpu_period: CPU_PERIOD_US,
        cpu_quota: milli_cpu_to_quota(cpu_limit),
        memory_limit_in_bytes: memory_limit.max(0),
        ..Default::default()
    };
    if ctx.cgroups.v2 {
        out.unified.insert("memory.oom.group".into(), "1".into());
    }
    out
}

/// 2 (the kernel's minimum) for no cpu, else 1024 per core, within the
/// kernel's range.
fn milli_cpu_to_shares(milli: i64) -> i64 {
    match milli {
        0 => MIN_CPU_SHARES,
        m => {
            (i128::from(m) * 1024 / 1000).clamp(MIN_CPU_SHARES.into(), MAX_CPU_SHARES.into()) as i64
        }
    }
}

/// 0 (no quota) without a limit, else the limit's share of the period and
/// at least 1 ms.
fn milli_cpu_to_quota(milli: i64) -> i64 {
    if milli <= 0 {
        return 0;
    }
    let quota = i128::from(milli) * i128::from(CPU_PERIOD_US) / 1000;
    quota.clamp(MIN_CPU_QUOTA_US.into(), i64::MAX.into()) as i64
}

/// A container's resources as the kubelet sends them in CreateContainer.
pub(super) fn resources(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
) -> Result<LinuxContainerResources, MappingError> {
    let a = amounts(pod, c)?;
    let mut out = linux_resources(
        ctx,
        a.cpu_request,
        a.cpu_limit.unwrap_or(0),
        a.memory_limit.unwrap_or(0),
    );
    out.oom_score_adj = oom_score_adj(ctx, pod, a.memory_request.unwrap_or(0));
    out.hugepage_limits = hugepage_limits(ctx, pod, c)?;
    no_swap(ctx, &mut out);
    Ok(out)
}

/// One limit of 0 per hugepage size the node has, raised to the
/// container's `hugepages-<size>` limit where it sets one. A limit naming
/// a size the node lacks is dropped, as is one whose size the hugetlb
/// cgroup cannot name (the kubelet logs and skips both).
pub(super) fn hugepage_limits(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
) -> Result<Vec<HugepageLimit>, MappingError> {
    let mut out: Vec<HugepageLimit> = (ctx.hugepage_sizes.iter())
        .map(|size| HugepageLimit {
            page_size: size.clone(),
            limit: 0,
        })
        .collect();
    let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
    for (name, amount) in limits.into_iter().flatten() {
        let Some(size) = name.strip_prefix(HUGEPAGES_PREFIX) else {
            continue;
        };
        let Some(page) = quantity::parse(size).ok().and_then(|q| q.value()) else {
            continue;
        };
        let Some(page_size) = hugepage_unit_size(page) else {
            continue;
        };
        let field = format!("{}.resources.limits.{name}", container_field(pod, &c.name));
        let text = amount.0.as_str();
        let q = quantity::parse(text).map_err(|e| invalid(pod, &field, text, &e))?;
        let bytes = q.value().filter(|v| *v >= 0);
        let bytes = bytes.ok_or_else(|| invalid(pod, &field, text, "must be 0 or more bytes"))?;
        for slot in out.iter_mut().filter(|h| h.page_size == page_size) {
            slot.limit = bytes as u64;
        }
    }
    Ok(out)
}

pub(super) const HUGEPAGES_PREFIX: &str = "hugepages-";

/// A page size in bytes as the hugetlb cgroup names it (the kubelet's
/// `HugePageUnitSizeFromByteSize`): every factor of 1024 into the unit,
/// `2097152` is "2MB"; `None` for a size that does not reduce to at most
/// 1024 of some unit.
pub fn hugepage_unit_size(bytes: i64) -> Option<String> {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let (mut size, mut unit) = (bytes, 0);
    while size % 1024 == 0 && unit < UNITS.len() - 1 {
        size /= 1024;
        unit += 1;
    }
    if size > 1024 && unit < UNITS.len() - 1 {
        return None;
    }
    Some(format!("{size}{}", UNITS[unit]))
}

/// The kubelet's NoSwap (its default swap behaviour, and the only one off
/// cgroup v2): nothing without a swap controller; on cgroup v1 memory+swap
/// equal to the memory limit (0, no limit, stays 0); on cgroup v2 a swap
/// limit of 0.
fn no_swap(ctx: &NodeContext, r: &mut LinuxContainerResources) {
    if !ctx.cgroups.swap_controller {
        return;
    }
    if ctx.cgroups.v2 {
        r.unified.insert("memory.swap.max".into(), "0".into());
    } else {
        r.memory_swap_limit_in_bytes = r.memory_limit_in_bytes;
    }
}

/// Guaranteed (and a static pod of priority class system-node-critical,
/// which the kubelet treats as node-critical) -997, BestEffort 1000,
/// Burstable `1000 - 1000*request/capacity` kept within [3, 999]: above a
/// Guaranteed pod's effective score, below BestEffort's.
///
/// With `--restrict-oom-score-adj`, no score goes below the floor.
pub(super) fn oom_score_adj(ctx: &NodeContext, pod: &Pod, memory_request: i64) -> i64 {
    let score = qos_oom_score_adj(ctx, pod, memory_request);
    ctx.oom_score_adj_floor
        .map_or(score, |floor| score.max(floor))
}

fn qos_oom_score_adj(ctx: &NodeContext, pod: &Pod, memory_request: i64) -> i64 {
    if spec(pod).priority_class_name.as_deref() == Some("system-node-critical") {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match qos_class(pod) {
        QosClass::Guaranteed => GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable if ctx.memory_capacity == 0 => BEST_EFFORT_OOM_SCORE_ADJ - 1,
        QosClass::Burstable => {
            let share = 1000 * i128::from(memory_request.max(0)) / i128::from(ctx.memory_capacity);
            let floor = 1000 + GUARANTEED_OOM_SCORE_ADJ;
            (1000 - share).clamp(floor.into(), (BEST_EFFORT_OOM_SCORE_ADJ - 1).into()) as i64
        }
    }
}
