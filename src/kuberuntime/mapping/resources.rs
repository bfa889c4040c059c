//! Container resources and security: requests and limits to cgroupfs
//! values, oom_score_adj, and the securityContext. Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping.

use super::*;

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
    let get = |kind: &str, res: &str| -> Result<Option<i64>, MappingError> {
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
    };
    let (cpu_limit, memory_limit) = (get("limits", "cpu")?, get("limits", "memory")?);
    Ok(Amounts {
        cpu_request: get("requests", "cpu")?.or(cpu_limit),
        cpu_limit,
        memory_request: get("requests", "memory")?.or(memory_limit),
        memory_limit,
    })
}

/// The kubelet's cgroupfs arithmetic. cpu_period/cpu_quota are sent only
/// with a cpu limit (the kubelet always sends the 100 ms period, which is
/// the kernel default anyway).
pub(super) fn resources(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
) -> Result<LinuxContainerResources, MappingError> {
    let a = amounts(pod, c)?;
    let limit_millis = a.cpu_limit.unwrap_or(0);
    let share_millis = match a.cpu_request.unwrap_or(0) {
        0 => limit_millis,
        request => request,
    };
    let mut out = LinuxContainerResources {
        cpu_shares: match share_millis {
            0 => MIN_CPU_SHARES,
            m => (i128::from(m) * 1024 / 1000).clamp(MIN_CPU_SHARES.into(), MAX_CPU_SHARES.into())
                as i64,
        },
        memory_limit_in_bytes: a.memory_limit.unwrap_or(0),
        oom_score_adj: oom_score_adj(ctx, pod, a.memory_request.unwrap_or(0)),
        ..Default::default()
    };
    if limit_millis > 0 {
        out.cpu_period = CPU_PERIOD_US;
        let quota = i128::from(limit_millis) * i128::from(CPU_PERIOD_US) / 1000;
        out.cpu_quota = quota.clamp(MIN_CPU_QUOTA_US.into(), i64::MAX.into()) as i64;
    }
    Ok(out)
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
