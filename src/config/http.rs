//! The URL source: static pods served at a URL (a Pod or a PodList, JSON or
//! YAML), polled like the kubelet's `--manifest-url` and reported to the
//! merge as SETs.
//!
//! Invariant: a SET is sent only for a body that was fetched and parsed in
//! full, the first time and then only when the pods differ from the last SET
//! sent. A failed poll (transport error, non-200, a body over the limit or
//! one that does not parse) sends nothing, so the pods last read from the URL
//! keep running; until a first success the source stays unseen, which holds
//! back deletions of its own pods only. A body equal byte for byte to the
//! last good one (or a 304 answer) is not parsed again.
//!
//! [`UrlPoll`] and [`FailureLog`] are pure; [`run`] drives them with a
//! [`Fetch`] (the hyper adapter is in [`fetch`]) and the clock.

pub mod fetch;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod tests;

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::file::SourceSet;
use super::merge::SourcePod;
use crate::pod::defaults::{PodSource, apply_api_defaults, apply_static_defaults};
use crate::pod::model::{MAX_MANIFEST_BYTES, ManifestError, parse_pods};
use crate::pod::{self, HTTP_SOURCE};

/// The source name this driver reports under (`kubernetes.io/config.source`).
pub const HTTP_SOURCE_NAME: &str = HTTP_SOURCE;
/// The kubelet's `--http-check-frequency` default.
pub const DEFAULT_HTTP_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
/// Deadline of one fetch, connection, redirects and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed before a fetch fails (a loop ends here).
pub const MAX_REDIRECTS: usize = 10;
/// Largest body accepted: the manifest limit (1 MiB).
pub const MAX_BODY_BYTES: usize = MAX_MANIFEST_BYTES;
/// Failures logged at warning level before the source gets quieter.
pub const WARN_FIRST: u32 = 3;
/// While quiet, every this many failures one more warning says it persists
/// (about every 10 minutes at the default check frequency).
pub const WARN_EVERY: u32 = 30;

#[derive(Debug, Clone)]
pub struct UrlSourceConfig {
    /// The URL as given: it is part of the UID recipe, so it is not normalised.
    pub url: String,
    pub check_frequency: Duration,
    pub node_name: String,
}

/// A configured URL source, ready to run.
#[derive(Clone)]
pub struct UrlSource {
    pub config: UrlSourceConfig,
    pub fetcher: std::sync::Arc<dyn Fetch>,
}

impl UrlSource {
    /// The source for `url` with the hyper fetcher; fails on a bad URL,
    /// header or CA file, naming it.
    pub fn new(
        config: UrlSourceConfig,
        options: &fetch::FetchOptions,
    ) -> Result<Self, fetch::FetchSetupError> {
        let fetcher = fetch::HttpFetcher::new(&config.url, options)?;
        Ok(UrlSource {
            config,
            fetcher: std::sync::Arc::new(fetcher),
        })
    }

    pub async fn run(self, tx: mpsc::Sender<SourceSet>, cancel: CancellationToken) {
        run(self.config, self.fetcher, tx, cancel).await
    }
}

/// Why one poll of the URL failed. Every message names the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlSourceError {
    #[error("GET {url}: {detail}")]
    Request { url: String, detail: String },
    #[error("GET {url}: HTTP status {status}, expected 200")]
    Status { url: String, status: u16 },
    #[error("GET {url}: body larger than the {MAX_BODY_BYTES}-byte limit; refused")]
    TooLarge { url: String },
    #[error("GET {url}: 304 Not Modified, but no earlier body to keep")]
    UnexpectedNotModified { url: String },
    #[error("{0}")]
    Manifest(#[from] ManifestError),
}

/// The validators of the last good body, sent back as a conditional request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// Sent as `If-None-Match`.
    pub etag: Option<String>,
    /// Sent as `If-Modified-Since`.
    pub last_modified: Option<String>,
}

/// What one fetch answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// 304: the body is the one the validators came from.
    NotModified,
    /// Any other status, with the body read up to the limit.
    Body {
        status: u16,
        validators: Validators,
        body: Vec<u8>,
    },
}

