//! The worker's host-file steps against the fake runtime and a temporary
//! root dir: hostPath checks before the sandbox.

use super::*;
use std::path::Path;

use crate::cri::{DnsConfig, FakeRuntime};
use crate::pod::defaults::apply_api_defaults;
use k8s_openapi::api::core::v1::ContainerState as K8sState;

fn worker(rt: Arc<FakeRuntime>, root: &Path) -> Worker {
    let (done, _) = mpsc::unbounded_channel();
    let ctx = WorkerContext {
        runtime: rt,
        runtime_name: "fake".into(),
        node: NodeContext {
            node_name: "node-1".into(),
            root_dir: root.to_path_buf(),
            cgroup_root: "/".into(),
            host_dns: DnsConfig::default(),
            host_ip: "10.0.0.1".into(),
            memory_capacity: 1 << 30,
        },
        statuses: StatusCache::default(),
        status_changed: watch::channel(()).0,
        cgroup_fs: root.join("cgroup"),
        done,
    };
    Worker {
        ctx: Arc::new(ctx),
        backoff: BackOff::default(),
        pull_failures: HashMap::new(),
        waiting: HashMap::new(),
        volume_error: None,
        start_time: None,
        previous: None,
        errors: 0,
    }
}

fn pod(container: serde_json::Value, volumes: serde_json::Value) -> Pod {
    let mut c = serde_json::json!({"name": "app", "image": "busybox", "imagePullPolicy": "Never"});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"restartPolicy": "Never", "containers": [c], "volumes": volumes}
    }))
    .unwrap();
    apply_api_defaults(&mut pod);
    pod
}

fn fake() -> Arc<FakeRuntime> {
    let rt = Arc::new(FakeRuntime::new());
    rt.add_image("busybox", 1);
    rt
}

fn app_state(w: &Worker) -> K8sState {
    let status = w.previous.as_ref().unwrap();
    let app = &status.container_statuses.as_ref().unwrap()[0];
    app.state.clone().unwrap()
}

#[tokio::test]
async fn failed_host_path_check_keeps_the_pod_pending_until_it_passes() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker(rt.clone(), root.path());
    let conf = root.path().join("etc/kubernetes/scheduler.conf");
    let volumes = serde_json::json!([{
        "name": "kubeconfig",
        "hostPath": {"path": conf, "type": "FileOrCreate"}
    }]);
    let mount = serde_json::json!({"volumeMounts": [{"name": "kubeconfig", "mountPath": "/etc/kubernetes/scheduler.conf", "readOnly": true}]});
    let pod = pod(mount, volumes);

    let err = w.sync(&pod).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("MountVolume.SetUp failed for volume \"kubeconfig\""),
        "{err}"
    );
    assert!(
        !rt.ops().contains(&"RunPodSandbox"),
        "no sandbox before the volumes"
    );
    let status = w.previous.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let waiting = app_state(&w).waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    let message = waiting.message.unwrap();
    assert!(
        message.contains(&format!("open {}", conf.display())),
        "{message}"
    );

    // The parent appears (kubeadm wrote /etc/kubernetes): the retry passes,
    // makes the file, and the message goes.
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    w.sync(&pod).await.unwrap();
    assert!(conf.is_file());
    assert!(rt.ops().contains(&"RunPodSandbox"));
    assert!(app_state(&w).running.is_some());
}
