//! A manifest server for the URL source tests: HTTP/1 on 127.0.0.1, one
//! programmable reply, every request's headers recorded. It honours
//! If-None-Match and If-Modified-Since with 304, like a static file server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{
    CONTENT_TYPE, ETAG, HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LOCATION,
};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crilet::config::http::MAX_BODY_BYTES;

/// What the server answers to every GET.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this body and validators (304 when the request's match).
    Manifest {
        body: String,
        etag: Option<String>,
        last_modified: Option<String>,
    },
    /// This status, with a short text body.
    Status(u16),
    /// Reads the request and never answers.
    Hang,
    /// 302 to itself, for ever.
    RedirectLoop,
    /// 302 to this Location.
    RedirectTo(String),
    /// One byte over the body limit, with a Content-Length or chunked.
    Oversize { chunked: bool },
    /// 200 with a chunked body that never ends: a client that buffered the
    /// whole body before checking its size would never finish.
    Endless,
}

impl Reply {
    pub fn manifest(body: impl Into<String>) -> Self {
        Reply::Manifest {
            body: body.into(),
            etag: None,
            last_modified: None,
        }
    }
}

struct State {
    reply: Reply,
    requests: Vec<HeaderMap>,
}

/// A private CA and a server certificate for 127.0.0.1 that it signed.
pub struct TestTls {
    pub ca_pem: String,
    pub server: Arc<tokio_rustls::rustls::ServerConfig>,
}

impl TestTls {
    pub fn new() -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose,
        };
        use tokio_rustls::rustls::{self, pki_types::PrivatePkcs8KeyDer};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.distinguished_name
            .push(DnType::CommonName, "crilet test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = leaf.signed_by(&key, &ca).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            )
            .unwrap();
        TestTls {
            ca_pem: ca.pem(),
            server: Arc::new(server),
        }
    }
}

pub struct ManifestServer {
    pub addr: SocketAddr,
    scheme: &'static str,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
    accept: Option<tokio::task::JoinHandle<()>>,
}

type Body = BoxBody<Bytes, Infallible>;

impl ManifestServer {
    pub async fn start(reply: Reply) -> Self {
        Self::start_on("127.0.0.1:0".parse().unwrap(), reply).await
    }

    /// Binds `addr` (a port used before, to come back where crilet looks).
    /// Serves https with `tls`.
    pub async fn start_tls(reply: Reply, tls: Arc<tokio_rustls::rustls::ServerConfig>) -> Self {
        Self::bind("127.0.0.1:0".parse().unwrap(), reply, Some(tls)).await
    }

    pub async fn start_on(addr: SocketAddr, reply: Reply) -> Self {
        Self::bind(addr, reply, None).await
    }

    async fn bind(
        addr: SocketAddr,
        reply: Reply,
        tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> Self {
        let listener = TcpListener::bind(addr)
            .await
            .expect("bind the manifest server");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State {
            reply,
            requests: Vec::new(),
        }));
        let stop = CancellationToken::new();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        let accept = tokio::spawn(accept_loop(listener, tls, state.clone(), stop.clone()));
        ManifestServer {
            addr,
            scheme,
            state,
            stop,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("{}://{}/pods", self.scheme, self.addr)
    }

    pub fn set(&self, reply: Reply) {
        self.state.lock().unwrap().reply = reply;
    }

    /// The headers of every request so far, oldest first.
    pub fn requests(&self) -> Vec<HeaderMap> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Stops listening (the port refuses connections once this returns)
    /// and drops every open connection.
    pub async fn stop(&mut self) {
        self.stop.cancel();
        if let Some(accept) = self.accept.take() {
            accept.await.unwrap();
        }
    }
}

impl Drop for ManifestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let (state, stop, tls) = (state.clone(), stop.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                // A failed handshake (an untrusting client) just ends here.
                Some(tls) => {
                    if let Ok(stream) = tls.accept(stream).await {
                        serve(stream, state, stop).await
                    }
                }
                None => serve(stream, state, stop).await,
            }
        });
    }
}

async fn serve<S>(stream: S, state: Arc<Mutex<State>>, stop: CancellationToken)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        _ = stop.cancelled() => {}
    }
}

fn full(status: u16, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    response
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let reply = {
        let mut state = state.lock().unwrap();
        state.requests.push(req.headers().clone());
        state.reply.clone()
    };
    let asked = |name| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    Ok(match reply {
        Reply::Manifest {
            body,
            etag,
            last_modified,
        } => {
            let unchanged = (etag.is_some() && asked(IF_NONE_MATCH) == etag)
                || (last_modified.is_some() && asked(IF_MODIFIED_SINCE) == last_modified);
            let mut response = if unchanged {
                full(304, "")
            } else {
                full(200, body)
            };
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, "application/yaml".parse().unwrap());
            if let Some(etag) = etag {
                headers.insert(ETAG, etag.parse().unwrap());
            }
            if let Some(at) = last_modified {
                headers.insert(LAST_MODIFIED, at.parse().unwrap());
            }
            response
        }
        Reply::Status(code) => full(code, "not today\n"),
        Reply::Hang => futures::future::pending().await,
        Reply::RedirectTo(location) => {
            let mut response = full(302, "");
            response
                .headers_mut()
                .insert(LOCATION, location.parse().unwrap());
            response
        }
        Reply::RedirectLoop => {
            let mut response = full(302, "");
            let here = req.uri().path().to_string();
            response
                .headers_mut()
                .insert(LOCATION, here.parse().unwrap());
            response
        }
        Reply::Oversize { chunked: false } => full(200, vec![b'#'; MAX_BODY_BYTES + 1]),
        Reply::Oversize { chunked: true } => {
            let half = Bytes::from(vec![b'#'; MAX_BODY_BYTES / 2 + 1]);
            let frames = futures::stream::iter(
                [half.clone(), half].map(|b| Ok::<_, Infallible>(Frame::data(b))),
            );
            Response::new(StreamBody::new(frames).boxed())
        }
        Reply::Endless => {
            let chunk = Bytes::from(vec![b'#'; 64 * 1024]);
            let frames = futures::stream::repeat_with(move || Ok(Frame::data(chunk.clone())));
            Response::new(StreamBody::new(frames).boxed())
        }
    })
}
