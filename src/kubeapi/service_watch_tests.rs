//! The Service watch driver against the recording fake: the store follows
//! a list and its changes, a dropped watch is asked for again and its list
//! replaces the store, and readers wait for the first list only as long as
//! they should (on virtual time).

use super::*;
use crate::kubeapi::client::{MirrorError, ServiceEvent, WatchEvent};
use crate::kubeapi::fake::FakeMirrorClient;
use k8s_openapi::api::core::v1::Service;

fn service(namespace: &str, name: &str, ip: &str) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterIP": ip, "ports": [{"port": 443, "protocol": "TCP"}]}
    }))
    .unwrap()
}

fn names(store: &ServiceStore) -> Vec<String> {
    (store.services())
        .map(|s| {
            let m = &s.metadata;
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap(),
                m.name.as_deref().unwrap()
            )
        })
        .collect()
}

fn failure() -> MirrorError {
    MirrorError::Watch {
        what: "watching the Services",
        message: "listing: 503 ServiceUnavailable".into(),
    }
}

/// Waits (virtual time) until the store satisfies `done`.
async fn until(lister: &ServiceLister, done: impl Fn(&ServiceStore) -> bool) -> Arc<ServiceStore> {
    let mut rx = lister.store.clone();
    let waited = tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|s| done(s))).await;
    assert!(waited.is_ok(), "store now: {:?}", lister.snapshot());
    lister.snapshot()
}

fn send(
    tx: &tokio::sync::mpsc::UnboundedSender<Result<ServiceEvent, MirrorError>>,
    e: ServiceEvent,
) {
    tx.send(Ok(e)).expect("the driver holds the watch");
}

#[tokio::test(start_paused = true)]
async fn the_store_follows_the_watch_and_relists_after_a_dropped_watch() {
    let client = Arc::new(FakeMirrorClient::new());
    let first = client.service_watch();
    let second = client.service_watch();
    let cancel = CancellationToken::new();
    let lister = ServiceLister::start(client.clone(), cancel.clone());
    assert_eq!(lister.snapshot().state(), SyncState::Listing);

    send(
        &first,
        WatchEvent::Restarted(vec![
            service("default", "kubernetes", "10.96.0.1"),
            service("web", "db", "10.96.0.20"),
            service("web", "headless", "None"),
        ]),
    );
    let store = until(&lister, |s| s.state() == SyncState::Synced).await;
    assert_eq!(names(&store), ["default/kubernetes", "web/db"]);

    send(
        &first,
        WatchEvent::Applied(service("web", "cache", "10.96.0.21")),
    );
    let store = until(&lister, |s| s.len() == 3).await;
    assert_eq!(names(&store), ["default/kubernetes", "web/cache", "web/db"]);

    // A deleted Service disappears.
    send(
        &first,
        WatchEvent::Deleted(service("web", "db", "10.96.0.20")),
    );
    let store = until(&lister, |s| s.len() == 2).await;
    assert_eq!(names(&store), ["default/kubernetes", "web/cache"]);

    // An error keeps what is known.
    first.send(Err(failure())).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        names(&lister.snapshot()),
        ["default/kubernetes", "web/cache"]
    );
    assert_eq!(lister.snapshot().state(), SyncState::Synced);

    // The server drops the watch; while none was open, web/cache was
    // deleted and web/queue created: the new watch's list says so.
    drop(first);
    send(
        &second,
        WatchEvent::Restarted(vec![
            service("default", "kubernetes", "10.96.0.1"),
            service("web", "queue", "10.96.0.22"),
        ]),
    );
    let store = until(&lister, |s| s.get("web", "queue").is_some()).await;
    assert_eq!(names(&store), ["default/kubernetes", "web/queue"]);
    assert_eq!(client.calls(), ["watch_services", "watch_services"]);

    // Cancelled: the driver stops and lets its watch go.
    cancel.cancel();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(second.is_closed(), "the driver dropped its watch");
}

#[tokio::test(start_paused = true)]
async fn readers_wait_for_the_first_list() {
    let client = Arc::new(FakeMirrorClient::new());
    let watch = client.service_watch();
    let lister = ServiceLister::start(client, CancellationToken::new());
    let reader = tokio::spawn({
        let lister = lister.clone();
        async move {
            let start = Instant::now();
            let store = lister.wait_for_first_list().await;
            (start.elapsed(), store)
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    send(
        &watch,
        WatchEvent::Restarted(vec![service("default", "kubernetes", "10.96.0.1")]),
    );
    let (waited, store) = reader.await.unwrap();
    assert_eq!(
        waited,
        Duration::from_secs(1),
        "it waited for the list, no longer"
    );
    assert_eq!(names(&store), ["default/kubernetes"]);

    // Synced: no wait at all.
    let start = Instant::now();
    lister.wait_for_first_list().await;
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_failed_first_list_or_the_deadline_ends_the_wait() {
    // The first attempt fails: readers go on at once, without Services.
    let client = Arc::new(FakeMirrorClient::new());
    let watch = client.service_watch();
    let lister = ServiceLister::start(client, CancellationToken::new());
    watch.send(Err(failure())).unwrap();
    let store = until(&lister, |s| s.state() == SyncState::ListFailed).await;
    assert!(store.is_empty());
    let start = Instant::now();
    assert!(lister.wait_for_first_list().await.is_empty());
    assert_eq!(start.elapsed(), Duration::ZERO);

    // No answer at all: readers wait until FIRST_LIST_WAIT after the start,
    // and a later reader no longer waits.
    let client = Arc::new(FakeMirrorClient::new());
    let _silent = client.service_watch();
    let lister = ServiceLister::start(client, CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let start = Instant::now();
    assert!(lister.wait_for_first_list().await.is_empty());
    assert_eq!(start.elapsed(), FIRST_LIST_WAIT - Duration::from_secs(2));
    let start = Instant::now();
    lister.wait_for_first_list().await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(lister.snapshot().state(), SyncState::Listing);
}

#[tokio::test(start_paused = true)]
async fn standalone_has_no_services_and_no_wait() {
    let lister = ServiceLister::standalone();
    let start = Instant::now();
    let store = lister.wait_for_first_list().await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(store.is_empty());
    assert_eq!(store.state(), SyncState::Synced);
}
