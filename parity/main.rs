//! The differential harness: the manifests of `parity/corpus/` run under
//! the real kubelet v1.32.13 and under crilet, one agent at a time on the
//! same runtime, with the same node name, node IP, ports, cgroup root and
//! manifest directory, and everything each did compared.
//!
//! For each agent: the recording CRI proxy ([`cri_proxy`]) takes the
//! runtime's place, the agent starts and runs the corpus until its `/pods`
//! stops changing and its mirror pods carry that status, and the run is
//! captured ([`capture`]): what it sent the runtime, what the runtime then
//! held, `/pods`, the mirror pods, the Node, the Lease and the Events. The
//! manifests are then removed and what the agent sends to tear the pods
//! down is captured too. Both snapshots are normalized ([`normalize`]:
//! IDs, times, root directories, versions) and compared ([`compare`]);
//! each difference is one line, and each line is either on the accepted
//! list (`docs/kubelet-differences.md`, [`accepted`]) or fails the run.
//!
//! The test needs a runtime instance and API server of its own (the kubelet
//! removes every kubelet-labelled pod it does not know, on its runtime);
//! `scripts/test.sh` starts them on containerd 1.6 and CRI-O 1.32, and
//! `scripts/bench.sh parity` on all three runtimes. Everything each run
//! wrote stays in CRILET_PARITY_DIR: both snapshots (normalized), the
//! report, both agents' logs.

mod accepted;
mod agents;
mod capture;
mod compare;
mod cri_decode;
mod cri_proxy;
mod lab;
mod normalize;
mod report;
mod settle;
mod takeover;

use std::path::Path;

use agents::Agent;
use compare::Snapshot;
use lab::Lab;
use normalize::Normalizer;

/// The images the corpus runs, which the lab imported: neither agent may
/// remove them (the next run could not pull them again).
const LAB_IMAGES: [&str; 2] = [
    "registry.k8s.io/pause:3.6",
    "docker.io/library/busybox:latest",
];

/// One agent's whole run: start, settle, capture, remove, capture.
fn run_agent(lab: &Lab, rt: &tokio::runtime::Runtime, agent: Agent) -> (Snapshot, Normalizer) {
    lab.remove_all_pods();
    lab.forget_node();
    write_corpus(lab);
    let proxy = {
        let _enter = rt.enter();
        cri_proxy::CriProxy::start(&lab.proxy_socket(), &lab.runtime_socket)
            .expect("start the recording CRI proxy")
    };
    let mut running = agents::start(lab, agent, &lab.proxy_socket());
    let pods = settle::until_settled(lab, agent);
    settle::until_mirrors_agree(lab, &pods);
    let mut snapshot = Snapshot::new();
    let names = capture::Names::read(lab);
    capture::cri_objects(&proxy.calls(), &names, &mut snapshot);
    capture::runtime_objects(lab, &mut snapshot);
    capture::pod_objects(&pods, &mut snapshot);
    capture::api_objects(lab, &mut snapshot);

    // Tear-down: the manifests go, the agent stops its pods.
    proxy.clear();
    for entry in std::fs::read_dir(lab.manifests()).unwrap().flatten() {
        std::fs::remove_file(entry.path()).unwrap();
    }
    settle::until_torn_down(lab);
    let mut removal = Snapshot::new();
    capture::cri_objects(&proxy.calls(), &names, &mut removal);
    for (key, value) in removal {
        if let Some(pod) = key.strip_prefix("cri calls ") {
            snapshot.insert(format!("teardown {pod}"), capture::teardown_summary(&value));
        }
    }
    let left = lab.node_pods_json();
    let left: Vec<&serde_json::Value> = (left["items"].as_array().into_iter().flatten())
        .map(|p| &p["metadata"]["name"])
        .collect();
    snapshot.insert("teardown mirror pods left".into(), serde_json::json!(left));
    running.stop();
    drop(proxy);
    for image in LAB_IMAGES {
        assert!(
            lab.crictl(&["inspecti", image]).is_ok(),
            "{} removed the lab's image {image} during its run (its log: {})",
            agent.name(),
            running.log.display()
        );
    }

    let mut n = Normalizer::default();
    n.literal(running.root_dir.display().to_string(), "<root-dir>");
    n.literal(running.pod_logs_dir.display().to_string(), "<pod-logs-dir>");
    n.literal(lab.node.clone(), "<node>");
    // Each agent's own version string (the Node's kubeletVersion).
    let node = snapshot.get("node");
    let version = node.and_then(|n| n["status"]["nodeInfo"]["kubeletVersion"].as_str());
    if let Some(version) = version {
        n.literal(version, "<version>");
    }
    for p in pods["items"].as_array().into_iter().flatten() {
        if let Some(uid) = p["metadata"]["uid"].as_str() {
            n.literal(uid, "<uid>");
        }
        // Pod-network pods' addresses, which the runtime's IPAM hands out.
        for ip in p["status"]["podIPs"].as_array().into_iter().flatten() {
            match ip["ip"].as_str() {
                Some(ip) if ip != lab.node_ip => n.address(ip, "<pod-ip>"),
                _ => {}
            }
        }
    }
    (snapshot, n)
}

