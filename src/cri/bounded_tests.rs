use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

use super::*;
use crate::cri::fake::sandbox;

/// Whether `call` finishes while the test holds the only permit.
async fn passes_while_held<T>(
    b: &BoundedRuntime,
    call: impl std::future::Future<Output = T>,
) -> bool {
    let _held = b.permits.acquire().await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), call)
        .await
        .is_ok()
}

#[tokio::test(start_paused = true)]
async fn mutations_wait_for_a_permit_and_the_rest_pass() {
    let fake = Arc::new(FakeRuntime::new());
    let b = BoundedRuntime::new(fake.clone(), 1);
    let cid = fake.run_container("p", "uid-p", "c", "/dev/null").await;
    let sid = fake.list_pod_sandbox(&Default::default()).await.unwrap()[0]
        .id
        .clone();
    let sb = sandbox("q");
    let cfg = ContainerConfig {
        metadata: ContainerMetadata {
            name: "c".into(),
            attempt: 1,
        },
        image: "busybox:latest".into(),
        ..Default::default()
    };
    // The mutations of a pod's sandbox and containers wait...
    assert!(
        !passes_while_held(&b, b.run_pod_sandbox(&sb)).await,
        "RunPodSandbox"
    );
    assert!(
        !passes_while_held(&b, b.create_container(&sid, &cfg, &sandbox("p"))).await,
        "CreateContainer"
    );
    assert!(
        !passes_while_held(&b, b.start_container(&cid)).await,
        "StartContainer"
    );
    assert!(
        !passes_while_held(&b, b.remove_container("x")).await,
        "RemoveContainer"
    );
    assert!(
        !passes_while_held(&b, b.stop_pod_sandbox("x")).await,
        "StopPodSandbox"
    );
    assert!(
        !passes_while_held(&b, b.remove_pod_sandbox("x")).await,
        "RemovePodSandbox"
    );
    // ...reads, stops that wait out a grace period, pulls and exec do not.
    assert!(passes_while_held(&b, b.version()).await, "Version");
    assert!(passes_while_held(&b, b.list_containers(&Default::default())).await);
    assert!(passes_while_held(&b, b.container_status(&cid)).await);
    assert!(passes_while_held(&b, b.pod_sandbox_status(&sid)).await);
    assert!(passes_while_held(&b, b.image_status("busybox:latest")).await);
    assert!(passes_while_held(&b, b.pull_image("busybox:latest", None, None)).await);
    assert!(passes_while_held(&b, b.stop_container(&cid, Duration::from_secs(30))).await);
    assert!(passes_while_held(&b, b.list_pod_sandbox_stats(&Default::default())).await);
    // Nothing was sent for the calls that waited and were dropped.
    let ops = fake.ops();
    assert!(!ops.contains(&"RemovePodSandbox"), "{ops:?}");
    // With the permit free, the same calls go through to the runtime.
    let id = b.run_pod_sandbox(&sb).await.unwrap();
    b.stop_pod_sandbox(&id).await.unwrap();
    b.remove_pod_sandbox(&id).await.unwrap();
    assert!(
        fake.ops()
            .ends_with(&["RunPodSandbox", "StopPodSandbox", "RemovePodSandbox"])
    );
}

#[tokio::test(start_paused = true)]
async fn at_most_limit_calls_run_at_once_and_all_finish() {
    let b = Arc::new(BoundedRuntime::new(Arc::new(FakeRuntime::new()), 3));
    let (now, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (b, now, max) = (b.clone(), now.clone(), max.clone());
        tasks.push(tokio::spawn(async move {
            b.bounded(async {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(max.load(Ordering::SeqCst), 3);
    // A limit of 0 would deadlock every mutation: it is taken as 1.
    let b = BoundedRuntime::new(Arc::new(FakeRuntime::new()), 0);
    b.run_pod_sandbox(&sandbox("a")).await.unwrap();
}

#[tokio::test]
async fn reads_with_a_default_body_in_the_trait_are_passed_on_too() {
    // A default method the wrapper forgot would answer the trait's default
    // (nothing) instead of the runtime's.
    let fake = Arc::new(FakeRuntime::new());
    let b = BoundedRuntime::new(fake.clone(), 1);
    let cid = fake.run_container("p", "uid-p", "c", "/dev/null").await;
    assert_eq!(
        b.container_status_verbose(&cid).await.unwrap(),
        fake.container_status_verbose(&cid).await.unwrap()
    );
    assert!(b.container_status_verbose(&cid).await.unwrap().1.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_call_the_runtime_holds_gives_its_slot_back_at_the_limit() {
    let b = Arc::new(BoundedRuntime::new(Arc::new(FakeRuntime::new()), 1));
    let (finished, release) = (Arc::new(AtomicUsize::new(0)), CancellationToken::new());
    // A call the runtime holds (a StopPodSandbox CRI-O keeps for minutes).
    let held = tokio::spawn({
        let (b, finished, release) = (b.clone(), finished.clone(), release.clone());
        async move {
            b.bounded(async {
                release.cancelled().await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await
        }
    });
    tokio::task::yield_now().await;
    // Before the limit, the next mutation waits for the slot...
    let sb = sandbox("a");
    let early = SLOT_HOLD_LIMIT - Duration::from_millis(100);
    assert!(
        tokio::time::timeout(early, b.run_pod_sandbox(&sb))
            .await
            .is_err()
    );
    // ...and at the limit it goes ahead while the held call still runs.
    tokio::time::timeout(Duration::from_millis(200), b.run_pod_sandbox(&sb))
        .await
        .expect("the held call kept its slot past the limit")
        .unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), 0);
    // The held call still ends with its own result.
    release.cancel();
    held.await.unwrap().unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), 1);
}
