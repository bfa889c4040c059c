//! The node's MemoryPressure, DiskPressure and PIDPressure conditions: which
//! are under pressure after one observation (the eviction manager's
//! bookkeeping, transition period included) and the `NodeCondition`s the
//! kubelet writes for them.
//!
//! Invariant: pure, time passed in; a condition turns True only from met
//! thresholds (so never from an unknown reading), stays True until it has
//! been clear for the whole transition period, and its `lastTransitionTime`
//! moves only when its status does, while `lastHeartbeatTime` moves on
//! every update.
//!
//! What this follows, file by file (kubernetes/kubernetes):
//! - `pkg/kubelet/eviction/helpers.go`: `signalToNodeCondition` (memory and
//!   allocatableMemory -> MemoryPressure; nodefs, imagefs and containerfs,
//!   bytes or inodes -> DiskPressure; pid -> PIDPressure), `nodeConditions`,
//!   `nodeConditionsLastObservedAt` (conditions seen now get `now`, the rest
//!   keep their old time) and `nodeConditionsObservedSince` (a condition is
//!   reported while `now - lastObservedAt < period`).
//! - `pkg/kubelet/eviction/eviction_manager.go` `synchronize`: thresholds
//!   met -> conditions -> last observed -> observed within
//!   `evictionPressureTransitionPeriod` (5m by default,
//!   `pkg/kubelet/apis/config/v1beta1/defaults.go`; a zero period is
//!   defaulted to 5m there, so the kubelet never runs with one: here it
//!   would report no pressure at all, as the same comparison gives).
//! - `pkg/kubelet/nodestatus/setters.go` `MemoryPressureCondition`,
//!   `DiskPressureCondition`, `PIDPressureCondition`: a missing condition
//!   starts as Unknown; the heartbeat is always `now`; only a change of
//!   status rewrites reason, message and `lastTransitionTime` (to `now`), so
//!   an unchanged condition keeps whatever reason and message it had. The
//!   reasons and messages are the kubelet's, word for word.
//!
//! Choices: a previous condition with the same status but no
//! `lastTransitionTime` gets `now` (the kubelet would keep Go's zero time);
//! [`set_pressure_conditions`] puts a new condition before `Ready`, where
//! the kubelet's setters order it on a new node, instead of after it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::eviction::{Observation, Signal, Threshold, thresholds_met};

/// The kubelet's default `evictionPressureTransitionPeriod`.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(5 * 60);

/// A node condition the eviction manager drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PressureCondition {
    MemoryPressure,
    DiskPressure,
    PIDPressure,
}

impl PressureCondition {
    /// In the order the kubelet's status setters write them.
    pub const ALL: [PressureCondition; 3] = [
        PressureCondition::MemoryPressure,
        PressureCondition::DiskPressure,
        PressureCondition::PIDPressure,
    ];

    /// The condition's `type`.
    pub fn type_(self) -> &'static str {
        match self {
            PressureCondition::MemoryPressure => "MemoryPressure",
            PressureCondition::DiskPressure => "DiskPressure",
            PressureCondition::PIDPressure => "PIDPressure",
        }
    }

    /// `signalToNodeCondition`.
    pub fn of_signal(signal: Signal) -> PressureCondition {
        match signal {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => {
                PressureCondition::MemoryPressure
            }
            Signal::NodeFsAvailable
            | Signal::NodeFsInodesFree
            | Signal::ImageFsAvailable
            | Signal::ImageFsInodesFree
            | Signal::ContainerFsAvailable
            | Signal::ContainerFsInodesFree => PressureCondition::DiskPressure,
            Signal::PidAvailable => PressureCondition::PIDPressure,
        }
    }

    /// `(reason, message)` for status True (under pressure) or False.
    pub fn reason_and_message(self, under_pressure: bool) -> (&'static str, &'static str) {
        use PressureCondition::*;
        match (self, under_pressure) {
            (MemoryPressure, true) => (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            ),
            (MemoryPressure, false) => (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (DiskPressure, true) => ("KubeletHasDiskPressure", "kubelet has disk pressure"),
            (DiskPressure, false) => ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            (PIDPressure, true) => (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
            ),
            (PIDPressure, false) => (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
        }
    }
}

/// `nodeConditions`: the conditions the met thresholds raise.
pub fn node_conditions(met: &[Threshold]) -> BTreeSet<PressureCondition> {
    met.iter()
        .map(|t| PressureCondition::of_signal(t.signal))
        .collect()
}

/// The eviction manager's memory between observations: when each
/// condition was last raised by a met threshold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PressureTracker {
    last_observed_at: BTreeMap<PressureCondition, jiff::Timestamp>,
}

