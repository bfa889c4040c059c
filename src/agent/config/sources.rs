//! Pod-source settings: the static pod manifest path and the manifest URL
//! (headers, poll period, CA file). Invariant: flag over file over default;
//! `--manifest-url-header` flags replace the file's headers, never merge.

use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigError, ConfigFile, RunArgs, file_duration};

pub const DEFAULT_FILE_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
pub const DEFAULT_HTTP_CHECK_FREQUENCY: Duration =
    crate::config::http::DEFAULT_HTTP_CHECK_FREQUENCY;

/// The resolved source fields of `Settings`.
pub(super) struct SourceSettings {
    pub pod_manifest_path: Option<PathBuf>,
    pub file_check_frequency: Duration,
    pub manifest_url: Option<String>,
    pub manifest_url_headers: Vec<(String, String)>,
    pub http_check_frequency: Duration,
    pub manifest_url_ca_file: Option<PathBuf>,
}

/// Flags over file over defaults; a bad file duration names its field.
pub(super) fn resolve_sources(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<SourceSettings, ConfigError> {
    let file_check = file_duration(
        origin,
        "fileCheckFrequency",
        file.file_check_frequency.as_deref(),
    )?;
    let http_check = file_duration(
        origin,
        "httpCheckFrequency",
        file.http_check_frequency.as_deref(),
    )?;
    Ok(SourceSettings {
        pod_manifest_path: args
            .pod_manifest_path
            .clone()
            .or_else(|| file.static_pod_path.clone()),
        file_check_frequency: args
            .file_check_frequency
            .or(file_check)
            .unwrap_or(DEFAULT_FILE_CHECK_FREQUENCY),
        manifest_url: args
            .manifest_url
            .clone()
            .or_else(|| file.static_pod_url.clone()),
        manifest_url_headers: url_headers(args, file),
        http_check_frequency: args
            .http_check_frequency
            .or(http_check)
            .unwrap_or(DEFAULT_HTTP_CHECK_FREQUENCY),
        manifest_url_ca_file: args.manifest_url_ca_file.clone(),
    })
}

/// `--manifest-url-header` flags replace the file's `staticPodURLHeader`.
fn url_headers(args: &RunArgs, file: &ConfigFile) -> Vec<(String, String)> {
    if !args.manifest_url_header.is_empty() {
        return args.manifest_url_header.clone();
    }
    let map = file.static_pod_url_header.iter().flatten();
    map.flat_map(|(name, values)| values.iter().map(|v| (name.clone(), v.clone())))
        .collect()
}

/// Parses `--manifest-url-header 'Name: value'`: split at the first colon,
/// so a value may hold colons and commas.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!("{text:?} is not 'Name: value'"));
    };
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("{text:?}: the header name {name:?} is not valid"));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[cfg(test)]
#[path = "sources_tests.rs"]
mod tests;