/// One GET of the manifest URL, conditional on `validators`.
#[async_trait::async_trait]
pub trait Fetch: Send + Sync {
    async fn fetch(&self, validators: &Validators) -> Result<Fetched, UrlSourceError>;
}

/// How a failure or a recovery is to be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Failure number `failures` in a row: worth a warning.
    Warn { failures: u32 },
    /// A repeat of a failure already warned about: debug level.
    Quiet { failures: u32 },
    /// The URL works again after `failures` failed polls.
    Recovered { failures: u32 },
}

/// Counts consecutive failures: the first [`WARN_FIRST`] warn, then one in
/// [`WARN_EVERY`]; the first success after failures is a recovery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureLog {
    failures: u32,
}

impl FailureLog {
    pub fn failed(&mut self) -> Report {
        self.failures = self.failures.saturating_add(1);
        let failures = self.failures;
        if failures <= WARN_FIRST || failures % WARN_EVERY == 0 {
            Report::Warn { failures }
        } else {
            Report::Quiet { failures }
        }
    }

    pub fn succeeded(&mut self) -> Option<Report> {
        let failures = std::mem::take(&mut self.failures);
        (failures > 0).then_some(Report::Recovered { failures })
    }
}

/// What the driver does after a poll.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// A SET to send, when the pods changed (or on the first success).
    pub set: Option<Vec<SourcePod>>,
    /// The failure or recovery to log, if any.
    pub report: Option<(Report, Option<UrlSourceError>)>,
}

/// The state of the URL source between polls (pure).
#[derive(Debug, Clone)]
pub struct UrlPoll {
    url: String,
    node_name: String,
    /// The last body that parsed, and its validators.
    last_good: Option<(Vec<u8>, Validators)>,
    /// The pods of the last SET sent; `None` until the first success.
    last_sent: Option<Vec<SourcePod>>,
    failures: FailureLog,
    /// Bodies parsed so far: an unchanged body must not add to it.
    parsed: u64,
}

impl UrlPoll {
    pub fn new(url: impl Into<String>, node_name: impl Into<String>) -> Self {
        UrlPoll {
            url: url.into(),
            node_name: node_name.into(),
            last_good: None,
            last_sent: None,
            failures: FailureLog::default(),
            parsed: 0,
        }
    }

    /// How many bodies were parsed (a 304 or a byte-equal body is not).
    pub fn bodies_parsed(&self) -> u64 {
        self.parsed
    }

