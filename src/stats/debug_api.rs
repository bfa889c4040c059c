//! The `crilet.debug.v1.Debug` service, for `crilet logs` and `crilet
//! exec`: a container's log through the log reader (`crate::logs`), and a
//! one-shot command through CRI ExecSync. Served on the agent's unix socket
//! only (mode 0600): exec is root in the pod.
//!
//! Invariant: every request finds its pod through the pod manager
//! (`pod::lookup`, so a mirror UID works), a named container must be the
//! pod's (`pod::containers`) and an unnamed one is the default
//! (`logs::default_container`, as for the kubelet server); an
//! unknown pod or container is NOT_FOUND, a malformed request
//! INVALID_ARGUMENT, each naming what was asked for.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use super::StatsSources;
use super::reply::{lookup_status, pod_ref};
use crate::api::debug::v1 as pb;
use crate::cri::{ContainerFilter, ContainerState, Runtime, RuntimeError};
use crate::kuberuntime::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::logs::{LocateError, locate};
use crate::logs::{LogOptions, default_container};
use crate::pod::containers::require_container;
use crate::pod::lookup::{PodRef, ResolvedPod, resolve};
use pb::debug_server::Debug;

#[derive(Clone)]
pub struct DebugApi {
    pub sources: StatsSources,
    pub runtime: Arc<dyn Runtime>,
    /// `--pod-logs-dir`, where relative log paths are anchored.
    pub pod_logs_dir: PathBuf,
}

/// The pod and the container a request names.
struct Target {
    pod: ResolvedPod,
    container: String,
}

impl Target {
    fn describe(&self) -> String {
        format!(
            "container {:?} of pod {}/{}",
            self.container, self.pod.namespace, self.pod.name
        )
    }
}

impl DebugApi {
    fn target(
        &self,
        r: Option<crate::api::stats::v1::PodRef>,
        container: &str,
    ) -> Result<Target, Status> {
        let r = pod_ref(r)?;
        let view = self.sources.view();
        let pod = resolve(&view.manager, &r).map_err(lookup_status)?;
        let container = match container.trim() {
            "" => {
                default_container(&pod.pod).map_err(|e| Status::invalid_argument(e.to_string()))?
            }
            named => {
                require_container(&pod.pod, named).map_err(|e| Status::not_found(e.to_string()))?;
                named.to_owned()
            }
        };
        Ok(Target { pod, container })
    }

