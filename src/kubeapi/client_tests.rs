//! Unit tests of the kube-rs adapter's pure parts: error text, the pod
//! watch's event mapping and backoff (on virtual time).

use super::*;

#[test]
fn in_cluster_needs_the_service_host_and_the_token() {
    assert!(in_cluster_available(Some("10.96.0.1"), true));
    assert!(!in_cluster_available(Some("10.96.0.1"), false));
    assert!(!in_cluster_available(None, true));
    assert!(!in_cluster_available(Some(""), true));
}

fn forbidden(message: &str) -> kube::Error {
    let status = kube::core::Status::failure(message, "Forbidden").with_code(403);
    kube::Error::Api(Box::new(status))
}

#[test]
fn an_api_refusal_reads_as_code_reason_and_the_servers_message() {
    let e = MirrorError::Api {
        what: "creating mirror pod default/web-n1".into(),
        source: forbidden(
            "pods \"web-n1\" is forbidden: a mirror pod may not reference service accounts",
        ),
    };
    assert_eq!(
        e.to_string(),
        "creating mirror pod default/web-n1: 403 Forbidden: pods \"web-n1\" is forbidden: \
         a mirror pod may not reference service accounts"
    );
    assert_eq!(e.code(), Some(403));
    let list = watcher::Error::InitialListFailed(forbidden(
        "can only list/watch pods with spec.nodeName field selector",
    ));
    assert_eq!(
        describe_watch(&list),
        "listing: 403 Forbidden: can only list/watch pods with spec.nodeName field selector"
    );
}

type WatcherItem = std::result::Result<watcher::Event<Pod>, watcher::Error>;

fn pod(name: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p
}

/// Drains `events` through the adapter and its backoff; returns each
/// item (Ok: the pod names it carries, Err: "error") with the virtual
/// milliseconds at which it came.
async fn timed(events: Vec<WatcherItem>, take: usize) -> Vec<(u128, String)> {
    let start = tokio::time::Instant::now();
    let stream =
        watch_events("watching", futures::stream::iter(events)).backoff(WatchBackoff::default());
    stream
        .take(take)
        .map(|item| {
            let what = match item {
                Ok(PodEvent::Restarted(pods)) => format!(
                    "restarted {:?}",
                    pods.iter().map(crate::pod::name).collect::<Vec<_>>()
                ),
                Ok(PodEvent::Applied(p)) => format!("applied {}", crate::pod::name(&p)),
                Ok(PodEvent::Deleted(p)) => format!("deleted {}", crate::pod::name(&p)),
                Err(_) => "error".into(),
            };
            (start.elapsed().as_millis(), what)
        })
        .collect()
        .await
}

#[tokio::test(start_paused = true)]
async fn a_list_that_always_fails_backs_off_although_each_relist_begins_with_init() {
    // What the watcher yields against a server that refuses the list:
    // Init, then the error, on every retry.
    let events: Vec<WatcherItem> = (0..6)
        .flat_map(|_| {
            [
                Ok(watcher::Event::Init),
                Err(watcher::Error::NoResourceVersion),
            ]
        })
        .collect();
    let got = timed(events, 6).await;
    let at: Vec<u128> = got.iter().map(|(t, _)| *t).collect();
    assert_eq!(at, [0, 500, 1500, 3500, 7500, 12500], "{got:?}");
    assert!(got.iter().all(|(_, w)| w == "error"));
}

#[tokio::test(start_paused = true)]
async fn a_completed_relist_is_one_restarted_event_and_resets_the_backoff() {
    let events: Vec<WatcherItem> = vec![
        Err(watcher::Error::NoResourceVersion),
        Ok(watcher::Event::Init),
        Err(watcher::Error::NoResourceVersion),
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(pod("a"))),
        Ok(watcher::Event::InitApply(pod("b"))),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Apply(pod("c"))),
        Ok(watcher::Event::Delete(pod("a"))),
        Err(watcher::Error::NoResourceVersion),
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitDone),
    ];
    let got = timed(events, 7).await;
    let want: Vec<(u128, String)> = [
        (0, "error"),
        (500, "error"),
        (1500, "restarted [\"a\", \"b\"]"),
        (1500, "applied c"),
        (1500, "deleted a"),
        (1500, "error"),
        // 500 ms again, not 2 s: the relist before it was real progress.
        (2000, "restarted []"),
    ]
    .into_iter()
    .map(|(t, w)| (t, w.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn the_server_ends_a_quiet_watch_before_the_read_timeout_would() {
    // With some slack for the server's own timer.
    const {
        assert!(WATCH_TIMEOUT_SECONDS as u64 + 3 <= WATCH_READ_TIMEOUT.as_secs());
        // And a watch is long: within the kubelet's 5 to 10 minutes.
        assert!(WATCH_TIMEOUT_SECONDS >= 300 && WATCH_TIMEOUT_SECONDS < 600);
    }
}

#[test]
fn watch_backoff_doubles_to_five_seconds_and_resets() {
    let mut b = WatchBackoff::default();
    let waits: Vec<u64> = (&mut b).take(6).map(|d| d.as_millis() as u64).collect();
    assert_eq!(waits, [500, 1000, 2000, 4000, 5000, 5000]);
    b.reset();
    assert_eq!(b.next(), Some(Duration::from_millis(500)));
}

#[test]
fn objects_kept_from_the_server_lose_only_their_managed_fields() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    let mut pod = Pod::default();
    pod.metadata.name = Some("web".into());
    pod.metadata.uid = Some("u1".into());
    pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("crilet".into()),
        ..Default::default()
    }]);
    let kept = lean(pod.clone());
    assert_eq!(kept.metadata.managed_fields, None);
    pod.metadata.managed_fields = None;
    assert_eq!(kept, pod, "nothing else changes");
}
