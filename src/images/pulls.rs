//! Image pulls, one per image however many pods wait on it: the first pod
//! worker that needs a missing image leads the pull, the others that ask
//! for the same reference while it runs wait for its result instead of
//! sending PullImage themselves (50 pods of one new image cost one pull).
//!
//! Invariants: at most one pull per key is in flight through a
//! [`PullFlights`]; every caller that joined a flight gets that flight's
//! result, and a pull that starts after a flight landed is a new flight
//! (a result is never cached: `Always` still pulls). A leader dropped before
//! its pull returns (its worker cancelled) lands its flight with no result,
//! and each waiter then tries again, one of them as the new leader.
//!
//! [`Flights`] is the pure table; [`PullFlights`] drives it with channels.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::cri::RuntimeError;

/// What a caller is to do after joining the flight of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No flight was in the air: the caller pulls and lands the flight.
    Lead,
    /// A flight is in the air: the caller's waiter gets its result.
    Wait,
}

/// The flights in the air, by key, with the waiters of each. Pure: the
/// caller decides what a waiter is and what landing hands it.
#[derive(Debug)]
pub struct Flights<W> {
    in_flight: HashMap<String, Vec<W>>,
}

impl<W> Default for Flights<W> {
    fn default() -> Self {
        Flights {
            in_flight: HashMap::new(),
        }
    }
}

impl<W> Flights<W> {
    /// Joins the flight of `key`: leads a new one, or waits on the one in
    /// the air (then `waiter()` is queued on it).
    pub fn join(&mut self, key: &str, waiter: impl FnOnce() -> W) -> Role {
        match self.in_flight.get_mut(key) {
            Some(waiters) => {
                waiters.push(waiter());
                Role::Wait
            }
            None => {
                self.in_flight.insert(key.to_string(), Vec::new());
                Role::Lead
            }
        }
    }

    /// Ends the flight of `key`, handing back its waiters (none when no
    /// flight of that key was in the air).
    pub fn land(&mut self, key: &str) -> Vec<W> {
        self.in_flight.remove(key).unwrap_or_default()
    }

    /// How many flights are in the air.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// How many callers wait on the flight of `key`.
    pub fn waiting(&self, key: &str) -> usize {
        self.in_flight.get(key).map_or(0, Vec::len)
    }
}

/// The result of one pull: the image reference the runtime returned.
pub type PullResult = Result<String, RuntimeError>;

/// The pulls of one agent, shared by its pod workers.
#[derive(Default)]
pub struct PullFlights {
    flights: Mutex<Flights<oneshot::Sender<PullResult>>>,
}

impl PullFlights {
    /// Runs `pull` unless a pull of `key` is in the air, in which case the
    /// result of that one is returned. `pull` is called at most once.
    pub async fn pull<F, Fut>(&self, key: &str, pull: F) -> PullResult
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = PullResult>,
    {
        let mut pull = Some(pull);
        loop {
            let (tx, rx) = oneshot::channel();
            let role = self.lock().join(key, || tx);
            match role {
                Role::Lead => {
                    let landing = Landing { flights: self, key };
                    let pull = pull.take().expect("a caller leads at most once");
                    let result = pull().await;
                    landing.land(&result);
                    return result;
                }
                Role::Wait => match rx.await {
                    Ok(result) => return result,
                    // The leader was dropped mid-pull: try again.
                    Err(_) => continue,
                },
            }
        }
    }

