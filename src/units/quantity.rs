//! Resource quantities ("100m", "0.5", "128Mi", "1G", "1e3") parsed exactly.
//!
//! Invariant: parsing never panics; every input gives a [`Quantity`] or a
//! reason. Conversions round up away from zero, as `Quantity.Value()` and
//! `Quantity.MilliValue()` do in Kubernetes, so "0.1m" of CPU is 1 millicore.

/// A parsed quantity: `±significand × 10^exp10 × 2^exp2`, without rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    significand: u128,
    exp10: i64,
    exp2: u32,
}

/// More significant digits than a u128 holds exactly.
const MAX_DIGITS: usize = 38;
/// Exponents beyond this are refused rather than computed.
const MAX_EXPONENT: i64 = 1_000;

/// Parses `<sign><digits>[.<digits>]<suffix>`, where the suffix is a binary
/// (Ki..Ei), decimal (n, u, m, "", k, M..E) or exponent (e3, E-2) suffix.
pub fn parse(text: &str) -> Result<Quantity, String> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return Err("more than one decimal point".into());
    }
    if whole.is_empty() && fraction.is_empty() {
        return Err("no digits".into());
    }
    let (exp10, exp2) = suffix_exponents(suffix)?;

    // Keep only significant digits; trailing zeros move into the exponent.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    let trailing_zeros = (digits.len() - significant.len()) as i64;
    if significant.len() > MAX_DIGITS {
        return Err(format!("more than {MAX_DIGITS} significant digits"));
    }
    let significand = significant
        .bytes()
        .fold(0u128, |acc, d| acc * 10 + u128::from(d - b'0'));
    let exp10 = exp10 + trailing_zeros - fraction.len() as i64;
    if significand != 0 && exp10.abs() > MAX_EXPONENT {
        return Err("exponent out of range".into());
    }
    Ok(Quantity {
        negative,
        significand,
        exp10,
        exp2,
    })
}

fn suffix_exponents(suffix: &str) -> Result<(i64, u32), String> {
    let decimal = |e| Ok((e, 0));
    let binary = |e| Ok((0, e));
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(format!("bad exponent {s:?}"));
            }
            exp.parse()
                .map(|e| (e, 0))
                .map_err(|e| format!("bad exponent {s:?}: {e}"))
        }
        s => Err(format!("unknown suffix {s:?}")),
    }
}

impl Quantity {
    pub fn is_negative(&self) -> bool {
        self.negative && self.significand != 0
    }

    /// The value in whole units (bytes, cores), rounded up; `None` if it
    /// does not fit an i64.
    pub fn value(&self) -> Option<i64> {
        self.scaled(0)
    }

    /// The value in thousandths (millicores), rounded up; `None` if it does
    /// not fit an i64.
    pub fn milli_value(&self) -> Option<i64> {
        self.scaled(3)
    }

    /// The value in whole units when it is a whole number exactly ("1.5"
    /// and "100m" are not) that fits an i64, as `Quantity.AsInt64()`: for
    /// sizes that must not be rounded, such as `containerLogMaxSize`.
    pub fn exact_value(&self) -> Option<i64> {
        if self.significand != 0 && self.exp10 < 0 {
            let divisor = 10u128.checked_pow(u32::try_from(-self.exp10).ok()?)?;
            let base = self
                .significand
                .checked_mul(1u128.checked_shl(self.exp2)?)?;
            if base % divisor != 0 {
                return None;
            }
        }
        self.value()
    }

    fn scaled(&self, scale: i64) -> Option<i64> {
        let base = self
            .significand
            .checked_mul(1u128.checked_shl(self.exp2)?)?;
        let exp = self.exp10 + scale;
        let magnitude = if exp >= 0 {
            base.checked_mul(10u128.checked_pow(u32::try_from(exp).ok()?)?)?
        } else {
            match 10u128.checked_pow(u32::try_from(-exp).ok()?) {
                Some(divisor) => base.div_ceil(divisor),
                // Smaller than one unit but not zero: rounds up to one.
                None => u128::from(base != 0),
            }
        };
        let magnitude = i64::try_from(magnitude).ok()?;
        Some(if self.negative { -magnitude } else { magnitude })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kubernetes_forms() {
        // (text, value(), milli_value())
        let rows: &[(&str, Option<i64>, Option<i64>)] = &[
            ("1", Some(1), Some(1000)),
            ("0", Some(0), Some(0)),
            ("100m", Some(1), Some(100)),
            ("0.5", Some(1), Some(500)),
            ("1.5", Some(2), Some(1500)),
            (".25", Some(1), Some(250)),
            ("2.", Some(2), Some(2000)),
            ("0.1m", Some(1), Some(1)),
            ("250000u", Some(1), Some(250)),
            ("5n", Some(1), Some(1)),
            ("1k", Some(1000), Some(1_000_000)),
            ("1Ki", Some(1024), Some(1_024_000)),
            ("128Mi", Some(134_217_728), Some(134_217_728_000)),
            ("1.5Gi", Some(1_610_612_736), Some(1_610_612_736_000)),
            ("1G", Some(1_000_000_000), Some(1_000_000_000_000)),
            ("1e3", Some(1000), Some(1_000_000)),
            ("1E3", Some(1000), Some(1_000_000)),
            ("12e-1", Some(2), Some(1200)),
            ("1E", Some(1_000_000_000_000_000_000), None),
            ("1Ei", Some(1 << 60), None),
            ("8Ei", None, None),
            ("+3", Some(3), Some(3000)),
            ("-100m", Some(-1), Some(-100)),
            ("000120000", Some(120_000), Some(120_000_000)),
            ("1e-900", Some(1), Some(1)),
        ];
        for &(text, value, milli) in rows {
            let q = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!((q.value(), q.milli_value()), (value, milli), "{text}");
        }
        assert!(parse("-1").unwrap().is_negative());
        assert!(!parse("-0").unwrap().is_negative());
    }

    #[test]
    fn exact_value_refuses_fractions() {
        let rows: &[(&str, Option<i64>)] = &[
            ("10Mi", Some(10 << 20)),
            ("1.5Gi", Some(1_610_612_736)),
            ("1.5", None),
            ("100m", None),
            ("1000m", Some(1)),
            ("12e-1", None),
            ("120e-1", Some(12)),
            ("1e-900", None),
            ("0.0", Some(0)),
            ("-1", Some(-1)),
            ("-1.5Ki", Some(-1536)),
            ("8Ei", None),
        ];
        for &(text, want) in rows {
            assert_eq!(parse(text).unwrap().exact_value(), want, "{text}");
        }
    }

    #[test]
    fn refuses_malformed() {
        for text in [
            "",
            "-",
            ".",
            "1..2",
            "1.2.3",
            "abc",
            "1x",
            "1 Mi",
            " 1",
            "1mi",
            "1e",
            "1e+",
            "1KiB",
            "1e1.5",
            "1e9999999",
            "1e2000",
            "123456789012345678901234567890123456789",
        ] {
            assert!(parse(text).is_err(), "{text:?} should be refused");
        }
    }

    proptest! {
        #[test]
        fn parsing_never_panics(text in "[-+]?[0-9.]{0,45}([a-zA-Z][a-z0-9+-]{0,8})?") {
            if let Ok(q) = parse(&text) {
                let _ = (q.value(), q.milli_value(), q.is_negative());
            }
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,40}") {
            let _ = parse(&text).map(|q| q.milli_value());
        }

        #[test]
        fn milli_suffix_round_trips(m in 0i64..1_000_000_000) {
            prop_assert_eq!(parse(&format!("{m}m")).unwrap().milli_value(), Some(m));
        }
    }
}
