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
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::agents::{self, Agent, crilet_command, kubelet_dirs};
use crate::lab::{Lab, run, wait_for};
use crate::settle;

/// The test's own pods: name, what its spec adds, and what its `main`
/// container (busybox, sleeping) adds.
const PODS: [(&str, &str, &str); 4] = [
    (
        "probed",
        "",
        "    readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: 2}\n",
    ),
    (
        "with-init",
        "  initContainers:\n  - {name: setup, image: docker.io/library/busybox:latest, imagePullPolicy: IfNotPresent, command: [\"true\"]}\n",
        "",
    ),
    (
        "host-net",
        "  hostNetwork: true\n",
        "    env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]\n",
    ),
    ("edited", "", "    env: [{name: GREETING, value: hello}]\n"),
];

/// The manifest of one of [`PODS`].
fn pod_manifest((name, spec, main): (&str, &str, &str)) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n\
         {spec}  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n\
         \x20   image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n\
         \x20   command: [sleep, \"3600\"]\n{main}"
    )
}

/// The control plane's pods: etcd and kube-apiserver as kubeadm v1.32
/// writes their manifests (host network, system-node-critical, probes on
/// the components' own health endpoints; the startup probe every second
/// for 240 tries where kubeadm probes every 10 s for 24: the same four
/// minutes, seen sooner), running the lab's own binaries
/// (mounted from the host: no image of them can be pulled here) with the
/// flags of the lab's API server, on ports of their own.
const CONTROL_PLANE: [&str; 2] = ["etcd", "kube-apiserver"];

fn control_plane(lab: &Lab) -> Vec<(String, String)> {
    let bin = |name: &str| {
        let path = run(Command::new("bash")
            .arg(lab.lab_scripts.join("bin.sh"))
            .arg(name))
        .unwrap_or_else(|e| panic!("bin.sh {name}: {e}"));
        path.trim().to_string()
    };
    let (etcd_port, api_port) = (control_plane_port(lab, 0), control_plane_port(lab, 3));
    let data = lab.dir.join("control-plane-etcd");
    let _ = std::fs::remove_dir_all(&data);
    let etcd = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  annotations: {{kubeadm.kubernetes.io/etcd.advertise-client-urls: "http://127.0.0.1:{etcd_port}"}}
  labels: {{component: etcd, tier: control-plane}}
  name: etcd
  namespace: kube-system
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  securityContext: {{seccompProfile: {{type: RuntimeDefault}}}}
  terminationGracePeriodSeconds: 5
  containers:
  - name: etcd
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command:
    - /usr/local/bin/etcd
    - --name=cp
    - --data-dir=/var/lib/etcd
    - --listen-client-urls=http://127.0.0.1:{etcd_port}
    - --advertise-client-urls=http://127.0.0.1:{etcd_port}
    - --listen-peer-urls=http://127.0.0.1:{peer}
    - --initial-advertise-peer-urls=http://127.0.0.1:{peer}
    - --initial-cluster=cp=http://127.0.0.1:{peer}
    - --listen-metrics-urls=http://127.0.0.1:{metrics}
    - --snapshot-count=10000
{probes}    resources: {{requests: {{cpu: 100m, memory: 100Mi}}}}
    volumeMounts:
    - {{mountPath: /var/lib/etcd, name: etcd-data}}
    - {{mountPath: /usr/local/bin/etcd, name: etcd-bin, readOnly: true}}
  volumes:
  - hostPath: {{path: {data}, type: DirectoryOrCreate}}
    name: etcd-data
  - hostPath: {{path: {etcd_bin}, type: File}}
    name: etcd-bin
"#,
        peer = etcd_port + 1,
        metrics = etcd_port + 2,
        probes = kubeadm_probes("HTTP", etcd_port + 2, "/readyz"),
        data = data.display(),
        etcd_bin = bin("etcd"),
    );
    // The lab's API server's own flags, on the control plane's etcd and port.
    let kubeconfig_dir = lab.admin_kubeconfig.parent().unwrap();
    let pid = std::fs::read_to_string(kubeconfig_dir.join("kube-apiserver.pid")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
    let flags: Vec<String> = (cmdline.split(|b| *b == 0).skip(1))
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .map(|f| match f.split_once('=') {
            Some(("--etcd-servers", _)) => format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            Some(("--secure-port", _)) => format!("--secure-port={api_port}"),
            _ => f,
        })
        .collect();
    let command: String = flags.iter().map(|f| format!("    - \"{f}\"\n")).collect();
    let pki = kubeconfig_dir.join("pki");
    let apiserver = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  labels: {{component: kube-apiserver, tier: control-plane}}
  name: kube-apiserver
  namespace: kube-system
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  securityContext: {{seccompProfile: {{type: RuntimeDefault}}}}
  terminationGracePeriodSeconds: 5
  containers:
  - name: kube-apiserver
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command:
    - /usr/local/bin/kube-apiserver
{command}{probes}    resources: {{requests: {{cpu: 250m}}}}
    volumeMounts:
    - {{mountPath: {pki}, name: k8s-certs, readOnly: true}}
    - {{mountPath: /usr/local/bin/kube-apiserver, name: apiserver-bin, readOnly: true}}
  volumes:
  - hostPath: {{path: {pki}, type: DirectoryOrCreate}}
    name: k8s-certs
  - hostPath: {{path: {apiserver_bin}, type: File}}
    name: apiserver-bin
"#,
        pki = pki.display(),
        apiserver_bin = bin("kube-apiserver"),
        probes = kubeadm_probes("HTTPS", api_port, "/livez"),
    );
    vec![("etcd".into(), etcd), ("kube-apiserver".into(), apiserver)]
}

