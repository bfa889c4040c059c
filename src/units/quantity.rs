//! Resource quantities ("100m", "0.5", "128Mi", "1G", "1e3") parsed exactly.
//!
//! Invariant: parsing never panics; every input gives a [`Quantity`] or a
//! reason. Conversions round up away from zero, as `Quantity.Value()` and
//! `Quantity.MilliValue()` do in Kubernetes, so "0.1m" of CPU is 1 millicore.
//!
//! [`format_value`] and [`format_milli_value`] print whole and milli amounts
//! as apimachinery's `Quantity.String()` prints `NewQuantity` and
//! `NewMilliQuantity` (staging/src/k8s.io/apimachinery/pkg/api/resource:
//! `CanonicalizeBytes`, `AsCanonicalBytes`, `AsCanonicalBase1024Bytes`), so a
//! node's capacity reads as the kubelet's does: `2`, `24605048Ki`, `1500m`.

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

/// How a quantity prints, as apimachinery's `resource.Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Powers of ten: `m`, `k`, `M`, `G` (cpu, pods).
    DecimalSi,
    /// Powers of 1024: `Ki`, `Mi`, `Gi` (memory, storage, hugepages).
    BinarySi,
}

/// `resource.NewQuantity(value, format).String()`.
///
/// A binary amount under 1024 in magnitude prints in decimal, as Go does
/// ("to avoid confusion"): 1000 bytes is `1k`, 2000 bytes is `2000`.
pub fn format_value(value: i64, format: Format) -> String {
    match format {
        Format::BinarySi if value.unsigned_abs() >= 1024 => format_binary(value),
        _ => format_decimal(i128::from(value), 0),
    }
}

/// `resource.NewMilliQuantity(milli, format).String()`: `2000` is `2`,
/// `1500` is `1500m`. A binary amount that is not whole prints in decimal.
pub fn format_milli_value(milli: i64, format: Format) -> String {
    if format == Format::BinarySi && milli % 1000 == 0 {
        return format_value(milli / 1000, format);
    }
    format_decimal(i128::from(milli), -3)
}

/// `Quantity.String()` of `text` once parsed: its canonical form in the
/// format its suffix picks, as the API server compares it with fixed lists
/// (a `resourceFieldRef` divisor's): `1000m` is `1`, `1024Ki` is `1Mi`,
/// `1024` stays `1024`, `1000e0` is `1e3`. A binary amount that is not a
/// whole number of at least 1024 prints in decimal, as Go does; precision
/// finer than a nano is rounded up to it, as Go's parse rounds.
pub fn canonical(text: &str) -> Result<String, String> {
    let q = parse(text)?;
    let unsigned = text.trim_start_matches(['+', '-']);
    let number_len = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let suffix = &unsigned[number_len..];
    if q.significand == 0 {
        return Ok("0".into());
    }
    if suffix.ends_with('i') {
        if let Some(v) = q.exact_value().filter(|v| v.unsigned_abs() >= 1024) {
            return Ok(format_binary(v));
        }
    }
    let too_large = || format!("{text:?} is too large to print");
    let mut magnitude = (q.significand)
        .checked_mul(1u128.checked_shl(q.exp2).ok_or_else(too_large)?)
        .ok_or_else(too_large)?;
    let mut exp10 = q.exp10;
    if exp10 < -9 {
        magnitude = match 10u128.checked_pow((-9 - exp10) as u32) {
            Some(divisor) => magnitude.div_ceil(divisor),
            None => 1,
        };
        exp10 = -9;
    }
    let mantissa = i128::try_from(magnitude).map_err(|_| too_large())?;
    let mantissa = if q.negative { -mantissa } else { mantissa };
    let exp10 = i32::try_from(exp10).map_err(|_| too_large())?;
    // `E` alone is exa, a decimal suffix; `e3`/`E3` is an exponent.
    Ok(if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
        format_exponent(mantissa, exp10)
    } else {
        format_decimal(mantissa, exp10)
    })
}

/// `mantissa × 10^exp10` in apimachinery's `DecimalExponent` form: the
/// exponent a multiple of three, written `e3`, none for `e0`.
fn format_exponent(mantissa: i128, exp10: i32) -> String {
    let (m, e) = normalize(mantissa, exp10);
    if e == 0 {
        format!("{m}")
    } else {
        format!("{m}e{e}")
    }
}

/// Trailing zeros into the exponent, then the exponent lowered to a
/// multiple of three.
fn normalize(mantissa: i128, exp10: i32) -> (i128, i32) {
    let (mut m, mut e) = (mantissa, exp10);
    while m != 0 && m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    let down = e.rem_euclid(3);
    (m * 10i128.pow(down as u32), e - down)
}

