//! The file source: static pod manifests in a directory (or one file),
//! reported to the merge as SETs.
//!
//! Invariant: a SET is sent once when the source starts (even an empty one,
//! so the merge counts the source as seen) and afterwards only when the
//! pods differ from the last SET sent; a pod that did not change is sent as
//! the same object, so its config.seen stays the time it was first read.
//! inotify only makes us faster: the periodic re-list alone is correct.
//! A manifest whose bytes are those of the last read is not parsed again
//! ([`ManifestCache`]).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::merge::SourcePod;
use super::trust::{ManifestTrust, path_reasons};
use crate::pod::defaults::{
    PodSource, apply_api_defaults, apply_static_defaults, pod_content_equal,
};
use crate::pod::model::{MAX_MANIFEST_BYTES, ManifestError, parse_pod};
use crate::pod::uid;

/// The source name this driver reports under.
pub const FILE_SOURCE_NAME: &str = "file";
/// The kubelet's `--file-check-frequency` default.
pub const DEFAULT_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
/// Editors write a file in several steps; one re-list after the burst.
const DEBOUNCE: Duration = Duration::from_millis(20);

#[derive(Debug, Clone)]
pub struct FileSourceConfig {
    /// A manifest file, or a directory of them.
    pub path: PathBuf,
    /// How often the path is re-listed whatever inotify says.
    pub check_frequency: Duration,
    pub node_name: String,
    /// Warn about, or refuse, manifests others than root could change.
    pub trust: ManifestTrust,
}

impl FileSourceConfig {
    /// A config with the default check frequency.
    pub fn new(path: impl Into<PathBuf>, node_name: impl Into<String>) -> Self {
        FileSourceConfig {
            path: path.into(),
            check_frequency: DEFAULT_CHECK_FREQUENCY,
            node_name: node_name.into(),
            trust: ManifestTrust::Warn,
        }
    }
}

/// One report of a source: all its pods, replacing the previous report.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSet {
    pub source: &'static str,
    pub pods: Vec<SourcePod>,
}

/// Reads and defaults every manifest under `path`. A bad file is reported
/// and skipped; the others still load. Files come in file-name order, which
/// is the order the merge uses to settle duplicate names.
pub fn read_manifests(
    path: &Path,
    node_name: &str,
    now: jiff::Timestamp,
) -> (Vec<SourcePod>, Vec<ManifestError>) {
    let read = read_manifests_trusting(path, node_name, now, ManifestTrust::Warn);
    (read.pods, read.errors)
}

/// The pods of the last read, by origin, with the bytes each was parsed
/// from. A re-list every 20 s parsed, defaulted and hashed every manifest
/// again to find, nearly always, the same pods; a manifest whose bytes are
/// unchanged now gives its last pod, which is what the comparison with
/// the last SET keeps anyway (the same pod, first seen then).
#[derive(Debug, Default)]
pub struct ManifestCache(HashMap<String, (Vec<u8>, SourcePod)>);

/// What one read of the manifest path found.
#[derive(Debug, Default)]
pub struct ManifestRead {
    pub pods: Vec<SourcePod>,
    pub errors: Vec<ManifestError>,
    /// The directory and the loaded manifests that someone other than root
    /// or crilet's user could change, with why (warnings: their pods run).
    pub untrusted: Vec<ManifestError>,
}

/// [`read_manifests`], checking each manifest's (and the directory's)
/// owner and mode: an untrusted manifest is a warning, or with
/// [`ManifestTrust::Strict`] an error and no pod.
pub fn read_manifests_trusting(
    path: &Path,
    node_name: &str,
    now: jiff::Timestamp,
    trust: ManifestTrust,
) -> ManifestRead {
    read_manifests_cached(path, node_name, now, trust, &mut ManifestCache::default())
}

