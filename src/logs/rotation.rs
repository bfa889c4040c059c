//! Container log rotation, planned: what the kubelet's container log
//! manager does to one running container's log at one check, as a list of
//! steps over file names. The driver (`logs::container_log_manager`) lists the
//! directory, stats the log, reads the clock, applies the steps and calls
//! the runtime.
//!
//! The log `<log>` is what ContainerStatus names; its rotated siblings are
//! the files named `<log>.*`. At a check:
//! - the log is missing: ask the runtime to reopen it, nothing else;
//! - the log is smaller than the max size: nothing;
//! - otherwise rotate:
//!   1. remove leftovers of an interrupted rotation: `*.tmp`, and an
//!      uncompressed file whose `.gz` exists;
//!   2. remove the oldest (by name) so at most `max_files - 2` rotated
//!      files remain (the runtime's new log and the one rotated now make
//!      up the rest);
//!   3. gzip every remaining uncompressed rotated file;
//!   4. rename `<log>` to `<log>.<YYYYMMDD-hhmmss>`, then have the runtime
//!      reopen `<log>` (the driver renames it back if that fails).
//!
//! One deviation from the kubelet: when `<log>.<timestamp>` (or a file
//! derived from it) already exists, which takes two rotations in one
//! second, the rotation waits for the next check. The kubelet renames over
//! the name and then deletes the new file as "already compressed" at its
//! next rotation, losing those lines.
//!
//! Invariant: pure; steps name files of the log's directory only; the only
//! step that touches `<log>` is the final rename; after the steps and the
//! reopen at most `max_files` files match `<log>` and `<log>.*`, and the
//! only uncompressed rotated one is the file renamed now.

/// The kubelet's rotation policy (`containerLogMaxSize`, `containerLogMaxFiles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotatePolicy {
    /// A log at least this big (bytes) is rotated.
    pub max_size: u64,
    /// Files per container at most, the current log included; more than 1.
    pub max_files: u32,
}

/// The suffix of a compressed rotated log.
pub const COMPRESS_SUFFIX: &str = ".gz";
/// The suffix of a log being compressed.
pub const TMP_SUFFIX: &str = ".tmp";
/// The timestamp of a rotated log's name, as strftime (the kubelet's Go
/// layout `20060102-150405`).
pub const TIMESTAMP_FORMAT: &str = "%Y%m%d-%H%M%S";

/// One file operation (names are of the log's directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Remove(String),
    /// gzip `x` into `x.tmp`, rename that to `x.gz`, remove `x`.
    Compress(String),
    Rename {
        from: String,
        to: String,
    },
    /// ReopenContainerLog: the runtime starts a new `<log>`.
    Reopen,
}

/// What to do with one container's log at a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Smaller than the max size.
    Keep,
    /// The log is missing: reopen it only.
    Reopen,
    /// Rotate: these steps in order; the last two are the rename of `<log>`
    /// and [`Step::Reopen`].
    Rotate(Vec<Step>),
    /// The rotated name is taken (two rotations in one second): try at the
    /// next check.
    Wait { taken: String },
}

/// The rotated siblings of `log` among the names of its directory: the
/// names `<log>.*` (the kubelet's glob), in any order.
pub fn rotated_siblings<'a>(log: &str, listing: &'a [String]) -> Vec<&'a str> {
    let prefix = format!("{log}.");
    listing
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Whether a rotated file still holds lines: not a `.tmp`, and not an
/// uncompressed file whose `.gz` exists (compressed, removal interrupted).
pub fn is_in_use(name: &str, rotated: &[&str]) -> bool {
    if name.ends_with(TMP_SUFFIX) {
        return false;
    }
    if name.ends_with(COMPRESS_SUFFIX) {
        return true;
    }
    let compressed = format!("{name}{COMPRESS_SUFFIX}");
    !rotated.contains(&compressed.as_str())
}

/// Every file holding the log's lines, oldest first, the current log last
/// (the kubelet's `GetAllLogs`): the in-use rotated files sorted by name.
pub fn all_logs(log: &str, listing: &[String]) -> Vec<String> {
    let rotated = rotated_siblings(log, listing);
    let mut inuse: Vec<String> = (rotated.iter())
        .filter(|n| is_in_use(n, &rotated))
        .map(|n| n.to_string())
        .collect();
    inuse.sort();
    inuse.push(log.to_string());
    inuse
}

/// What removing a container removes (the kubelet's `Clean`, a glob
/// `<log>*`): the log and every name that starts with it.
pub fn clean_targets(log: &str, listing: &[String]) -> Vec<String> {
    let mut out: Vec<String> = (listing.iter())
        .filter(|n| !log.is_empty() && n.starts_with(log))
        .cloned()
        .collect();
    out.sort();
    out
}

/// `<log>.<timestamp>`.
pub fn rotated_name(log: &str, timestamp: &str) -> String {
    format!("{log}.{timestamp}")
}

/// Whether a log of `size` bytes is rotated: at least the max size.
pub fn due(size: u64, policy: RotatePolicy) -> bool {
    size >= policy.max_size
}

/// Plans one check of `log` (a file name), `size` bytes or `None` when
/// missing, given the names in its directory and the timestamp for the
/// rotated name (formatted with [`TIMESTAMP_FORMAT`]).
pub fn plan(
    log: &str,
    size: Option<u64>,
    listing: &[String],
    policy: RotatePolicy,
    timestamp: &str,
) -> Decision {
    let Some(size) = size else {
        return Decision::Reopen;
    };
    if !due(size, policy) {
        return Decision::Keep;
    }
    let rotated = rotated_siblings(log, listing);
    let target = rotated_name(log, timestamp);
    // `<target>`, `<target>.gz`, `<target>.tmp`, ...: the name is this
    // second's, already used.
    if let Some(taken) = rotated
        .iter()
        .find(|n| **n == target || n.starts_with(&format!("{target}.")))
    {
        return Decision::Wait {
            taken: taken.to_string(),
        };
    }
    let mut steps = Vec::new();
    let (mut inuse, unused): (Vec<&str>, Vec<&str>) =
        rotated.iter().partition(|n| is_in_use(n, &rotated));
    let mut unused = unused;
    unused.sort_unstable();
    steps.extend(unused.into_iter().map(|n| Step::Remove(n.to_string())));
    // Oldest first: the kubelet sorts names, which sort as their timestamps.
    inuse.sort_unstable();
    let keep = policy.max_files.saturating_sub(2) as usize;
    let excess = inuse.len().saturating_sub(keep);
    steps.extend(inuse[..excess].iter().map(|n| Step::Remove(n.to_string())));
    steps.extend(
        (inuse[excess..].iter())
            .filter(|n| !n.ends_with(COMPRESS_SUFFIX))
            .map(|n| Step::Compress(n.to_string())),
    );
    steps.push(Step::Rename {
        from: log.to_string(),
        to: target,
    });
    steps.push(Step::Reopen);
    Decision::Rotate(steps)
}

#[cfg(test)]
#[path = "rotation_tests.rs"]
mod tests;