/// The corpus into the manifest directory, with its placeholders filled
/// in and what `corpus/setup.txt` asks for made.
fn write_corpus(lab: &Lab) {
    let dir = lab.manifests();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(lab.host_dir()).unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("parity/corpus");
    let setup = std::fs::read_to_string(corpus.join("setup.txt")).unwrap();
    for line in setup.lines().map(|l| fill(lab, l)) {
        match line.split_once(' ') {
            Some(("dir", path)) => std::fs::create_dir_all(path).unwrap(),
            Some(("file", path)) => drop(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap(),
            ),
            Some(("namespace", name)) if lab.kubectl(&["get", "namespace", name]).is_err() => {
                lab.kubectl(&["create", "namespace", name]).unwrap();
            }
            _ => {}
        }
    }
    for entry in std::fs::read_dir(&corpus).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(dir.join(entry.file_name()), fill(lab, &text)).unwrap();
        }
    }
}

/// `@@HOST@@`, `@@NODE_IP@@` and `@@PORT1@@`..`@@PORT9@@` (the run's
/// port + 1000 + n) filled in.
fn fill(lab: &Lab, text: &str) -> String {
    let mut out = text
        .replace("@@HOST@@", &lab.host_dir().display().to_string())
        .replace("@@NODE_IP@@", &lab.node_ip);
    for n in 1..=9 {
        let port = u32::from(lab.port) + 1000 + n;
        out = out.replace(&format!("@@PORT{n}@@"), &port.to_string());
    }
    out
}

fn accepted_list() -> Vec<accepted::Accepted> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/kubelet-differences.md");
    let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    accepted::parse(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// An agent's run as captured, with the substitutions that normalize it.
fn raw_file(lab: &Lab, agent: Agent) -> std::path::PathBuf {
    lab.dir.join(format!("{}.raw.json", agent.name()))
}

/// Both runs normalized, compared and judged; the report and the
/// normalized snapshots written beside the raw ones. Panics with every new
/// difference.
fn compare_runs(lab: &Lab, raw: [serde_json::Value; 2]) {
    let accepted = accepted_list();
    let mut snapshots = Vec::new();
    for (agent, raw) in [Agent::Kubelet, Agent::Crilet].into_iter().zip(raw) {
        let n = Normalizer::from_json(&raw["substitutions"]);
        let mut snapshot: Snapshot = serde_json::from_value(raw["objects"].clone()).unwrap();
        for (key, value) in snapshot.iter_mut() {
            n.normalize(value);
            normalize::sort_dns_options(value);
            if ["pods ", "mirror ", "node", "lease", "events"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                normalize::prune_empty(value);
            }
            if key.starts_with("runtime container ") {
                normalize::sort_process_env(value);
            }
            if key == "node" {
                normalize::sort_runtime_handlers(value);
            }
        }
        let file = lab.dir.join(format!("{}.json", agent.name()));
        std::fs::write(&file, serde_json::to_string_pretty(&snapshot).unwrap()).unwrap();
        snapshots.push(snapshot);
    }
    let lines = compare::differences(&snapshots[0], &snapshots[1]);
    let verdict = report::judge(&lab.runtime, &lines, &accepted);
    let file = lab.dir.join("report.txt");
    std::fs::write(&file, &verdict.text).unwrap();
    eprint!("{}", verdict.text);
    eprintln!(
        "parity [{}]: {} differences, {} accepted, {} new; report {}",
        lab.runtime,
        verdict.differences,
        verdict.differences - verdict.unexpected.len(),
        verdict.unexpected.len(),
        file.display()
    );
    assert!(
        verdict.unexpected.is_empty(),
        "{} difference(s) between the kubelet and crilet are neither fixed nor on the accepted \
         list (docs/kubelet-differences.md):\n{}",
        verdict.unexpected.len(),
        verdict.unexpected.join("\n")
    );
}

#[test]
#[ignore = "needs a runtime and an API server of its own (scripts/test.sh)"]
fn kubelet_and_crilet_agree_over_the_corpus() {
    let lab = Lab::from_env();
    accepted_list(); // a broken page fails now, not after both runs
    std::fs::create_dir_all(&lab.dir).unwrap();
    lab.make_cgroup_root();
    lab.make_host_dir_shared();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut raw = Vec::new();
    for agent in [Agent::Kubelet, Agent::Crilet] {
        let started = std::time::Instant::now();
        let (snapshot, n) = run_agent(&lab, &rt, agent);
        let run = serde_json::json!({"substitutions": n.to_json(), "objects": snapshot});
        let file = raw_file(&lab, agent);
        std::fs::write(&file, serde_json::to_string_pretty(&run).unwrap()).unwrap();
        eprintln!(
            "parity [{}]: {} ran the corpus in {:.0?}; what it did: {}",
            lab.runtime,
            agent.name(),
            started.elapsed(),
            file.display()
        );
        raw.push(run);
    }
    lab.remove_all_pods();
    lab.forget_node();
    compare_runs(&lab, raw.try_into().unwrap());
}

/// The last run's captures compared again, with the current normalization
/// and accepted list: `CRILET_PARITY_DIR=... CRILET_PARITY_RUNTIME=...
/// cargo test --test parity -- --ignored --exact compare_the_last_run_again`.
#[test]
#[ignore = "compares what an earlier run in CRILET_PARITY_DIR captured"]
fn compare_the_last_run_again() {
    let dir =
        std::path::PathBuf::from(std::env::var("CRILET_PARITY_DIR").expect("CRILET_PARITY_DIR"));
    let runtime = std::env::var("CRILET_PARITY_RUNTIME").expect("CRILET_PARITY_RUNTIME");
    let read = |agent: Agent| -> serde_json::Value {
        let file = dir.join(format!("{}.raw.json", agent.name()));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        serde_json::from_str(&text).unwrap()
    };
    let runs = [read(Agent::Kubelet), read(Agent::Crilet)];
    compare_runs(&Lab::offline(dir, runtime), runs);
}
