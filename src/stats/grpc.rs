//! The gRPC server of `crilet.stats.v1.Stats`, with gRPC health and
//! reflection, on a unix socket (mode 0600) and optionally on TCP with TLS.
//! The stats API is read-only: every method answers from snapshots. The
//! debug service (`crilet.debug.v1.Debug`: logs, exec) is served on the
//! unix socket only.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use super::StatsSources;
use super::debug_api::DebugApi;
use super::images_api::ImagesApi;
use super::reply::{self, lookup_status, pod_ref};
use crate::api::debug::v1::debug_server::DebugServer;
use crate::api::stats::v1 as pb;
use crate::pod::lookup::{ResolvedPod, resolve};
use pb::images_server::ImagesServer;
use pb::stats_server::{Stats, StatsServer};

/// Where `crilet run` serves and the CLI connects by default.
pub const DEFAULT_SOCKET: &str = "/run/crilet/crilet.sock";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("stats socket {path}: {message}")]
    Socket { path: PathBuf, message: String },
    #[error("stats socket {path}: {source}")]
    SocketIo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {what} {path}: {source}")]
    Tls {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--grpc-address {addr}: {source}")]
    Tcp {
        addr: String,
        source: std::io::Error,
    },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

#[derive(Clone)]
pub struct StatsApi {
    sources: StatsSources,
}

impl StatsApi {
    pub fn new(sources: StatsSources) -> Self {
        StatsApi { sources }
    }

    fn resolve(&self, r: Option<pb::PodRef>) -> Result<ResolvedPod, Status> {
        let r = pod_ref(r)?;
        let view = self.sources.view();
        resolve(&view.manager, &r).map_err(lookup_status)
    }

    fn sample(&self) -> Result<std::sync::Arc<super::assemble::Sample>, Status> {
        self.sources.sample().ok_or_else(|| {
            Status::unavailable(
                "no stats sample yet: the first is taken at start, then every --stats-period",
            )
        })
    }
}

fn not_sampled(r: &ResolvedPod) -> Status {
    Status::unavailable(format!(
        "pod {}/{} (uid {}) has no stats yet: it is sampled once its sandbox runs",
        r.namespace, r.name, r.static_uid
    ))
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::ListPodStatsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Stats for StatsApi {
    async fn get_pod_stats(
        &self,
        req: Request<pb::GetPodStatsRequest>,
    ) -> Result<Response<pb::PodStats>, Status> {
        let r = self.resolve(req.into_inner().pod)?;
        let sample = self.sample()?;
        reply::pod_stats(&r, &sample)
            .map(Response::new)
            .ok_or_else(|| not_sampled(&r))
    }

    async fn list_pod_stats(
        &self,
        _req: Request<pb::ListPodStatsRequest>,
    ) -> Result<Response<pb::ListPodStatsResponse>, Status> {
        let sample = self.sample()?;
        let view = self.sources.view();
        Ok(Response::new(reply::list_pod_stats(&view.manager, &sample)))
    }

    async fn get_container_stats(
        &self,
        req: Request<pb::GetContainerStatsRequest>,
    ) -> Result<Response<pb::GetContainerStatsResponse>, Status> {
        let req = req.into_inner();
        if req.container.trim().is_empty() {
            return Err(Status::invalid_argument("a container name is required"));
        }
        let r = self.resolve(req.pod)?;
        let in_spec = r
            .pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .any(|c| c.name == req.container);
        if !in_spec {
            return Err(Status::not_found(format!(
                "pod {}/{} has no container {:?}",
                r.namespace, r.name, req.container
            )));
        }
        let sample = self.sample()?;
        let pod = reply::pod_stats(&r, &sample).ok_or_else(|| not_sampled(&r))?;
        let container = pod
            .containers
            .into_iter()
            .find(|c| c.name == req.container)
            .ok_or_else(|| {
                Status::unavailable(format!(
                    "container {:?} of pod {}/{} is not running",
                    req.container, r.namespace, r.name
                ))
            })?;
        Ok(Response::new(pb::GetContainerStatsResponse {
            pod: Some(reply::identity(&r)),
            sample_time_unix_nano: sample.time.0,
            container: Some(container),
        }))
    }

    async fn get_summary(
        &self,
        req: Request<pb::GetSummaryRequest>,
    ) -> Result<Response<pb::Summary>, Status> {
        let sample = self.sample()?;
        let view = self.sources.view();
        Ok(Response::new(reply::summary_message(
            &view.manager,
            &sample,
            req.into_inner().only_cpu_and_memory,
        )))
    }

    async fn list_pods(
        &self,
        _req: Request<pb::ListPodsRequest>,
    ) -> Result<Response<pb::ListPodsResponse>, Status> {
        let view = self.sources.view();
        let statuses = self.sources.statuses();
        Ok(Response::new(pb::ListPodsResponse {
            pods: reply::list_pods(&view.manager, &statuses),
        }))
    }

    type WatchPodStatsStream = WatchStream;

    async fn watch_pod_stats(
        &self,
        req: Request<pb::WatchPodStatsRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let wanted = match req.into_inner().pod {
            Some(r) => Some(pod_ref(Some(r))?),
            None => None,
        };
        if let Some(r) = &wanted {
            resolve(&self.sources.view().manager, r).map_err(lookup_status)?;
        }
        let sources = self.sources.clone();
        let stream = tokio_stream::wrappers::WatchStream::new(self.sources.samples.clone())
            .filter_map(move |sample| {
                let sources = sources.clone();
                let wanted = wanted.clone();
                async move {
                    let sample = sample?;
                    let view = sources.view();
                    let mut reply = reply::list_pod_stats(&view.manager, &sample);
                    if let Some(r) = &wanted {
                        let Ok(found) = resolve(&view.manager, r) else {
                            return Some(Err(Status::not_found(format!(
                                "{r} is no longer managed by crilet"
                            ))));
                        };
                        reply.pods.retain(|p| {
                            p.pod
                                .as_ref()
                                .is_some_and(|i| i.static_uid == found.static_uid)
                        });
                    }
                    Some(Ok(reply))
                }
            });
        Ok(Response::new(Box::pin(stream)))
    }
}

/// The stats (and, when given, images and debug) services with health and
/// reflection on `server` (plain for the unix socket, TLS for TCP).
async fn router(
    mut server: Server,
    api: StatsApi,
    images: Option<ImagesApi>,
    debug: Option<DebugApi>,
) -> tonic::transport::server::Router {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<StatsServer<StatsApi>>().await;
    if images.is_some() {
        reporter.set_serving::<ImagesServer<ImagesApi>>().await;
    }
    if debug.is_some() {
        reporter.set_serving::<DebugServer<DebugApi>>().await;
    }
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("the embedded descriptor set is valid");
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .expect("the embedded descriptor set is valid");
    server
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(StatsServer::new(api))
        .add_optional_service(images.map(ImagesServer::new))
        .add_optional_service(debug.map(DebugServer::new))
}

/// Binds the unix socket: creates its directory, replaces a stale socket
/// (one nobody answers on), refuses a live one or a non-socket file, and
/// restricts it to its owner (0600).
pub async fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, ServeError> {
    let io = |source| ServeError::SocketIo {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if tokio::net::UnixStream::connect(path).await.is_ok() {
                return Err(ServeError::Socket {
                    path: path.to_owned(),
                    message: "another process is serving on it (is crilet already running?)".into(),
                });
            }
            tracing::info!(path = %path.display(), "replacing a stale stats socket");
            std::fs::remove_file(path).map_err(io)?;
        }
        Ok(_) => {
            return Err(ServeError::Socket {
                path: path.to_owned(),
                message: "exists and is not a socket; refusing to replace it".into(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    // Bind under a umask-independent mode: create, then chmod before anyone
    // is told the path.
    let listener = tokio::net::UnixListener::bind(path).map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    Ok(listener)
}

/// Serves on a bound unix socket until `cancel`; removes the socket after.
/// Only here is `debug` (exec into pods) served: the socket is 0600.
pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    path: PathBuf,
    api: StatsApi,
    images: Option<ImagesApi>,
    debug: Option<DebugApi>,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let result = router(Server::builder(), api, images, debug)
        .await
        .serve_with_incoming_shutdown(incoming, cancel.cancelled())
        .await;
    let _ = std::fs::remove_file(&path);
    Ok(result?)
}

/// The TLS files of the TCP listener.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::Tls {
        what,
        path: path.to_owned(),
        source,
    })
}

/// Binds the TCP listener and reads the TLS files, so that errors surface
/// at start.
pub async fn bind_tcp(
    addr: &str,
    tls: &TlsFiles,
) -> Result<(tokio::net::TcpListener, ServerTlsConfig), ServeError> {
    let identity = Identity::from_pem(
        read("--tls-cert-file", &tls.cert)?,
        read("--tls-private-key-file", &tls.key)?,
    );
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca {
        config = config
            .client_ca_root(Certificate::from_pem(read("--client-ca-file", ca)?))
            .client_auth_optional(false);
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Tcp {
            addr: addr.to_owned(),
            source,
        })?;
    Ok((listener, config))
}

/// Serves TLS on a bound TCP listener until `cancel`.
pub async fn serve_tcp(
    listener: tokio::net::TcpListener,
    tls: ServerTlsConfig,
    api: StatsApi,
    images: Option<ImagesApi>,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    router(Server::builder().tls_config(tls)?, api, images, None)
        .await
        .serve_with_incoming_shutdown(incoming, cancel.cancelled())
        .await?;
    Ok(())
}

#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;
