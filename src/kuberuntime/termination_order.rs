//! The order in which a pod's containers stop when the whole pod is killed
//! (the kubelet's `terminationOrdering`, used by `killContainersWithSyncResult`).
//!
//! Without sidecars every container stops at once. With sidecars (init
//! containers with `restartPolicy: Always`), every kill still begins at
//! once (the `Killing` event and the preStop hook), but a sidecar's
//! StopContainer waits until every app container has stopped, and until
//! the next sidecar (in spec order) has stopped: app containers first, then
//! the sidecars from the last to the first. A wait never outlasts the
//! grace period the container has left; the driver subtracts it.
//!
//! Invariant: pure. Only running containers are waited for (one that is not
//! running has nothing left to stop), and a container never waits for
//! itself, so the waits form no cycle.

use std::collections::BTreeMap;

use crate::pod::{Pod, is_restartable_init_container};

/// For each container in `running`, the containers of `running` it waits
/// for before it is stopped (empty when it stops at once).
pub fn termination_prereqs(pod: &Pod, running: &[&str]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = running
        .iter()
        .map(|name| (name.to_string(), Vec::new()))
        .collect();
    let Some(spec) = &pod.spec else {
        return out;
    };
    let is_running = |name: &str| running.contains(&name);
    let apps: Vec<String> = spec
        .containers
        .iter()
        .map(|c| c.name.clone())
        .filter(|n| is_running(n))
        .collect();
    // The sidecar after this one in spec order, running or not: the kubelet
    // waits only for the next one, which itself waits for the one after.
    let mut later: Option<&str> = None;
    for init in spec.init_containers.iter().flatten().rev() {
        if !is_restartable_init_container(init) {
            continue;
        }
        if let Some(wait) = out.get_mut(&init.name) {
            wait.extend(apps.iter().cloned());
            wait.extend(later.filter(|l| is_running(l)).map(str::to_string));
        }
        later = Some(&init.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(inits: &[(&str, bool)], apps: &[&str]) -> Pod {
        let init: Vec<_> = inits
            .iter()
            .map(|(n, side)| {
                let mut c = json!({"name": n, "image": "busybox"});
                if *side {
                    c["restartPolicy"] = json!("Always");
                }
                c
            })
            .collect();
        let app: Vec<_> = apps
            .iter()
            .map(|n| json!({"name": n, "image": "busybox"}))
            .collect();
        serde_json::from_value(json!({"spec": {"initContainers": init, "containers": app}}))
            .unwrap()
    }

    fn waits(p: &Pod, running: &[&str]) -> Vec<(String, Vec<String>)> {
        termination_prereqs(p, running).into_iter().collect()
    }

    fn row(name: &str, wait: &[&str]) -> (String, Vec<String>) {
        (
            name.to_string(),
            wait.iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn without_sidecars_everything_stops_at_once() {
        let p = pod(&[("init", false)], &["a", "b"]);
        assert_eq!(waits(&p, &["a", "b"]), [row("a", &[]), row("b", &[])]);
    }

    #[test]
    fn sidecars_wait_for_the_apps_then_stop_last_first() {
        let p = pod(&[("s1", true), ("setup", false), ("s2", true)], &["a", "b"]);
        assert_eq!(
            waits(&p, &["s1", "s2", "a", "b"]),
            [
                row("a", &[]),
                row("b", &[]),
                row("s1", &["a", "b", "s2"]),
                row("s2", &["a", "b"]),
            ]
        );
    }

    #[test]
    fn only_running_containers_are_waited_for() {
        let p = pod(&[("s1", true), ("s2", true), ("s3", true)], &["a", "b"]);
        // b has exited and s2 is in back-off: s1 does not wait for s3
        // through s2 (the kubelet chains only the next sidecar).
        assert_eq!(
            waits(&p, &["s1", "s3", "a"]),
            [row("a", &[]), row("s1", &["a"]), row("s3", &["a"])]
        );
    }

    #[test]
    fn a_running_regular_init_container_stops_at_once() {
        let p = pod(&[("s1", true), ("setup", false)], &["a"]);
        assert_eq!(
            waits(&p, &["s1", "setup"]),
            [row("s1", &[]), row("setup", &[])]
        );
    }

    #[test]
    fn unknown_names_and_no_spec_wait_for_nothing() {
        let p = Pod::default();
        assert_eq!(waits(&p, &["x"]), [row("x", &[])]);
    }
}
