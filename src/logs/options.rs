//! v1 `PodLogOptions` from a `/containerLogs` query, as the kubelet decodes
//! and validates them (`server.go` getContainerLogs,
//! `validation.ValidatePodLogOptions`). Invariant: a `LogOptions` that
//! came out of [`LogOptions::from_query`] is valid: counts are positive,
//! at most one of `sinceSeconds` and `sinceTime` is set.

use jiff::Timestamp;

/// What a log request asks for (v1 `PodLogOptions`, less `container`,
/// which the path carries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<Timestamp>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
}

/// Why a query was refused. `Decode` answers 400 (the kubelet's "Unable to
/// decode query."), `Invalid` 422 (its "Invalid request."); both name the
/// parameter, where the kubelet's own text does not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogOptionsError {
    #[error("unable to decode query: {0}")]
    Decode(String),
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl LogOptions {
    /// Decodes a raw query string (`a=1&b=2`, percent-encoded), then
    /// validates it. Unknown parameters are ignored, as Go's parameter
    /// codec ignores them; a repeated one takes its first value. `tail` is
    /// the legacy name of `tailLines`, and `tail=all` means no limit.
    pub fn from_query(query: &str) -> Result<LogOptions, LogOptionsError> {
        let mut o = LogOptions::default();
        let mut seen = std::collections::HashSet::new();
        let mut tail_legacy: Option<String> = None;
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            if !seen.insert(key.to_string()) {
                continue;
            }
            let v = value.as_ref();
            match key.as_ref() {
                "follow" => o.follow = parse_bool("follow", v)?,
                "previous" => o.previous = parse_bool("previous", v)?,
                "timestamps" => o.timestamps = parse_bool("timestamps", v)?,
                "sinceSeconds" => o.since_seconds = parse_int("sinceSeconds", v)?,
                "sinceTime" => o.since_time = parse_time("sinceTime", v)?,
                "tailLines" => o.tail_lines = parse_int("tailLines", v)?,
                "limitBytes" => o.limit_bytes = parse_int("limitBytes", v)?,
                "tail" => tail_legacy = Some(v.to_string()),
                _ => {}
            }
        }
        if let Some(tail) = tail_legacy.filter(|t| !t.is_empty()) {
            o.tail_lines = if tail == "all" {
                None
            } else {
                parse_int("tail", &tail)?
            };
        }
        o.validate()?;
        Ok(o)
    }

    /// The kubelet's `ValidatePodLogOptions`.
    pub fn validate(&self) -> Result<(), LogOptionsError> {
        let invalid = |m: &str| Err(LogOptionsError::Invalid(m.to_string()));
        if self.tail_lines.is_some_and(|n| n < 0) {
            return invalid("tailLines must be greater than or equal to 0");
        }
        if self.limit_bytes.is_some_and(|n| n < 1) {
            return invalid("limitBytes must be greater than 0");
        }
        if self.since_seconds.is_some_and(|n| n < 1) {
            return invalid("sinceSeconds must be greater than 0");
        }
        if self.since_seconds.is_some() && self.since_time.is_some() {
            return invalid("at most one of sinceTime or sinceSeconds may be specified");
        }
        Ok(())
    }

    /// The earliest timestamp a line may carry, if the request limits it.
    pub fn since(&self, now: Timestamp) -> Option<Timestamp> {
        if let Some(t) = self.since_time {
            return Some(t);
        }
        let secs = self.since_seconds?;
        Some(
            now.checked_sub(jiff::SignedDuration::from_secs(secs))
                .unwrap_or(Timestamp::MIN),
        )
    }
}

/// Go's `strconv.ParseBool`; an empty value (`follow=`) is false, as the
/// parameter codec leaves the field unset.
fn parse_bool(name: &str, v: &str) -> Result<bool, LogOptionsError> {
    match v {
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        _ => Err(LogOptionsError::Decode(format!(
            "{name}={v:?} is not a boolean"
        ))),
    }
}

fn parse_int(name: &str, v: &str) -> Result<Option<i64>, LogOptionsError> {
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<i64>()
        .map(Some)
        .map_err(|_| LogOptionsError::Decode(format!("{name}={v:?} is not an integer")))
}

fn parse_time(name: &str, v: &str) -> Result<Option<Timestamp>, LogOptionsError> {
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<Timestamp>()
        .map(Some)
        .map_err(|_| LogOptionsError::Decode(format!("{name}={v:?} is not an RFC 3339 time")))
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