/// kubeadm's three probes of a control-plane container, on its own health
/// endpoint: liveness on `/livez`, readiness on `/readyz`, the startup probe
/// on `startup` (etcd's `/readyz`, the API server's `/livez`).
fn kubeadm_probes(scheme: &str, port: u16, startup: &str) -> String {
    let probe = |kind: &str, threshold: u32, path: &str, timing: &str| {
        format!(
            "    {kind}:\n      failureThreshold: {threshold}\n      \
             httpGet: {{host: 127.0.0.1, path: {path}, port: {port}, scheme: {scheme}}}\n\
             {timing}      timeoutSeconds: 15\n"
        )
    };
    [
        probe(
            "livenessProbe",
            8,
            "/livez",
            "      initialDelaySeconds: 10\n      periodSeconds: 10\n",
        ),
        probe("readinessProbe", 3, "/readyz", "      periodSeconds: 1\n"),
        probe(
            "startupProbe",
            240,
            startup,
            "      initialDelaySeconds: 1\n      periodSeconds: 1\n",
        ),
    ]
    .concat()
}

/// The control plane's ports: the run's port + 1100 + n.
fn control_plane_port(lab: &Lab, n: u16) -> u16 {
    lab.port + 1100 + n
}

/// Polls the control plane's API server every 100 ms until told to stop;
/// returns the polls made and the failed ones (when, and what).
struct Poller {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(usize, Vec<String>)>,
}

