//! The connection to the API server when the kubeconfig names its client
//! certificate and key as files (what the kubelet's TLS bootstrap writes:
//! both point at `<cert-dir>/kubelet-client-current.pem`). As client-go's
//! dynamic client certificate, the files are read again when they change, so
//! a rotated certificate is used by the next connection without rebuilding
//! any client; unlike client-go, a rotation does not close the open
//! connections: each connection retires on its own shortly before the
//! certificate it was opened with expires (the API server checks a client
//! certificate's validity on every request), so the watches keep running on
//! the old certificate while it is valid and resume on the new one.
//!
//! Invariant: a connection never outlives its certificate's `notAfter`
//! minus [`retire_margin`]; a file that fails to load leaves the last good
//! identity in use, and the failure is logged naming the file.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// How long before its certificate's `notAfter` a connection is closed:
/// a tenth of the certificate's lifetime, at most a minute.
pub fn retire_margin(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(60))
}

/// When a connection opened `now` with a certificate valid from
/// `not_before` to `not_after` must close, as a delay from now.
pub fn retire_after(now: SystemTime, not_before: SystemTime, not_after: SystemTime) -> Duration {
    let lifetime = not_after.duration_since(not_before).unwrap_or_default();
    let until_expiry = not_after.duration_since(now).unwrap_or_default();
    until_expiry.saturating_sub(retire_margin(lifetime))
}

/// How long a connection lives when it has no valid certificate to show.
pub const NO_CERTIFICATE_LIFETIME: Duration = Duration::from_secs(2);

/// How long a new connection waits for a pair the TLS bootstrap has yet to
/// write, and how often it looks. The kubelet starts no API client before
/// its bootstrap ends; crilet's static pods do not wait for it, but its
/// API clients do, as long as a bootstrap of a busy fleet may take.
pub const PENDING_PAIR_WAIT: Duration = Duration::from_secs(300);
const PENDING_PAIR_POLL: Duration = Duration::from_millis(200);

/// What identifies one version of a file: a rename or rewrite changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> io::Result<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode: m.ino(),
    })
}

struct Loaded {
    stamps: (Stamp, Stamp),
    key: Arc<CertifiedKey>,
    not_before: SystemTime,
    not_after: SystemTime,
}

/// The client certificate and key of a kubeconfig, read from their files
/// and read again when either changes.
pub struct FileIdentity {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Option<Loaded>>,
}

impl std::fmt::Debug for FileIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileIdentity")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish()
    }
}

fn to_system_time(t: x509_parser::time::ASN1Time) -> SystemTime {
    let secs = t.timestamp();
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH
    }
}

/// A certificate's validity, (notBefore, notAfter).
pub fn validity(cert: &CertificateDer<'_>) -> Result<(SystemTime, SystemTime), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let v = parsed.validity();
    Ok((to_system_time(v.not_before), to_system_time(v.not_after)))
}

/// The first certificate in the PEM file at `path`, if there is one that
/// parses.
pub fn first_certificate(path: &Path) -> Option<CertificateDer<'static>> {
    let pem = std::fs::read(path).ok()?;
    CertificateDer::pem_slice_iter(&pem).next()?.ok()
}

impl FileIdentity {
    /// Reads both files now: an error names the file. A certificate file
    /// that does not exist yet is no error: the TLS bootstrap is about to
    /// write it, and until then connections go without a certificate.
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<FileIdentity>, String> {
        let identity = FileIdentity {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            loaded: Mutex::new(None),
        };
        if cert.exists() {
            let loaded = identity.read()?;
            *identity.loaded.lock().unwrap() = Some(loaded);
        }
        Ok(Arc::new(identity))
    }

