//! The CRI log decoder: raw bytes of a CRI log file in, what `kubectl logs`
//! prints out. Invariant: bytes may arrive cut anywhere; a raw line is
//! decoded only once its newline has arrived (or at [`LogDecoder::finish`]),
//! so a line is never printed twice or half.
//!
//! As the kubelet: entries older than `since` are dropped, lines that are
//! not CRI entries are skipped (and counted), output stops at `limitBytes`.
//! Better than the kubelet: a line the runtime split into partial (`P`)
//! entries gets one timestamp prefix, not one per fragment, and the since
//! filter keeps or drops the joined line whole.

use jiff::Timestamp;

use super::{LogOptions, parse_cri_line};

/// The kubelet's output format for `timestamps=true` (Go's
/// `2006-01-02T15:04:05.000000000Z07:00`), always in UTC here.
pub const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S";

#[derive(Debug, Clone)]
pub struct LogDecoder {
    since: Option<Timestamp>,
    timestamps: bool,
    /// Bytes still allowed out (`limitBytes`); None is no limit.
    remaining: Option<u64>,
    /// The start of a raw line whose newline has not arrived.
    pending: Vec<u8>,
    /// Inside a logical line (the last entry was partial): whether it is
    /// being printed.
    open_line: Option<bool>,
    bad_lines: u64,
}

impl LogDecoder {
    /// `since` is [`LogOptions::since`] resolved against the clock.
    pub fn new(opts: &LogOptions, since: Option<Timestamp>) -> LogDecoder {
        LogDecoder {
            since,
            timestamps: opts.timestamps,
            remaining: opts.limit_bytes.map(|n| n.max(0) as u64),
            pending: Vec::new(),
            open_line: None,
            bad_lines: 0,
        }
    }

    /// Decodes every complete raw line of `chunk` (with what was pending)
    /// into `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            if self.done() {
                self.pending.clear();
                return;
            }
            if self.pending.is_empty() {
                self.line(&rest[..nl], out);
            } else {
                let mut line = std::mem::take(&mut self.pending);
                line.extend_from_slice(&rest[..nl]);
                self.line(&line, out);
            }
            rest = &rest[nl + 1..];
        }
        if !self.done() {
            self.pending.extend_from_slice(rest);
        }
    }

    /// The file ended for good (not following): a last line without its
    /// newline is decoded too.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.pending);
        if !line.is_empty() && !self.done() {
            self.line(&line, out);
        }
    }

    /// Forgets a raw line cut by a file change (the log was rotated and the
    /// rest of it is in no file the reader will open).
    pub fn drop_pending(&mut self) {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.bad_lines += 1;
        }
    }

    /// `limitBytes` reached: nothing more will be written.
    pub fn done(&self) -> bool {
        self.remaining == Some(0)
    }

    /// Raw lines skipped because they were not CRI log entries.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    fn line(&mut self, raw: &[u8], out: &mut Vec<u8>) {
        let Some(entry) = parse_cri_line(raw) else {
            self.bad_lines += 1;
            return;
        };
        let print = match self.open_line {
            Some(print) => print,
            None => {
                let ts: Timestamp = entry.timestamp.parse().unwrap_or(Timestamp::MIN);
                let print = self.since.is_none_or(|since| ts >= since);
                if print && self.timestamps {
                    let prefix = format!(
                        "{}.{:09}Z ",
                        ts.strftime(TIMESTAMP_FORMAT),
                        ts.subsec_nanosecond()
                    );
                    self.emit(prefix.as_bytes(), out);
                }
                print
            }
        };
        if print {
            self.emit(entry.content, out);
            if !entry.partial {
                self.emit(b"\n", out);
            }
        }
        self.open_line = entry.partial.then_some(print);
    }

    fn emit(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        let n = match self.remaining {
            Some(left) => {
                let n = (bytes.len() as u64).min(left);
                self.remaining = Some(left - n);
                n as usize
            }
            None => bytes.len(),
        };
        out.extend_from_slice(&bytes[..n]);
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
