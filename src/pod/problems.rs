//! The vocabulary of manifest validation, shared by the parser
//! (`document`, `model`) and every `*_validation` file: a refusal
//! (`Invalid`), the list of them ([`Problems`]), the error a refused
//! manifest gets ([`ManifestError`]), and the name rules the API server
//! applies (DNS-1123 labels and subdomains, IANA service names).
//!
//! Invariant: pure; nothing here decides what is valid about a Pod, only
//! how a refusal is spelled and reported.

use std::fmt::Display;

use serde_json::Value;

/// A refusal: the field path and what is wrong with it.
pub(super) type Invalid = (String, String);

/// The refusals found so far, in field order.
pub type Problems = Vec<Invalid>;

/// Adds the problem of a check that answers with at most one.
pub(super) fn note(out: &mut Problems, check: Result<(), Invalid>) {
    if let Err(problem) = check {
        out.push(problem);
    }
}

/// Why a manifest was refused: where it came from, which field (Kubernetes
/// JSON path such as `spec.containers[0].image`) when one is to blame, and what
/// is wrong.
///
/// Validation reports every problem of a manifest: the first in `field` and
/// `message`, the others in `others`. Displayed, they are one line:
/// `origin: field: message; field: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {}", self.problems().map(|(f, m)| match f {
    Some(f) => format!("{f}: {m}"),
    None => m.to_owned(),
}).collect::<Vec<_>>().join("; "))]
pub struct ManifestError {
    pub origin: String,
    pub field: Option<String>,
    pub message: String,
    /// The manifest's other problems, after the first.
    pub others: Vec<Invalid>,
}

impl ManifestError {
    /// One problem of the manifest at `origin`.
    pub fn new(origin: &str, field: Option<String>, message: impl Display) -> Self {
        Self {
            origin: origin.to_owned(),
            field,
            message: message.to_string(),
            others: Vec::new(),
        }
    }

    /// All of `problems` as one error, or None when there are none.
    pub fn from_problems(origin: &str, problems: Problems) -> Option<Self> {
        let mut problems = problems.into_iter();
        let (field, message) = problems.next()?;
        Some(Self {
            others: problems.collect(),
            ..Self::new(origin, Some(field), message)
        })
    }

    /// Every problem, first included, as (field path if any, message).
    pub fn problems(&self) -> impl Iterator<Item = (Option<&str>, &str)> {
        let first = (self.field.as_deref(), self.message.as_str());
        let others = self
            .others
            .iter()
            .map(|(f, m)| (Some(f.as_str()), m.as_str()));
        std::iter::once(first).chain(others)
    }

    /// Re-roots the field paths under `prefix` (an item of a PodList).
    pub(super) fn within(mut self, prefix: &str) -> Self {
        self.field = Some(match self.field.take() {
            Some(f) => format!("{prefix}.{f}"),
            None => prefix.to_owned(),
        });
        for (f, _) in &mut self.others {
            *f = format!("{prefix}.{f}");
        }
        self
    }
}

pub(super) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// RFC 1123 label: 1..=63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub(super) fn dns1123_label_problem(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1]);
    (!ok).then(|| {
        format!(
            "{s:?} is not a DNS-1123 label (at most 63 lowercase letters, digits or '-', \
             starting and ending with a letter or digit)"
        )
    })
}

/// RFC 1123 subdomain: at most 253 characters of dot-separated labels.
pub(super) fn dns1123_subdomain_problem(s: &str) -> Option<String> {
    let ok = s.len() <= 253
        && s.split('.')
            .all(|part| dns1123_label_problem(part).is_none());
    (!ok).then(|| {
        format!(
            "{s:?} is not a DNS-1123 subdomain (at most 253 characters: lowercase letters, \
             digits, '-' and '.', each part starting and ending with a letter or digit)"
        )
    })
}

/// IANA service name, the API server's rule for port names: 1..=15 of
/// `[a-z0-9-]`, at least one letter, no leading, trailing or doubled '-'.
pub(super) fn iana_svc_name_problem(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = b.len() <= 15
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--");
    (!ok).then(|| {
        format!(
            "{s:?} is not a valid port name (at most 15 lowercase letters, digits or '-', \
             with a letter, no leading, trailing or doubled '-')"
        )
    })
}

/// The API server's `IsValidIP` for fields parsed the legacy way (host
/// aliases): an IPv4 or IPv6 address, IPv4 parts allowed leading zeros
/// ("010.1.2.3" is 10.1.2.3 to the API server, and accepted); no zone, no
/// spaces.
pub(super) fn ip_address_problem(s: &str) -> Option<&'static str> {
    let valid = match s.rsplit_once(':') {
        None => legacy_ipv4(s).is_some(),
        // IPv6, its last group possibly a dotted IPv4 with leading zeros.
        Some((head, tail)) if tail.contains('.') => legacy_ipv4(tail)
            .is_some_and(|v4| format!("{head}:{v4}").parse::<std::net::Ipv6Addr>().is_ok()),
        Some(_) => s.parse::<std::net::Ipv6Addr>().is_ok(),
    };
    (!valid).then_some("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
}

/// Four dot-separated decimal parts of at most 255 each.
fn legacy_ipv4(s: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    let [a, b, c, d] = parts[..] else {
        return None;
    };
    let octet = |p: &str| -> Option<u8> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = p.trim_start_matches('0');
        match digits {
            "" => Some(0),
            d if d.len() > 3 => None,
            d => d.parse().ok(),
        }
    };
    Some(std::net::Ipv4Addr::new(
        octet(a)?,
        octet(b)?,
        octet(c)?,
        octet(d)?,
    ))
}
