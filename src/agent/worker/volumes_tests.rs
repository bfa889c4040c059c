//! The worker's volume and hosts-file steps against the fake runtime and a
//! temporary root dir: emptyDirs made 0777 and given to the fsGroup before
//! the sandbox, the managed /etc/hosts written and mounted before each
//! container that gets it, and the failures of both as the kubelet shows
//! them. (The chown needs root, as crilet itself does.)

use super::tests::{app_state, fake, worker_with};
use super::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::cri::{ContainerFilter, Mount};
use crate::pod::defaults::apply_api_defaults;
use crate::prober::handlers::fake::FakeHandlers;

fn worker(rt: Arc<crate::cri::FakeRuntime>, root: &Path) -> Worker {
    worker_with(rt, root, Arc::new(FakeHandlers::new()))
}

/// Pod `web` (UID u1) from its spec; containers use the fake's busybox.
fn pod(spec: serde_json::Value) -> Pod {
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": spec,
    }))
    .unwrap();
    apply_api_defaults(&mut pod);
    pod
}

fn busybox(name: &str, mounts: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": name, "image": "busybox", "imagePullPolicy": "Never",
        "volumeMounts": mounts})
}

/// The mounts CreateContainer got for container `name`.
async fn mounts_of(rt: &crate::cri::FakeRuntime, name: &str) -> Vec<Mount> {
    let list = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    let c = list.iter().find(|c| c.metadata.name == name).unwrap();
    rt.container_status(&c.id).await.unwrap().mounts
}

fn mode_and_gid(path: &Path) -> (u32, u32) {
    let m = std::fs::metadata(path).unwrap();
    (m.mode() & 0o7777, m.gid())
}

#[tokio::test]
async fn empty_dirs_are_given_to_the_fs_group_and_hosts_mounted_where_not_taken() {
    let root = tempfile::tempdir().unwrap();
    let own_hosts = root.path().join("my-hosts");
    std::fs::write(&own_hosts, "10.9.9.9 mine\n").unwrap();
    let rt = fake();
    rt.set_pod_ips(&["10.156.0.3", "fd00::3"]);
    let mut w = worker(rt.clone(), root.path());
    let work = serde_json::json!([{"name": "work", "mountPath": "/work"}]);
    let web = pod(serde_json::json!({
        "restartPolicy": "Never",
        "hostname": "www",
        "subdomain": "sub",
        "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}],
        "containers": [
            busybox("app", work.clone()),
            busybox("own", serde_json::json!([{"name": "hosts", "mountPath": "/etc/hosts"}])),
        ],
        "volumes": [
            {"name": "work", "emptyDir": {}},
            {"name": "hosts", "hostPath": {"path": own_hosts.to_str().unwrap(), "type": "File"}},
        ],
    }));
    w.sync(&Arc::new(web.clone())).await.unwrap();

    let pod_dir = root.path().join("pods/u1");
    let dir = pod_dir.join("volumes/kubernetes.io~empty-dir/work");
    assert_eq!(mode_and_gid(&dir), (0o2777, 2000));
    assert!(
        pod_dir
            .join("plugins/kubernetes.io~empty-dir/work/ready")
            .is_file()
    );
    // hostPath volumes are not the pod's to re-own.
    assert_ne!(mode_and_gid(&own_hosts).1, 2000);

    let hosts = pod_dir.join("etc-hosts");
    let text = std::fs::read_to_string(&hosts).unwrap();
    assert!(text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
    assert!(
        text.ends_with(
            "fe00::2\tip6-allrouters\n\
             10.156.0.3\twww.sub.default.svc.\twww\n\
             fd00::3\twww.sub.default.svc.\twww\n\
             \n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
        ),
        "{text}"
    );
    assert_eq!(mode_and_gid(&hosts).0, 0o644);

    let app: Vec<(String, String)> = mounts_of(&rt, "app")
        .await
        .into_iter()
        .map(|m| (m.container_path, m.host_path))
        .collect();
    assert_eq!(app[0], ("/work".into(), dir.display().to_string()));
    assert_eq!(app[1], ("/etc/hosts".into(), hosts.display().to_string()));
    assert_eq!(app[2].0, "/dev/termination-log");
    let own = mounts_of(&rt, "own").await;
    let at_hosts: Vec<&str> = (own.iter())
        .filter(|m| m.container_path == "/etc/hosts")
        .map(|m| m.host_path.as_str())
        .collect();
    assert_eq!(at_hosts, [own_hosts.to_str().unwrap()], "its own file only");
}

#[tokio::test]
async fn a_pod_without_an_ip_gets_no_hosts_file_and_no_fs_group_keeps_root() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let web = pod(serde_json::json!({
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": 1000},
        "containers": [busybox("app", serde_json::json!([{"name": "work", "mountPath": "/work"}]))],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }));
    w.sync(&Arc::new(web.clone())).await.unwrap();
    let dir = root
        .path()
        .join("pods/u1/volumes/kubernetes.io~empty-dir/work");
    assert_eq!(mode_and_gid(&dir), (0o777, 0));
    assert!(!root.path().join("pods/u1/etc-hosts").exists());
    let mounts = mounts_of(&rt, "app").await;
    assert!(mounts.iter().all(|m| m.container_path != "/etc/hosts"));
}

#[tokio::test]
async fn a_host_network_pod_gets_the_node_file_and_its_aliases() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    rt.set_pod_ips(&["10.156.0.9"]);
    let mut w = worker(rt.clone(), root.path());
    let web = pod(serde_json::json!({
        "restartPolicy": "Never",
        "hostNetwork": true,
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local"]}],
        "containers": [busybox("app", serde_json::json!([]))],
    }));
    w.sync(&Arc::new(web.clone())).await.unwrap();
    let node = std::fs::read_to_string("/etc/hosts").unwrap();
    let text = std::fs::read_to_string(root.path().join("pods/u1/etc-hosts")).unwrap();
    assert_eq!(
        text,
        format!(
            "# Kubernetes-managed hosts file (host network).\n{node}\
             \n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\n"
        )
    );
    let mounts = mounts_of(&rt, "app").await;
    assert!(mounts.iter().any(|m| m.container_path == "/etc/hosts"));
}

#[tokio::test]
async fn an_empty_dir_that_cannot_be_made_keeps_the_pod_waiting_with_the_reason() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let web = pod(serde_json::json!({
        "restartPolicy": "Never",
        "containers": [busybox("app", serde_json::json!([{"name": "work", "mountPath": "/work"}]))],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }));
    let dir = root
        .path()
        .join("pods/u1/volumes/kubernetes.io~empty-dir/work");
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    std::fs::write(&dir, "in the way").unwrap();
    assert!(w.sync(&Arc::new(web.clone())).await.is_err());
    assert!(!rt.ops().contains(&"RunPodSandbox"));
    let waiting = app_state(&w).waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    let message = waiting.message.unwrap();
    let want = format!(
        "MountVolume.SetUp failed for volume \"work\" : mkdir {}: ",
        dir.display()
    );
    assert!(message.starts_with(&want), "{message}");

    // Cleared: the retry sets it up and the pod runs.
    std::fs::remove_file(&dir).unwrap();
    w.sync(&Arc::new(web.clone())).await.unwrap();
    assert!(app_state(&w).running.is_some());
    assert_eq!(mode_and_gid(&dir).0, 0o777);
}
