//! The `--manifest-url` source as `crilet run` builds it: the settings
//! turned into a [`UrlSource`], and the URL's trust checked first.
//!
//! Invariant: with `--manifest-trust=strict`, an untrusted URL (plain http
//! from a host other than loopback) stops crilet before anything starts;
//! otherwise it is one warning.

use crate::agent::config::Settings;
use crate::config::http::{UrlSource, UrlSourceConfig, fetch::FetchOptions};
use crate::config::trust::{ManifestTrust, url_reasons};

/// The `--manifest-url` source, checked before anything starts.
pub fn manifest_url_source(
    settings: &Settings,
    node_name: &str,
) -> anyhow::Result<Option<UrlSource>> {
    let Some(url) = &settings.manifest_url else {
        return Ok(None);
    };
    let reasons = url_reasons(url);
    if !reasons.is_empty() {
        if settings.manifest_trust == ManifestTrust::Strict {
            anyhow::bail!(
                "--manifest-url {url}: untrusted: {}; refused (--manifest-trust=strict)",
                reasons.join("; ")
            );
        }
        tracing::warn!(%url, reason = %reasons.join("; "),
            "the manifest URL is untrusted (see --manifest-trust)");
    }
    let config = UrlSourceConfig {
        url: url.clone(),
        check_frequency: settings.http_check_frequency,
        node_name: node_name.to_string(),
    };
    let options = FetchOptions {
        headers: settings.manifest_url_headers.clone(),
        ca_file: settings.manifest_url_ca_file.clone(),
        ..FetchOptions::default()
    };
    Ok(Some(UrlSource::new(config, &options)?))
}