    fn read(&self) -> Result<Loaded, String> {
        let file = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
        let stamps = (
            stamp(&self.cert).map_err(|e| file(&self.cert, &e))?,
            stamp(&self.key).map_err(|e| file(&self.key, &e))?,
        );
        let pem = std::fs::read(&self.cert).map_err(|e| file(&self.cert, &e))?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file(&self.cert, &format!("not PEM certificates: {e}")))?;
        let Some(first) = certs.first() else {
            return Err(file(&self.cert, &"no certificate in it"));
        };
        let (not_before, not_after) = validity(first).map_err(|e| file(&self.cert, &e))?;
        let pem = std::fs::read(&self.key).map_err(|e| file(&self.key, &e))?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| file(&self.key, &format!("no PEM private key: {e}")))?;
        let provider = rustls::crypto::ring::default_provider();
        let key = CertifiedKey::from_der(certs, key, &provider)
            .map_err(|e| file(&self.cert, &format!("certificate and key: {e}")))?;
        Ok(Loaded {
            stamps,
            key: Arc::new(key),
            not_before,
            not_after,
        })
    }

    /// Reads the files again if either changed since the last read; on a
    /// failure the last good identity stays.
    fn refresh(&self) {
        let current = (stamp(&self.cert).ok(), stamp(&self.key).ok());
        {
            let loaded = self.loaded.lock().unwrap();
            match loaded.as_ref() {
                Some(l) if current == (Some(l.stamps.0.clone()), Some(l.stamps.1.clone())) => {
                    return;
                }
                // Nothing yet, and still no file: the bootstrap has not
                // written it. Not worth a line per connection.
                None if current.0.is_none() => return,
                _ => {}
            }
        }
        match self.read() {
            Ok(fresh) => {
                tracing::info!(file = %self.cert.display(), "certificate pair read again: it changed");
                *self.loaded.lock().unwrap() = Some(fresh);
            }
            Err(e) => {
                tracing::warn!(error = %e, "certificate pair changed but does not load: the last one stays")
            }
        }
    }

    /// How long a connection opened now may live: a connection without a
    /// valid certificate (none yet, or an expired one that the bootstrap
    /// is replacing) lives [`NO_CERTIFICATE_LIFETIME`], so that the next
    /// one picks the new certificate up.
    pub fn retire_after(&self) -> Duration {
        self.refresh();
        let loaded = self.loaded.lock().unwrap();
        let now = SystemTime::now();
        match loaded.as_ref() {
            Some(l) if now < l.not_after => {
                retire_after(now, l.not_before, l.not_after).max(NO_CERTIFICATE_LIFETIME)
            }
            _ => NO_CERTIFICATE_LIFETIME,
        }
    }

    /// Whether the pair is still to come: none read, and no file yet (the
    /// TLS bootstrap has not written it).
    pub fn pending(&self) -> bool {
        self.refresh();
        self.loaded.lock().unwrap().is_none()
    }

    /// The current certificate's validity.
    pub fn current_validity(&self) -> Option<(SystemTime, SystemTime)> {
        let loaded = self.loaded.lock().unwrap();
        loaded.as_ref().map(|l| (l.not_before, l.not_after))
    }
}

impl ResolvesClientCert for FileIdentity {
    fn resolve(
        &self,
        _hints: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.refresh();
        self.loaded.lock().unwrap().as_ref().map(|l| l.key.clone())
    }

    fn has_certs(&self) -> bool {
        self.loaded.lock().unwrap().is_some()
    }
}

/// The kubelet server's certificate when it comes through a CSR: the
/// current pair, read again when it changes; none yet, and every handshake
/// fails, as the kubelet's "no serving certificate available".
impl rustls::server::ResolvesServerCert for FileIdentity {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.refresh();
        self.loaded.lock().unwrap().as_ref().map(|l| l.key.clone())
    }
}

/// A connector whose connections close themselves when their certificate
/// is about to expire.
#[derive(Clone)]
pub struct RetiringConnector<C> {
    pub inner: C,
    pub identity: Arc<FileIdentity>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<C> tower::Service<http::Uri> for RetiringConnector<C>
where
    C: tower::Service<http::Uri> + Clone + Send + 'static,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = RetiringIo<C::Response>;
    type Error = C::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        // The connector made ready goes into the future; a clone stays.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let identity = self.identity.clone();
        Box::pin(async move {
            // While the bootstrap has not written the pair, a connection
            // would go anonymous and be refused (403): wait for it a while,
            // then go anyway, so that a bootstrap that never ends shows in
            // the server's answer.
            let waited = tokio::time::Instant::now();
            while identity.pending() && waited.elapsed() < PENDING_PAIR_WAIT {
                tokio::time::sleep(PENDING_PAIR_POLL).await;
            }
            let after = identity.retire_after();
            let io = inner.call(uri).await?;
            Ok(RetiringIo {
                io,
                retire: Some(Box::pin(tokio::time::sleep(after))),
            })
        })
    }
}

