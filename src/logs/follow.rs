//! Streams one container's log file: from the start or from where its last
//! N lines begin, through the decoder, into a channel; with `follow`, on
//! past the end of the file and across rotations until the container stops.
//!
//! Invariant: the file at the path is re-opened only once the file held
//! open has been read to its end after the path changed, so a rotation
//! (rename, then the runtime's ReopenContainerLog) neither loses nor
//! repeats a line.

use std::io::SeekFrom;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

use super::LogTarget;
use crate::cri::{ContainerState, Runtime};
use crate::logs::{LogDecoder, LogOptions, TailScanner};

/// How often a follower looks for new bytes once at the end of the file.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// How often a follower at the end of the file asks whether the container
/// still runs (the kubelet's is 5 s).
const STATE_CHECK_PERIOD: Duration = Duration::from_secs(1);
const READ_CHUNK: usize = 256 * 1024;
const TAIL_CHUNK: usize = 32 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error("opening the log file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the log file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Sends `target`'s log, decoded as `opts` asks, to `out`; returns when it
/// is all sent (without `follow`), when the container stopped and its file
/// was read to the end, when `limitBytes` is reached, or when `out` is
/// closed. `runtime` tells whether the container still runs.
pub async fn stream(
    target: LogTarget,
    opts: LogOptions,
    runtime: Arc<dyn Runtime>,
    out: mpsc::Sender<Bytes>,
) -> Result<(), LogsError> {
    let path = target.path.clone();
    let read_err = |source| LogsError::Read {
        path: path.clone(),
        source,
    };
    let mut file = open(&path).await?;
    let len = file.metadata().await.map_err(read_err)?.len();
    let mut start = 0;
    if let Some(lines) = opts.tail_lines {
        start = tail_start(&mut file, len, lines.max(0) as u64)
            .await
            .map_err(read_err)?;
        file.seek(SeekFrom::Start(start)).await.map_err(read_err)?;
    }
    let mut inode = file.metadata().await.map_err(read_err)?.ino();
    let mut decoder = LogDecoder::new(&opts, opts.since(jiff::Timestamp::now()));
    let mut buf = vec![0u8; READ_CHUNK];
    let mut last_check = Instant::now();
    // Without `follow`, the file as it was when the request came: what the
    // runtime appends meanwhile is not sent, so `tailLines=N` sends N lines
    // however fast the container writes (the kubelet's limited mode).
    let mut unread = (!opts.follow).then(|| len.saturating_sub(start));
    loop {
        let want = match unread {
            Some(0) => break,
            Some(left) => buf.len().min(usize::try_from(left).unwrap_or(usize::MAX)),
            None => buf.len(),
        };
        let n = file.read(&mut buf[..want]).await.map_err(read_err)?;
        if let Some(left) = unread.as_mut() {
            *left -= n as u64;
        }
        if n > 0 {
            let mut chunk = Vec::with_capacity(n);
            decoder.feed(&buf[..n], &mut chunk);
            if !send(&out, chunk).await || decoder.done() {
                return Ok(());
            }
            continue;
        }
        if !opts.follow {
            break;
        }
        // At the end: a new file at the path means the old one is complete.
        match tokio::fs::metadata(&path).await {
            Ok(m) if m.ino() != inode => {
                if let Ok(next) = File::open(&path).await {
                    // The runtime may have written more to the old file
                    // between our last read and its reopen.
                    loop {
                        let n = file.read(&mut buf).await.map_err(read_err)?;
                        if n == 0 {
                            break;
                        }
                        let mut chunk = Vec::with_capacity(n);
                        decoder.feed(&buf[..n], &mut chunk);
                        if !send(&out, chunk).await || decoder.done() {
                            return Ok(());
                        }
                    }
                    decoder.drop_pending();
                    inode = next.metadata().await.map_err(read_err)?.ino();
                    file = next;
                    continue;
                }
            }
            _ => {}
        }
        if out.is_closed() {
            return Ok(());
        }
        if last_check.elapsed() >= STATE_CHECK_PERIOD {
            last_check = Instant::now();
            if !running(runtime.as_ref(), &target.container_id).await {
                // Read what the container wrote before it stopped, then end.
                let n = file.read(&mut buf).await.map_err(read_err)?;
                if n == 0 {
                    break;
                }
                let mut chunk = Vec::new();
                decoder.feed(&buf[..n], &mut chunk);
                if !send(&out, chunk).await {
                    return Ok(());
                }
                continue;
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    let mut chunk = Vec::new();
    decoder.finish(&mut chunk);
    send(&out, chunk).await;
    if decoder.bad_lines() > 0 {
        tracing::debug!(path = %path.display(), skipped = decoder.bad_lines(), "log lines that are not CRI entries were skipped");
    }
    Ok(())
}

async fn open(path: &PathBuf) -> Result<File, LogsError> {
    File::open(path).await.map_err(|source| LogsError::Open {
        path: path.clone(),
        source,
    })
}

/// False once nobody listens.
async fn send(out: &mpsc::Sender<Bytes>, chunk: Vec<u8>) -> bool {
    chunk.is_empty() || out.send(Bytes::from(chunk)).await.is_ok()
}

async fn running(runtime: &dyn Runtime, id: &str) -> bool {
    match runtime.container_status(id).await {
        Ok(s) => s.state == ContainerState::Running,
        Err(e) => {
            tracing::debug!(container = id, error = %e, "container status while following its log");
            false
        }
    }
}

/// Reads backwards from `len` until the start of the last `lines` lines.
async fn tail_start(file: &mut File, len: u64, lines: u64) -> std::io::Result<u64> {
    let mut scan = TailScanner::new(len, lines);
    let mut buf = vec![0u8; TAIL_CHUNK];
    loop {
        if let Some(start) = scan.answer() {
            return Ok(start);
        }
        let end = scan.position();
        if end == 0 {
            return Ok(scan.finish());
        }
        let start = end.saturating_sub(TAIL_CHUNK as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start)).await?;
        file.read_exact(chunk).await?;
        scan.feed_back(chunk);
    }
}