impl Poller {
    fn start(url: String) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (started, mut polls, mut failed) = (Instant::now(), 0, Vec::new());
            while !flag.load(Ordering::Relaxed) {
                let at = Instant::now();
                let answer = run(Command::new("curl").args(["-sSk", "--max-time", "2", &url]));
                polls += 1;
                match answer {
                    Ok(body) if body.trim() == "ok" => {}
                    Ok(body) => failed.push(format!("{:.1?}: {body}", started.elapsed())),
                    Err(e) => failed.push(format!("{:.1?}: {e}", started.elapsed())),
                }
                std::thread::sleep(Duration::from_millis(100).saturating_sub(at.elapsed()));
            }
            (polls, failed)
        });
        Poller { stop, thread }
    }

    fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

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
    let names = PODS.iter().map(|(n, ..)| *n).chain(CONTROL_PLANE);
    let sandboxes = lab.crictl_json(&["pods", "-o", "json"]);
    let containers = lab.crictl_json(&["ps", "-a", "-o", "json"]);
    let mirrors = lab.node_pods_json();
    let mut out = BTreeMap::new();
    for name in names {
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
    let ready = wait_for(Duration::from_secs(240), Duration::from_secs(1), || {
        let pods = lab.get("/pods")?;
        let items = pods["items"].as_array()?;
        let all = items.len() == PODS.len() + CONTROL_PLANE.len()
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
    for pod in PODS {
        std::fs::write(dir.join(format!("{}.yaml", pod.0)), pod_manifest(pod)).unwrap();
    }
    for (name, text) in control_plane(lab) {
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
    // The control plane's API server, polled from now until the node is
    // back with the kubelet.
    let readyz = format!("https://127.0.0.1:{}/readyz", control_plane_port(&lab, 3));
    let poller = Poller::start(readyz);
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
    let mut dry_run = crilet_command("takeover --dry-run", &lab, &cri, &root_dir, &pod_logs_dir);
    let report = run(&mut dry_run).unwrap_or_else(|e| panic!("crilet takeover --dry-run: {e}"));
    eprintln!(
        "parity [{}]: crilet takeover --dry-run:\n{report}",
        lab.runtime
    );
    std::fs::write(lab.dir.join("takeover-dry-run.txt"), &report).unwrap();
    for name in before.keys() {
        let line = (report.lines())
            .find(|l| l.contains(&format!("/{name}-{}:", lab.node)))
            .unwrap_or_else(|| panic!("no line for {name}:\n{report}"));
        match name.as_str() {
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
    for (name, was) in &before {
        let is = &after[name];
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
                "{name}: crilet did not keep it as it was (log {log})"
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
    // itself (its own UID) it replaces (docs/takeover.md says why).
    let mut kubelet = agents::take_over(&lab, Agent::Kubelet, &cri);
    until_ready(&lab, Agent::Kubelet);
    std::thread::sleep(Duration::from_secs(10));
    let (polls, failed) = poller.finish();
    let back = held(&lab);
    for (name, was) in &after {
        if name == "edited" {
            assert_ne!(back[name].sandbox, was.sandbox, "{name}");
        } else {
            assert_eq!(
                &back[name], was,
                "{name}: the kubelet did not keep it as it was"
            );
        }
    }
    let polled = format!(
        "the control plane's API server, polled every 100 ms through both moves: {polls} polls, {} failed",
        failed.len()
    );
    eprintln!("parity [{}]: {polled}", lab.runtime);
    std::fs::write(
        lab.dir.join("takeover-polls.txt"),
        format!("{polled}\n{}\n", failed.join("\n")),
    )
    .unwrap();
    assert!(failed.is_empty(), "{polled}:\n{}", failed.join("\n"));
    assert!(polls > 100, "{polled}");

    // Tear down: the manifests go, the kubelet stops the pods.
    for entry in std::fs::read_dir(lab.manifests()).unwrap().flatten() {
        std::fs::remove_file(entry.path()).unwrap();
    }
    settle::until_torn_down(&lab);
    kubelet.stop();
    lab.remove_all_pods();
    lab.forget_node();
}

#[test]
fn the_test_pods_are_written_as_yaml_the_agents_read() {
    let want = "apiVersion: v1\nkind: Pod\nmetadata: {name: host-net, namespace: default}\nspec:\n  \
                hostNetwork: true\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    \
                image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    \
                command: [sleep, \"3600\"]\n    env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]\n";
    assert_eq!(pod_manifest(PODS[2]), want);
    for pod in PODS {
        let text = pod_manifest(pod);
        assert!(text.ends_with('\n') && !text.contains("\n\n"), "{text}");
    }
}

#[test]
fn kubeadm_probes_are_written_as_kubeadm_writes_them() {
    let want = "    livenessProbe:\n      failureThreshold: 8\n      \
                httpGet: {host: 127.0.0.1, path: /livez, port: 2381, scheme: HTTP}\n      \
                initialDelaySeconds: 10\n      periodSeconds: 10\n      timeoutSeconds: 15\n    \
                readinessProbe:\n      failureThreshold: 3\n      \
                httpGet: {host: 127.0.0.1, path: /readyz, port: 2381, scheme: HTTP}\n      \
                periodSeconds: 1\n      timeoutSeconds: 15\n    \
                startupProbe:\n      failureThreshold: 240\n      \
                httpGet: {host: 127.0.0.1, path: /readyz, port: 2381, scheme: HTTP}\n      \
                initialDelaySeconds: 1\n      periodSeconds: 1\n      timeoutSeconds: 15\n";
    assert_eq!(kubeadm_probes("HTTP", 2381, "/readyz"), want);
}
