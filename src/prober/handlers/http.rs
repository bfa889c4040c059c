//! HTTP GET for httpGet probes and lifecycle hooks, built and sent as the
//! kubelet's `pkg/probe/http` does (Go's client with keep-alives,
//! compression and proxies off, `InsecureSkipVerify`).
//!
//! Invariants: one request per connection (`Connection: close`, nothing
//! pooled, the socket closed when the call returns or is dropped); no
//! proxy; no compression; HTTP/1.1; certificates never verified (tls.rs);
//! at most [`MAX_OUTPUT_BYTES`] of a body read; redirects followed only
//! while the hostname stays that of the first request, and a chain stops
//! after 10 requests.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper::header::{
    ACCEPT, CONNECTION, HOST, HeaderMap, HeaderName, HeaderValue, LOCATION, USER_AGENT,
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use url::{Host, Position, Url};

use super::{
    HttpGetTarget, MAX_OUTPUT_BYTES, ProbeOutcome, Scheme, error_chain, go_dial_error,
    join_host_port, tls,
};

/// The kubelet's `kube-probe/<major>.<minor>`, for the version we follow.
pub const PROBE_USER_AGENT: &str = "kube-probe/1.32";
/// The same for lifecycle hooks.
pub const HOOK_USER_AGENT: &str = "kube-lifecycle/1.32";
/// Go's default redirect check: at most this many requests in a chain.
const MAX_REQUESTS: usize = 10;

/// Sends httpGet requests with one User-Agent. Cheap to clone; every
/// client shares one TLS config.
#[derive(Clone)]
pub struct HttpGetClient {
    user_agent: HeaderValue,
    tls: TlsConnector,
}

/// The last response of a redirect chain.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: u16,
    location: Option<HeaderValue>,
    /// At most [`MAX_OUTPUT_BYTES`].
    pub body: Vec<u8>,
}

/// httpGet probe: 200–399 → Success with the body (10 KiB at most); a 3xx
/// left unfollowed (another host, or no Location) → Warning; other codes →
/// Failure "HTTP probe failed with statuscode: N"; a transport error or no
/// complete answer within `timeout` (redirects and body included) →
/// Failure with the error.
pub async fn http_probe(
    client: &HttpGetClient,
    target: &HttpGetTarget,
    timeout: Duration,
) -> ProbeOutcome {
    let answer = match tokio::time::timeout(timeout, client.get(target)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return ProbeOutcome::Failure(e),
        Err(_) => {
            let url = target_url(target).map(String::from).unwrap_or_default();
            return ProbeOutcome::Failure(format!(
                "Get {url:?}: timed out after {timeout:?} (Client.Timeout exceeded)"
            ));
        }
    };
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    match answer.status {
        200..=299 => ProbeOutcome::Success(body),
        300..=399 => {
            ProbeOutcome::Warning(format!("Probe terminated redirects, Response body: {body}"))
        }
        code => ProbeOutcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
    }
}

/// httpGet hook: any answer, whatever its status, is a success (the
/// kubelet ignores it, kubernetes/kubernetes#56963); only a transport
/// error fails. No timeout of its own: the caller bounds it.
pub async fn http_hook(client: &HttpGetClient, target: &HttpGetTarget) -> Result<(), String> {
    client.get(target).await.map(|_| ())
}

impl HttpGetClient {
    /// A client sending `user_agent` unless the target's headers set one
    /// ([`PROBE_USER_AGENT`] or [`HOOK_USER_AGENT`]).
    pub fn new(user_agent: &'static str) -> Self {
        HttpGetClient {
            user_agent: HeaderValue::from_static(user_agent),
            tls: TlsConnector::from(tls::insecure_client_config()),
        }
    }

    /// GETs the target, following same-host redirects. `Err` is one line
    /// naming the URL, as Go's `*url.Error` does.
    pub(super) async fn get(&self, target: &HttpGetTarget) -> Result<Answer, String> {
        let mut url = target_url(target)?;
        let (headers, mut host_override) = request_headers(&target.headers, &self.user_agent)?;
        let first_hostname = url.host_str().unwrap_or_default().to_string();
        // Go's formatURL keeps the port even when it is the default one.
        let mut authority = join_host_port(&target.host, target.port);
        let mut requests = 0;
        loop {
            requests += 1;
            let host_line = host_override.as_deref().unwrap_or(&authority);
            let answer = self
                .send(&url, host_line, &headers)
                .await
                .map_err(|e| format!("Get {:?}: {e}", url.as_str()))?;
            let Some((next, relative)) = redirect_target(&url, &answer)? else {
                return Ok(answer);
            };
            if next.host_str() != Some(first_hostname.as_str()) {
                // Not followed: the 3xx is the answer (a Warning for probes).
                return Ok(answer);
            }
            if requests >= MAX_REQUESTS {
                return Err(format!(
                    "Get {:?}: stopped after {MAX_REQUESTS} redirects",
                    next.as_str()
                ));
            }
            // A given Host survives only relative redirects (Go, #22233).
            if !relative {
                host_override = None;
            }
            authority = match next.port() {
                Some(port) => join_host_port(next.host_str().unwrap_or_default(), port),
                None => next.host_str().unwrap_or_default().to_string(),
            };
            url = next;
        }
    }

