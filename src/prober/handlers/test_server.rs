//! A scripted HTTP/1.1 server on 127.0.0.1:0 for the handler tests (plain
//! or TLS with a self-signed certificate).
//!
//! Invariant: it records each request head exactly as it came off the
//! wire, answers whatever the test's closure returns for it (`None`: never
//! answers), and stops every connection when dropped.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

type Reply = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

pub struct TestServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(reply: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self::bind(Arc::new(reply), None).await
    }

    pub async fn start_tls(
        reply: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
        tls: Arc<rustls::ServerConfig>,
    ) -> Self {
        Self::bind(Arc::new(reply), Some(tokio_rustls::TlsAcceptor::from(tls))).await
    }

    async fn bind(reply: Reply, tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let accept = tokio::spawn(async move {
            // Dropped with the accept task: every connection ends with it.
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (reply, seen, tls) = (reply.clone(), seen.clone(), tls.clone());
                connections.spawn(async move {
                    match tls {
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                answer(stream, reply, seen).await
                            }
                        }
                        None => answer(stream, reply, seen).await,
                    }
                });
            }
        });
        TestServer {
            addr,
            requests,
            accept,
        }
    }

    /// The request heads received so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn answer<S>(mut stream: S, reply: Reply, seen: Arc<Mutex<Vec<String>>>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    seen.lock().unwrap().push(head.clone());
    match reply(&head) {
        Some(text) => {
            let _ = stream.write_all(text.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        None => std::future::pending().await,
    }
}

/// A complete answer that closes the connection.
pub fn response(status: u16, headers: &[(&str, &str)], body: &str) -> String {
    let mut text = format!(
        "HTTP/1.1 {status} Test\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

/// The path of a request head ("GET /x HTTP/1.1" → "/x").
pub fn path(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or_default()
}

/// A server config with a fresh self-signed certificate for "localhost".
pub fn self_signed_tls() -> Arc<rustls::ServerConfig> {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![key.cert.der().clone()],
            rustls::pki_types::PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()).into(),
        )
        .unwrap();
    Arc::new(config)
}