impl PressureTracker {
    /// One eviction-manager pass: which conditions are under pressure at
    /// `now` given this observation. A condition stays under pressure until
    /// `transition_period` has passed since a threshold last raised it.
    pub fn synchronize(
        &mut self,
        thresholds: &[Threshold],
        observation: &Observation,
        now: jiff::Timestamp,
        transition_period: Duration,
    ) -> BTreeSet<PressureCondition> {
        for c in node_conditions(&thresholds_met(thresholds, observation)) {
            self.last_observed_at.insert(c, now);
        }
        self.under_pressure(now, transition_period)
    }

    /// `nodeConditionsObservedSince`: the conditions raised within the
    /// period before `now`.
    pub fn under_pressure(
        &self,
        now: jiff::Timestamp,
        transition_period: Duration,
    ) -> BTreeSet<PressureCondition> {
        let period =
            jiff::SignedDuration::try_from(transition_period).unwrap_or(jiff::SignedDuration::MAX);
        self.last_observed_at
            .iter()
            .filter(|&(_, &at)| now.duration_since(at) < period)
            .map(|(&c, _)| c)
            .collect()
    }

    /// When a threshold last raised `condition`.
    pub fn last_observed_at(&self, condition: PressureCondition) -> Option<jiff::Timestamp> {
        self.last_observed_at.get(&condition).copied()
    }
}

/// The condition `kind` after an update at `now`, from the node's
/// `previous` one (`None` for a node without it).
pub fn pressure_condition(
    kind: PressureCondition,
    previous: Option<&NodeCondition>,
    under_pressure: bool,
    now: jiff::Timestamp,
) -> NodeCondition {
    let status = if under_pressure { "True" } else { "False" };
    match previous {
        Some(p) if p.status == status => NodeCondition {
            type_: kind.type_().into(),
            last_heartbeat_time: Some(Time(now)),
            last_transition_time: p.last_transition_time.clone().or(Some(Time(now))),
            ..p.clone()
        },
        _ => {
            let (reason, message) = kind.reason_and_message(under_pressure);
            NodeCondition {
                type_: kind.type_().into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                last_heartbeat_time: Some(Time(now)),
                last_transition_time: Some(Time(now)),
            }
        }
    }
}

/// The three pressure conditions after an update at `now`, in the
/// kubelet's order, each from its namesake in `previous`.
pub fn pressure_conditions(
    previous: &[NodeCondition],
    under_pressure: &BTreeSet<PressureCondition>,
    now: jiff::Timestamp,
) -> Vec<NodeCondition> {
    PressureCondition::ALL
        .into_iter()
        .map(|kind| {
            let prev = previous.iter().find(|c| c.type_ == kind.type_());
            pressure_condition(kind, prev, under_pressure.contains(&kind), now)
        })
        .collect()
}

/// Updates the pressure conditions of a node's condition list in place,
/// leaving every other condition as it is; a missing one goes before
/// `Ready` (or at the end when there is no `Ready`).
pub fn set_pressure_conditions(
    conditions: &mut Vec<NodeCondition>,
    under_pressure: &BTreeSet<PressureCondition>,
    now: jiff::Timestamp,
) {
    for updated in pressure_conditions(conditions, under_pressure, now) {
        if let Some(slot) = conditions.iter_mut().find(|c| c.type_ == updated.type_) {
            *slot = updated;
        } else {
            let at = conditions
                .iter()
                .position(|c| c.type_ == "Ready")
                .unwrap_or(conditions.len());
            conditions.insert(at, updated);
        }
    }
}

#[cfg(test)]
#[path = "pressure_tests.rs"]
mod tests;
