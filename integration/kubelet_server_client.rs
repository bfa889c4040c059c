//! The kubelet server tests' client side: a private CA issuing client
//! certificates, an HTTPS client that (as the API server) does not check
//! crilet's serving certificate, and WebSocket sessions in
//! `v4.channel.k8s.io`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::agent::AgentProcess;
use crate::support::eventually;

pub const LIMIT: Duration = Duration::from_secs(60);

/// A CA and the client certificates it signs.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// (certificate PEM, key PEM) of a client `cn` in groups `orgs`.
    pub fn client(&self, cn: &str, orgs: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// As the kube-apiserver without `--kubelet-certificate-authority`: the
/// serving certificate is not checked (the handshake signatures are).
#[derive(Debug)]
pub struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// An HTTPS client of the kubelet server, with an optional client certificate.
#[derive(Clone)]
pub struct Client {
    port: u16,
    tls: Arc<ClientConfig>,
}

pub type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

impl Client {
    pub fn new(port: u16, identity: Option<&(String, String)>) -> Client {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)));
        let config = match identity {
            Some((cert, key)) => {
                let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
                builder.with_client_auth_cert(certs, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        Client {
            port,
            tls: Arc::new(config),
        }
    }

    pub async fn connect(&self) -> Result<Tls, String> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let name = ServerName::try_from("127.0.0.1").unwrap();
        connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    }

    /// One request: (status, body). An Err is a failed connection or handshake.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<(u16, String), String> {
        let tls = self.connect().await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(conn);
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("127.0.0.1:{}", self.port));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let answer = sender
            .send_request(req.body(Empty::<Bytes>::new()).unwrap())
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = answer.status().as_u16();
        let body = answer
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        self.call("GET", path, &[])
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// A WebSocket session (`v4.channel.k8s.io`) on `path`.
    pub async fn websocket(&self, path: &str) -> tokio_tungstenite::WebSocketStream<Tls> {
        let tls = self.connect().await.unwrap();
        let mut req = format!("wss://127.0.0.1:{}{path}", self.port)
            .into_client_request()
            .unwrap();
        req.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            "v4.channel.k8s.io".parse().unwrap(),
        );
        let (ws, answer) = tokio_tungstenite::client_async(req, tls)
            .await
            .unwrap_or_else(|e| panic!("WebSocket upgrade on {path}: {e}"));
        assert_eq!(
            answer
                .headers()
                .get("sec-websocket-protocol")
                .map(|v| v.to_str().unwrap()),
            Some("v4.channel.k8s.io")
        );
        ws
    }
}

/// What came back on each channel until the stream closed (or `limit`).
pub async fn channels(
    ws: &mut tokio_tungstenite::WebSocketStream<Tls>,
    limit: Duration,
    done: impl Fn(&[Vec<u8>; 5]) -> bool,
) -> [Vec<u8>; 5] {
    let mut out: [Vec<u8>; 5] = Default::default();
    let _ = tokio::time::timeout(limit, async {
        while let Some(Ok(msg)) = ws.next().await {
            if let Message::Binary(data) = msg
                && let Some((&ch, rest)) = data.split_first()
                && (ch as usize) < out.len()
            {
                out[ch as usize].extend_from_slice(rest);
            }
            if done(&out) {
                return;
            }
        }
    })
    .await;
    out
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn files(dir: &std::path::Path, ca: &Ca) -> String {
    let path = dir.join("client-ca.crt");
    std::fs::write(&path, ca.pem()).unwrap();
    path.to_string_lossy().into_owned()
}

pub async fn wait_healthy(client: &Client, agent: &AgentProcess) {
    let up = eventually(LIMIT, || async {
        client
            .call("GET", "/healthz", &[])
            .await
            .ok()
            .filter(|(s, _)| *s == 200)
    })
    .await;
    assert!(
        up.is_some(),
        "the kubelet server never answered\n{}",
        agent.logs()
    );
}
