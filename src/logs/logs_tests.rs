use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::*;
use crate::cri::FakeRuntime;
use crate::logs::LogOptions;
use crate::pod::manager::PodManager;

const UID: &str = "0123456789abcdef0123456789abcdef";
const MIRROR_UID: &str = "11111111-2222-3333-4444-555555555555";

/// A fake runtime with one running container logging to `log_path`.
async fn runtime_with_container(log_path: &str) -> (FakeRuntime, String) {
    let rt = FakeRuntime::new();
    let cid = rt.run_container("web-n1", UID, "app", log_path).await;
    (rt, cid)
}

fn view_and_status(container_id: &str) -> (AgentView, StatusCache) {
    let pod: crate::pod::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-n1", "namespace": "default", "uid": UID,
            "annotations": {"kubernetes.io/config.source": "file"}},
        "spec": {"containers": [{"name": "app"}, {"name": "side"}]},
    }))
    .unwrap();
    let mirror: crate::pod::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-n1", "namespace": "default", "uid": MIRROR_UID,
            "annotations": {"kubernetes.io/config.source": "api",
                "kubernetes.io/config.mirror": "x"}},
        "spec": {"containers": [{"name": "app"}, {"name": "side"}]},
    }))
    .unwrap();
    let mut manager = PodManager::new();
    manager.add_pod(pod);
    manager.add_pod(mirror);
    let status: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(json!({"containerStatuses": [
        {"name": "app", "containerID": format!("fake://{container_id}"), "state": {"running": {}}},
        {"name": "side", "state": {"waiting": {"reason": "ContainerCreating"}}},
    ]}))
    .unwrap();
    let statuses = StatusCache::default();
    statuses
        .write()
        .unwrap()
        .insert(UID.into(), Arc::new(status));
    let view = AgentView {
        manager: Arc::new(manager),
        ..Default::default()
    };
    (view, statuses)
}

#[tokio::test]
async fn locate_by_name_or_either_uid() {
    let (rt, cid) = runtime_with_container("app/0.log").await;
    let (view, statuses) = view_and_status(&cid);
    let root = Path::new("/var/log/pods");
    for r in ["default/web-n1", "web-n1", UID, MIRROR_UID] {
        let pod = PodRef::parse(r).unwrap();
        let t = locate(&view, &statuses, &rt, root, &pod, Some("app"), false)
            .await
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        assert_eq!(t.container_id, cid);
        assert_eq!(t.pod_uid, UID);
        assert_eq!(
            t.path,
            Path::new(&format!("/var/log/pods/default_web-n1_{UID}/app/0.log"))
        );
    }
}

#[tokio::test]
async fn locate_refusals_say_why() {
    let (rt, cid) = runtime_with_container("/abs/0.log").await;
    let (view, statuses) = view_and_status(&cid);
    let root = Path::new("/r");
    let at = |pod: &'static str, c: Option<&'static str>, previous: bool| {
        let (view, statuses, rt) = (&view, &statuses, &rt);
        let pod = PodRef::parse(pod).unwrap();
        async move { locate(view, statuses, rt, root, &pod, c, previous).await }
    };
    assert_eq!(
        at("web-n1", Some("app"), false).await.unwrap().path,
        Path::new("/abs/0.log")
    );
    assert_eq!(
        at("default/nope", Some("app"), false).await,
        Err(LocateError::NotFound(
            "no pod managed by crilet matches pod default/nope".into()
        ))
    );
    assert_eq!(
        at("web-n1", Some("nope"), false).await,
        Err(LocateError::NotFound(
            "container \"nope\" not found in pod \"web-n1\"".into()
        ))
    );
    assert_eq!(
        at("web-n1", Some("side"), false).await,
        Err(LocateError::BadRequest(
            "container \"side\" in pod \"web-n1\" is waiting to start: ContainerCreating".into()
        ))
    );
    assert_eq!(
        at("web-n1", None, false).await,
        Err(LocateError::BadRequest(
            "a container name must be specified for pod \"web-n1\", choose one of: [app side]"
                .into()
        ))
    );
    assert!(matches!(
        at("web-n1", Some("app"), true).await,
        Err(LocateError::BadRequest(m)) if m.contains("previous terminated container")
    ));
}

