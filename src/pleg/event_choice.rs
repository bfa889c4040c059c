//! Whether crilet subscribes to the runtime's container events at all: the
//! `EventedPLEG` gate as set (or its default, on), and the runtime's name
//! and version, against the runtimes whose GetContainerEvents is known to
//! break the runtime itself.
//!
//! CRI-O before 1.33 panics ("sync: negative WaitGroup counter") when a
//! subscriber has gone away (crilet restarted, or any client's stream
//! ended) and two events come in quick succession, such as two pods
//! starting at once: its broadcaster counts the dead subscriber done once
//! per failed send (cri-o/cri-o#9004, fixed for 1.33 by cri-o/cri-o#9014;
//! CRI-O 1.32.13 has it). The kubelet v1.32 does not subscribe by default
//! (EventedPLEG is off there), so it never meets this; crilet, which
//! subscribes by default, relists every second on such a runtime unless the
//! gate is set explicitly.
//!
//! containerd before 1.7 has no GetContainerEvents at all (it came with
//! containerd 1.7's CRI): crilet relists there without asking, so nothing
//! waits on a call the runtime can only refuse, and a loaded machine that
//! refuses it slowly cannot pass for a subscription.
//!
//! Invariant: pure; the driver logs the choice once at start.

/// What crilet does about container events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventsChoice {
    /// Subscribe (the gate on, the runtime without a known bug).
    Follow,
    /// Relist every second: the gate is off.
    Relist,
    /// Relist every second although the gate's default is on: the runtime
    /// has a known bug with subscribers (`bug` says which).
    RelistAvoidingBug { bug: &'static str },
    /// Subscribe because the gate was set on explicitly, despite `bug`.
    FollowDespiteBug { bug: &'static str },
    /// Relist every second: the runtime has no GetContainerEvents
    /// (containerd before 1.7), whatever the gate says.
    RelistUnserved,
}

impl EventsChoice {
    pub fn follows(&self) -> bool {
        matches!(
            self,
            EventsChoice::Follow | EventsChoice::FollowDespiteBug { .. }
        )
    }
}

const CRIO_EVENTS_PANIC: &str = "CRI-O before 1.33 can panic in GetContainerEvents once a subscriber has gone away and two events come at once (cri-o/cri-o#9004, fixed in 1.33 by cri-o/cri-o#9014)";

/// The major and minor of a runtime's version ("v1.32.13", "1.6.20~ds1").
fn major_minor(runtime_version: &str) -> Option<(u32, u32)> {
    let mut parts = runtime_version
        .trim_start_matches('v')
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    Some((parts.next().flatten()?, parts.next().flatten()?))
}

/// The known bug of this runtime's event stream, if any.
pub fn known_events_bug(runtime_name: &str, runtime_version: &str) -> Option<&'static str> {
    if runtime_name != "cri-o" {
        return None;
    }
    match major_minor(runtime_version) {
        Some(version) if version < (1, 33) => Some(CRIO_EVENTS_PANIC),
        Some(_) => None,
        // A version crilet cannot read: assume the bug, the safe side.
        None => Some(CRIO_EVENTS_PANIC),
    }
}

/// Whether this runtime is known to lack GetContainerEvents: containerd
/// before 1.7. A version crilet cannot read is asked (the call's own
/// Unimplemented answer then decides).
fn lacks_container_events(runtime_name: &str, runtime_version: &str) -> bool {
    runtime_name == "containerd" && major_minor(runtime_version).is_some_and(|v| v < (1, 7))
}

/// The choice for `gate` (`None`: not set, on by default) on this runtime.
pub fn events_choice(
    gate: Option<bool>,
    runtime_name: &str,
    runtime_version: &str,
) -> EventsChoice {
    if gate != Some(false) && lacks_container_events(runtime_name, runtime_version) {
        return EventsChoice::RelistUnserved;
    }
    match (gate, known_events_bug(runtime_name, runtime_version)) {
        (Some(false), _) => EventsChoice::Relist,
        (None | Some(true), None) => EventsChoice::Follow,
        (None, Some(bug)) => EventsChoice::RelistAvoidingBug { bug },
        (Some(true), Some(bug)) => EventsChoice::FollowDespiteBug { bug },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_o_before_1_33_is_relisted_unless_the_gate_is_set() {
        use EventsChoice::*;
        let bug = CRIO_EVENTS_PANIC;
        let cases = [
            (None, "cri-o", "1.32.13", RelistAvoidingBug { bug }),
            (Some(true), "cri-o", "1.32.13", FollowDespiteBug { bug }),
            (Some(false), "cri-o", "1.32.13", Relist),
            (None, "cri-o", "1.31.0", RelistAvoidingBug { bug }),
            (None, "cri-o", "1.33.0", Follow),
            (None, "cri-o", "v1.34.1-dev", Follow),
            (None, "cri-o", "2.0.0", Follow),
            (None, "cri-o", "unknown", RelistAvoidingBug { bug }),
            (None, "containerd", "v2.1.5", Follow),
            (None, "containerd", "1.6.20~ds1", RelistUnserved),
            (Some(true), "containerd", "1.6.20~ds1", RelistUnserved),
            (Some(false), "containerd", "1.6.20~ds1", Relist),
            (None, "containerd", "v1.7.0", Follow),
            (None, "containerd", "unknown", Follow),
            (Some(false), "containerd", "v2.1.5", Relist),
        ];
        for (gate, name, version, want) in cases {
            let got = events_choice(gate, name, version);
            assert_eq!(got, want, "{gate:?} {name} {version}");
            assert_eq!(
                got.follows(),
                matches!(want, Follow | FollowDespiteBug { .. })
            );
        }
    }
}
