//! Durations written as the kubelet's flags take them: Go's
//! `time.ParseDuration` syntax ("2m", "1m30s", "500ms", "1h").

use std::time::Duration;

/// Parses a Go-style duration. Negative durations are refused: no crilet
/// flag has a use for them.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(format!("duration {text:?} is negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("duration {text:?}: expected a number at {rest:?}"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("duration {text:?}: bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("duration {text:?}: missing unit (e.g. 10s, 2m)")),
            u => return Err(format!("duration {text:?}: unknown unit {u:?}")),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("duration {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("0", 0),
            ("10s", 10_000),
            ("2m", 120_000),
            ("1m30s", 90_000),
            ("500ms", 500),
            ("1h", 3_600_000),
            ("1.5s", 1_500),
            ("2m0s", 120_000),
        ];
        for (text, ms) in cases {
            assert_eq!(
                parse_duration(text).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_bad_durations() {
        for (text, want) in [
            ("", "empty"),
            ("10", "missing unit"),
            ("-5s", "negative"),
            ("5d", "unknown unit \"d\""),
            ("s", "expected a number"),
            ("1..2s", "bad number"),
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
