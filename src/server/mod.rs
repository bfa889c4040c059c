//! The kubelet server: the HTTPS port (10250 by default) through which the
//! API server reaches a node for `kubectl logs`, `exec`, `attach` and
//! `port-forward`, and which also serves `/pods`, `/healthz`,
//! `/stats/summary`, `/metrics` and `/metrics/probes`.
//!
//! Every request goes through the same chain, as the kubelet's: TLS (with
//! client certificates requested when `--client-ca-file` is set) →
//! authentication ([`authn`]) → authorization ([`authz`]) → routing
//! ([`routes`]) → a thin handler. Invariant: nothing reaches a handler
//! unauthenticated or unauthorized, and no input makes the server panic.
//! May import `agent`, `stats`, `logs`, `mirror`, `kuberuntime`, `cri`,
//! `pod` and `units`.

pub mod authn;
pub mod authz;
pub mod handlers;
pub mod proxy;
pub mod review;
pub mod routes;
pub mod start;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;

use authn::Authenticator;
use authz::Authorizer;
use handlers::Handlers;
use proxy::{Body, text};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("--address/--port {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Review(#[from] review::ReviewError),
}

/// One server: who may ask, and who answers.
pub struct KubeletServer {
    pub node_name: String,
    pub authn: Authenticator,
    pub authz: Authorizer,
    pub handlers: Handlers,
}

/// Binds the listener (at start, so a taken port fails the start).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

impl KubeletServer {
    /// Authenticates, authorizes, routes and answers one request (logged
    /// at debug level with its user and status).
    pub async fn handle(
        &self,
        req: Request<Incoming>,
        peer_chain: Option<&[CertificateDer<'static>]>,
    ) -> Response<Body> {
        let (method, path) = (req.method().clone(), req.uri().path().to_owned());
        let (user, answer) = self.answer(req, peer_chain).await;
        let path: String = path.chars().take(200).collect();
        let status = answer.status().as_u16();
        tracing::debug!(%method, %path, %user, status, "kubelet server request");
        answer
    }

    /// The user's name (or "-") and the answer.
    async fn answer(
        &self,
        req: Request<Incoming>,
        peer_chain: Option<&[CertificateDer<'static>]>,
    ) -> (String, Response<Body>) {
        let authorization = req
            .headers()
            .get(AUTHORIZATION)
            // A header that is not text is a credential that fails, not none.
            .map(|v| v.to_str().unwrap_or_default());
        let user = match self.authn.authenticate(peer_chain, authorization).await {
            Ok(user) => user,
            Err(e) => {
                tracing::debug!(reason = %e, "kubelet server: unauthenticated request");
                return ("-".into(), text(StatusCode::UNAUTHORIZED, "Unauthorized"));
            }
        };
        let name = user.name.clone();
        let attrs = authz::attributes(
            user,
            req.method().as_str(),
            req.uri().path(),
            &self.node_name,
        );
        if !self.authz.authorize(&attrs).await {
            let refusal = text(StatusCode::FORBIDDEN, authz::forbidden_message(&attrs));
            return (name, refusal);
        }
        let route = match routes::parse(req.uri().path()) {
            Ok(route) => route,
            Err(routes::RouteError::NotFound(m)) => {
                return (name, text(StatusCode::NOT_FOUND, m));
            }
            Err(routes::RouteError::BadRequest(m)) => {
                return (name, text(StatusCode::BAD_REQUEST, m));
            }
        };
        (name, self.handlers.handle(req, route).await)
    }
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that does not finish a request head in this time is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves HTTPS (HTTP/1.1 with upgrades) on `listener` until `cancel`.
/// Upgraded streams outlive their request and end with their peers.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    server: Arc<KubeletServer>,
    cancel: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet server: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, server, cancel) = (acceptor.clone(), server.clone(), cancel.clone());
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "kubelet server: TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "kubelet server: TLS handshake timed out");
                        return;
                    }
                };
            let chain: Option<Arc<Vec<CertificateDer<'static>>>> = stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()));
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (server, chain) = (server.clone(), chain.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        server
                            .handle(req, chain.as_deref().map(Vec::as_slice))
                            .await,
                    )
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "kubelet server: connection ended");
                },
                _ = cancel.cancelled() => {}
            }
        });
    }
}
