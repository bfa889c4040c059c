//! Container logs as the kubelet reads them back (`kuberuntime/logs/logs.go`,
//! `kubelet_pods.go` validateContainerLogStatus): the CRI log line format,
//! the v1 `PodLogOptions` a request carries, the decoder that turns CRI
//! lines into what `kubectl logs` prints, the backwards scan that finds
//! where the last N lines start, and which container's log a request means.
//!
//! Invariant: pure. The readers (`logs::locate`, `logs::stream`) open, seek
//! and follow the files and feed the bytes through here; nothing here
//! touches a file or the clock.

/// One line of a CRI log file, without its newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CriLogLine<'a> {
    pub timestamp: &'a str,
    /// `stdout` or `stderr`.
    pub stream: &'a str,
    /// Tag `P`: the runtime split a long line; the next entry continues it.
    pub partial: bool,
    pub content: &'a [u8],
}

/// `<RFC3339Nano timestamp> <stdout|stderr> <tags> <content>`, where tags
/// are `:`-separated and the first is `P` (partial) or `F` (full). None for
/// anything else (the kubelet's parseCRILog refuses it).
pub fn parse_cri_line(line: &[u8]) -> Option<CriLogLine<'_>> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let timestamp = std::str::from_utf8(parts.next()?).ok()?;
    timestamp.parse::<jiff::Timestamp>().ok()?;
    let stream = match parts.next()? {
        b"stdout" => "stdout",
        b"stderr" => "stderr",
        _ => return None,
    };
    let tags = parts.next()?;
    let partial = match tags.split(|b| *b == b':').next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    Some(CriLogLine {
        timestamp,
        stream,
        partial,
        content: parts.next()?,
    })
}

/// Whether a raw CRI line ends a logical line: a full (`F`) entry, or a
/// line that is not a CRI entry at all (it is skipped, and must not glue
/// the lines around it together).
pub fn ends_logical_line(line: &[u8]) -> bool {
    parse_cri_line(line).is_none_or(|l| !l.partial)
}