fn target(path: PathBuf, container_id: &str) -> LogTarget {
    LogTarget {
        pod_uid: UID.into(),
        pod_full_name: "web-n1_default".into(),
        container: "app".into(),
        container_id: container_id.into(),
        path,
    }
}

fn cri(n: usize) -> String {
    format!(
        "2026-12-01T00:00:{:02}.000000000Z stdout F line {n}\n",
        n % 60
    )
}

async fn collect(t: LogTarget, opts: LogOptions, rt: Arc<dyn crate::cri::Runtime>) -> String {
    let (tx, mut rx) = mpsc::channel(4);
    let task = tokio::spawn(stream(t, opts, rt, tx));
    let mut out = Vec::new();
    while let Some(b) = rx.recv().await {
        out.extend_from_slice(&b);
    }
    task.await.unwrap().unwrap();
    String::from_utf8(out).unwrap()
}

use tokio::sync::mpsc;

#[tokio::test]
async fn reads_tail_since_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let text: String = (0..50).map(cri).collect();
    std::fs::write(&path, text).unwrap();
    let (rt, cid) = runtime_with_container("x").await;
    let rt: Arc<dyn crate::cri::Runtime> = Arc::new(rt);
    let opts = |q: &str| LogOptions::from_query(q).unwrap();
    let all: String = (0..50).map(|n| format!("line {n}\n")).collect();
    assert_eq!(
        collect(target(path.clone(), &cid), opts(""), rt.clone()).await,
        all
    );
    assert_eq!(
        collect(target(path.clone(), &cid), opts("tailLines=2"), rt.clone()).await,
        "line 48\nline 49\n"
    );
    assert_eq!(
        collect(target(path.clone(), &cid), opts("tailLines=0"), rt.clone()).await,
        ""
    );
    assert_eq!(
        collect(
            target(path.clone(), &cid),
            opts("sinceTime=2026-12-01T00:00:48Z"),
            rt.clone()
        )
        .await,
        "line 48\nline 49\n"
    );
    assert_eq!(
        collect(target(path.clone(), &cid), opts("limitBytes=9"), rt.clone()).await,
        "line 0\nli"
    );
    let missing = target(dir.path().join("gone.log"), &cid);
    let (tx, _rx) = mpsc::channel(1);
    let err = stream(missing, opts(""), rt, tx).await.unwrap_err();
    assert!(
        err.to_string().starts_with("opening the log file "),
        "{err}"
    );
    assert!(err.to_string().contains("gone.log"), "{err}");
}

#[tokio::test]
async fn follow_crosses_a_rotation_and_ends_with_the_container() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, (0..10).map(cri).collect::<String>()).unwrap();
    let (fake, cid) = runtime_with_container("x").await;
    let fake = Arc::new(fake);
    let rt: Arc<dyn crate::cri::Runtime> = fake.clone();
    let opts = LogOptions::from_query("follow=true").unwrap();
    let reader = tokio::spawn(collect(target(path.clone(), &cid), opts, rt));
    let append = |from: usize, to: usize, path: PathBuf| async move {
        let mut f = tokio::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .await
            .unwrap();
        for n in from..to {
            f.write_all(cri(n).as_bytes()).await.unwrap();
        }
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    append(10, 20, path.clone()).await;
    // Rotate as the kubelet does: rename, the runtime writes on to the
    // renamed file until it reopens, then a new file at the path.
    let rotated = dir.path().join("0.log.20261201-000000");
    std::fs::rename(&path, &rotated).unwrap();
    append(20, 30, rotated.clone()).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    std::fs::write(&path, "").unwrap();
    append(30, 40, path.clone()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    fake.exit_container(&cid, 0);
    let out = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the follower ends once the container stopped")
        .unwrap();
    let want: String = (0..40).map(|n| format!("line {n}\n")).collect();
    assert_eq!(out, want);
}
