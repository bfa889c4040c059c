use super::*;

const T: &str = "2026-12-01T00:00:01Z";

/// Reads the file backwards in `chunk`-byte pieces.
fn scan(file: &[u8], lines: u64, chunk: usize) -> u64 {
    let mut s = TailScanner::new(file.len() as u64, lines);
    loop {
        if let Some(a) = s.answer() {
            return a;
        }
        let end = s.position() as usize;
        if end == 0 {
            return s.finish();
        }
        let start = end.saturating_sub(chunk);
        if let Some(a) = s.feed_back(&file[start..end]) {
            return a;
        }
    }
}

/// The same answer read forwards: the offsets after each logical line.
fn forward(file: &[u8], lines: u64) -> u64 {
    let mut ends = vec![0u64];
    let mut off = 0u64;
    for raw in file.split_inclusive(|b| *b == b'\n') {
        off += raw.len() as u64;
        let line = raw.strip_suffix(b"\n").unwrap_or(raw);
        if !line.is_empty() && ends_logical_line(line) {
            ends.push(off.min(file.len() as u64));
        }
    }
    if lines == 0 {
        return file.len() as u64;
    }
    let m = ends.len() as u64 - 1;
    if m <= lines {
        0
    } else {
        ends[(m - lines) as usize]
    }
}

#[test]
fn small_table() {
    let file = format!("{T} stdout F a\n{T} stdout P b\n{T} stdout F c\n{T} stdout F d\n");
    let f = file.as_bytes();
    let line2 = f.iter().position(|b| *b == b'\n').unwrap() as u64 + 1;
    let line4 = file.rfind(&format!("{T} stdout F d")).unwrap() as u64;
    for chunk in [1, 3, 16, 4096] {
        assert_eq!(scan(f, 0, chunk), f.len() as u64);
        assert_eq!(scan(f, 1, chunk), line4, "chunk {chunk}");
        assert_eq!(
            scan(f, 2, chunk),
            line2,
            "a P+F pair is one line; chunk {chunk}"
        );
        assert_eq!(scan(f, 3, chunk), 0);
        assert_eq!(scan(f, 30, chunk), 0);
        assert_eq!(scan(b"", 5, chunk), 0);
    }
}

#[test]
fn reads_only_the_end_of_a_big_file() {
    let line = format!("{T} stdout F {}\n", "x".repeat(100));
    let file = line.repeat(100_000); // ~12 MB
    let mut s = TailScanner::new(file.len() as u64, 100);
    let mut read = 0usize;
    while s.answer().is_none() {
        let end = s.position() as usize;
        let start = end.saturating_sub(32 * 1024);
        read += end - start;
        s.feed_back(&file.as_bytes()[start..end]);
    }
    assert_eq!(s.answer(), Some((file.len() - 100 * line.len()) as u64));
    assert!(read <= 32 * 1024, "read {read} bytes");
}

proptest::proptest! {
    #[test]
    fn matches_a_forward_read(
        lines in proptest::collection::vec((0u8..3, "[a-z]{0,20}"), 0..60),
        unterminated in proptest::bool::ANY,
        want in 0u64..70,
        chunk in 1usize..64,
    ) {
        let mut file: String = lines.iter().map(|(kind, text)| match kind {
            0 => format!("{T} stdout F {text}\n"),
            1 => format!("{T} stderr P {text}\n"),
            _ => format!("{text}\n"),
        }).collect();
        if unterminated && file.ends_with('\n') {
            file.pop();
        }
        proptest::prop_assert_eq!(scan(file.as_bytes(), want, chunk), forward(file.as_bytes(), want));
    }
}
