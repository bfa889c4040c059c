//! The fake against CRI semantics: calls recorded in order, injected
//! failures, images, exec, RuntimeConfig and the container event streams.

use super::*;

#[tokio::test]
async fn records_calls_and_follows_cri_semantics() {
    let rt = FakeRuntime::new();
    rt.add_image("busybox:latest", 10);
    let sb = sandbox("web");
    let id = rt.run_pod_sandbox(&sb).await.unwrap();
    let cfg = ContainerConfig {
        metadata: ContainerMetadata {
            name: "c".into(),
            attempt: 0,
        },
        image: "busybox:latest".into(),
        ..Default::default()
    };
    let cid = rt.create_container(&id, &cfg, &sb).await.unwrap();
    rt.start_container(&cid).await.unwrap();
    let list = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].state, ContainerState::Running);
    assert_eq!(list[0].image_ref, "sha256:busybox-latest");
    // A name is reserved per attempt.
    assert!(rt.run_pod_sandbox(&sb).await.is_err());
    rt.stop_pod_sandbox(&id).await.unwrap();
    let st = rt.container_status(&cid).await.unwrap();
    assert_eq!(st.state, ContainerState::Exited);
    rt.remove_pod_sandbox(&id).await.unwrap();
    // Remove of an unknown id succeeds; status of it is NotFound.
    rt.remove_pod_sandbox(&id).await.unwrap();
    assert!(rt.pod_sandbox_status(&id).await.unwrap_err().is_not_found());
    assert_eq!(
        rt.ops(),
        [
            "RunPodSandbox",
            "CreateContainer",
            "StartContainer",
            "ListContainers",
            "RunPodSandbox",
            "StopPodSandbox",
            "ContainerStatus",
            "RemovePodSandbox",
            "RemovePodSandbox",
            "PodSandboxStatus"
        ]
    );
}

#[tokio::test]
async fn injected_failure_hits_once() {
    let rt = FakeRuntime::new();
    rt.fail_next("Version", tonic::Status::unavailable("down"));
    let err = rt.version().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(rt.version().await.is_ok());
}

#[tokio::test]
async fn images_resolve_by_tag_or_id_and_remove_all_tags() {
    let rt = FakeRuntime::new();
    let id = rt.add_image("docker.io/library/busybox:latest", 5);
    assert!(rt.image_status(&id).await.unwrap().is_some());
    rt.remove_image("docker.io/library/busybox:latest")
        .await
        .unwrap();
    assert!(rt.image_status(&id).await.unwrap().is_none());
    assert!(rt.list_images().await.unwrap().is_empty());
}

#[tokio::test]
async fn exec_answers_scripted_results_then_echoes_and_records_timeouts() {
    let rt = FakeRuntime::new();
    rt.add_image("busybox:latest", 1);
    let sb = sandbox("exec");
    let id = rt.run_pod_sandbox(&sb).await.unwrap();
    let cfg = ContainerConfig {
        image: "busybox:latest".into(),
        ..Default::default()
    };
    let cid = rt.create_container(&id, &cfg, &sb).await.unwrap();
    rt.start_container(&cid).await.unwrap();
    let scripted = ExecSyncResult {
        stdout: b"out".to_vec(),
        stderr: b"err".to_vec(),
        exit_code: 3,
    };
    rt.push_exec_result(scripted.clone());
    let cmd = ["true".to_string()];
    let first = rt.exec_sync(&cid, &cmd, Duration::from_secs(1)).await;
    assert_eq!(first.unwrap(), scripted);
    let second = rt.exec_sync(&cid, &cmd, Duration::from_secs(2)).await;
    assert_eq!(second.unwrap().stdout, b"true");
    assert_eq!(
        rt.exec_timeouts(),
        [Duration::from_secs(1), Duration::from_secs(2)]
    );
}

#[tokio::test]
async fn runtime_config_answers_cgroupfs_until_told_otherwise() {
    let rt = FakeRuntime::new();
    assert_eq!(
        rt.runtime_config().await.unwrap(),
        Some(CgroupDriver::Cgroupfs)
    );
    rt.set_runtime_config(Some(CgroupDriver::Systemd));
    assert_eq!(
        rt.runtime_config().await.unwrap(),
        Some(CgroupDriver::Systemd)
    );
    rt.set_runtime_config(None);
    assert_eq!(rt.runtime_config().await.unwrap(), None);
    rt.fail_next("RuntimeConfig", tonic::Status::unavailable("down"));
    assert!(rt.runtime_config().await.is_err());
    assert_eq!(rt.ops(), ["RuntimeConfig"; 4]);
}