/// [`read_manifests_trusting`], parsing only the manifests whose bytes are
/// not in `cache`; `cache` then holds this read's.
pub fn read_manifests_cached(
    path: &Path,
    node_name: &str,
    now: jiff::Timestamp,
    trust: ManifestTrust,
    cache: &mut ManifestCache,
) -> ManifestRead {
    let mut read = ManifestRead::default();
    let dir_reasons = match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => path_reasons("manifest directory", path),
        _ => Vec::new(),
    };
    if !dir_reasons.is_empty() {
        read.untrusted
            .push(manifest_error(path, dir_reasons.join("; ")));
    }
    for result in read_all(path, node_name, now, cache) {
        let pod = match result {
            Ok(pod) => pod,
            Err(e) => {
                read.errors.push(e);
                continue;
            }
        };
        let mut reasons = path_reasons("manifest", Path::new(&pod.origin));
        reasons.extend(dir_reasons.iter().cloned());
        if reasons.is_empty() {
            read.pods.push(pod);
        } else if trust == ManifestTrust::Strict {
            let why = format!(
                "untrusted: {}; refused (--manifest-trust=strict)",
                reasons.join("; ")
            );
            read.errors.push(ManifestError::new(&pod.origin, None, why));
        } else {
            let why = format!("untrusted: {}", reasons.join("; "));
            read.untrusted
                .push(ManifestError::new(&pod.origin, None, why));
            read.pods.push(pod);
        }
    }
    read
}

/// One result per manifest file, in file-name order.
fn read_all(
    path: &Path,
    node_name: &str,
    now: jiff::Timestamp,
    cache: &mut ManifestCache,
) -> Vec<Result<SourcePod, ManifestError>> {
    let last = std::mem::take(&mut cache.0);
    let mut read_one = |file: &Path, meta: &Metadata| {
        let origin = file.to_string_lossy();
        let bytes = read_limited(file, meta).map_err(|message| manifest_error(file, message))?;
        let pod = match last.get(origin.as_ref()) {
            Some((before, pod)) if *before == bytes => pod.clone(),
            _ => load_manifest(&origin, &bytes, node_name, now)?,
        };
        cache.0.insert(origin.into_owned(), (bytes, pod.clone()));
        Ok(pod)
    };
    let fail = |message: String| vec![Err(manifest_error(path, message))];
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !is_symlink(path) => {
            return fail("does not exist".into());
        }
        Err(e) => return fail(cannot_stat(path, &e)),
    };
    if !meta.is_dir() {
        return vec![read_one(path, &meta)];
    }
    let entries = match list_dir(path) {
        Ok(entries) => entries,
        Err(e) => return fail(format!("cannot list directory: {e}")),
    };
    let mut results = Vec::new();
    for file in entries {
        match fs::metadata(&file) {
            Ok(meta) if meta.is_dir() => {
                debug!(path = %file.display(), "skipping a subdirectory of the manifest directory");
            }
            Ok(meta) => results.push(read_one(&file, &meta)),
            // Removed between the listing and now: the next re-list agrees.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !is_symlink(&file) => {}
            Err(e) => results.push(Err(manifest_error(&file, cannot_stat(&file, &e)))),
        }
    }
    results
}

/// The directory's entries, sorted by file name, without dot-files: editors
/// keep swap and backup files there, and they are not manifests.
fn list_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if !name.as_encoded_bytes().starts_with(b".") {
            names.push(name);
        }
    }
    names.sort();
    Ok(names.into_iter().map(|name| dir.join(name)).collect())
}

/// The manifest `bytes` read from `origin` parsed, validated and defaulted
/// as the file source does it (also for `crilet validate -`).
pub fn load_manifest(
    origin: &str,
    bytes: &[u8],
    node_name: &str,
    now: jiff::Timestamp,
) -> Result<SourcePod, ManifestError> {
    let mut pod = parse_pod(origin, bytes)?;
    apply_api_defaults(&mut pod);
    apply_static_defaults(&mut pod, node_name, &PodSource::File(origin), now);
    Ok(SourcePod::new(origin, pod))
}

