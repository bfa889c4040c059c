//! One agent's run, captured as a [`Snapshot`]: what it sent the runtime
//! (the proxy's record), what the runtime then held (`crictl inspectp` /
//! `inspect`), the pod status it serves on `/pods`, and what it wrote to
//! the API server (mirror pods, the Node, its Lease, Events).
//!
//! Invariant: every object is keyed by what identifies it for both agents
//! alike (namespace, pod name, container name, image, command), never by
//! an ID one agent's run produced; the ID-to-name maps come from the
//! runtime's own lists.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value as Json, json};

use crate::compare::Snapshot;
use crate::cri_decode::request_json;
use crate::cri_proxy::CriCall;
use crate::lab::{Lab, event_of_node};
use crate::normalize;

/// `<namespace>/<pod>` and `<namespace>/<pod>/<container>` for the IDs
/// the runtime holds.
#[derive(Debug, Default)]
pub struct Names {
    sandboxes: HashMap<String, String>,
    containers: HashMap<String, (String, String)>,
}

impl Names {
    pub fn read(lab: &Lab) -> Names {
        let mut names = Names::default();
        let pods = lab.crictl_json(&["pods", "-o", "json"]);
        for p in pods["items"].as_array().into_iter().flatten() {
            let id = p["id"].as_str().unwrap_or_default().to_string();
            names.sandboxes.insert(id, pod_key(&p["metadata"]));
        }
        let ctrs = lab.crictl_json(&["ps", "-a", "-o", "json"]);
        for c in ctrs["containers"].as_array().into_iter().flatten() {
            let pod = names
                .sandboxes
                .get(c["podSandboxId"].as_str().unwrap_or_default())
                .cloned()
                .unwrap_or_else(|| "?".into());
            let name = c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            names.containers.insert(
                c["id"].as_str().unwrap_or_default().to_string(),
                (pod, name),
            );
        }
        names
    }

    fn container(&self, id: &str) -> Option<String> {
        let (pod, c) = self.containers.get(id)?;
        Some(format!("{pod}/{c}"))
    }
}

fn pod_key(metadata: &Json) -> String {
    format!(
        "{}/{}",
        metadata["namespace"].as_str().unwrap_or_default(),
        metadata["name"].as_str().unwrap_or_default()
    )
}

fn method_name(method: &str) -> &str {
    method.rsplit('/').next().unwrap_or(method)
}

