//! The kubelet's resource admission of a static pod: its predicate admit
//! handler (`pkg/kubelet/lifecycle/predicate.go`) fits the pod's requests
//! into what the node's allocatable leaves after the admitted pods'
//! (`noderesources.Fits`: the pod count, cpu, memory, ephemeral storage).
//! A static pod is a critical pod, so a pod that does not fit goes to the
//! critical pod admission handler (`pkg/kubelet/preemption`), which looks
//! for pods to evict among the non-critical ones. crilet runs static pods
//! only, so there are none: the pod is always rejected with the handler's
//! error, reason `UnexpectedAdmissionError`, as the kubelet rejects it.
//!
//! Invariant: pure. A pod that asks for nothing fits whatever is used (but
//! still counts against the pod limit); each resource is checked only when
//! the pod requests some of it.

/// What a pod asks of the node, or what the admitted pods ask together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
}

impl Requests {
    pub fn plus(self, other: Requests) -> Requests {
        Requests {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            ephemeral_storage_bytes: (self.ephemeral_storage_bytes)
                .saturating_add(other.ephemeral_storage_bytes),
        }
    }
}

/// The node's allocatable as admission sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    /// `None` when the node reports no ephemeral storage (then any request
    /// of it is more than the node has, as the scheduler's zero).
    pub ephemeral_storage_bytes: Option<i64>,
    pub pods: i64,
}

/// The status reason of a static pod the node has no room for.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// A refused pod: the reason and message of its status (the message gets
/// `Pod was rejected: ` in front) and of its Warning Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

/// Admits a static pod requesting `requested` on a node whose admitted pods
/// (`admitted_pods` of them) request `used` together; `Err` when it does not
/// fit, worded as the kubelet words it.
pub fn admit_static_pod(
    requested: Requests,
    used: Requests,
    admitted_pods: i64,
    allocatable: &Allocatable,
) -> Result<(), Refusal> {
    // (resource, requested, used, capacity), in the scheduler's order.
    let mut short: Vec<(&str, i64, i64, i64)> = Vec::new();
    if admitted_pods + 1 > allocatable.pods {
        short.push(("pods", 1, admitted_pods, allocatable.pods));
    }
    let checks = [
        (
            "cpu",
            requested.cpu_millis,
            used.cpu_millis,
            allocatable.cpu_millis,
        ),
        (
            "memory",
            requested.memory_bytes,
            used.memory_bytes,
            allocatable.memory_bytes,
        ),
        (
            "ephemeral-storage",
            requested.ephemeral_storage_bytes,
            used.ephemeral_storage_bytes,
            allocatable.ephemeral_storage_bytes.unwrap_or(0),
        ),
    ];
    for (name, want, used, capacity) in checks {
        if want > 0 && want > capacity.saturating_sub(used) {
            short.push((name, want, used, capacity));
        }
    }
    if short.is_empty() {
        return Ok(());
    }
    // The preemption's list of what it could not reclaim: each resource's
    // shortfall (`GetInsufficientAmount`), in Go's `(res: %v, q: %d), ` form.
    let list: String = short
        .iter()
        .map(|(name, want, used, capacity)| {
            let q = want.saturating_sub(capacity.saturating_sub(*used));
            format!("(res: {name}, q: {q}), ")
        })
        .collect();
    Err(Refusal {
        reason: UNEXPECTED_ADMISSION_ERROR,
        message: format!(
            "Unexpected error while attempting to recover from admission failure: preemption: \
             error finding a set of pods to preempt: no set of running pods found to reclaim \
             resources: [{list}]"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: Allocatable = Allocatable {
        cpu_millis: 2000,
        memory_bytes: 8 << 30,
        ephemeral_storage_bytes: Some(10 << 30),
        pods: 110,
    };

    fn cpu(m: i64) -> Requests {
        Requests {
            cpu_millis: m,
            ..Requests::default()
        }
    }

    #[test]
    fn a_pod_that_fits_is_admitted_up_to_the_last_millicore() {
        assert_eq!(admit_static_pod(cpu(1900), cpu(100), 3, &NODE), Ok(()));
        assert!(admit_static_pod(cpu(1901), cpu(100), 3, &NODE).is_err());
    }

    #[test]
    fn too_much_cpu_is_refused_with_the_kubelet_s_words_and_shortfall() {
        let refusal = admit_static_pod(cpu(64000), cpu(100), 3, &NODE).unwrap_err();
        assert_eq!(refusal.reason, "UnexpectedAdmissionError");
        assert_eq!(
            refusal.message,
            "Unexpected error while attempting to recover from admission failure: preemption: \
             error finding a set of pods to preempt: no set of running pods found to reclaim \
             resources: [(res: cpu, q: 62100), ]"
        );
    }

    #[test]
    fn every_short_resource_is_listed_in_the_scheduler_s_order() {
        let want = Requests {
            cpu_millis: 3000,
            memory_bytes: 9 << 30,
            ephemeral_storage_bytes: 11 << 30,
        };
        let refusal = admit_static_pod(want, Requests::default(), 110, &NODE).unwrap_err();
        assert!(
            refusal.message.ends_with(
                "[(res: pods, q: 1), (res: cpu, q: 1000), (res: memory, q: 1073741824), \
                 (res: ephemeral-storage, q: 1073741824), ]"
            ),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn a_pod_asking_nothing_fits_an_overcommitted_node_but_not_a_full_one() {
        let over = cpu(5000);
        assert_eq!(
            admit_static_pod(Requests::default(), over, 3, &NODE),
            Ok(())
        );
        assert!(admit_static_pod(Requests::default(), over, 110, &NODE).is_err());
    }

    #[test]
    fn ephemeral_storage_on_a_node_without_it_never_fits() {
        let node = Allocatable {
            ephemeral_storage_bytes: None,
            ..NODE
        };
        let want = Requests {
            ephemeral_storage_bytes: 1,
            ..Requests::default()
        };
        assert!(admit_static_pod(want, Requests::default(), 0, &node).is_err());
        assert_eq!(
            admit_static_pod(cpu(1), Requests::default(), 0, &node),
            Ok(())
        );
    }
}