/// The file's bytes, refusing anything but a regular file of at most
/// MAX_MANIFEST_BYTES without reading more than one byte past the limit.
fn read_limited(path: &Path, meta: &Metadata) -> Result<Vec<u8>, String> {
    check_regular(meta)?;
    // O_NONBLOCK: if a FIFO replaced the file since the stat, opening it
    // must not hang the source; the fstat below then refuses it.
    let file = File::options()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    check_regular(&meta)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.take(MAX_MANIFEST_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn check_regular(meta: &Metadata) -> Result<(), String> {
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_block_device() || kind.is_char_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(format!("{what}, not a manifest; skipped"));
    }
    if meta.len() > MAX_MANIFEST_BYTES as u64 {
        return Err(too_large());
    }
    Ok(())
}

fn too_large() -> String {
    format!("larger than the {MAX_MANIFEST_BYTES}-byte manifest limit; refused")
}

fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn cannot_stat(path: &Path, e: &io::Error) -> String {
    match (is_symlink(path), e.kind()) {
        (true, io::ErrorKind::NotFound) => "dangling symlink: its target does not exist".into(),
        (true, _) => format!("cannot follow symlink: {e}"),
        (false, _) => format!("cannot stat: {e}"),
    }
}

fn manifest_error(path: &Path, message: String) -> ManifestError {
    ManifestError::new(&path.to_string_lossy(), None, message)
}

/// Watches the manifest directory and re-lists it on changes and on every
/// `check_frequency` tick, sending a SET whenever the pods changed. Returns
/// when `cancel` fires or the receiver is gone.
pub async fn run(config: FileSourceConfig, tx: mpsc::Sender<SourceSet>, cancel: CancellationToken) {
    // Pending wake-ups all mean "re-list"; a few slots keep an urgent one
    // from being dropped behind a stream of writes.
    let (wake_tx, mut wake_rx) = mpsc::channel::<Urgency>(16);
    let mut watch = Watch::new(config.path.clone(), wake_tx);
    let mut ticker = tokio::time::interval(config.check_frequency);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut last_sent: Option<Vec<SourcePod>> = None;
    let mut error_texts = BTreeMap::new();
    let mut untrusted_texts = BTreeMap::new();
    let mut cache = ManifestCache::default();

    loop {
        // Watch before reading, so a change during the read is not missed.
        watch.ensure();
        let (path, node, trust) = (config.path.clone(), config.node_name.clone(), config.trust);
        let mut last = std::mem::take(&mut cache);
        let read = tokio::task::spawn_blocking(move || {
            let now = jiff::Timestamp::now();
            let read = read_manifests_cached(&path, &node, now, trust, &mut last);
            (read, last)
        });
        match read.await {
            Ok((
                ManifestRead {
                    pods,
                    errors,
                    untrusted,
                },
                last,
            )) => {
                cache = last;
                error_texts = log_errors(&error_texts, &errors, SKIPPED);
                untrusted_texts = log_errors(&untrusted_texts, &untrusted, UNTRUSTED);
                let pods = stabilize(last_sent.as_deref().unwrap_or_default(), pods);
                if last_sent.as_ref() != Some(&pods) {
                    let set = SourceSet {
                        source: FILE_SOURCE_NAME,
                        pods: pods.clone(),
                    };
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        sent = tx.send(set) => if sent.is_err() { return },
                    }
                    last_sent = Some(pods);
                }
            }
            Err(e) => warn!(error = %e, "reading the manifest path failed"),
        }

        tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            _ = ticker.tick() => {}
            Some(first) = wake_rx.recv() => {
                let mut urgent = first == Urgency::Now;
                while let Ok(u) = wake_rx.try_recv() {
                    urgent |= u == Urgency::Now;
                }
                if !urgent {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(DEBOUNCE) => {}
                    }
                    while wake_rx.try_recv().is_ok() {}
                }
            }
        }
    }
}

/// `current` with every pod that is unchanged since `previous` replaced by
/// its previous object, so that an unchanged directory gives an equal SET.
fn stabilize(previous: &[SourcePod], current: Vec<SourcePod>) -> Vec<SourcePod> {
    current
        .into_iter()
        .map(|new| {
            previous
                .iter()
                .find(|old| {
                    // The manifest cache hands an unchanged file its
                    // previous pod: the same `Arc` needs no deep comparison.
                    old.origin == new.origin
                        && (Arc::ptr_eq(&old.pod, &new.pod)
                            || (uid(&old.pod) == uid(&new.pod)
                                && pod_content_equal(&old.pod, &new.pod)))
                })
                .cloned()
                .unwrap_or(new)
        })
        .collect()
}

/// The error text of each origin, with a warning `what` for the texts that
/// changed and an info line for origins whose errors are gone: a broken (or
/// untrusted) file warns once, not on every re-list.
fn log_errors(
    previous: &BTreeMap<String, String>,
    errors: &[ManifestError],
    (what, resolved): (&str, &str),
) -> BTreeMap<String, String> {
    let current = error_texts(errors);
    for e in errors {
        if previous.get(&e.origin) != current.get(&e.origin) {
            warn!(error = %e, "{what}");
        }
    }
    for origin in previous.keys().filter(|o| !current.contains_key(*o)) {
        info!(%origin, "{resolved}");
    }
    current
}

