//! `Runtime` over CRI gRPC on a unix socket (containerd, CRI-O).
//!
//! One lazily connected channel per `CriRuntime` (tonic reconnects it after
//! a failure), 16 MiB message limits, and a deadline on every call: the
//! request timeout for ordinary calls, a longer one for image pulls.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Uri};

use super::endpoint::{Endpoint, check_socket};
use super::*;
use crate::proto::runtime::v1 as pb;
use pb::image_service_client::ImageServiceClient;
use pb::runtime_service_client::RuntimeServiceClient;

/// Largest message sent or accepted (the kubelet uses the same limit).
pub const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// Deadlines of the adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Every call but PullImage (the kubelet's --runtime-request-timeout, 2m).
    pub request_timeout: Duration,
    /// PullImage: large images over slow links take long.
    pub image_pull_timeout: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            request_timeout: Duration::from_secs(120),
            image_pull_timeout: Duration::from_secs(30 * 60),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CriRuntime {
    endpoint: Endpoint,
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    /// The same channel, for the relist's brief lists.
    raw: brief::RawClient,
    options: RuntimeOptions,
    observer: Option<std::sync::Arc<dyn OperationObserver>>,
}

/// Told of every CRI call: its method name, how long it took, and whether
/// it succeeded (the metrics).
pub trait OperationObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, op: &'static str, elapsed: Duration, ok: bool);
}

impl CriRuntime {
    /// Checks the endpoint and prepares a channel; nothing is dialled until
    /// the first call, so an agent may start before its runtime.
    pub fn connect_lazy(endpoint: &str, options: RuntimeOptions) -> Result<Self> {
        let endpoint = Endpoint::parse(endpoint)?;
        let path: PathBuf = endpoint.path().to_path_buf();
        // The URI is required by tonic but unused: the connector dials the socket.
        let channel = tonic::transport::Endpoint::from_static("http://cri.local")
            .connect_timeout(options.request_timeout)
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    check_socket(&path)?;
                    let stream = tokio::net::UnixStream::connect(&path).await.map_err(|e| {
                        std::io::Error::new(e.kind(), format!("connect {}: {e}", path.display()))
                    })?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }));
        let runtime = RuntimeServiceClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let images = ImageServiceClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let raw = brief::RawClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        Ok(CriRuntime {
            endpoint,
            runtime,
            images,
            raw,
            options,
            observer: None,
        })
    }

    /// Reports every call to `observer` from now on.
    pub fn with_observer(mut self, observer: std::sync::Arc<dyn OperationObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn request<T>(&self, msg: T, timeout: Duration) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        req.set_timeout(timeout);
        req
    }

    /// Runs one call under its deadline. The local timer backs up the
    /// grpc-timeout header: a peer that never answers (or is not gRPC at
    /// all) must not hold the caller past the deadline.
    async fn call<T, F>(&self, op: &'static str, timeout: Duration, fut: F) -> Result<T>
    where
        F: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let started = std::time::Instant::now();
        let in_flight = crate::cri::wait::InFlight::enter();
        let result = self.call_inner(op, timeout, fut).await;
        drop(in_flight);
        let elapsed = started.elapsed();
        tracing::debug!(op, ?elapsed, ok = result.is_ok(), "CRI call");
        if let Some(o) = &self.observer {
            o.observe(op, elapsed, result.is_ok());
        }
        result
    }

    async fn call_inner<T, F>(&self, op: &'static str, timeout: Duration, fut: F) -> Result<T>
    where
        F: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        match tokio::time::timeout(timeout, fut).await {
            Err(_) => Err(RuntimeError::DeadlineExceeded {
                endpoint: self.endpoint.to_string(),
                op,
                timeout,
            }),
            // tonic's own timer (from the grpc-timeout we set) reports Cancelled.
            Ok(Err(status))
                if status.code() == tonic::Code::DeadlineExceeded
                    || (status.code() == tonic::Code::Cancelled
                        && status.message().contains("Timeout expired")) =>
            {
                Err(RuntimeError::DeadlineExceeded {
                    endpoint: self.endpoint.to_string(),
                    op,
                    timeout,
                })
            }
            Ok(Err(status)) => {
                let err = RuntimeError::Rpc {
                    endpoint: self.endpoint.to_string(),
                    op,
                    status,
                };
                if err.code() == tonic::Code::Unavailable {
                    tracing::debug!(error = %err, "CRI transport failure");
                }
                Err(err)
            }
            Ok(Ok(resp)) => Ok(resp.into_inner()),
        }
    }

    fn malformed(&self, op: &'static str, what: &str) -> RuntimeError {
        RuntimeError::Malformed {
            endpoint: self.endpoint.to_string(),
            op,
            what: what.to_string(),
        }
    }

    /// Shorthand for an ordinary call: `rpc!(self, Op, client, method, msg)`.
    fn timeout(&self) -> Duration {
        self.options.request_timeout
    }
}

macro_rules! rpc {
    ($self:ident, $op:literal, $client:ident . $method:ident ( $msg:expr )) => {{
        let t = $self.timeout();
        let req = $self.request($msg, t);
        let mut client = $self.$client.clone();
        $self
            .call($op, t, async move { client.$method(req).await })
            .await
    }};
}

// The calls, in the order of the `Runtime` trait (after `rpc!`, which they use).
mod brief;
mod runtime;
