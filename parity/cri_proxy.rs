//! A recording CRI proxy: a unix socket that an agent (the kubelet or
//! crilet) takes for its runtime, passing every gRPC call through to the
//! real runtime's socket and keeping each request message it carried.
//!
//! Invariant: the proxy never changes what passes through. Requests are
//! forwarded with their headers and body as received (a CRI request is one
//! unary message, so the body is read whole first); responses, streamed ones
//! (GetContainerEvents) included, go back frame by frame with their trailers.
//! Each agent connection gets its own upstream connection, so HTTP/2 stream
//! limits and ordering stay the agent's and the runtime's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{UnixListener, UnixStream};

/// One gRPC call the agent made: its method path and its request message
/// (the protobuf bytes, without gRPC's 5-byte frame header).
#[derive(Debug, Clone)]
pub struct CriCall {
    /// e.g. `/runtime.v1.RuntimeService/CreateContainer`.
    pub method: String,
    pub request: Bytes,
}

/// The proxy; dropping it stops accepting (calls in flight finish).
pub struct CriProxy {
    pub socket: PathBuf,
    calls: Arc<Mutex<Vec<CriCall>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CriProxy {
    /// Listens on `socket` (replacing a stale file) and forwards to the
    /// runtime's `upstream` socket. Must be called inside a tokio runtime.
    pub fn start(socket: &Path, upstream: &Path) -> std::io::Result<Self> {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        let calls: Arc<Mutex<Vec<CriCall>>> = Arc::default();
        let upstream = upstream.to_path_buf();
        let record = calls.clone();
        let accept = tokio::spawn(async move {
            while let Ok((agent, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let record = record.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(agent, upstream.clone(), record).await {
                        eprintln!(
                            "parity: CRI proxy connection to {}: {e}",
                            upstream.display()
                        );
                    }
                });
            }
        });
        Ok(Self {
            socket: socket.to_path_buf(),
            calls,
            accept,
        })
    }

    /// Every call recorded so far, in the order the requests arrived.
    pub fn calls(&self) -> Vec<CriCall> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets the calls recorded so far.
    pub fn clear(&self) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

impl Drop for CriProxy {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One agent connection: an upstream HTTP/2 connection of its own, and
/// each request passed through it.
async fn serve(
    agent: UnixStream,
    upstream: PathBuf,
    record: Arc<Mutex<Vec<CriCall>>>,
) -> Result<(), BoxError> {
    let runtime = UnixStream::connect(&upstream).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(runtime)).await?;
    tokio::spawn(connection);
    let service = service_fn(move |request: Request<Incoming>| {
        let mut sender = sender.clone();
        let record = record.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            let method = parts.uri.path().to_string();
            {
                let mut calls = record.lock().unwrap_or_else(|e| e.into_inner());
                calls.extend(grpc_messages(&body).map(|request| CriCall {
                    method: method.clone(),
                    request,
                }));
            }
            sender.ready().await?;
            let response: Response<Incoming> = sender
                .send_request(Request::from_parts(parts, Full::new(body)))
                .await?;
            Ok::<_, hyper::Error>(response)
        }
    });
    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(agent), service)
        .await?;
    Ok(())
}

/// The messages of a gRPC body: each frame is a compressed flag (0 here:
/// neither agent compresses CRI calls), a 4-byte big-endian length and the
/// message. A truncated tail is dropped.
pub fn grpc_messages(body: &Bytes) -> impl Iterator<Item = Bytes> + '_ {
    let mut rest = body.clone();
    std::iter::from_fn(move || {
        if rest.len() < 5 {
            return None;
        }
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        if rest.len() < 5 + len {
            return None;
        }
        rest.advance(5);
        Some(rest.split_to(len))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((message.len() as u32).to_be_bytes());
        out.extend(message);
        out
    }

    #[test]
    fn frames_are_split_into_messages_and_a_truncated_tail_is_dropped() {
        let mut body = frame(b"abc");
        body.extend(frame(b""));
        body.extend(frame(b"xyz"));
        body.extend(&frame(b"cut")[..6]);
        let got: Vec<Bytes> = grpc_messages(&Bytes::from(body)).collect();
        assert_eq!(got, [&b"abc"[..], b"", b"xyz"]);
        assert_eq!(grpc_messages(&Bytes::from_static(&[0, 0])).count(), 0);
    }
}