#[tokio::test]
async fn container_events_follow_every_change_once_served() {
    use futures::StreamExt;
    let rt = FakeRuntime::new();
    rt.add_image("busybox:latest", 1);
    // Off by default, as containerd 1.6.
    let err = rt.get_container_events().await.err().unwrap();
    assert_eq!(err.code(), tonic::Code::Unimplemented);

    rt.serve_container_events();
    let rt = std::sync::Arc::new(rt);
    let call = tokio::spawn({
        let rt = rt.clone();
        async move { rt.get_container_events().await }
    });
    // The call waits for the first event, as containerd's and CRI-O's do.
    while rt.container_event_subscribers() == 0 {
        tokio::task::yield_now().await;
    }
    assert!(!call.is_finished());
    let sb = sandbox("ev");
    let id = rt.run_pod_sandbox(&sb).await.unwrap();
    let cfg = ContainerConfig {
        image: "busybox:latest".into(),
        ..Default::default()
    };
    let cid = rt.create_container(&id, &cfg, &sb).await.unwrap();
    rt.start_container(&cid).await.unwrap();
    rt.exit_container(&cid, 1);
    // Muted: a lost event.
    rt.mute_container_events(true);
    let lost = rt.create_container(&id, &cfg, &sb).await.unwrap();
    rt.mute_container_events(false);
    rt.remove_pod_sandbox(&id).await.unwrap();

    let mut events = call.await.unwrap().unwrap();
    let mut seen = Vec::new();
    for _ in 0..8 {
        let e = events.next().await.unwrap().unwrap();
        assert_eq!(e.pod_uid.as_deref(), Some("uid-ev"));
        assert_eq!(e.pod_sandbox_id.as_deref(), Some(id.as_str()));
        let who = if e.is_sandbox() {
            "sandbox"
        } else {
            "container"
        };
        seen.push((who, e.event_type, e.container_id));
    }
    use ContainerEventType::*;
    let sbx = |t| ("sandbox", t, id.clone());
    let ctr = |t, c: &str| ("container", t, c.to_string());
    assert_eq!(
        seen,
        [
            sbx(Created),
            sbx(Started),
            ctr(Created, &cid),
            ctr(Started, &cid),
            ctr(Stopped, &cid),
            ctr(Deleted, &cid),
            ctr(Deleted, &lost),
            sbx(Deleted),
        ]
    );

    // A runtime restart ends the stream with an error.
    rt.break_container_events(tonic::Status::unavailable("restarting"));
    let err = events.next().await.unwrap().unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(events.next().await.is_none());
    assert_eq!(rt.container_event_subscribers(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_paced_fake_takes_containerds_time_records_nothing_and_its_stats_move() {
    let fake = FakeRuntime::paced(Pacing::containerd());
    let began = tokio::time::Instant::now();
    let sid = fake.run_pod_sandbox(&sandbox("web")).await.unwrap();
    assert_eq!(
        began.elapsed(),
        Pacing::containerd().latency("RunPodSandbox")
    );
    fake.add_image("busybox:latest", 1);
    let cfg = ContainerConfig {
        metadata: ContainerMetadata {
            name: "main".into(),
            attempt: 0,
        },
        image: "busybox:latest".into(),
        ..Default::default()
    };
    let cid = fake
        .create_container(&sid, &cfg, &sandbox("web"))
        .await
        .unwrap();
    fake.start_container(&cid).await.unwrap();
    assert!(
        fake.calls().is_empty(),
        "a hollow node's fake keeps no call log"
    );
    // Wall-clock times, not the test counter's zero.
    let status = fake.container_status(&cid).await.unwrap();
    assert!(
        status.started_at > 1_600_000_000_000_000_000,
        "{}",
        status.started_at
    );
    let stats = fake.container_stats(&cid).await.unwrap();
    let memory = stats.memory.unwrap().working_set_bytes.unwrap();
    assert!((8 << 20..=12 << 20).contains(&memory), "{memory}");
}
