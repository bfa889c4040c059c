//! Termination messages, as the kubelet makes them
//! (`kuberuntime_container.go` getTerminationMessage and
//! readLastStringFromContainerLogs, `status_manager.go` normalizeStatus):
//! which file, or which log, an exited container's message comes from; the
//! tail of a CRI log turned back into the text the container wrote; and the
//! cap each message gets in the pod status.
//!
//! Invariant: pure. The agent reads the files this module names and hands
//! the bytes back; nothing here touches the filesystem or the clock.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use super::labels::{
    ContainerLabels, DEFAULT_TERMINATION_MESSAGE_PATH, TERMINATION_MESSAGE_POLICY_FALLBACK,
};
use super::mapping::{NodeContext, container_log_path, pod_log_dir, termination_message_file};
use crate::cri::types::{ContainerState, ContainerStatus};
use crate::logs::parse_cri_line;
use crate::pod::uid;

/// At most this much of the end of the message file is read
/// (MaxContainerTerminationMessageLength).
pub const MAX_MESSAGE_FILE_BYTES: u64 = 4096;
/// The log fallback takes this many lines from the end of the log
/// (MaxContainerTerminationMessageLogLines)...
pub const MAX_LOG_LINES: usize = 80;
/// ...of which it keeps the last this many bytes
/// (MaxContainerTerminationMessageLogLength).
pub const MAX_LOG_BYTES: usize = 2048;
/// All the termination messages of a pod's status together
/// (MaxPodTerminationMessageLogLength), shared equally by its containers.
pub const MAX_POD_MESSAGE_BYTES: usize = 12 * 1024;

/// The reason a runtime gives a container that never ran: it has no logs.
const CONTAINER_CANNOT_RUN: &str = "ContainerCannotRun";

/// Where an exited container's termination message is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSource {
    /// The host file behind `terminationMessagePath`; None when the
    /// container has no such mount.
    pub file: Option<PathBuf>,
    /// The container's log, when policy FallbackToLogsOnError applies (a
    /// non-zero exit of a container that ran): read when the file is
    /// missing or empty.
    pub fallback_log: Option<PathBuf>,
}

/// What to read for `c`, or None when it has not exited (a message is only
/// read once the container is done writing it). The file is the status
/// mount at the container's `terminationMessagePath` (as the kubelet finds
/// it); a runtime that reports no mounts at all gets the path the mapping
/// gave that instance. A relative (or missing) log path is taken to be
/// relative to the pod's log directory, as the mapping set it.
pub fn message_source(ctx: &NodeContext, pod: &Pod, c: &ContainerStatus) -> Option<MessageSource> {
    if c.state != ContainerState::Exited {
        return None;
    }
    let labels = ContainerLabels::from_labels(&c.labels, &c.annotations).ok();
    let path = labels
        .as_ref()
        .map_or(DEFAULT_TERMINATION_MESSAGE_PATH, |l| {
            l.termination_message_path.as_str()
        });
    let file = if c.mounts.is_empty() {
        Some(termination_message_file(
            ctx,
            uid(pod),
            &c.metadata.name,
            c.metadata.attempt,
        ))
    } else {
        let mount = c.mounts.iter().find(|m| m.container_path == path);
        mount.map(|m| PathBuf::from(&m.host_path))
    };
    let policy = labels
        .as_ref()
        .map(|l| l.termination_message_policy.as_str());
    let fallback = policy == Some(TERMINATION_MESSAGE_POLICY_FALLBACK)
        && c.exit_code != 0
        && c.reason != CONTAINER_CANNOT_RUN;
    let fallback_log = fallback.then(|| {
        let relative = match c.log_path.as_str() {
            "" => {
                let count = labels
                    .as_ref()
                    .map_or(c.metadata.attempt, |l| l.restart_count);
                container_log_path(&c.metadata.name, count)
            }
            given => given.to_owned(),
        };
        // An absolute path (containerd's) is kept as it is by `join`.
        pod_log_dir(ctx, pod).join(Path::new(&relative))
    });
    Some(MessageSource { file, fallback_log })
}

/// The message from the last bytes of the message file (at most
/// [`MAX_MESSAGE_FILE_BYTES`]): a character cut by the read is dropped.
pub fn file_message(tail: &[u8]) -> String {
    utf8_suffix(tail)
}

/// The message from the end of a CRI log: the content of its last
/// [`MAX_LOG_LINES`] lines, partial (`P`) lines joined to what follows
/// without a newline, of which the last [`MAX_LOG_BYTES`] bytes are kept.
/// `tail` is the end of the file; unless `from_start` (it is the whole
/// file), its first line may be cut and is skipped. A last line without a
/// newline counts; lines that are not CRI log lines are skipped, as the
/// kubelet skips them.
pub fn log_message(tail: &[u8], from_start: bool) -> String {
    let body = tail.strip_suffix(b"\n").unwrap_or(tail);
    let mut lines: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
    if !from_start && !lines.is_empty() {
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(MAX_LOG_LINES);
    let mut out = Vec::new();
    // Only the last line can lack its newline: the others had one.
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate().skip(skip) {
        let Some(entry) = parse_cri_line(line) else {
            continue;
        };
        out.extend_from_slice(entry.content);
        if !entry.partial && (i < last || tail.ends_with(b"\n")) {
            out.push(b'\n');
        }
    }
    let keep = out.len().saturating_sub(MAX_LOG_BYTES);
    utf8_suffix(&out[keep..])
}

/// The most each terminated message may keep in the pod status: 12 KiB
/// shared by every container of the spec, init containers included.
pub fn message_cap(pod: &Pod) -> usize {
    let spec = pod.spec.as_ref();
    let apps = spec.map_or(0, |s| s.containers.len());
    let inits = spec
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    MAX_POD_MESSAGE_BYTES / (apps + inits).max(1)
}

/// The first `cap` bytes of `message` (normalizeStatus keeps the start),
/// shortened to a character boundary.
pub fn cap_message(message: &str, cap: usize) -> &str {
    if message.len() <= cap {
        return message;
    }
    let mut end = cap;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// Bytes cut from the end of a text as a string: continuation bytes of a
/// character whose start was cut off are dropped, anything else invalid
/// becomes U+FFFD.
fn utf8_suffix(bytes: &[u8]) -> String {
    let cut = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    String::from_utf8_lossy(&bytes[cut..]).into_owned()
}

#[cfg(test)]
#[path = "termination_tests.rs"]
mod tests;