/// The requests an agent made while it brought its pods up: the first
/// RunPodSandbox of each pod, the first CreateContainer of each container,
/// each distinct exec probe and pull, each pod's lifecycle calls in order,
/// and which methods it used at all.
pub fn cri_objects(calls: &[CriCall], names: &Names, out: &mut Snapshot) {
    let mut methods = std::collections::BTreeSet::new();
    let mut order: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for call in calls {
        let method = method_name(&call.method);
        methods.insert(method.to_string());
        let mut request = request_json(&call.method, &call.request);
        match method {
            "RunPodSandbox" => {
                let pod = pod_key(&request["config"]["metadata"]);
                order.entry(pod.clone()).or_default().push(method.into());
                out.entry(format!("cri RunPodSandbox {pod}"))
                    .or_insert(request);
            }
            "CreateContainer" => {
                let pod = pod_key(&request["sandbox_config"]["metadata"]);
                let c = request["config"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                order
                    .entry(pod.clone())
                    .or_default()
                    .push(format!("CreateContainer {c}"));
                let key = format!("cri CreateContainer {pod}/{c}");
                if out.contains_key(&key) {
                    continue;
                }
                let run = out
                    .get(&format!("cri RunPodSandbox {pod}"))
                    .map(|r| r["config"].clone());
                let object = request
                    .as_object_mut()
                    .expect("a decoded request is an object");
                // The kubelet orders a pod's DNS options anew for each call.
                let sandbox = object.remove("sandbox_config").map(|mut s| {
                    normalize::sort_dns_options(&mut s);
                    s
                });
                let run = run.map(|mut r| {
                    normalize::sort_dns_options(&mut r);
                    r
                });
                object.remove("pod_sandbox_id");
                object.insert(
                    "sandbox_config_is_the_run_config".into(),
                    json!(sandbox == run),
                );
                out.insert(key, request);
            }
            "StartContainer" | "StopContainer" | "RemoveContainer" => {
                let id = request["container_id"].as_str().unwrap_or_default();
                if let Some(name) = names.container(id) {
                    let (pod, c) = name.rsplit_once('/').unwrap_or((&name, ""));
                    let timeout = request
                        .get("timeout")
                        .map(|t| format!(" timeout={t}"))
                        .unwrap_or_default();
                    order
                        .entry(pod.to_string())
                        .or_default()
                        .push(format!("{method} {c}{timeout}"));
                }
            }
            "StopPodSandbox" | "RemovePodSandbox" => {
                let id = request["pod_sandbox_id"].as_str().unwrap_or_default();
                if let Some(pod) = names.sandboxes.get(id) {
                    order.entry(pod.clone()).or_default().push(method.into());
                }
            }
            "ExecSync" => {
                let id = request["container_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let Some(name) = names.container(&id) else {
                    continue;
                };
                let cmd = request["cmd"].to_string();
                if let Some(o) = request.as_object_mut() {
                    o.remove("container_id");
                }
                out.entry(format!("cri ExecSync {name} {cmd}"))
                    .or_insert(request);
            }
            "PullImage" => {
                let image = request["image"]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                out.entry(format!("cri PullImage {image}"))
                    .or_insert(request);
            }
            _ => {}
        }
    }
    out.insert("cri methods".into(), json!(methods));
    for (pod, mut calls) in order {
        // A call repeated back to back is a retry; how many retries fit in
        // the run is timing, the order of different calls is behaviour.
        calls.dedup();
        out.insert(format!("cri calls {pod}"), json!(calls));
    }
}

/// What an agent sent to take a pod down, without the order: it stops a
/// pod's containers in parallel, so their order is chance. Each container
/// call's arguments (the container, StopContainer's timeout) sorted, and
/// whether each sandbox call was made.
pub fn teardown_summary(calls: &Json) -> Json {
    let mut out: BTreeMap<String, Json> = BTreeMap::new();
    for call in calls
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
    {
        let (method, args) = call.split_once(' ').unwrap_or((call, ""));
        if args.is_empty() {
            out.insert(method.to_string(), Json::Bool(true));
        } else {
            let entry = out.entry(method.to_string()).or_insert_with(|| json!([]));
            if let Some(list) = entry.as_array_mut() {
                if !list.iter().any(|a| a == args) {
                    list.push(json!(args));
                    list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
            }
        }
    }
    json!(out)
}

/// The runtime's view of each pod's newest sandbox and each container's
/// newest instance, as `crictl inspectp` / `inspect` print it (less the
/// CRI config containerd keeps, which the proxy's record already holds).
pub fn runtime_objects(lab: &Lab, out: &mut Snapshot) {
    let pods = lab.crictl_json(&["pods", "-o", "json"]);
    let mut newest: BTreeMap<String, (i64, String)> = BTreeMap::new();
    for p in pods["items"].as_array().into_iter().flatten() {
        let attempt = p["metadata"]["attempt"].as_i64().unwrap_or(0);
        let id = p["id"].as_str().unwrap_or_default().to_string();
        let key = pod_key(&p["metadata"]);
        if newest.get(&key).is_none_or(|(a, _)| attempt >= *a) {
            newest.insert(key, (attempt, id));
        }
    }
    for (pod, (_, id)) in &newest {
        let mut v = lab.crictl_json(&["inspectp", "-o", "json", id]);
        drop_config(&mut v);
        out.insert(format!("runtime sandbox {pod}"), v);
        let ctrs = lab.crictl_json(&["ps", "-a", "-o", "json", "-p", id]);
        let mut latest: BTreeMap<String, (i64, String)> = BTreeMap::new();
        for c in ctrs["containers"].as_array().into_iter().flatten() {
            let attempt = c["metadata"]["attempt"].as_i64().unwrap_or(0);
            let name = c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let cid = c["id"].as_str().unwrap_or_default().to_string();
            if latest.get(&name).is_none_or(|(a, _)| attempt >= *a) {
                latest.insert(name, (attempt, cid));
            }
        }
        for (name, (_, cid)) in latest {
            let mut v = lab.crictl_json(&["inspect", "-o", "json", &cid]);
            drop_config(&mut v);
            out.insert(format!("runtime container {pod}/{name}"), v);
        }
    }
}

fn drop_config(v: &mut Json) {
    if let Some(info) = v.get_mut("info").and_then(Json::as_object_mut) {
        info.remove("config");
    }
}

/// The agent's `/pods`, one object per pod.
pub fn pod_objects(pods: &Json, out: &mut Snapshot) {
    for p in pods["items"].as_array().into_iter().flatten() {
        out.insert(format!("pods {}", pod_key(&p["metadata"])), p.clone());
    }
}

/// What the agent left on the API server: its mirror pods, the Node, its
/// Lease, and its Events keyed by what they regard and their reason
/// (counts and times are the agents' timing, not their behaviour).
pub fn api_objects(lab: &Lab, out: &mut Snapshot) {
    let pods = lab.node_pods_json();
    for p in pods["items"].as_array().into_iter().flatten() {
        out.insert(format!("mirror {}", pod_key(&p["metadata"])), p.clone());
    }
    if let Ok(node) = lab.kubectl(&["get", "node", &lab.node, "-o", "json"]) {
        out.insert(
            "node".into(),
            serde_json::from_str(&node).unwrap_or(Json::Null),
        );
    }
    if let Ok(lease) = lab.kubectl(&[
        "-n",
        "kube-node-lease",
        "get",
        "lease",
        &lab.node,
        "-o",
        "json",
    ]) {
        let lease: Json = serde_json::from_str(&lease).unwrap_or(Json::Null);
        out.insert("lease".into(), lease["spec"].clone());
    }
    let events = lab.kubectl_json(&["get", "events", "-A", "-o", "json"]);
    let mut keyed = serde_json::Map::new();
    for e in events["items"].as_array().into_iter().flatten() {
        if !event_of_node(e, &lab.node) {
            continue;
        }
        let o = &e["involvedObject"];
        let key = format!(
            "{} {}/{} {} {}",
            o["kind"].as_str().unwrap_or_default(),
            o["namespace"].as_str().unwrap_or_default(),
            o["name"].as_str().unwrap_or_default(),
            o["fieldPath"].as_str().unwrap_or_default(),
            e["reason"].as_str().unwrap_or_default()
        );
        keyed.entry(key).or_insert_with(|| {
            json!({
                "type": e["type"],
                "message": e["message"],
                "source": e["source"],
                "reportingComponent": e["reportingComponent"],
                "action": e["action"],
            })
        });
    }
    out.insert("events".into(), Json::Object(keyed));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_teardown_is_summed_up_without_the_order_of_parallel_stops() {
        let a = json!([
            "StopContainer b timeout=2",
            "StopContainer a timeout=2",
            "StopPodSandbox",
            "RemoveContainer b",
            "RemoveContainer a",
            "StopPodSandbox"
        ]);
        let b = json!([
            "StopContainer a timeout=2",
            "StopContainer b timeout=2",
            "StopPodSandbox",
            "RemoveContainer a",
            "RemoveContainer b"
        ]);
        assert_eq!(teardown_summary(&a), teardown_summary(&b));
        assert_eq!(
            teardown_summary(&a),
            json!({"StopContainer": ["a timeout=2", "b timeout=2"], "StopPodSandbox": true,
                   "RemoveContainer": ["a", "b"]})
        );
        let removed = json!(["StopPodSandbox", "RemovePodSandbox"]);
        assert_eq!(
            teardown_summary(&removed),
            json!({"StopPodSandbox": true, "RemovePodSandbox": true})
        );
    }
}