    /// How many pulls are in the air.
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }

    /// How many callers wait on the pull of `key`.
    pub fn waiting(&self, key: &str) -> usize {
        self.lock().waiting(key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Flights<oneshot::Sender<PullResult>>> {
        // The table stays consistent whatever panicked while holding it:
        // every method leaves it whole before it could panic.
        self.flights.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Lands a flight when its leader is done or dropped; dropped, the waiters'
/// channels close and they try again.
struct Landing<'a> {
    flights: &'a PullFlights,
    key: &'a str,
}

impl Landing<'_> {
    fn land(self, result: &PullResult) {
        let waiters = self.flights.lock().land(self.key);
        std::mem::forget(self);
        for w in waiters {
            let _ = w.send(result.clone());
        }
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        drop(self.flights.lock().land(self.key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::Notify;

    #[test]
    fn first_leads_others_wait_until_landed() {
        let mut f: Flights<u32> = Flights::default();
        assert_eq!(f.join("busybox", || 1), Role::Lead);
        assert_eq!(f.join("busybox", || 2), Role::Wait);
        assert_eq!(f.join("busybox", || 3), Role::Wait);
        assert_eq!(f.join("pause", || 4), Role::Lead);
        assert_eq!(
            (f.len(), f.waiting("busybox"), f.waiting("pause")),
            (2, 2, 0)
        );
        // The leader's own waiter is never made.
        assert_eq!(f.land("busybox"), vec![2, 3]);
        assert_eq!(f.waiting("busybox"), 0);
        // After landing, the next caller leads a new flight.
        assert_eq!(f.join("busybox", || 5), Role::Lead);
        assert_eq!(f.land("busybox"), Vec::<u32>::new());
        assert_eq!(f.land("pause"), Vec::<u32>::new());
        assert!(f.is_empty());
    }

    #[test]
    fn landing_an_unknown_key_hands_back_nothing() {
        let mut f: Flights<u32> = Flights::default();
        assert_eq!(f.land("nothing"), Vec::<u32>::new());
        assert_eq!(f.join("a", || 1), Role::Lead);
        assert_eq!(f.land("b"), Vec::<u32>::new());
        assert_eq!(f.len(), 1);
    }

    /// A pull that waits for `gate`, counting its calls.
    async fn gated(calls: Arc<AtomicUsize>, gate: Arc<Notify>, result: PullResult) -> PullResult {
        calls.fetch_add(1, Ordering::SeqCst);
        gate.notified().await;
        result
    }

    /// Lets spawned tasks run until `done` holds (no real time passes).
    async fn settle(done: impl Fn() -> bool) {
        for _ in 0..1000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never settled");
    }

    #[tokio::test]
    async fn fifty_callers_of_one_image_pull_once_and_share_the_result() {
        let flights = Arc::new(PullFlights::default());
        let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (f, c, g) = (flights.clone(), calls.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                f.pull("busybox", || gated(c, g, Ok("sha256:b".into())))
                    .await
            }));
        }
        settle(|| flights.waiting("busybox") == 49).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        gate.notify_one();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap(), "sha256:b");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(flights.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_failed_pull_fails_every_waiter_and_the_next_call_pulls_again() {
        let flights = Arc::new(PullFlights::default());
        let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let refused = || RuntimeError::Refused {
            op: "PullImage",
            message: "not found".into(),
        };
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let (f, c, g) = (flights.clone(), calls.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                f.pull("absent", || gated(c, g, Err(refused()))).await
            }));
        }
        settle(|| flights.waiting("absent") == 2).await;
        gate.notify_one();
        for t in tasks {
            let e = t.await.unwrap().unwrap_err();
            assert_eq!(e.to_string(), "PullImage: not found");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Nothing is remembered: a later call pulls.
        let again = flights
            .pull("absent", || async {
                Ok::<_, RuntimeError>("sha256:a".into())
            })
            .await;
        assert_eq!(again.unwrap(), "sha256:a");
    }

    #[tokio::test]
    async fn different_images_pull_side_by_side() {
        let flights = Arc::new(PullFlights::default());
        let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let mut tasks = Vec::new();
        for image in ["a", "b", "c"] {
            let (f, c, g) = (flights.clone(), calls.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                f.pull(image, || gated(c, g, Ok(format!("sha256:{image}"))))
                    .await
            }));
        }
        settle(|| calls.load(Ordering::SeqCst) == 3).await;
        assert_eq!(flights.in_flight(), 3);
        for _ in 0..3 {
            gate.notify_one();
        }
        let got: Vec<String> = futures::future::join_all(tasks)
            .await
            .into_iter()
            .map(|r| r.unwrap().unwrap())
            .collect();
        assert_eq!(got, ["sha256:a", "sha256:b", "sha256:c"]);
    }

    #[tokio::test]
    async fn a_cancelled_leader_hands_the_pull_to_a_waiter() {
        let flights = Arc::new(PullFlights::default());
        let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let (f, c, g) = (flights.clone(), calls.clone(), gate.clone());
        let leader = tokio::spawn(async move {
            f.pull("busybox", || gated(c, g, Ok("from the leader".into())))
                .await
        });
        settle(|| calls.load(Ordering::SeqCst) == 1).await;
        let (f, c, g) = (flights.clone(), calls.clone(), gate.clone());
        let waiter = tokio::spawn(async move {
            f.pull("busybox", || gated(c, g, Ok("from the waiter".into())))
                .await
        });
        settle(|| flights.waiting("busybox") == 1).await;
        leader.abort();
        assert!(leader.await.unwrap_err().is_cancelled());
        // The waiter retried and leads now: its own pull is the second call.
        settle(|| calls.load(Ordering::SeqCst) == 2).await;
        gate.notify_one();
        assert_eq!(waiter.await.unwrap().unwrap(), "from the waiter");
        assert_eq!(flights.in_flight(), 0);
    }
}
