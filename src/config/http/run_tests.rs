//! The URL source's run loop on a scripted fetcher, under paused time:
//! when it polls, what it asks, and which answers become SETs.

use std::sync::{Arc, Mutex};

use super::tests::{NODE, URL, images, ok, pod_yaml, refused, status};
use super::*;

/// Answers from a script, recording when it was asked and with what.
struct Scripted {
    answers: Mutex<Vec<Result<Fetched, UrlSourceError>>>,
    calls: Mutex<Vec<(tokio::time::Instant, Validators)>>,
}

#[async_trait::async_trait]
impl Fetch for Scripted {
    async fn fetch(&self, validators: &Validators) -> Result<Fetched, UrlSourceError> {
        self.calls
            .lock()
            .unwrap()
            .push((tokio::time::Instant::now(), validators.clone()));
        let mut answers = self.answers.lock().unwrap();
        if answers.is_empty() {
            refused()
        } else {
            answers.remove(0)
        }
    }
}

#[tokio::test(start_paused = true)]
async fn run_polls_at_the_check_frequency_and_sends_only_changes() {
    let web = pod_yaml("web", "busybox");
    let fetcher = Arc::new(Scripted {
        answers: Mutex::new(vec![
            status(503),
            ok(&web, Some("\"1\""), None),
            Ok(Fetched::NotModified),
            refused(),
            ok(&pod_yaml("web", "busybox:2"), Some("\"2\""), None),
        ]),
        calls: Mutex::new(Vec::new()),
    });
    let (tx, mut rx) = mpsc::channel(4);
    let cancel = CancellationToken::new();
    let config = UrlSourceConfig {
        url: URL.into(),
        check_frequency: Duration::from_secs(20),
        node_name: NODE.into(),
    };
    let start = tokio::time::Instant::now();
    let task = tokio::spawn(run(config, fetcher.clone(), tx, cancel.clone()));

    // The 503 sends nothing: the first SET is the second poll's, 20 s in.
    let set = rx.recv().await.unwrap();
    assert_eq!(
        (set.source, images(&set.pods)),
        ("http", vec!["busybox".to_string()])
    );
    assert_eq!(start.elapsed(), Duration::from_secs(20));
    // The 304 and the refusal send nothing; the new image does, at 80 s.
    let set = rx.recv().await.unwrap();
    assert_eq!(images(&set.pods), ["busybox:2"]);
    assert_eq!(start.elapsed(), Duration::from_secs(80));

    cancel.cancel();
    task.await.unwrap();
    let calls = fetcher.calls.lock().unwrap();
    let offsets: Vec<u64> = calls.iter().map(|(t, _)| (*t - start).as_secs()).collect();
    assert_eq!(offsets, [0, 20, 40, 60, 80]);
    let etags: Vec<Option<&str>> = calls.iter().map(|(_, v)| v.etag.as_deref()).collect();
    assert_eq!(
        etags,
        [None, None, Some("\"1\""), Some("\"1\""), Some("\"1\"")]
    );
}