    /// The validators for the next request: those of the last good body,
    /// never of a body that failed (a 304 must not hide a broken manifest).
    pub fn validators(&self) -> Validators {
        self.last_good
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Folds in the result of one fetch, made at `now`.
    pub fn on_fetch(
        &mut self,
        fetched: Result<Fetched, UrlSourceError>,
        now: jiff::Timestamp,
    ) -> Outcome {
        match self.handle(fetched, now) {
            Ok(set) => Outcome {
                set,
                report: self.failures.succeeded().map(|r| (r, None)),
            },
            Err(e) => Outcome {
                set: None,
                report: Some((self.failures.failed(), Some(e))),
            },
        }
    }

    fn handle(
        &mut self,
        fetched: Result<Fetched, UrlSourceError>,
        now: jiff::Timestamp,
    ) -> Result<Option<Vec<SourcePod>>, UrlSourceError> {
        let url = &self.url;
        let (validators, body) = match fetched? {
            Fetched::NotModified if self.last_good.is_some() => return Ok(None),
            Fetched::NotModified => {
                return Err(UrlSourceError::UnexpectedNotModified { url: url.clone() });
            }
            Fetched::Body {
                status,
                validators,
                body,
            } => {
                if status != 200 {
                    return Err(UrlSourceError::Status {
                        url: url.clone(),
                        status,
                    });
                }
                (validators, body)
            }
        };
        if body.len() > MAX_BODY_BYTES {
            return Err(UrlSourceError::TooLarge { url: url.clone() });
        }
        if let Some((last, old_validators)) = &mut self.last_good {
            if *last == body {
                // Same bytes: no parse. Keep the newest validators.
                *old_validators = validators;
                return Ok(None);
            }
        }
        self.parsed += 1;
        let pods = read_body(url, &self.node_name, &body, now)?;
        self.last_good = Some((body, validators));
        let previous = self.last_sent.as_deref().unwrap_or_default();
        let pods = stabilize(previous, pods);
        if self.last_sent.as_ref() == Some(&pods) {
            return Ok(None);
        }
        self.last_sent = Some(pods.clone());
        Ok(Some(pods))
    }
}

/// Parses and defaults the pods of a body served at `url`. A lone pod is
/// known by the URL; each pod of a longer list by the URL and its index, so
/// that a name repeated inside the list names both items.
pub fn read_body(
    url: &str,
    node_name: &str,
    body: &[u8],
    now: jiff::Timestamp,
) -> Result<Vec<SourcePod>, ManifestError> {
    let pods = parse_pods(url, body)?;
    let several = pods.len() > 1;
    Ok(pods
        .into_iter()
        .enumerate()
        .map(|(i, mut pod)| {
            apply_api_defaults(&mut pod);
            apply_static_defaults(&mut pod, node_name, &PodSource::Url(url), now);
            let origin = if several {
                format!("{url} items[{i}]")
            } else {
                url.to_string()
            };
            SourcePod::new(origin, pod)
        })
        .collect())
}

/// `current` with every pod whose UID and content are unchanged carrying
/// its previous object, so an unchanged list gives an equal SET and each
/// pod keeps the config.seen of its first read.
fn stabilize(previous: &[SourcePod], current: Vec<SourcePod>) -> Vec<SourcePod> {
    current
        .into_iter()
        .map(|new| {
            let same = previous.iter().find(|old| {
                pod::uid(&old.pod) == pod::uid(&new.pod)
                    && crate::pod::defaults::pod_content_equal(&old.pod, &new.pod)
            });
            match same {
                // The origin may move with the pod's index in a list.
                Some(old) => SourcePod {
                    origin: new.origin,
                    pod: old.pod.clone(),
                },
                None => new,
            }
        })
        .collect()
}

/// Polls the URL at once and then every `check_frequency`, sending a SET
/// whenever the pods changed. Returns when `cancel` fires or the receiver
/// is gone.
pub async fn run(
    config: UrlSourceConfig,
    fetcher: std::sync::Arc<dyn Fetch>,
    tx: mpsc::Sender<SourceSet>,
    cancel: CancellationToken,
) {
    let mut poll = UrlPoll::new(config.url.clone(), config.node_name.clone());
    let mut ticker = tokio::time::interval(config.check_frequency);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let validators = poll.validators();
        let fetched = tokio::select! {
            _ = cancel.cancelled() => return,
            fetched = fetcher.fetch(&validators) => fetched,
        };
        let outcome = poll.on_fetch(fetched, jiff::Timestamp::now());
        log_report(&config.url, outcome.report);
        if let Some(pods) = outcome.set {
            debug!(url = %config.url, pods = pods.len(), "manifest URL changed");
            let set = SourceSet {
                source: HTTP_SOURCE_NAME,
                pods,
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                sent = tx.send(set) => if sent.is_err() { return },
            }
        }
    }
}

fn log_report(url: &str, report: Option<(Report, Option<UrlSourceError>)>) {
    let Some((report, error)) = report else {
        return;
    };
    let error = error.map(|e| e.to_string()).unwrap_or_default();
    match report {
        Report::Warn { failures } if failures <= WARN_FIRST => {
            warn!(%url, failures, %error, "manifest URL poll failed; keeping the pods last read from it")
        }
        Report::Warn { failures } => {
            warn!(%url, failures, %error, "manifest URL still failing; keeping the pods last read from it")
        }
        Report::Quiet { failures } => {
            debug!(%url, failures, %error, "manifest URL poll failed")
        }
        Report::Recovered { failures } => {
            info!(%url, failures, "manifest URL answers again")
        }
    }
}