/// The warning and the all-clear for a manifest that cannot be read.
const SKIPPED: (&str, &str) = (
    "static pod manifest skipped",
    "static pod manifest error resolved",
);
/// The warning and the all-clear for a manifest others can change.
const UNTRUSTED: (&str, &str) = (
    "static pod manifest can be changed by others than root (see --manifest-trust)",
    "static pod manifest trusted again",
);

fn error_texts(errors: &[ManifestError]) -> BTreeMap<String, String> {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for e in errors {
        let text = texts.entry(e.origin.clone()).or_default();
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&e.to_string());
    }
    texts
}

/// The inotify watch on the manifest directory (or on a single manifest's
/// parent). It is re-created when its target appears or is replaced, since
/// a watch on a deleted directory reports nothing for its successor.
struct Watch {
    path: PathBuf,
    wake: mpsc::Sender<Urgency>,
    /// The watcher and the (dev, inode) of the directory it watches.
    current: Option<(RecommendedWatcher, (u64, u64))>,
    last_error: Option<String>,
}

impl Watch {
    fn new(path: PathBuf, wake: mpsc::Sender<Urgency>) -> Self {
        Watch {
            path,
            wake,
            current: None,
            last_error: None,
        }
    }

    fn ensure(&mut self) {
        // A directory is watched itself; a file (or a path that does not
        // exist yet) through its parent, keeping only events naming it.
        let (target, only) = match fs::metadata(&self.path) {
            Ok(meta) if meta.is_dir() => (self.path.clone(), None),
            _ => {
                let parent = match self.path.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                (parent, self.path.file_name().map(OsString::from))
            }
        };
        let Ok(meta) = fs::metadata(&target) else {
            self.current = None;
            return;
        };
        let id = (meta.dev(), meta.ino());
        if self
            .current
            .as_ref()
            .is_some_and(|(_, current)| *current == id)
        {
            return;
        }
        self.current = None;
        match self.watch(&target, only) {
            Ok(watcher) => {
                debug!(path = %target.display(), "watching for manifest changes");
                self.current = Some((watcher, id));
                self.last_error = None;
            }
            Err(e) => {
                let text = e.to_string();
                if self.last_error.as_ref() != Some(&text) {
                    warn!(path = %target.display(), error = %text,
                        "cannot watch the manifest path; relying on the periodic re-list");
                }
                self.last_error = Some(text);
            }
        }
    }

    fn watch(&self, target: &Path, only: Option<OsString>) -> notify::Result<RecommendedWatcher> {
        let wake = self.wake.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(event) => {
                    if let Some(urgency) = relevance(&event, only.as_deref()) {
                        // Full means a re-read is pending already.
                        let _ = wake.try_send(urgency);
                    }
                }
                Err(e) => warn!(error = %e, "manifest watch error; the periodic re-list continues"),
            })?;
        watcher.watch(target, RecursiveMode::NonRecursive)?;
        Ok(watcher)
    }
}

/// How soon a watch event should lead to a re-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Urgency {
    /// The change is complete (written and closed, renamed in, removed):
    /// read now, so a new manifest starts without delay.
    Now,
    /// A file is being created or written: its close (or the periodic
    /// re-list) follows; wait DEBOUNCE so a half-written file is not read.
    Soon,
}

/// Opening and reading files, our own re-lists included, are not changes;
/// a close after writing is. Hidden files are never read, so their events
/// are not changes either (the kubelet's `produceWatchEvent` ignores them
/// too): an editor's or a deployer's `.name.tmp` written before its rename
/// would otherwise hold the rename's read back by [`DEBOUNCE`]. `only` is
/// the file name that matters when the watch is on a single manifest's
/// parent directory (that manifest is read even when its name is hidden).
fn relevance(event: &notify::Event, only: Option<&OsStr>) -> Option<Urgency> {
    use notify::event::ModifyKind;
    let hidden = |p: &PathBuf| {
        p.file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
    };
    if only.is_none() && !event.paths.is_empty() && event.paths.iter().all(hidden) {
        return None;
    }
    let urgency = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => Urgency::Now,
        EventKind::Access(_) => return None,
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Data(_)) => Urgency::Soon,
        _ => Urgency::Now,
    };
    match only {
        Some(name)
            if !event.paths.is_empty()
                && !event.paths.iter().any(|p| p.file_name() == Some(name)) =>
        {
            None
        }
        _ => Some(urgency),
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
