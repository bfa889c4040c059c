//! The driver of the [`ServiceStore`]: one watch of the Services of every
//! namespace for the whole node (the kubelet's service informer), and the
//! readers' handle on the store ([`ServiceLister`]), which the pod workers
//! read when they build a container's environment.
//!
//! Invariants: only [`run`] writes the store; readers take `Arc` snapshots
//! and never hold one across a wait. A watch that ends is asked for again,
//! and its list replaces the store; a watch error keeps what the store has.
//! Readers wait for the first list at most until [`FIRST_LIST_WAIT`] after
//! the lister was made, and not at all once a first attempt has failed, so
//! an API server that is down never holds a container back for long.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::MirrorClient;
use super::service_store::{ServiceStore, SyncState};

/// How long after start a container waits for the first list of the
/// Services at most. The kubelet never makes a static pod wait (only API
/// pods), but it starts its informer seconds before its first pod; crilet
/// starts pods within a second, often before a list could answer, and a
/// container created then would miss `KUBERNETES_SERVICE_HOST` for its
/// whole life.
pub const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

/// The readers' handle on the Services the node knows of.
#[derive(Debug, Clone)]
pub struct ServiceLister {
    store: watch::Receiver<Arc<ServiceStore>>,
    /// No reader waits for the first list past this.
    deadline: Instant,
    /// Whether a reader gave up waiting already (said once, not per container).
    gave_up: Arc<AtomicBool>,
}

impl ServiceLister {
    /// Without an API server: no Services, nothing to wait for.
    pub fn standalone() -> Self {
        let (_, store) = watch::channel(Arc::new(ServiceStore::standalone()));
        ServiceLister {
            store,
            deadline: Instant::now(),
            gave_up: Default::default(),
        }
    }

    /// Starts the watch on `client` and returns its readers' handle.
    pub fn start(client: Arc<dyn MirrorClient>, cancel: CancellationToken) -> Self {
        let (tx, store) = watch::channel(Arc::new(ServiceStore::new()));
        tokio::spawn(run(client, tx, cancel));
        ServiceLister {
            store,
            deadline: Instant::now() + FIRST_LIST_WAIT,
            gave_up: Default::default(),
        }
    }

    /// The Services known now.
    pub fn snapshot(&self) -> Arc<ServiceStore> {
        Arc::clone(&self.store.borrow())
    }

    /// The Services, once the first list has come, its first attempt has
    /// failed, or the deadline has passed, whichever comes first.
    pub async fn wait_for_first_list(&self) -> Arc<ServiceStore> {
        let mut store = self.store.clone();
        let listed = store.wait_for(|s| s.state() != SyncState::Listing);
        let timed_out = tokio::time::timeout_at(self.deadline, listed)
            .await
            .is_err();
        if timed_out && !self.gave_up.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                waited = ?FIRST_LIST_WAIT,
                "no list of the Services yet: containers are created without their variables \
                 until it comes"
            );
        }
        self.snapshot()
    }
}

/// Follows the Services into `store` until `cancel`.
pub async fn run(
    client: Arc<dyn MirrorClient>,
    store: watch::Sender<Arc<ServiceStore>>,
    cancel: CancellationToken,
) {
    let mut stream = client.watch_services();
    let mut failing = false;
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = stream.next() => e,
        };
        let Some(event) = event else {
            // The watch ended: a new one starts with a list.
            stream = client.watch_services();
            continue;
        };
        match event {
            Ok(event) => {
                if failing {
                    tracing::info!("watching the Services again");
                }
                failing = false;
                store.send_modify(|s| Arc::make_mut(s).apply(event));
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "Service watch failed; it resumes on its own");
                }
                failing = true;
                store.send_if_modified(|s| {
                    let listing = s.state() == SyncState::Listing;
                    if listing {
                        Arc::make_mut(s).watch_failed();
                    }
                    listing
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "service_watch_tests.rs"]
mod tests;
