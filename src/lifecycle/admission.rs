//! The admission driver: writes the rejections [`admit`](super::admit)
//! decides for the API pods bound to this node, with the node's own
//! credentials (NodeRestriction lets a node write the status of the pods
//! bound to it).
//!
//! Invariants: it writes pod statuses only, never the runtime or the pod
//! manager; it runs beside the pod watch, so a slow or failing API server
//! never holds up mirror pod work; a failed write is retried after a delay
//! that grows per pod (1 s doubling to the resync period), never in a hot
//! loop; each rejection is logged once, when the API server takes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::admit::{REJECT_MESSAGE, REJECT_REASON, pods_to_finish, pods_to_reject};
use crate::events::kubelet_events::rejected;
use crate::events::recorder::EventRecorder;
use crate::kubeapi::client::MirrorClient;
use crate::kubeapi::retry::retry_delay;

/// A failed write: how many in a row, and when the next may go.
struct Retry {
    failures: u32,
    due: Instant,
}

/// Follows `api_pods` (the non-mirror pods bound to the node, by UID) and
/// rejects each, until `cancel`.
pub(crate) async fn admission_loop(
    client: Arc<dyn MirrorClient>,
    events: Arc<dyn EventRecorder>,
    mut api_pods: watch::Receiver<BTreeMap<String, Arc<Pod>>>,
    cancel: CancellationToken,
) {
    let mut written: BTreeSet<String> = BTreeSet::new();
    let mut retries: BTreeMap<String, Retry> = BTreeMap::new();
    loop {
        let pods = api_pods.borrow_and_update().clone();
        // A pod no longer bound is forgotten; a new one has a new UID.
        written.retain(|uid| pods.contains_key(uid));
        retries.retain(|uid, _| pods.contains_key(uid));
        let now = Instant::now();
        let waiting: BTreeSet<String> = (retries.iter())
            .filter(|(_, r)| r.due > now)
            .map(|(uid, _)| uid.clone())
            .collect();
        for f in pods_to_finish(pods.values().map(|p| &**p), &written, &waiting) {
            match client.delete_pod(&f.namespace, &f.name, &f.uid).await {
                Ok(()) => {
                    retries.remove(&f.uid);
                    tracing::info!(pod = %f.full_name, uid = %f.uid, "pod bound to this node was deleted before it ran: deleted at once, there is nothing to stop");
                    written.insert(f.uid);
                }
                Err(e) => {
                    if failed(&mut retries, &f.uid) {
                        tracing::warn!(pod = %f.full_name, uid = %f.uid, error = %e, "cannot finish deleting a pod; retrying");
                    }
                }
            }
        }
        let rejections = pods_to_reject(
            pods.values().map(|p| &**p),
            &written,
            &waiting,
            jiff::Timestamp::now(),
        );
        for r in rejections {
            // A merge of the rejection into the pod's status, conditions and
            // QoS class left as they are (see `rejected_status`).
            let patch = serde_json::json!({ "status": r.status });
            let result = (client.patch_pod_status(&r.namespace, &r.name, &patch)).await;
            match result {
                // Gone already (the watch will say so): nothing left to do.
                Err(e) if e.code() == Some(404) => {
                    retries.remove(&r.uid);
                    written.insert(r.uid);
                }
                Ok(_) => {
                    retries.remove(&r.uid);
                    tracing::warn!(
                        pod = %r.full_name, uid = %r.uid, reason = REJECT_REASON,
                        "pod rejected: {REJECT_MESSAGE}"
                    );
                    events.event(&r.object, rejected(REJECT_REASON, REJECT_MESSAGE.into()));
                    written.insert(r.uid);
                }
                Err(e) => {
                    if failed(&mut retries, &r.uid) {
                        tracing::warn!(pod = %r.full_name, uid = %r.uid, error = %e, "cannot write the rejection of a pod; retrying");
                    }
                }
            }
        }
        let next_retry = retries.values().map(|r| r.due).min();
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = api_pods.changed() => {
                if changed.is_err() {
                    return; // the watch loop is gone
                }
            }
            _ = tokio::time::sleep_until(next_retry.unwrap_or(now)), if next_retry.is_some() => {}
        }
    }
}

