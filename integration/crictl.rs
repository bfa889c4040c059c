//! What an operator sees with crictl (the binary from ../shared/bin, path
//! in CRILET_CRICTL) on a node crilet runs: `crictl pods`, `crictl ps -a`,
//! `crictl inspectp` and `crictl inspect`, on each runtime of the suite.
//! Names, namespaces, attempts, labels and annotations are the kubelet's.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::agent::*;

const LIMIT: Duration = Duration::from_secs(60);

pub fn crictl(args: &[&str]) -> String {
    let bin = std::env::var("CRILET_CRICTL").unwrap_or_else(|_| {
        panic!(
            "CRILET_CRICTL is not set: these tests run the operator's crictl. \
             Run `bash scripts/test.sh`, or export CRILET_CRICTL=$(../shared/lab/bin.sh crictl)"
        )
    });
    let endpoint = agent_endpoint();
    let out = Command::new(&bin)
        .args([
            "--runtime-endpoint",
            &endpoint,
            "--image-endpoint",
            &endpoint,
        ])
        .args(args)
        .env("CRI_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    assert!(
        out.status.success(),
        "crictl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn crictl_json(args: &[&str]) -> Value {
    let text = crictl(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("crictl {args:?}: {e}: {text}"))
}

/// The keys of a JSON object, less those a runtime adds on its own:
/// containerd's `io.cri-containerd.*`, CRI-O's sandbox container name "POD".
fn own_keys(map: &Value) -> BTreeSet<String> {
    map.as_object()
        .unwrap_or_else(|| panic!("not an object: {map}"))
        .iter()
        .filter(|(k, v)| {
            let sandbox_name = k.as_str() == "io.kubernetes.container.name" && *v == "POD";
            !(k.starts_with("io.cri-containerd.") || sandbox_name)
        })
        .map(|(k, _)| k.clone())
        .collect()
}

fn keys(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

const MANIFEST: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: view
  namespace: kube-system
  labels:
    app: view
    tier: control-plane
  annotations:
    example.com/note: hello
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: setup
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: main
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exec sleep 100000"]
  - name: crash
    image: docker.io/library/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exit 3"]
"#;

#[tokio::test]
#[ignore = "needs the agent tests' runtime and crictl (scripts/test.sh)"]
async fn crictl_shows_pods_and_containers_as_the_kubelet_names_them() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write("view.yaml", MANIFEST);
    let full = format!("view-{NODE}");
    // "crash" exits at once and is restarted at once (the back-off starts after).
    wait_for(
        &rt,
        &agent,
        "view",
        LIMIT,
        "main running, crash restarted",
        |v| v.running("main").is_some() && v.named("crash").len() >= 2,
    )
    .await;

    // --- crictl pods: one Ready sandbox, attempt 0, named <name>-<node>.
    let pods = crictl_json(&["pods", "--name", &full, "-o", "json"]);
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{pods:#}");
    let pod = &items[0];
    assert_eq!(pod["metadata"]["name"], full.as_str());
    assert_eq!(pod["metadata"]["namespace"], "kube-system");
    assert_eq!(pod["metadata"]["attempt"], 0, "{pod:#}");
    assert_eq!(pod["state"], "SANDBOX_READY");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(uid.len(), 32, "a static pod's UID is the config hash");
    assert_eq!(
        own_keys(&pod["labels"]),
        keys(&[
            "app",
            "tier",
            "io.kubernetes.pod.name",
            "io.kubernetes.pod.namespace",
            "io.kubernetes.pod.uid"
        ]),
        "{pod:#}"
    );
    assert_eq!(pod["labels"]["io.kubernetes.pod.uid"], uid.as_str());
    assert_eq!(
        own_keys(&pod["annotations"]),
        keys(&[
            "example.com/note",
            "kubernetes.io/config.hash",
            "kubernetes.io/config.seen",
            "kubernetes.io/config.source"
        ]),
        "{pod:#}"
    );
    assert_eq!(pod["annotations"]["kubernetes.io/config.source"], "file");
    assert_eq!(
        pod["annotations"]["kubernetes.io/config.hash"],
        uid.as_str()
    );
    let sandbox = pod["id"].as_str().unwrap().to_string();
    let table = crictl(&["pods", "--name", &full]);
    let row = table.lines().find(|l| l.contains(&full)).expect(&table);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(
        cols.contains(&"Ready") && cols.contains(&"kube-system") && cols.contains(&"0"),
        "{table}"
    );

    // --- crictl inspectp: the kubelet's namespaces for a host-network pod.
    let p = crictl_json(&["inspectp", "-o", "json", &sandbox]);
    let ns = &p["status"]["linux"]["namespaces"]["options"];
    assert_eq!(ns["network"], "NODE", "{p:#}");
    assert_eq!(ns["pid"], "CONTAINER", "{p:#}");
    assert_eq!(p["status"]["metadata"]["name"], full.as_str());

    // --- crictl ps -a: every container of the pod, attempts counting restarts.
    let ps = crictl_json(&["ps", "-a", "--pod", &sandbox, "-o", "json"]);
    let containers = ps["containers"].as_array().unwrap();
    let names: BTreeSet<&str> = containers
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BTreeSet::from(["setup", "main", "crash"]), "{ps:#}");
    let mut crash_attempts: Vec<u64> = Vec::new();
    for c in containers {
        let name = c["metadata"]["name"].as_str().unwrap();
        assert_eq!(
            own_keys(&c["labels"]),
            keys(&[
                "io.kubernetes.container.name",
                "io.kubernetes.pod.name",
                "io.kubernetes.pod.namespace",
                "io.kubernetes.pod.uid"
            ]),
            "{c:#}"
        );
        assert_eq!(c["labels"]["io.kubernetes.container.name"], name);
        assert_eq!(c["labels"]["io.kubernetes.pod.name"], full.as_str());
        assert_eq!(c["labels"]["io.kubernetes.pod.namespace"], "kube-system");
        assert_eq!(c["labels"]["io.kubernetes.pod.uid"], uid.as_str());
        for a in [
            "io.kubernetes.container.hash",
            "io.kubernetes.container.restartCount",
            "io.kubernetes.container.terminationMessagePath",
            "io.kubernetes.container.terminationMessagePolicy",
            "io.kubernetes.pod.terminationGracePeriod",
        ] {
            assert!(own_keys(&c["annotations"]).contains(a), "{a}: {c:#}");
        }
        let attempt = c["metadata"]["attempt"].as_u64().unwrap();
        assert_eq!(
            c["annotations"]["io.kubernetes.container.restartCount"],
            attempt.to_string(),
            "{c:#}"
        );
        if name == "crash" {
            crash_attempts.push(attempt);
        }
    }
    crash_attempts.sort();
    assert_eq!(crash_attempts[..2], [0, 1], "{ps:#}");
    let table = crictl(&["ps", "-a", "--pod", &sandbox]);
    for name in ["setup", "main", "crash"] {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().any(|w| w == name))
            .unwrap_or_else(|| panic!("{name} missing: {table}"));
        // POD and NAMESPACE come from the container's labels ("unknown" without them).
        assert!(
            row.contains(&full) && row.contains("kube-system"),
            "{table}"
        );
    }

    // --- crictl inspect: the log path the kubelet uses, and the exit code.
    let crash = containers
        .iter()
        .find(|c| c["metadata"]["name"] == "crash" && c["metadata"]["attempt"] == 0)
        .unwrap();
    let i = crictl_json(&["inspect", "-o", "json", crash["id"].as_str().unwrap()]);
    let log_path = i["status"]["logPath"].as_str().unwrap();
    assert_eq!(
        std::path::Path::new(log_path),
        agent
            .pod_logs_dir()
            .join(format!("kube-system_{full}_{uid}/crash/0.log")),
    );
    assert_eq!(i["status"]["exitCode"], 3, "{i:#}");
    assert_eq!(i["status"]["state"], "CONTAINER_EXITED");
    clean_runtime(&rt).await;
}
