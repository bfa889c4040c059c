//! Moving a node from the kubelet to crilet, and back, on the lab's runtime
//! and API server: the real kubelet v1.32.13 runs a few static pods (one
//! probed, one with an init container, one on the host network, and one
//! whose manifest is edited during the move), stops, and crilet starts on
//! its root directory. Every sandbox, container and mirror pod of the
//! unchanged pods must be kept (same IDs, same UIDs, no container created),
//! the edited pod replaced as the kubelet replaces it, and `crilet takeover
//! --dry-run` must have said so first. Then the kubelet comes back and
//! keeps what crilet kept.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value as Json;

use crate::agents::{self, Agent, crilet_command, kubelet_dirs};
use crate::lab::{Lab, run, wait_for};
use crate::settle;

const PODS: [(&str, &str); 4] = [
    (
        "probed",
        r#"apiVersion: v1
kind: Pod
metadata: {name: probed, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sleep, "3600"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 2
"#,
    ),
    (
        "with-init",
        r#"apiVersion: v1
kind: Pod
metadata: {name: with-init, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: setup, image: docker.io/library/busybox:latest, imagePullPolicy: IfNotPresent, command: ["true"]}
  containers:
  - {name: main, image: docker.io/library/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"]}
"#,
    ),
    (
        "host-net",
        r#"apiVersion: v1
kind: Pod
metadata: {name: host-net, namespace: default}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sleep, "3600"]
    env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
"#,
    ),
    (
        "edited",
        r#"apiVersion: v1
kind: Pod
metadata: {name: edited, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sleep, "3600"]
    env: [{name: GREETING, value: hello}]
"#,
    ),
];

/// What the runtime and the API server hold for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    /// The ready sandbox's ID and UID.
    sandbox: Option<(String, String)>,
    /// Every container of the pod's sandboxes: (name, ID).
    containers: Vec<(String, String)>,
    mirror_uid: Option<String>,
}

