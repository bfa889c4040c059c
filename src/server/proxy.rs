//! The streaming proxy of exec, attach and port-forward: the client's
//! upgrade request is replayed to the runtime's streaming URL and, once the
//! runtime switches protocols, bytes are copied both ways until either side
//! closes. Invariant: the stream (SPDY or WebSocket) is never interpreted;
//! only the request head is rewritten (target path and Host; the client's
//! Authorization, which is not the runtime's business, and its body framing
//! are dropped: an upgrade request carries no body).

use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    AUTHORIZATION, CONNECTION, CONTENT_LENGTH, HOST, HeaderMap, HeaderValue, TRANSFER_ENCODING,
    UPGRADE,
};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = BoxBody<Bytes, BoxError>;

/// A plain-text answer.
pub fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut message = message.into();
    if !message.ends_with('\n') {
        message.push('\n');
    }
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(
            Full::new(Bytes::from(message))
                .map_err(|e| match e {})
                .boxed(),
        )
        .expect("static headers are valid")
}

/// Whether a request asks to switch protocols (`Connection: Upgrade` and an
/// `Upgrade` header).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    let connection_upgrade = headers.get_all(CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        })
    });
    connection_upgrade && headers.contains_key(UPGRADE)
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Replays `req` to `target` (the runtime's streaming URL) and pipes the
/// upgraded connection; a non-101 answer is passed through.
pub async fn proxy(mut req: Request<Incoming>, target: &str) -> Response<Body> {
    let bad_gateway = |m: String| text(StatusCode::BAD_GATEWAY, m);
    let url = match url::Url::parse(target) {
        Ok(u) => u,
        Err(e) => return bad_gateway(format!("the runtime's streaming URL {target:?}: {e}")),
    };
    if url.scheme() != "http" {
        return bad_gateway(format!(
            "the runtime's streaming URL {target:?} is not plain http (TLS streaming is not supported)"
        ));
    }
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return bad_gateway(format!(
            "the runtime's streaming URL {target:?} has no host"
        ));
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let stream = match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return bad_gateway(format!(
                "connecting to the runtime's streaming server {host}:{port}: {e}"
            ));
        }
        Err(_) => {
            return bad_gateway(format!(
                "connecting to the runtime's streaming server {host}:{port}: timed out"
            ));
        }
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(pair) => pair,
        Err(e) => return bad_gateway(format!("the runtime's streaming server: {e}")),
    };
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "streaming connection to the runtime ended");
        }
    });
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut path = url.path().to_owned();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let mut out = Request::builder().method(req.method().clone()).uri(path);
    for (name, value) in req.headers() {
        // The upgrade request is replayed without a body, so the client's
        // framing headers do not apply to it.
        let framing = name == CONTENT_LENGTH || name == TRANSFER_ENCODING;
        if name != HOST && name != AUTHORIZATION && !framing {
            out = out.header(name, value);
        }
    }
    let authority = url[url::Position::BeforeHost..url::Position::AfterPort].to_owned();
    if let Ok(v) = HeaderValue::from_str(&authority) {
        out = out.header(HOST, v);
    }
    let out = match out.body(Empty::<Bytes>::new()) {
        Ok(r) => r,
        Err(e) => return bad_gateway(format!("building the request to the runtime: {e}")),
    };
    let mut answer = match sender.send_request(out).await {
        Ok(a) => a,
        Err(e) => return bad_gateway(format!("the runtime's streaming server: {e}")),
    };
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        return answer.map(|b| b.map_err(BoxError::from).boxed());
    }
    let runtime_upgrade = hyper::upgrade::on(&mut answer);
    let mut reply = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        reply = reply.header(name, value);
    }
    tokio::spawn(async move {
        let (client, runtime) = match tokio::join!(client_upgrade, runtime_upgrade) {
            (Ok(c), Ok(r)) => (c, r),
            (c, r) => {
                tracing::warn!(client = ?c.err(), runtime = ?r.err(), "a streaming upgrade failed");
                return;
            }
        };
        let (mut client, mut runtime) = (TokioIo::new(client), TokioIo::new(runtime));
        match tokio::io::copy_bidirectional(&mut client, &mut runtime).await {
            Ok((up, down)) => tracing::debug!(up, down, "stream closed"),
            Err(e) => tracing::debug!(error = %e, "stream ended"),
        }
    });
    reply
        .body(Empty::new().map_err(|e| match e {}).boxed())
        .unwrap_or_else(|e| {
            text(
                StatusCode::BAD_GATEWAY,
                format!("the runtime's answer: {e}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrade_needs_both_headers() {
        let mut h = HeaderMap::new();
        assert!(!is_upgrade(&h));
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        assert!(!is_upgrade(&h));
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        assert!(is_upgrade(&h));
        h.insert(CONNECTION, HeaderValue::from_static("close"));
        assert!(!is_upgrade(&h));
    }
}
