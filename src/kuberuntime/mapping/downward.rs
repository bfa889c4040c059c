//! `resourceFieldRef` env values: a container's limits and requests, as the
//! kubelet computes them (`pkg/kubelet/kubelet_pods.go`
//! `containerResourceRuntimeValue`, `pkg/kubelet/kubelet_resources.go`
//! `defaultPodLimitsForDownwardAPI`, `pkg/api/v1/resource/helpers.go`
//! `ExtractContainerResourceValue`, `MergeContainerResourceLimits`). Part of
//! `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. A limit of cpu, memory
//! or ephemeral-storage that is unset (or 0) reads as the Node's
//! allocatable, for the container itself and for the app container
//! `containerName` names, not for an init container named there (the
//! kubelet fills in app containers only). The value is the amount divided
//! by the divisor (1 when unset or 0), rounded up, in float64 as the
//! kubelet divides.

use k8s_openapi::api::core::v1::ResourceFieldSelector;

use super::resources::HUGEPAGES_PREFIX;
use super::*;

/// The value of `selector` for container `own` of `pod`; `field` is the
/// selector's path (`spec.containers{app}.env{X}.valueFrom.resourceFieldRef`).
pub(super) fn resource_field_value(
    ctx: &NodeContext,
    pod: &Pod,
    own: &Container,
    selector: &ResourceFieldSelector,
    field: &str,
) -> Result<String, MappingError> {
    let (target, with_allocatable) = match selector.container_name.as_deref() {
        None | Some("") => (own, true),
        Some(name) => {
            let spec = spec(pod);
            match spec.containers.iter().find(|c| c.name == name) {
                Some(c) => (c, true),
                None => match spec
                    .init_containers
                    .iter()
                    .flatten()
                    .find(|c| c.name == name)
                {
                    Some(c) => (c, false),
                    None => {
                        let reason = "no such container in the pod";
                        let field = format!("{field}.containerName");
                        return Err(invalid(pod, field, name, reason));
                    }
                },
            }
        }
    };
    let resource = selector.resource.as_str();
    let unsupported_resource = || {
        let reason = "expected limits or requests of cpu, memory, ephemeral-storage or \
                      hugepages-<size>";
        invalid(pod, format!("{field}.resource"), resource, reason)
    };
    let (kind, name) = resource
        .split_once('.')
        .filter(|(kind, _)| matches!(*kind, "limits" | "requests"))
        .ok_or_else(unsupported_resource)?;
    let cpu = name == "cpu";
    if !cpu
        && !matches!(name, "memory" | "ephemeral-storage")
        && !name.starts_with(HUGEPAGES_PREFIX)
    {
        return Err(unsupported_resource());
    }
    let divisor = divisor(pod, selector, cpu, field)?;
    let mut amount = amount_of(pod, target, kind, name)?;
    let fills_in = matches!(name, "cpu" | "memory" | "ephemeral-storage");
    if kind == "limits" && with_allocatable && fills_in && amount.unwrap_or(0) == 0 {
        let a = &ctx.allocatable;
        amount = match name {
            "cpu" => Some(a.cpu_millicores),
            "memory" => Some(a.memory_bytes),
            _ => a.ephemeral_storage_bytes.or(amount),
        };
    }
    let value = (amount.unwrap_or(0) as f64 / divisor as f64).ceil();
    Ok((value as i64).to_string())
}

/// The container's amount of `name` under `kind`: millicores for cpu,
/// whole units (rounded up) otherwise.
fn amount_of(
    pod: &Pod,
    c: &Container,
    kind: &str,
    name: &str,
) -> Result<Option<i64>, MappingError> {
    super::resources::quantity_of(pod, c, kind, name)
}

/// The divisor in the unit of the amount (millicores for cpu, whole units
/// otherwise); 1 when unset or 0.
fn divisor(
    pod: &Pod,
    selector: &ResourceFieldSelector,
    cpu: bool,
    field: &str,
) -> Result<i64, MappingError> {
    let one = if cpu { 1000 } else { 1 };
    let Some(text) = selector.divisor.as_ref().map(|q| q.0.as_str()) else {
        return Ok(one);
    };
    let field = format!("{field}.divisor");
    let q = quantity::parse(text).map_err(|e| invalid(pod, &field, text, &e))?;
    let v = if cpu { q.milli_value() } else { q.value() };
    match v {
        Some(0) => Ok(one),
        Some(v) if v > 0 => Ok(v),
        _ => Err(invalid(pod, &field, text, "must be a positive quantity")),
    }
}