fn held(lab: &Lab) -> BTreeMap<String, Held> {
    let sandboxes = lab.crictl_json(&["pods", "-o", "json"]);
    let containers = lab.crictl_json(&["ps", "-a", "-o", "json"]);
    let mirrors = lab.node_pods_json();
    let mut out = BTreeMap::new();
    for (name, _) in PODS {
        let full = format!("{name}-{}", lab.node);
        let mine = |s: &&Json| s["metadata"]["name"] == full.as_str();
        let all: Vec<&Json> = (sandboxes["items"].as_array().into_iter().flatten())
            .filter(mine)
            .collect();
        let ready = (all.iter()).find(|s| s["state"] == "SANDBOX_READY");
        let ids: Vec<&str> = all.iter().filter_map(|s| s["id"].as_str()).collect();
        let mut cs: Vec<(String, String)> = (containers["containers"].as_array().into_iter())
            .flatten()
            .filter(|c| ids.contains(&c["podSandboxId"].as_str().unwrap_or_default()))
            .map(|c| {
                let name = c["metadata"]["name"].as_str().unwrap_or_default();
                (
                    name.to_string(),
                    c["id"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        cs.sort();
        let mirror = (mirrors["items"].as_array().into_iter().flatten())
            .find(|p| p["metadata"]["name"] == full.as_str());
        out.insert(
            name.to_string(),
            Held {
                sandbox: ready.map(|s| {
                    let text = |v: &Json| v.as_str().unwrap_or_default().to_string();
                    (text(&s["id"]), text(&s["metadata"]["uid"]))
                }),
                containers: cs,
                mirror_uid: mirror
                    .map(|p| p["metadata"]["uid"].as_str().unwrap_or_default().into()),
            },
        );
    }
    out
}

/// Waits until the agent's `/pods` shows every pod Running and Ready and
/// the mirror pods agree with it.
fn until_ready(lab: &Lab, agent: Agent) -> Json {
    let ready = wait_for(Duration::from_secs(120), Duration::from_secs(1), || {
        let pods = lab.get("/pods")?;
        let items = pods["items"].as_array()?;
        let all = items.len() == PODS.len()
            && items.iter().all(|p| {
                let conditions = p["status"]["conditions"].as_array();
                p["status"]["phase"] == "Running"
                    && conditions
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
        all.then_some(pods)
    });
    let pods =
        ready.unwrap_or_else(|| panic!("{}: the pods did not all become ready", agent.name()));
    settle::until_mirrors_agree(lab, &pods);
    pods
}

fn write_pods(lab: &Lab) {
    let dir = lab.manifests();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in PODS {
        std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
    }
}

#[test]
#[ignore = "needs a runtime and an API server of its own (scripts/test.sh)"]
fn crilet_takes_the_node_over_from_the_kubelet_and_hands_it_back() {
    let lab = Lab::from_env();
    std::fs::create_dir_all(&lab.dir).unwrap();
    lab.make_cgroup_root();
    lab.remove_all_pods();
    lab.forget_node();
    write_pods(&lab);
    let cri = lab.runtime_socket.clone();

    // The kubelet runs the pods, and stops; they keep running.
    let mut kubelet = agents::start(&lab, Agent::Kubelet, &cri);
    until_ready(&lab, Agent::Kubelet);
    let before = held(&lab);
    kubelet.stop();
    for (name, h) in &before {
        assert!(
            h.sandbox.is_some() && h.mirror_uid.is_some(),
            "{name} under the kubelet: {h:?}"
        );
    }
    // The move: one manifest is edited meanwhile.
    let edited = lab.manifests().join("edited.yaml");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replace("value: hello", "value: bye")).unwrap();

    // What crilet would do, before anything is touched.
    let (root_dir, pod_logs_dir) = kubelet_dirs(&lab);
    let report = run(&mut crilet_command(
        "takeover --dry-run",
        &lab,
        &cri,
        &root_dir,
        &pod_logs_dir,
    ))
    .unwrap_or_else(|e| panic!("crilet takeover --dry-run: {e}"));
    eprintln!(
        "parity [{}]: crilet takeover --dry-run:\n{report}",
        lab.runtime
    );
    std::fs::write(lab.dir.join("takeover-dry-run.txt"), &report).unwrap();
    for (name, _) in PODS {
        let line = (report.lines())
            .find(|l| l.contains(&format!(" default/{name}-{}:", lab.node)))
            .unwrap_or_else(|| panic!("no line for {name}:\n{report}"));
        match name {
            "edited" => assert!(
                line.starts_with("replace")
                    && line
                        .contains("env GREETING: \"hello\" on the node, \"bye\" in the manifest"),
                "{line}"
            ),
            _ => assert!(line.starts_with("keep"), "{line}"),
        }
    }
    assert_eq!(held(&lab), before, "the dry run changed something");

    // crilet takes over.
    let mut crilet = agents::take_over(&lab, Agent::Crilet, &cri);
    until_ready(&lab, Agent::Crilet);
    // Probes and a resync have run by now; a restart would show.
    std::thread::sleep(Duration::from_secs(10));
    let after = held(&lab);
    let log = crilet.log.display().to_string();
    for (name, _) in PODS {
        let (was, is) = (&before[name], &after[name]);
        if name == "edited" {
            assert_ne!(
                is.sandbox, was.sandbox,
                "the edited pod is replaced (log {log})"
            );
            assert!(is.sandbox.is_some(), "and runs again (log {log})");
            assert_ne!(
                is.mirror_uid, was.mirror_uid,
                "with a new mirror pod (log {log})"
            );
        } else {
            assert_eq!(
                is, was,
                "{name}: crilet kept nothing of it the same (log {log})"
            );
        }
    }
    // Stats and status by the kubelet's UID.
    let summary = lab.get("/stats/summary").expect("crilet's summary");
    let probed_uid = before["probed"].sandbox.as_ref().unwrap().1.clone();
    assert!(
        (summary["pods"].as_array().into_iter().flatten())
            .any(|p| p["podRef"]["uid"] == probed_uid.as_str()),
        "crilet's summary has the kept pod under the kubelet's UID"
    );
    crilet.stop();

    // And back: the kubelet keeps what crilet kept; the pod crilet started
    // itself (its own UID) it replaces (docs/running.md says why).
    let mut kubelet = agents::take_over(&lab, Agent::Kubelet, &cri);
    until_ready(&lab, Agent::Kubelet);
    std::thread::sleep(Duration::from_secs(10));
    let back = held(&lab);
    for (name, _) in PODS {
        if name == "edited" {
            assert_ne!(back[name].sandbox, after[name].sandbox, "{name}");
        } else {
            assert_eq!(
                back[name], after[name],
                "{name}: the kubelet kept nothing of it the same"
            );
        }
    }
    // Tear down: the manifests go, the kubelet stops the pods.
    for (name, _) in PODS {
        std::fs::remove_file(lab.manifests().join(format!("{name}.yaml"))).unwrap();
    }
    settle::until_torn_down(&lab);
    kubelet.stop();
    lab.remove_all_pods();
    lab.forget_node();
}