/// `mantissa × 10^exp10` with the exponent lowered to a multiple of three
/// and its SI suffix (`AsCanonicalBytes` + `constructBytes`).
fn format_decimal(mantissa: i128, exp10: i32) -> String {
    if mantissa == 0 {
        return "0".into();
    }
    let (m, e) = normalize(mantissa, exp10);
    let suffix = match e {
        -9 => "n".to_string(),
        -6 => "u".into(),
        -3 => "m".into(),
        0 => String::new(),
        3 => "k".into(),
        6 => "M".into(),
        9 => "G".into(),
        12 => "T".into(),
        15 => "P".into(),
        18 => "E".into(),
        other => format!("e{other}"),
    };
    format!("{m}{suffix}")
}

/// Whole bytes with every factor of 1024 moved into the suffix
/// (`AsCanonicalBase1024Bytes`).
fn format_binary(value: i64) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut m = i128::from(value);
    let mut exponent = 0;
    while m % 1024 == 0 && exponent < SUFFIXES.len() - 1 {
        m /= 1024;
        exponent += 1;
    }
    format!("{m}{}", SUFFIXES[exponent])
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

    #[test]
    fn formats_as_apimachinery_prints() {
        let rows: &[(i64, Format, &str)] = &[
            (0, Format::BinarySi, "0"),
            (0, Format::DecimalSi, "0"),
            (110, Format::DecimalSi, "110"),
            (1000, Format::DecimalSi, "1k"),
            (1500, Format::DecimalSi, "1500"),
            (25_000, Format::DecimalSi, "25k"),
            (1000, Format::BinarySi, "1k"),
            (1023, Format::BinarySi, "1023"),
            (1024, Format::BinarySi, "1Ki"),
            (2000, Format::BinarySi, "2000"),
            (25_195_569_152, Format::BinarySi, "24605048Ki"),
            (104_857_600, Format::BinarySi, "100Mi"),
            (2_097_152, Format::BinarySi, "2Mi"),
            (1 << 30, Format::BinarySi, "1Gi"),
            (94_580_335_255, Format::BinarySi, "94580335255"),
            (-2048, Format::BinarySi, "-2Ki"),
            (-5, Format::DecimalSi, "-5"),
            (i64::MAX, Format::DecimalSi, "9223372036854775807"),
            (1 << 62, Format::BinarySi, "4Ei"),
        ];
        for &(value, format, want) in rows {
            assert_eq!(format_value(value, format), want, "{value} {format:?}");
        }
        let milli: &[(i64, Format, &str)] = &[
            (2000, Format::DecimalSi, "2"),
            (1500, Format::DecimalSi, "1500m"),
            (100, Format::DecimalSi, "100m"),
            (0, Format::DecimalSi, "0"),
            (64_000, Format::DecimalSi, "64"),
            (1_000_000, Format::DecimalSi, "1k"),
            (2_048_000, Format::BinarySi, "2Ki"),
            (1500, Format::BinarySi, "1500m"),
        ];
        for &(value, format, want) in milli {
            assert_eq!(
                format_milli_value(value, format),
                want,
                "{value}m {format:?}"
            );
        }
    }

    #[test]
    fn canonical_forms_are_apimachinery_strings() {
        let rows: &[(&str, &str)] = &[
            ("1", "1"),
            ("1000m", "1"),
            ("0.001", "1m"),
            ("1m", "1m"),
            ("0.5m", "500u"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1024", "1024"),
            ("1Ki", "1Ki"),
            ("1024Ki", "1Mi"),
            ("0.5Ki", "512"),
            ("1.5Ki", "1536"),
            ("1500Ki", "1500Ki"),
            ("1Mi", "1Mi"),
            ("1e3", "1e3"),
            ("1000e0", "1e3"),
            ("1e0", "1"),
            ("1E", "1E"),
            ("0", "0"),
            ("0Mi", "0"),
            ("-1", "-1"),
            ("+1Gi", "1Gi"),
            ("1e-12", "1e-9"),
            ("0.0000000001", "1n"),
            ("2", "2"),
            ("1.0", "1"),
        ];
        for &(text, want) in rows {
            assert_eq!(canonical(text).as_deref(), Ok(want), "{text}");
        }
        assert!(canonical("1x").is_err());
        assert!(canonical("").is_err());
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
        fn formatted_values_parse_back(v in (i64::MIN + 1)..=i64::MAX, binary in any::<bool>()) {
            let format = if binary { Format::BinarySi } else { Format::DecimalSi };
            let q = parse(&format_value(v, format)).unwrap();
            prop_assert_eq!(q.exact_value(), Some(v));
        }

        #[test]
        fn formatted_milli_values_parse_back(m in -(1i64 << 53)..(1i64 << 53)) {
            let q = parse(&format_milli_value(m, Format::DecimalSi)).unwrap();
            prop_assert_eq!(q.milli_value(), Some(m));
        }

        #[test]
        fn milli_suffix_round_trips(m in 0i64..1_000_000_000) {
            prop_assert_eq!(parse(&format!("{m}m")).unwrap().milli_value(), Some(m));
        }
    }
}
