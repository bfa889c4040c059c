//! When an agent's run is over: its `/pods` has stopped changing, its
//! mirror pods carry that status, and after the manifests go, its pods are
//! down.
//!
//! Invariant: waits end on a condition or a limit, never on a fixed sleep
//! alone; a limit reached is reported on stderr and the run goes on, so
//! the comparison shows what was different instead of a timeout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::agents::Agent;
use crate::lab::{Lab, wait_for};

/// The corpus is settled once `/pods` has held the same
/// [`signature`] this long...
const QUIET: Duration = Duration::from_secs(12);
/// ...and at least this long after the agent started (probes with a period
/// of a few seconds have run by then).
const MINIMUM: Duration = Duration::from_secs(25);
const LIMIT: Duration = Duration::from_secs(240);

/// What decides that nothing changes any more: each pod's phase,
/// conditions and containers' states, readiness and restarts.
pub fn signature(pods: &Json) -> Json {
    let mut out = serde_json::Map::new();
    for p in pods["items"].as_array().into_iter().flatten() {
        let s = &p["status"];
        let conditions: Vec<Json> = (s["conditions"].as_array().into_iter().flatten())
            .map(|c| json!([c["type"], c["status"]]))
            .collect();
        let containers: Vec<Json> = ["initContainerStatuses", "containerStatuses"]
            .iter()
            .flat_map(|k| s[k].as_array().into_iter().flatten())
            .map(|c| {
                let state = c["state"]
                    .as_object()
                    .and_then(|o| o.keys().next().cloned());
                json!([
                    c["name"],
                    state,
                    c["ready"],
                    c["started"],
                    c["restartCount"]
                ])
            })
            .collect();
        let key = format!("{}/{}", p["metadata"]["namespace"], p["metadata"]["name"]);
        out.insert(key, json!([s["phase"], conditions, containers]));
    }
    Json::Object(out)
}

/// Waits for the agent's `/pods` to settle; returns it.
pub fn until_settled(lab: &Lab, agent: Agent) -> Json {
    let start = Instant::now();
    let mut last: Option<(Json, Instant)> = None;
    loop {
        let pods = lab.get("/pods").unwrap_or(Json::Null);
        let sig = signature(&pods);
        let now = Instant::now();
        let since = match &last {
            Some((prev, at)) if *prev == sig => *at,
            _ => {
                last = Some((sig, now));
                now
            }
        };
        if now - since >= QUIET && now - start >= MINIMUM {
            return pods;
        }
        if now - start >= LIMIT {
            eprintln!(
                "parity [{}]: {}'s /pods still changed after {LIMIT:?}; comparing what it shows now",
                lab.runtime,
                agent.name()
            );
            return pods;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Waits until every mirror pod carries the phase and conditions `/pods`
/// shows for its pod, and the set of mirror pods has stopped growing. A pod
/// may have no mirror at all: its namespace is missing, or the API server's
/// admission refuses it (a RuntimeClass it does not have); that shows in
/// the comparison, it is not waited for.
pub fn until_mirrors_agree(lab: &Lab, pods: &Json) {
    let want = |p: &Json| {
        let s = &p["status"];
        let conditions: Vec<Json> = (s["conditions"].as_array().into_iter().flatten())
            .map(|c| json!([c["type"], c["status"]]))
            .collect();
        let name = p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (name, json!([s["phase"], conditions]))
    };
    let wanted: BTreeMap<String, Json> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(want)
        .collect();
    let mut last_names: Option<Vec<String>> = None;
    let agreed = wait_for(Duration::from_secs(90), Duration::from_secs(3), || {
        let mirrors =
            (lab.node_pods("json").ok()).and_then(|t| serde_json::from_str::<Json>(&t).ok())?;
        let have: BTreeMap<String, Json> = mirrors["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(want)
            .collect();
        let names: Vec<String> = have.keys().cloned().collect();
        let stable = last_names.replace(names) == Some(have.keys().cloned().collect());
        let agree = have
            .iter()
            .all(|(name, status)| wanted.get(name) == Some(status));
        (stable && agree && !have.is_empty()).then_some(())
    });
    if agreed.is_none() {
        eprintln!(
            "parity [{}]: the mirror pods did not reach /pods' status within 90 s; comparing them as they are",
            lab.runtime
        );
    }
}

/// After the manifests are gone: waits until no sandbox is ready and no
/// container runs on the runtime, and no mirror pod is left.
pub fn until_torn_down(lab: &Lab) {
    let down = wait_for(Duration::from_secs(90), Duration::from_secs(1), || {
        let ready = lab.crictl(&["pods", "-q", "--state", "ready"]).ok()?;
        let running = lab.crictl(&["ps", "-q", "--state", "running"]).ok()?;
        let mirrors = lab.node_pods("name").ok()?;
        (ready.trim().is_empty() && running.trim().is_empty() && mirrors.trim().is_empty())
            .then_some(())
    });
    if down.is_none() {
        // What is left, by name, so the report says whose teardown hung.
        let left = |args: &[&str]| lab.crictl(args).unwrap_or_default().replace('\n', " ");
        let mirrors = lab.node_pods("name").unwrap_or_default().replace('\n', " ");
        eprintln!(
            "parity [{}]: pods or mirror pods still up 90 s after their manifests were removed: \
             ready sandboxes [{}], running containers [{}], mirror pods [{mirrors}]",
            lab.runtime,
            left(&["pods", "--state", "ready", "-o", "table"]).trim(),
            left(&["ps", "--state", "running", "-o", "table"]).trim(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_follows_state_but_not_times_or_ids() {
        let pods = |started: &str, id: &str, ready: bool| {
            json!({"items": [{"metadata": {"namespace": "default", "name": "web"},
                "status": {"phase": "Running",
                  "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                                  "lastTransitionTime": started}],
                  "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 0,
                    "containerID": id, "state": {"running": {"startedAt": started}}}]}}]})
        };
        let a = signature(&pods("2026-01-01T00:00:00Z", "containerd://a", true));
        let b = signature(&pods("2026-01-01T00:00:09Z", "containerd://b", true));
        let c = signature(&pods("2026-01-01T00:00:00Z", "containerd://a", false));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
