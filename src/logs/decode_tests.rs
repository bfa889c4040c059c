use super::*;

const T1: &str = "2026-12-01T00:00:01.000000001Z";
const T2: &str = "2026-12-01T00:00:02.5Z";

fn decode(opts: &LogOptions, since: Option<&str>, input: &str, chunk: usize) -> (String, u64) {
    let mut d = LogDecoder::new(opts, since.map(|s| s.parse().unwrap()));
    let mut out = Vec::new();
    for c in input.as_bytes().chunks(chunk.max(1)) {
        d.feed(c, &mut out);
    }
    d.finish(&mut out);
    (String::from_utf8(out).unwrap(), d.bad_lines())
}

fn log() -> String {
    format!(
        "{T1} stdout F one\n{T1} stderr P tw\n{T1} stderr P o\n{T2} stderr F  2\nnot a cri line\n{T2} stdout F three\n"
    )
}

#[test]
fn joins_partials_and_skips_bad_lines_at_any_cut() {
    for chunk in [1, 2, 3, 7, 64, 4096] {
        let (out, bad) = decode(&LogOptions::default(), None, &log(), chunk);
        assert_eq!(out, "one\ntwo 2\nthree\n", "chunk {chunk}");
        assert_eq!(bad, 1, "chunk {chunk}");
    }
}

#[test]
fn timestamps_once_per_line_in_the_kubelet_format() {
    let opts = LogOptions {
        timestamps: true,
        ..LogOptions::default()
    };
    let (out, _) = decode(&opts, None, &log(), 5);
    assert_eq!(
        out,
        "2026-12-01T00:00:01.000000001Z one\n\
         2026-12-01T00:00:01.000000001Z two 2\n\
         2026-12-01T00:00:02.500000000Z three\n"
    );
}

#[test]
fn since_keeps_lines_at_or_after_it() {
    let (out, _) = decode(&LogOptions::default(), Some(T2), &log(), 4096);
    assert_eq!(out, "three\n");
    let (out, _) = decode(&LogOptions::default(), Some(T1), &log(), 4096);
    assert_eq!(out, "one\ntwo 2\nthree\n");
}

#[test]
fn limit_bytes_cuts_exactly() {
    for limit in [1, 4, 5, 9, 100] {
        let opts = LogOptions {
            limit_bytes: Some(limit),
            ..LogOptions::default()
        };
        let (out, _) = decode(&opts, None, &log(), 3);
        let full = "one\ntwo 2\nthree\n";
        assert_eq!(
            out,
            &full[..full.len().min(limit as usize)],
            "limit {limit}"
        );
    }
}

#[test]
fn a_last_line_without_newline_counts_only_at_finish() {
    let mut d = LogDecoder::new(&LogOptions::default(), None);
    let mut out = Vec::new();
    d.feed(
        format!("{T1} stdout F a\n{T1} stdout F b").as_bytes(),
        &mut out,
    );
    assert_eq!(out, b"a\n");
    d.feed(b"c\n", &mut out);
    assert_eq!(out, b"a\nbc\n");
    d.feed(format!("{T1} stdout F d").as_bytes(), &mut out);
    d.drop_pending();
    d.finish(&mut out);
    assert_eq!(out, b"a\nbc\n");
    assert_eq!(d.bad_lines(), 1);
}

proptest::proptest! {
    /// Any cut of the input decodes to the same output.
    #[test]
    fn chunking_never_changes_the_output(
        lines in proptest::collection::vec((0u8..4, "[a-z ]{0,12}"), 0..30),
        chunk in 1usize..50,
    ) {
        let input: String = lines.iter().map(|(kind, text)| match kind {
            0 => format!("{T1} stdout F {text}\n"),
            1 => format!("{T2} stderr P {text}\n"),
            2 => format!("{T1} stdout F:x {text}\n"),
            _ => format!("{text}\n"),
        }).collect();
        let whole = decode(&LogOptions::default(), None, &input, input.len().max(1));
        let cut = decode(&LogOptions::default(), None, &input, chunk);
        proptest::prop_assert_eq!(whole, cut);
    }
}