    /// The running instance of the target container (the newest, should
    /// the runtime list two).
    async fn running_container_id(&self, t: &Target) -> Result<String, Status> {
        let filter = ContainerFilter {
            state: Some(ContainerState::Running),
            label_selector: [
                (POD_UID_LABEL.to_owned(), t.pod.static_uid.clone()),
                (CONTAINER_NAME_LABEL.to_owned(), t.container.clone()),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let found = self
            .runtime
            .list_containers(&filter)
            .await
            .map_err(|e| runtime_status(&format!("listing {}", t.describe()), &e))?;
        found
            .into_iter()
            .max_by_key(|c| c.created_at)
            .map(|c| c.id)
            .ok_or_else(|| Status::failed_precondition(format!("{} is not running", t.describe())))
    }
}

pub fn locate_status(e: LocateError) -> Status {
    match e {
        LocateError::NotFound(m) => Status::not_found(m),
        LocateError::BadRequest(m) => Status::invalid_argument(m),
    }
}

/// A runtime failure, with the runtime's own code (NOT_FOUND when the
/// container went away, DEADLINE_EXCEEDED, UNAVAILABLE when it is down).
pub fn runtime_status(what: &str, e: &RuntimeError) -> Status {
    Status::new(e.code(), format!("{what}: {e}"))
}

/// An ExecSync failure. The runtime ends a command that outlives its
/// timeout with DEADLINE_EXCEEDED, which the CRI client cannot tell from
/// a runtime that never answered: with a timeout set, say it was the
/// command's.
pub fn exec_status(what: &str, timeout: Duration, e: &RuntimeError) -> Status {
    if e.code() == tonic::Code::DeadlineExceeded && !timeout.is_zero() {
        return Status::deadline_exceeded(format!(
            "exec in {what}: the command did not finish within its timeout of {timeout:?}"
        ));
    }
    runtime_status(&format!("exec in {what}"), e)
}

/// The exec timeout a request asks for; 0 is none of its own.
pub fn exec_timeout(seconds: i64) -> Result<Duration, Status> {
    u64::try_from(seconds)
        .map(Duration::from_secs)
        .map_err(|_| {
            Status::invalid_argument(format!(
                "timeout_seconds must be 0 (none) or positive, not {seconds}"
            ))
        })
}

/// The request's v1 PodLogOptions, validated as the kubelet validates them.
pub fn log_options(r: &pb::ContainerLogsRequest) -> Result<LogOptions, Status> {
    let since_time = match r.since_time.trim() {
        "" => None,
        t => Some(t.parse::<jiff::Timestamp>().map_err(|e| {
            Status::invalid_argument(format!("since_time {t:?} is not an RFC3339 time: {e}"))
        })?),
    };
    let o = LogOptions {
        follow: r.follow,
        previous: r.previous,
        timestamps: r.timestamps,
        since_seconds: r.since_seconds,
        since_time,
        tail_lines: r.tail_lines,
        limit_bytes: r.limit_bytes,
    };
    o.validate()
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok(o)
}

type LogStream = Pin<Box<dyn Stream<Item = Result<pb::LogChunk, Status>> + Send>>;

#[tonic::async_trait]
impl Debug for DebugApi {
    type ContainerLogsStream = LogStream;

    async fn container_logs(
        &self,
        req: Request<pb::ContainerLogsRequest>,
    ) -> Result<Response<LogStream>, Status> {
        let req = req.into_inner();
        let opts = log_options(&req)?;
        let t = self.target(req.pod, &req.container)?;
        let view = self.sources.view();
        let target = locate(
            &view,
            &self.sources.statuses,
            self.runtime.as_ref(),
            &self.pod_logs_dir,
            &PodRef::Uid(t.pod.static_uid.clone()),
            Some(&t.container),
            opts.previous,
        )
        .await
        .map_err(locate_status)?;
        let what = t.describe();
        let (tx, rx) = mpsc::channel::<Result<pb::LogChunk, Status>>(16);
        let (bytes_tx, mut bytes_rx) = mpsc::channel::<bytes::Bytes>(16);
        let reader = crate::logs::stream(target, opts, self.runtime.clone(), bytes_tx);
        tokio::spawn(async move {
            tokio::pin!(reader);
            let mut result = None;
            loop {
                tokio::select! {
                    r = &mut reader, if result.is_none() => result = Some(r),
                    chunk = bytes_rx.recv() => match chunk {
                        Some(data) => {
                            let chunk = pb::LogChunk { data: data.to_vec() };
                            if tx.send(Ok(chunk)).await.is_err() {
                                return;
                            }
                        }
                        // The reader ended and everything it sent is out.
                        None => break,
                    },
                    // The client went away: dropping the reader stops it.
                    _ = tx.closed() => return,
                }
            }
            if let Some(Err(e)) = result {
                let _ = tx.send(Err(Status::internal(format!("{what}: {e}")))).await;
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn exec_sync(
        &self,
        req: Request<pb::ExecSyncRequest>,
    ) -> Result<Response<pb::ExecSyncResponse>, Status> {
        let req = req.into_inner();
        if req.cmd.is_empty() || req.cmd[0].is_empty() {
            return Err(Status::invalid_argument("a command is required"));
        }
        let timeout = exec_timeout(req.timeout_seconds)?;
        let t = self.target(req.pod, &req.container)?;
        let id = self.running_container_id(&t).await?;
        let r = self
            .runtime
            .exec_sync(&id, &req.cmd, timeout)
            .await
            .map_err(|e| exec_status(&t.describe(), timeout, &e))?;
        Ok(Response::new(pb::ExecSyncResponse {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
            container: t.container,
        }))
    }
}

#[cfg(test)]
#[path = "debug_api_tests.rs"]
mod tests;