/// A connection that fails every read and write once its time is up, so
/// the client drops it and opens a new one (with the current certificate).
pub struct RetiringIo<T> {
    io: T,
    retire: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> RetiringIo<T> {
    fn retired(&mut self, cx: &mut Context<'_>) -> bool {
        self.retire
            .as_mut()
            .is_some_and(|s| s.as_mut().poll(cx).is_ready())
    }
}

fn retired_error() -> io::Error {
    io::Error::other("connection closed: its client certificate is about to expire")
}

impl<T: Read + Unpin> Read for RetiringIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.retired(cx) {
            return Poll::Ready(Err(retired_error()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for RetiringIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.retired(cx) {
            return Poll::Ready(Err(retired_error()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for RetiringIo<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

/// A kube client for `config` (its server, CA, headers, token) that
/// presents `identity` (the config's own identity, if any, is not used),
/// with `user_agent` on every request and the config's timeouts.
pub fn client_with_identity(
    config: &kube::Config,
    identity: Arc<FileIdentity>,
    user_agent: &str,
) -> Result<kube::Client, String> {
    use kube::client::ConfigExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    match &config.root_cert {
        Some(certs) => {
            for der in certs {
                roots
                    .add(CertificateDer::from(der.clone()))
                    .map_err(|e| format!("the certificate authority: {e}"))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_client_cert_resolver(identity.clone());
    // A resumed TLS session keeps the identity of the session it resumes
    // (the server asks for no certificate): every connection makes a full
    // handshake, so that it presents the current certificate.
    tls.resumption = rustls::client::Resumption::disabled();
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|e| format!("tls-server-name {name}: {e}"))?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let https = builder.enable_http1().wrap_connector(http);
    let mut timed = hyper_timeout::TimeoutConnector::new(https);
    timed.set_connect_timeout(config.connect_timeout);
    timed.set_read_timeout(config.read_timeout);
    timed.set_write_timeout(config.write_timeout);
    // Outside the connect timeout: the wait for a pending pair is no
    // connection attempt.
    let connector = RetiringConnector {
        inner: timed,
        identity,
    };
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, kube::client::Body>(connector);
    let auth = config.auth_layer().map_err(|e| e.to_string())?;
    let headers = config.extra_headers_layer().map_err(|e| e.to_string())?;
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(auth)
        .layer(headers)
        .layer(UserAgentLayer(user_agent.to_string()))
        .map_err(tower::BoxError::from)
        .service(client);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// The user of a kubeconfig's current context, if it has one.
pub fn current_auth_info_mut(
    kubeconfig: &mut kube::config::Kubeconfig,
) -> Option<&mut kube::config::AuthInfo> {
    let user = kubeconfig
        .current_context
        .as_ref()
        .and_then(|c| kubeconfig.contexts.iter().find(|n| &n.name == c))
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())?;
    kubeconfig
        .auth_infos
        .iter_mut()
        .find(|a| a.name == user)
        .and_then(|a| a.auth_info.as_mut())
}

/// Reads the kubeconfig at `path`: its config and, when its current user
/// names the client certificate and key as files, the identity over those
/// files (then the config carries no identity of its own). Errors name the
/// file.
pub async fn load_kubeconfig(
    path: &Path,
) -> Result<(kube::Config, Option<Arc<FileIdentity>>), String> {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
    let mut identity = None;
    if let Some(auth) = current_auth_info_mut(&mut kubeconfig)
        && auth.client_certificate_data.is_none()
        && auth.client_key_data.is_none()
        && let (Some(cert), Some(key)) = (auth.client_certificate.take(), auth.client_key.take())
    {
        identity = Some(FileIdentity::load(Path::new(&cert), Path::new(&key))?);
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok((config, identity))
}

/// A kube client for a kubeconfig [`load_kubeconfig`] read, with
/// `read_timeout` and `user_agent`.
pub fn client(
    config: &kube::Config,
    identity: Option<&Arc<FileIdentity>>,
    read_timeout: Duration,
    user_agent: &str,
) -> Result<kube::Client, String> {
    let mut config = config.clone();
    config.read_timeout = Some(read_timeout);
    match identity {
        Some(identity) => client_with_identity(&config, identity.clone(), user_agent),
        None => Ok(kube::client::ClientBuilder::try_from(config)
            .map_err(|e| e.to_string())?
            .with_layer(&UserAgentLayer(user_agent.to_string()))
            .build()),
    }
}

/// A layer that sets the User-Agent header on every request.
#[derive(Clone)]
pub struct UserAgentLayer(pub String);

impl<S> tower::Layer<S> for UserAgentLayer {
    type Service = UserAgent<S>;
    fn layer(&self, inner: S) -> Self::Service {
        UserAgent {
            inner,
            ua: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct UserAgent<S> {
    inner: S,
    ua: String,
}

impl<S, B> tower::Service<http::Request<B>> for UserAgent<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::result::Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if let Ok(v) = http::HeaderValue::from_str(&self.ua) {
            req.headers_mut().insert(http::header::USER_AGENT, v);
        }
        self.inner.call(req)
    }
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
