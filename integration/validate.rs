//! `crilet validate` as an operator runs it in CI: the binary, real files,
//! no runtime. And manifest trust in `crilet run` against the agent tests'
//! runtime: a manifest others can write warns once, or with
//! `--manifest-trust=strict` is refused and its pod never runs.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use crate::agent::*;
use crate::support::cli;

const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// kubeadm's etcd manifest (v1.32), as `kubeadm init` writes it.
pub const KUBEADM_ETCD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.10:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.10:2379
    - --data-dir=/var/lib/etcd
    - --listen-metrics-urls=http://127.0.0.1:2381
    image: registry.k8s.io/etcd:3.5.16-0
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /livez
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
    - mountPath: /etc/kubernetes/pki/etcd
      name: etcd-certs
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: /etc/kubernetes/pki/etcd
      type: DirectoryOrCreate
    name: etcd-certs
  - hostPath:
      path: /var/lib/etcd
      type: DirectoryOrCreate
    name: etcd-data
status: {}
"#;

const BROKEN: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\n  labels:\n    bad key!: x\nspec:\n  terminationGracePeriodSeconds: -1\n  containers:\n  - name: c\n    image: busybox\n    imagePullPolicy: Maybe\n";

fn validate(args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["validate", "--hostname-override", "node-v"];
    all.extend_from_slice(args);
    cli(&all)
}

#[test]
fn a_directory_with_a_kubeadm_manifest_and_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("etcd.yaml"), KUBEADM_ETCD).unwrap();
    std::fs::write(dir.path().join("broken.yaml"), BROKEN).unwrap();
    let d = dir.path().to_str().unwrap();
    let (ok, out, err) = validate(&[d]);
    assert!(!ok, "a broken manifest must fail the run: {out}{err}");
    let broken = format!("{d}/broken.yaml");
    for line in [
        format!("{broken}: metadata.labels: Invalid value: \"bad key!\""),
        format!("{broken}: spec.terminationGracePeriodSeconds: Invalid value: -1"),
        format!("{broken}: spec.containers[0].imagePullPolicy: Unsupported value: \"Maybe\""),
        format!("{d}/etcd.yaml: ok: pod etcd-node-v_kube-system (uid "),
        "2 manifest(s): 1 valid, 1 refused (3 problem(s))".to_owned(),
    ] {
        assert!(out.contains(&line), "missing {line:?} in\n{out}");
    }

    // The kubeadm manifest alone passes; JSON says the same as text.
    let etcd = format!("{d}/etcd.yaml");
    let (ok, out, err) = validate(&[&etcd, "-o", "json"]);
    assert!(ok, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["valid"], true);
    assert_eq!(v["manifests"][0]["pod"], "etcd-node-v_kube-system");
    let (_, out, _) = validate(&[d, "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["valid"], false);
    let problems = &v["manifests"][0]["problems"];
    assert_eq!(problems[0]["field"], "metadata.labels", "{v}");
    assert_eq!(problems.as_array().map(Vec::len), Some(3), "{v}");
}

/// A YAML scalar of the wrong type, refused as the agent refuses it (the
/// kubelet: "cannot unmarshal bool into Go struct field
/// ExecAction.spec.containers.livenessProbe.exec.command of type string").
#[test]
fn a_mistyped_scalar_names_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: typed}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    livenessProbe: {exec: {command: [true]}}\n";
    std::fs::write(dir.path().join("typed.yaml"), pod).unwrap();
    let file = format!("{}/typed.yaml", dir.path().display());
    let (ok, out, err) = validate(&[&file]);
    assert!(!ok, "{out}{err}");
    let line = format!(
        "{file}: spec.containers[0].livenessProbe.exec.command[0]: invalid Pod: expected a string, found a boolean (true)"
    );
    assert!(out.contains(&line), "missing {line:?} in\n{out}{err}");
}

#[test]
fn standard_input_missing_paths_and_duplicate_names() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(["validate", "--hostname-override", "node-v", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(KUBEADM_ETCD.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("-: ok: pod etcd-node-v_kube-system"),
        "{text}"
    );

    let (ok, out, _) = validate(&["/nonexistent/manifests"]);
    assert!(!ok);
    assert!(
        out.contains("/nonexistent/manifests: does not exist"),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), KUBEADM_ETCD).unwrap();
    std::fs::write(dir.path().join("b.yaml"), KUBEADM_ETCD).unwrap();
    let (ok, out, _) = validate(&[dir.path().to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("b.yaml: metadata.name: the pod etcd-node-v_kube-system is also defined in"),
        "{out}"
    );
}

#[test]
fn a_manifest_others_can_write_warns_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etcd.yaml");
    std::fs::write(&file, KUBEADM_ETCD).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let f = file.to_str().unwrap();
    let (ok, out, _) = validate(&[f]);
    assert!(ok, "a warning alone passes: {out}");
    assert!(
        out.contains(&format!("{f}: warning: untrusted: the manifest is writable by its group; the manifest is writable by others")),
        "{out}"
    );
    let (ok, out, _) = validate(&["--manifest-trust", "strict", f]);
    assert!(!ok, "{out}");
    assert!(out.contains("refused (--manifest-trust=strict)"), "{out}");
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn the_agent_warns_once_about_an_untrusted_manifest_and_strict_refuses_it() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let mut agent = AgentProcess::prepare_on(NODE, &[]);
    agent.write(
        "open.yaml",
        &busybox_pod("open", "Always", "exec sleep 100000"),
    );
    let open = agent.manifests.path().join("open.yaml");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o646)).unwrap();
    agent.spawn();
    wait_for(&rt, &agent, "open", LIMIT, "running", |v| {
        v.running("main").is_some()
    })
    .await;
    // Several re-lists (--file-check-frequency 1s) later, still one warning.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let logs = agent.logs();
    let warnings = logs
        .lines()
        .filter(|l| l.contains("can be changed by others than root") && l.contains("open.yaml"))
        .count();
    assert_eq!(warnings, 1, "{logs}");
    assert!(
        logs.contains("the manifest is writable by others"),
        "{logs}"
    );
    drop(agent);
    clean_runtime(&rt).await;

    let mut strict = AgentProcess::prepare_on(NODE, &["--manifest-trust".into(), "strict".into()]);
    strict.write(
        "open.yaml",
        &busybox_pod("open", "Always", "exec sleep 100000"),
    );
    strict.write(
        "fine.yaml",
        &busybox_pod("fine", "Always", "exec sleep 100000"),
    );
    let open = strict.manifests.path().join("open.yaml");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o664)).unwrap();
    strict.spawn();
    wait_for(&rt, &strict, "fine", LIMIT, "running", |v| {
        v.running("main").is_some()
    })
    .await;
    let logs = strict.logs();
    assert!(
        logs.contains("refused (--manifest-trust=strict)") && logs.contains("open.yaml"),
        "{logs}"
    );
    assert!(strict.view(&rt, "open").await.sandboxes.is_empty());
}

#[test]
fn strict_trust_refuses_a_plain_http_manifest_url_before_starting() {
    let root = tempfile::tempdir().unwrap();
    let url = "http://192.0.2.1:8080/pods";
    let (ok, _, err) = cli(&[
        "run",
        "--manifest-url",
        url,
        "--manifest-trust",
        "strict",
        "--container-runtime-endpoint",
        "unix:///nonexistent/crilet-test.sock",
        "--root-dir",
        root.path().to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "--manifest-url {url}: untrusted: served over plain http from \"192.0.2.1\""
        )) && err.contains("refused (--manifest-trust=strict)"),
        "{err}"
    );
}