    /// One request on a new connection.
    async fn send(
        &self,
        url: &Url,
        host_line: &str,
        headers: &HeaderMap,
    ) -> Result<Answer, String> {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(format!("unsupported protocol scheme {scheme:?}"));
        }
        let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else {
            return Err("no host in request URL".into());
        };
        let connected = match &host {
            Host::Domain(name) => TcpStream::connect((*name, port)).await,
            Host::Ipv4(ip) => TcpStream::connect(SocketAddr::from((*ip, port))).await,
            Host::Ipv6(ip) => TcpStream::connect(SocketAddr::from((*ip, port))).await,
        };
        let tcp = connected.map_err(|e| {
            let address = join_host_port(&host.to_string(), port);
            format!("dial tcp {address}: {}", go_dial_error(&e))
        })?;
        let mut request = Request::get(&url[Position::BeforePath..Position::AfterQuery])
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let host_value = HeaderValue::from_str(host_line)
            .map_err(|_| format!("invalid Host header {host_line:?}"))?;
        // Host first, as Go writes it; then the rest.
        let sent = request.headers_mut();
        sent.insert(HOST, host_value);
        for (name, value) in headers {
            sent.append(name, value.clone());
        }
        if scheme == "http" {
            return exchange(TokioIo::new(tcp), request).await;
        }
        let name = match host {
            Host::Domain(name) => rustls::pki_types::ServerName::try_from(name.to_string())
                .map_err(|e| format!("tls: server name {name:?}: {e}"))?,
            Host::Ipv4(ip) => rustls::pki_types::ServerName::from(std::net::IpAddr::from(ip)),
            Host::Ipv6(ip) => rustls::pki_types::ServerName::from(std::net::IpAddr::from(ip)),
        };
        let stream = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls handshake: {}", error_chain(&e)))?;
        exchange(TokioIo::new(stream), request).await
    }
}

/// Sends the request and reads the start of the answer's body.
async fn exchange<T>(io: T, request: Request<Empty<Bytes>>) -> Result<Answer, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(io)
        .await
        .map_err(|e| error_chain(&e))?;
    // Dropped with this call (done, failed, or timed out): the socket closes.
    let _connection = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| error_chain(&e))?;
    let status = response.status().as_u16();
    let location = response.headers().get(LOCATION).cloned();
    let mut body = response.into_body();
    let mut kept = Vec::new();
    // More than 10 KiB is cut, not an error (the kubelet logs and goes on).
    while kept.len() < MAX_OUTPUT_BYTES {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = MAX_OUTPUT_BYTES - kept.len();
                    kept.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            Some(Err(e)) => return Err(error_chain(&e)),
        }
    }
    Ok(Answer {
        status,
        location,
        body: kept,
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `scheme://host:port/path` (IPv6 bracketed; a path without its leading
/// `/` gets one, as Go's URL printing does; a `?query` is kept).
pub(super) fn target_url(target: &HttpGetTarget) -> Result<Url, String> {
    let scheme = match target.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    let slash = if target.path.starts_with('/') {
        ""
    } else {
        "/"
    };
    let text = format!(
        "{scheme}://{}{slash}{}",
        join_host_port(&target.host, target.port),
        target.path
    );
    Url::parse(&text).map_err(|e| format!("invalid probe URL {text:?}: {e}"))
}

/// The headers every request of a chain carries, and the Host to send
/// instead of the URL's (from a `Host` header).
fn request_headers(
    spec: &[(String, String)],
    user_agent: &HeaderValue,
) -> Result<(HeaderMap, Option<String>), String> {
    let mut map = HeaderMap::new();
    for (name, value) in spec {
        let key = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header field name {name:?}"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("invalid header field value for {name:?}"))?;
        map.append(key, value);
    }
    // Go sends the first of each of these and ignores the rest.
    let host = map
        .remove(HOST)
        .and_then(|v| v.to_str().ok().map(str::to_string))
        .filter(|h| !h.is_empty());
    match map.remove(USER_AGENT) {
        None => {
            map.insert(USER_AGENT, user_agent.clone());
        }
        Some(given) if !given.is_empty() => {
            map.insert(USER_AGENT, given);
        }
        // An empty User-Agent sends none.
        Some(_) => {}
    }
    match map.get(ACCEPT) {
        None => {
            map.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        // An empty Accept removes the header.
        Some(v) if v.is_empty() => {
            map.remove(ACCEPT);
        }
        Some(_) => {}
    }
    // What Go's DisableKeepAlives puts on the wire.
    map.insert(CONNECTION, HeaderValue::from_static("close"));
    Ok((map, host))
}

/// Where a redirect answer points, and whether its Location was relative;
/// `None` when the answer is not one Go follows (301, 302, 303, 307, 308
/// with a Location).
fn redirect_target(current: &Url, answer: &Answer) -> Result<Option<(Url, bool)>, String> {
    if !matches!(answer.status, 301 | 302 | 303 | 307 | 308) {
        return Ok(None);
    }
    let Some(location) = answer.location.as_ref().filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let text = location.to_str().map_err(|_| {
        format!(
            "Get {:?}: failed to parse Location header: not text",
            current.as_str()
        )
    })?;
    let next = current.join(text).map_err(|e| {
        format!(
            "Get {:?}: failed to parse Location header {text:?}: {e}",
            current.as_str()
        )
    })?;
    let relative = Url::parse(text).is_err();
    Ok(Some((next, relative)))
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