/// Counts a failed write for `uid` and sets when it may go again; true for
/// the first failure in a row (the one logged).
fn failed(retries: &mut BTreeMap<String, Retry>, uid: &str) -> bool {
    let retry = retries.entry(uid.to_string()).or_insert(Retry {
        failures: 0,
        due: Instant::now(),
    });
    retry.failures += 1;
    retry.due = Instant::now() + retry_delay(retry.failures);
    retry.failures == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeapi::fake::FakeMirrorClient;
    use crate::kubeapi::retry::RESYNC_PERIOD;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::time::Duration;

    fn api_pod(name: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap()
    }

    fn by_uid(pods: &[Pod]) -> BTreeMap<String, Arc<Pod>> {
        pods.iter()
            .map(|p| (p.metadata.uid.clone().unwrap(), Arc::new(p.clone())))
            .collect()
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn rejects_once_and_retries_a_failed_write_later() {
        let client = Arc::new(FakeMirrorClient::new());
        let (tx, rx) = watch::channel(BTreeMap::new());
        let cancel = CancellationToken::new();
        client.fail_next("patch_pod_status");
        for name in ["a", "b"] {
            client.insert_pod(api_pod(name));
        }
        let task = tokio::spawn(admission_loop(
            client.clone(),
            Arc::new(crate::events::recorder::NoopRecorder),
            rx,
            cancel.clone(),
        ));

        // The first write fails; the watch changing again does not retry it
        // before its delay.
        tx.send_replace(by_uid(&[api_pod("a")]));
        settle().await;
        assert_eq!(client.calls(), ["patch_pod_status default/a"]);
        tx.send_replace(by_uid(&[api_pod("a")]));
        settle().await;
        assert_eq!(client.calls().len(), 1, "no retry before its delay");

        // After the delay it is written, then never again.
        tokio::time::sleep(Duration::from_millis(1001)).await;
        settle().await;
        assert_eq!(client.calls().len(), 2);
        tx.send_replace(by_uid(&[api_pod("a")]));
        settle().await;
        tokio::time::sleep(RESYNC_PERIOD * 3).await;
        assert_eq!(client.calls().len(), 2, "written once");

        // A second pod is written at once, the first not again.
        tx.send_replace(by_uid(&[api_pod("a"), api_pod("b")]));
        settle().await;
        assert_eq!(client.calls()[2..], ["patch_pod_status default/b"]);
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_gone_before_its_rejection_is_written_is_not_retried() {
        let client = Arc::new(FakeMirrorClient::new());
        let (tx, rx) = watch::channel(BTreeMap::new());
        let cancel = CancellationToken::new();
        client.fail_next("patch_pod_status");
        let task = tokio::spawn(admission_loop(
            client.clone(),
            Arc::new(crate::events::recorder::NoopRecorder),
            rx,
            cancel.clone(),
        ));
        // Never on the fake server: its retry gets 404, which ends it.
        tx.send_replace(by_uid(&[api_pod("ghost")]));
        settle().await;
        tokio::time::sleep(Duration::from_millis(1001)).await;
        settle().await;
        assert_eq!(client.calls().len(), 2);
        tokio::time::sleep(RESYNC_PERIOD * 3).await;
        assert_eq!(client.calls().len(), 2, "not retried after a 404");
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_deleted_before_it_was_rejected_is_deleted_once() {
        let client = Arc::new(FakeMirrorClient::new());
        let (tx, rx) = watch::channel(BTreeMap::new());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(admission_loop(
            client.clone(),
            Arc::new(crate::events::recorder::NoopRecorder),
            rx,
            cancel.clone(),
        ));
        let mut p = api_pod("gone");
        p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::from_second(1).unwrap()));
        tx.send_replace(by_uid(&[p.clone()]));
        settle().await;
        tx.send_replace(by_uid(&[p]));
        settle().await;
        assert_eq!(
            client.calls(),
            ["delete_pod default/gone"],
            "deleted once, not rejected"
        );
        cancel.cancel();
        task.await.unwrap();
    }
}
