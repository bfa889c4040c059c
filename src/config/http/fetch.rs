//! The reqwest adapter of the URL source: one conditional GET per poll.
//!
//! Invariant: a fetch never takes longer than its timeout, follows at most
//! [`MAX_REDIRECTS`] redirects and never holds more than [`MAX_BODY_BYTES`]
//! bytes of a body; a non-200 body is not read at all. TLS is rustls with
//! the ring provider, the platform's roots plus an optional CA bundle.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{
    ETAG, HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED,
};

use super::{
    FETCH_TIMEOUT, Fetch, Fetched, MAX_BODY_BYTES, MAX_REDIRECTS, UrlSourceError, Validators,
};

/// How the client is set up.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Extra request headers (`--manifest-url-header`), in order; a name may repeat.
    pub headers: Vec<(String, String)>,
    /// A PEM bundle of CAs trusted beyond the platform's roots.
    pub ca_file: Option<PathBuf>,
    pub timeout: Duration,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            headers: Vec::new(),
            ca_file: None,
            timeout: FETCH_TIMEOUT,
        }
    }
}

/// Why the URL source cannot start: the flag or file at fault is named.
#[derive(Debug, thiserror::Error)]
pub enum FetchSetupError {
    #[error("manifest URL {url:?}: {detail}")]
    Url { url: String, detail: String },
    #[error("manifest URL header {name:?}: {detail}")]
    Header { name: String, detail: String },
    #[error("manifest URL CA file {path}: {detail}")]
    CaFile { path: String, detail: String },
    #[error("manifest URL {url}: cannot build the HTTP client: {detail}")]
    Client { url: String, detail: String },
}

/// GETs one URL with reqwest.
#[derive(Debug, Clone)]
pub struct HttpFetcher {
    client: reqwest::Client,
    url: reqwest::Url,
    /// The URL as configured, for messages.
    text: String,
    headers: HeaderMap,
    timeout: Duration,
}

impl HttpFetcher {
    pub fn new(url: &str, options: &FetchOptions) -> Result<Self, FetchSetupError> {
        let bad_url = |detail: String| FetchSetupError::Url {
            url: url.to_string(),
            detail,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| bad_url(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad_url(format!(
                "scheme {:?} is not supported; use http or https",
                parsed.scheme()
            )));
        }
        let headers = header_map(&options.headers)?;
        // The process-wide provider; an error only means one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(options.timeout)
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .user_agent(concat!("crilet/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &options.ca_file {
            builder = builder.tls_certs_merge(read_ca_file(path)?);
        }
        let client = builder.build().map_err(|e| FetchSetupError::Client {
            url: url.to_string(),
            detail: chain(&e),
        })?;
        Ok(HttpFetcher {
            client,
            url: parsed,
            text: url.to_string(),
            headers,
            timeout: options.timeout,
        })
    }

    fn error(&self, e: &reqwest::Error) -> UrlSourceError {
        let detail = if e.is_timeout() {
            format!("no complete answer within {:?}", self.timeout)
        } else if e.is_redirect() {
            format!("more than {MAX_REDIRECTS} redirects (a loop?)")
        } else if e.is_connect() {
            format!("cannot connect: {}", innermost(e))
        } else {
            causes(e)
        };
        UrlSourceError::Request {
            url: self.text.clone(),
            detail,
        }
    }
}

#[async_trait::async_trait]
impl Fetch for HttpFetcher {
    async fn fetch(&self, validators: &Validators) -> Result<Fetched, UrlSourceError> {
        let mut request = self
            .client
            .get(self.url.clone())
            .headers(self.headers.clone());
        if let Some(etag) = &validators.etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        if let Some(since) = &validators.last_modified {
            request = request.header(IF_MODIFIED_SINCE, since);
        }
        let mut response = request.send().await.map_err(|e| self.error(&e))?;
        let status = response.status().as_u16();
        if status == 304 {
            return Ok(Fetched::NotModified);
        }
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(String::from)
        };
        let validators = Validators {
            etag: header(ETAG),
            last_modified: header(LAST_MODIFIED),
        };
        let mut body = Vec::new();
        if status != 200 {
            return Ok(Fetched::Body {
                status,
                validators,
                body,
            });
        }
        let too_large = || UrlSourceError::TooLarge {
            url: self.text.clone(),
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES as u64)
        {
            return Err(too_large());
        }
        while let Some(chunk) = response.chunk().await.map_err(|e| self.error(&e))? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched::Body {
            status,
            validators,
            body,
        })
    }
}

/// The headers of `--manifest-url-header`, checked once at start-up.
fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, FetchSetupError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let bad = |detail: String| FetchSetupError::Header {
            name: name.clone(),
            detail,
        };
        let key = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad("not a valid header name".into()))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| bad("the value holds characters a header cannot carry".into()))?;
        // Keep credentials out of debug output.
        value.set_sensitive(true);
        map.append(key, value);
    }
    Ok(map)
}

fn read_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, FetchSetupError> {
    let bad = |detail: String| FetchSetupError::CaFile {
        path: path.display().to_string(),
        detail,
    };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(chain(&e)))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The deepest cause: for a connection, the one that says why (refused,
/// no route, a certificate the roots do not vouch for).
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = e;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    deepest.to_string()
}

/// The causes of a reqwest error, whose own text only repeats the URL.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    match e.source() {
        Some(source) => chain(source),
        None => e.to_string(),
    }
}

/// An error and its causes on one line, without repeating a cause that its
/// parent's text already carries.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_errors_name_the_input() {
        let cases: [(&str, FetchOptions, &str); 5] = [
            ("not a url", FetchOptions::default(), "\"not a url\""),
            ("ftp://h/p", FetchOptions::default(), "scheme \"ftp\""),
            (
                "http://h/p",
                FetchOptions {
                    headers: vec![("bad name".into(), "v".into())],
                    ..FetchOptions::default()
                },
                "header \"bad name\"",
            ),
            (
                "http://h/p",
                FetchOptions {
                    headers: vec![("X-Token".into(), "a\nb".into())],
                    ..FetchOptions::default()
                },
                "header \"X-Token\"",
            ),
            (
                "http://h/p",
                FetchOptions {
                    ca_file: Some("/no/such/ca.pem".into()),
                    ..FetchOptions::default()
                },
                "CA file /no/such/ca.pem",
            ),
        ];
        for (url, options, want) in cases {
            let err = HttpFetcher::new(url, &options).unwrap_err().to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let options = FetchOptions {
            ca_file: Some(empty.clone()),
            ..FetchOptions::default()
        };
        let err = HttpFetcher::new("https://h/p", &options)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn repeated_header_names_are_all_sent() {
        let map = header_map(&[
            ("X-A".into(), "1".into()),
            ("X-A".into(), "2".into()),
            ("X-B".into(), "3".into()),
        ])
        .unwrap();
        let a: Vec<&str> = map
            .get_all("x-a")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(a, ["1", "2"]);
        assert!(map.get("x-b").unwrap().is_sensitive());
    }
}
