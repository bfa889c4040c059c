//! Termination-message files on the host: the empty file each container
//! instance gets before CreateContainer, and reading an exited container's
//! message back from it (or from the end of its log) as
//! `kuberuntime::termination` says where to look.
//!
//! Invariant: reads are bounded: at most the last 4096 bytes of a message
//! file, and of a log only as much of its end as holds the lines the
//! fallback needs (never more than [`MAX_LOG_READ`]).

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use crate::kuberuntime::termination::{
    MAX_LOG_LINES, MAX_MESSAGE_FILE_BYTES, MessageSource, file_message, log_message,
};

/// The most of a log's end read for the fallback: 80 lines of up to 16 KiB
/// (containerd splits longer ones), and some to spare.
pub const MAX_LOG_READ: u64 = 2 << 20;
const LOG_BLOCK: u64 = 64 << 10;

/// Creates (or empties, should an old instance have left one there) the
/// message file, mode 0666 whatever the umask so any user in the container
/// can write it, in a directory made 0750 with its parents.
pub fn create_message_file(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        DirBuilder::new().recursive(true).mode(0o750).create(dir)?;
    }
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(0o666))
}

/// The container's termination message, the kubelet's way: the end of the
/// message file; when that is missing or empty and the source allows it,
/// the end of the log. A read error becomes the message, as the kubelet
/// reports it.
pub fn read_message(source: &MessageSource) -> String {
    let mut use_log = source.fallback_log.is_some();
    let mut message = String::new();
    if let Some(file) = &source.file {
        match read_end(file, MAX_MESSAGE_FILE_BYTES) {
            Ok((bytes, _)) => {
                message = file_message(&bytes);
                use_log &= bytes.is_empty();
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return format!("Error on reading termination log {}: {e}", file.display());
            }
        }
    }
    match source.fallback_log.as_deref().filter(|_| use_log) {
        Some(log) => match read_log_end(log) {
            Ok((bytes, whole)) => log_message(&bytes, whole),
            Err(e) => format!("Error on reading termination message from logs: {e}"),
        },
        None => message,
    }
}

/// The last `max` bytes of a file, and whether that is all of it.
pub fn read_end(path: &Path, max: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut out = Vec::with_capacity((len - start) as usize);
    file.take(max).read_to_end(&mut out)?;
    Ok((out, start == 0))
}

/// Enough of the end of a log for its last [`MAX_LOG_LINES`] lines: read
/// in growing blocks from the end until it holds that many line ends before
/// its last byte (so every one of those lines is whole), the file's start,
/// or [`MAX_LOG_READ`].
pub fn read_log_end(path: &Path) -> io::Result<(Vec<u8>, bool)> {
    let mut want = LOG_BLOCK;
    loop {
        let (bytes, whole) = read_end(path, want)?;
        let body = &bytes[..bytes.len().saturating_sub(1)];
        let line_ends = body.iter().filter(|b| **b == b'\n').count();
        if whole || line_ends >= MAX_LOG_LINES || want >= MAX_LOG_READ {
            return Ok((bytes, whole));
        }
        want = (want * 4).min(MAX_LOG_READ);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::kuberuntime::termination::{MAX_LOG_BYTES, log_message};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn cri_lines(range: std::ops::Range<usize>, width: usize) -> String {
        range
            .map(|i| format!("2024-05-01T10:00:00.000000001Z stderr F {i:0width$}\n"))
            .collect()
    }

    #[test]
    fn creates_the_file_0666_in_a_0750_directory() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("pods/u1/containers/app/0");
        create_message_file(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"");
        assert_eq!(mode(&path), 0o666, "the umask does not apply");
        assert_eq!(mode(path.parent().unwrap()), 0o750);
        assert_eq!(mode(&root.path().join("pods/u1")), 0o750);

        // Made again for a new instance of the same number: emptied.
        fs::write(&path, "old message").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o600)).unwrap();
        create_message_file(&path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"");
        assert_eq!(mode(&path), 0o666);
    }

    #[test]
    fn reads_the_last_4096_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("msg");
        fs::write(&path, "short").unwrap();
        assert_eq!(read_end(&path, 4096).unwrap(), (b"short".to_vec(), true));

        let text = format!("{}{}", "a".repeat(100), "b".repeat(4096));
        fs::write(&path, &text).unwrap();
        let source = MessageSource {
            file: Some(path.clone()),
            fallback_log: None,
        };
        assert_eq!(read_message(&source), "b".repeat(4096));
        let (_, whole) = read_end(&path, MAX_MESSAGE_FILE_BYTES).unwrap();
        assert!(!whole);
    }

    #[test]
    fn message_file_then_log_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("msg");
        let log = dir.path().join("0.log");
        fs::write(&log, cri_lines(0..3, 1)).unwrap();
        let source = |fallback: bool| MessageSource {
            file: Some(file.clone()),
            fallback_log: fallback.then(|| log.clone()),
        };

        // Missing file: empty, or the log when falling back.
        assert_eq!(read_message(&source(false)), "");
        assert_eq!(read_message(&source(true)), "0\n1\n2\n");
        // Empty file: the same.
        fs::write(&file, "").unwrap();
        assert_eq!(read_message(&source(true)), "0\n1\n2\n");
        // A message in the file wins over the log.
        fs::write(&file, "bad flag --x").unwrap();
        assert_eq!(read_message(&source(true)), "bad flag --x");
        // No file at all (no mount): the log.
        let no_file = MessageSource {
            file: None,
            fallback_log: Some(log.clone()),
        };
        assert_eq!(read_message(&no_file), "0\n1\n2\n");
        // An unreadable file is reported, not skipped.
        fs::remove_file(&file).unwrap();
        fs::create_dir(&file).unwrap();
        let got = read_message(&source(true));
        assert!(
            got.starts_with("Error on reading termination log "),
            "{got}"
        );
        // A missing log is reported too.
        let gone = MessageSource {
            file: None,
            fallback_log: Some(dir.path().join("nope.log")),
        };
        let got = read_message(&gone);
        assert!(
            got.starts_with("Error on reading termination message from logs: "),
            "{got}"
        );
    }

    #[test]
    fn log_end_holds_the_last_80_lines_of_a_big_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        // ~1 MiB of 100-byte lines: several blocks from the end.
        let all = cri_lines(0..10_000, 60);
        fs::write(&log, &all).unwrap();
        let (bytes, whole) = read_log_end(&log).unwrap();
        assert!(!whole);
        assert!((bytes.len() as u64) < MAX_LOG_READ);
        let want = log_message(all.as_bytes(), true);
        assert_eq!(log_message(&bytes, whole), want);
        assert_eq!(want.len(), MAX_LOG_BYTES);
        assert!(want.ends_with(&format!("{:060}\n", 9_999)));

        // Fewer than 80 lines: the whole file, from its start.
        fs::write(&log, cri_lines(0..5, 1)).unwrap();
        let (bytes, whole) = read_log_end(&log).unwrap();
        assert!(whole);
        assert_eq!(log_message(&bytes, whole), "0\n1\n2\n3\n4\n");
    }

    #[test]
    fn log_end_of_long_lines_reads_more_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        // 1 KiB lines: 80 of them need more than one 64 KiB block.
        let all = cri_lines(0..500, 1000);
        fs::write(&log, &all).unwrap();
        let (bytes, whole) = read_log_end(&log).unwrap();
        assert!(!whole);
        assert!(bytes.len() as u64 > LOG_BLOCK);
        assert_eq!(
            log_message(&bytes, whole),
            log_message(all.as_bytes(), true)
        );
    }
}
