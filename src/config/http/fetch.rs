//! The HTTP adapter of the URL source: one conditional GET per poll, on
//! the hyper client and rustls connector the API client already brings
//! (no second HTTP stack in the binary).
//!
//! Invariant: a fetch never takes longer than its timeout, follows at most
//! [`MAX_REDIRECTS`] redirects and never holds more than [`MAX_BODY_BYTES`]
//! bytes of a body; a non-200 body is not read at all. TLS is rustls with
//! the ring provider, the platform's roots plus an optional CA bundle. A
//! redirect to another host drops the credentials headers (Authorization,
//! Cookie, WWW-Authenticate), as Go's client and the kubelet do.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    AUTHORIZATION, COOKIE, ETAG, HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED, LOCATION, USER_AGENT, WWW_AUTHENTICATE,
};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

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

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// GETs one URL.
#[derive(Debug, Clone)]
pub struct HttpFetcher {
    client: HttpsClient,
    url: url::Url,
    /// The URL as configured, for messages.
    text: String,
    headers: HeaderMap,
    timeout: Duration,
}

const USER_AGENT_VALUE: &str = concat!("crilet/", env!("CARGO_PKG_VERSION"));

/// An http or https URL, or why not.
fn http_url(text: &str) -> Result<url::Url, String> {
    let parsed = url::Url::parse(text).map_err(|e| e.to_string())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "scheme {:?} is not supported; use http or https",
            parsed.scheme()
        ));
    }
    Ok(parsed)
}

impl HttpFetcher {
    pub fn new(url: &str, options: &FetchOptions) -> Result<Self, FetchSetupError> {
        let parsed = http_url(url).map_err(|detail| FetchSetupError::Url {
            url: url.to_string(),
            detail,
        })?;
        let headers = header_map(&options.headers)?;
        let client_error = |detail: String| FetchSetupError::Client {
            url: url.to_string(),
            detail,
        };
        let mut roots = rustls::RootCertStore::empty();
        // Unreadable platform certificates are skipped, as Go does.
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(path) = &options.ca_file {
            for cert in read_ca_file(path)? {
                roots.add(cert).map_err(|e| FetchSetupError::CaFile {
                    path: path.display().to_string(),
                    detail: e.to_string(),
                })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| client_error(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(HttpFetcher {
            client,
            url: parsed,
            text: url.to_string(),
            headers,
            timeout: options.timeout,
        })
    }

    fn failed(&self, detail: String) -> UrlSourceError {
        UrlSourceError::Request {
            url: self.text.clone(),
            detail,
        }
    }

    fn error(&self, e: &hyper_util::client::legacy::Error) -> UrlSourceError {
        if e.is_connect() {
            self.failed(format!("cannot connect: {}", innermost(e)))
        } else {
            self.failed(chain(e))
        }
    }

    /// The response of the last hop, after at most MAX_REDIRECTS redirects.
    async fn get(
        &self,
        validators: &Validators,
    ) -> Result<http::Response<hyper::body::Incoming>, UrlSourceError> {
        let mut url = self.url.clone();
        let mut headers = self.headers.clone();
        headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        for (name, value) in [
            (IF_NONE_MATCH, &validators.etag),
            (IF_MODIFIED_SINCE, &validators.last_modified),
        ] {
            if let Some(v) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, v);
            }
        }
        for _ in 0..=MAX_REDIRECTS {
            let mut request = http::Request::get(url.as_str())
                .body(Empty::new())
                .map_err(|e| self.failed(e.to_string()))?;
            *request.headers_mut() = headers.clone();
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| self.error(&e))?;
            let status = response.status().as_u16();
            let location = response.headers().get(LOCATION).cloned();
            let (true, Some(location)) = (matches!(status, 301 | 302 | 303 | 307 | 308), location)
            else {
                return Ok(response);
            };
            let next = location
                .to_str()
                .map_err(|e| e.to_string())
                .and_then(|l| url.join(l).map_err(|e| e.to_string()))
                .and_then(|u| http_url(u.as_str()))
                .map_err(|e| self.failed(format!("redirect to a bad Location: {e}")))?;
            if (next.host_str(), next.port_or_known_default())
                != (url.host_str(), url.port_or_known_default())
            {
                for name in [AUTHORIZATION, COOKIE, WWW_AUTHENTICATE] {
                    headers.remove(name);
                }
            }
            url = next;
        }
        Err(self.failed(format!("more than {MAX_REDIRECTS} redirects (a loop?)")))
    }

    async fn fetch_once(&self, validators: &Validators) -> Result<Fetched, UrlSourceError> {
        let response = self.get(validators).await?;
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
        let length = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if length.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(too_large());
        }
        let mut incoming = response.into_body();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| self.failed(chain(&e)))?;
            if let Ok(chunk) = frame.into_data() {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
        }
        Ok(Fetched::Body {
            status,
            validators,
            body,
        })
    }
}

#[async_trait::async_trait]
impl Fetch for HttpFetcher {
    async fn fetch(&self, validators: &Validators) -> Result<Fetched, UrlSourceError> {
        match tokio::time::timeout(self.timeout, self.fetch_once(validators)).await {
            Ok(result) => result,
            Err(_) => Err(self.failed(format!("no complete answer within {:?}", self.timeout))),
        }
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

fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, FetchSetupError> {
    let bad = |detail: String| FetchSetupError::CaFile {
        path: path.display().to_string(),
        detail,
    };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
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
