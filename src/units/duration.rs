//! Durations written as the kubelet's flags take them: Go's
//! `time.ParseDuration` syntax ("2m", "1m30s", "500ms", "1h"), and printed
//! as Go's `Duration.String()` prints them (the kubelet's event messages).

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

/// Prints `d` as Go's `time.Duration.String()` does: "0s", "750ms",
/// "1.5µs", "2.034s", "1m30s", "1h0m0s" (fractions without trailing zeros).
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let secs = nanos / 1_000_000_000;
    let (h, m) = (secs / 3600, secs / 60 % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    let rest = nanos - (secs - secs % 60) * 1_000_000_000;
    out.push_str(&decimal(rest, 1_000_000_000));
    out.push('s');
    out
}

/// `value / scale` with the fraction's trailing zeros left out; `scale` is
/// a power of ten.
fn decimal(value: u128, scale: u128) -> String {
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
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
    fn prints_as_go_does() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(523), "523ms"),
            (Duration::from_micros(1_250), "1.25ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(2_034), "2.034s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_millis(61_500), "1m1.5s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(3_723_004), "1h2m3.004s"),
            (Duration::from_secs(90_000), "25h0m0s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
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
