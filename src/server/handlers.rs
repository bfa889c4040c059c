//! The kubelet server's handlers: thin glue from a parsed [`Route`] to the
//! stats server's answers, the pod lookup, the CRI and the streaming proxy.
//! Invariant: every failure is answered with a status and a plain-text line
//! naming the pod, container or parameter at fault.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::proxy::{self, Body, text};
use super::routes::{self, ContainerPath, PodPath, Route, RouteError};
use crate::cri::{
    AttachRequest, ContainerFilter, ContainerState, ExecRequest, PodSandboxFilter, PodSandboxState,
    Runtime,
};
use crate::kuberuntime::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::pod::lookup::{LookupError, PodRef, ResolvedPod, resolve};
use crate::stats::StatsSources;
use crate::stats::http::HttpApi;

/// What the handlers read and call.
#[derive(Clone)]
pub struct Handlers {
    pub sources: StatsSources,
    pub http: HttpApi,
    pub runtime: Arc<dyn Runtime>,
    /// `--pod-logs-dir`, for a log path the runtime gives relative.
    pub pod_logs_dir: std::path::PathBuf,
}

/// A refused request: its status and the line saying why.
#[derive(Debug)]
pub struct Refusal(pub StatusCode, pub String);

fn refuse(status: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal(status, message.into())
}

type Answer = Result<Response<Body>, Refusal>;

fn route_error(e: RouteError) -> Refusal {
    match e {
        RouteError::NotFound(m) => refuse(StatusCode::NOT_FOUND, m),
        RouteError::BadRequest(m) => refuse(StatusCode::BAD_REQUEST, m),
    }
}

fn method_not_allowed(method: &Method, allowed: &str) -> Refusal {
    refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} not allowed here (only {allowed})"),
    )
}

/// Whether the pod's spec gives container `name` a TTY.
fn spec_tty(pod: &ResolvedPod, name: &str) -> bool {
    pod.pod.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .any(|c| c.name == name && c.tty == Some(true))
    })
}

/// The runtime's container ID without its `<runtime>://` prefix.
pub fn bare_container_id(id: &str) -> &str {
    id.split_once("://").map_or(id, |(_, id)| id)
}

impl Handlers {
    pub async fn handle(&self, req: Request<Incoming>, route: Route) -> Response<Body> {
        let answer = match route {
            Route::Healthz
            | Route::Pods
            | Route::StatsSummary
            | Route::Metrics
            | Route::MetricsProbes => {
                let reply = self
                    .http
                    .handle(req.method(), req.uri().path(), req.uri().query());
                Ok(reply.map(|b| b.map_err(|e| match e {}).boxed()))
            }
            Route::Run(c) => self.run(&req, &c).await,
            Route::Exec(c) => self.exec(req, &c, true).await,
            Route::Attach(c) => self.exec(req, &c, false).await,
            Route::PortForward(p) => self.port_forward(req, &p).await,
            Route::ContainerLogs(c) => self.container_logs(&req, &c).await,
        };
        answer.unwrap_or_else(|Refusal(status, message)| text(status, message))
    }

    fn find_pod(&self, p: &PodPath) -> Result<ResolvedPod, Refusal> {
        let view = self.sources.view();
        let r = PodRef::Name {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        };
        let pod = resolve(&view.manager, &r).map_err(|e| match e {
            LookupError::NotFound(_) => refuse(
                StatusCode::NOT_FOUND,
                format!("pod {}/{} does not exist on this node", p.namespace, p.name),
            ),
            LookupError::Invalid(m) => refuse(StatusCode::BAD_REQUEST, m),
        })?;
        if let Some(uid) = &p.uid
            && *uid != pod.static_uid
            && (pod.mirror_uid.is_empty() || *uid != pod.mirror_uid)
        {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                format!("pod {}/{} has no UID {uid}", p.namespace, p.name),
            ));
        }
        Ok(pod)
    }

    /// The running container's runtime ID: from the workers' statuses, or
    /// asked of the runtime when the status does not have it yet.
    async fn container_id(&self, pod: &ResolvedPod, name: &str) -> Result<String, Refusal> {
        let spec = pod.pod.spec.as_ref();
        let declared = spec.is_some_and(|s| {
            s.containers.iter().any(|c| c.name == name)
                || s.init_containers.iter().flatten().any(|c| c.name == name)
        });
        if !declared {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                format!(
                    "container {name} is not valid for pod {}/{}",
                    pod.namespace, pod.name
                ),
            ));
        }
        let from_status = self.sources.statuses().get(&pod.static_uid).and_then(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
                .find(|c| c.name == name && c.state.as_ref().is_some_and(|st| st.running.is_some()))
                .and_then(|c| c.container_id.clone())
        });
        if let Some(id) = from_status {
            return Ok(bare_container_id(&id).to_owned());
        }
        let filter = ContainerFilter {
            state: Some(ContainerState::Running),
            label_selector: [
                (POD_UID_LABEL.to_owned(), pod.static_uid.clone()),
                (CONTAINER_NAME_LABEL.to_owned(), name.to_owned()),
            ]
            .into(),
            ..Default::default()
        };
        let found = self.runtime.list_containers(&filter).await.map_err(|e| {
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("listing containers: {e}"),
            )
        })?;
        found
            .into_iter()
            .max_by_key(|c| c.created_at)
            .map(|c| c.id)
            .ok_or_else(|| {
                refuse(
                    StatusCode::NOT_FOUND,
                    format!(
                        "container {name} of pod {}/{} is not running",
                        pod.namespace, pod.name
                    ),
                )
            })
    }

    async fn run(&self, req: &Request<Incoming>, c: &ContainerPath) -> Answer {
        if req.method() != Method::POST {
            return Err(method_not_allowed(req.method(), "POST"));
        }
        let pod = self.find_pod(&c.pod)?;
        let cmd =
            routes::run_command(req.uri().query().unwrap_or_default()).map_err(route_error)?;
        let id = self.container_id(&pod, &c.container).await?;
        // As the kubelet's /run: no timeout of its own.
        let result = self
            .runtime
            .exec_sync(&id, &cmd, Duration::ZERO)
            .await
            .map_err(|e| {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("running {cmd:?} in {}: {e}", c.container),
                )
            })?;
        let mut output = result.stdout;
        output.extend_from_slice(&result.stderr);
        if result.exit_code != 0 {
            return Err(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "command {:?} exited with {}: {}",
                    cmd.join(" "),
                    result.exit_code,
                    String::from_utf8_lossy(&output)
                ),
            ));
        }
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/plain; charset=utf-8")
            .body(
                http_body_util::Full::new(output.into())
                    .map_err(|e| match e {})
                    .boxed(),
            )
            .expect("static headers are valid"))
    }

    async fn exec(&self, req: Request<Incoming>, c: &ContainerPath, exec: bool) -> Answer {
        if req.method() != Method::GET && req.method() != Method::POST {
            return Err(method_not_allowed(req.method(), "GET and POST"));
        }
        let pod = self.find_pod(&c.pod)?;
        let opts = routes::stream_options(req.uri().query().unwrap_or_default(), exec)
            .map_err(route_error)?;
        let id = self.container_id(&pod, &c.container).await?;
        // Checked before the runtime is asked: a plain request must not
        // leave a prepared stream behind.
        if !proxy::is_upgrade(req.headers()) {
            return Err(refuse(StatusCode::BAD_REQUEST, "Upgrade request required"));
        }
        let url = if exec {
            self.runtime
                .exec(&ExecRequest {
                    container_id: id,
                    cmd: opts.command,
                    tty: opts.tty,
                    stdin: opts.stdin,
                    stdout: opts.stdout,
                    stderr: opts.stderr,
                })
                .await
        } else {
            self.runtime
                .attach(&AttachRequest {
                    container_id: id,
                    stdin: opts.stdin,
                    // As the kubelet: a running process's TTY cannot change,
                    // so attach follows the container's spec, not the query.
                    tty: spec_tty(&pod, &c.container),
                    stdout: opts.stdout,
                    stderr: opts.stderr,
                })
                .await
        };
        let url = url.map_err(|e| {
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "preparing the stream to {} of pod {}/{}: {e}",
                    c.container, pod.namespace, pod.name
                ),
            )
        })?;
        Ok(proxy::proxy(req, &url).await)
    }

    async fn port_forward(&self, req: Request<Incoming>, p: &PodPath) -> Answer {
        if req.method() != Method::GET && req.method() != Method::POST {
            return Err(method_not_allowed(req.method(), "GET and POST"));
        }
        let pod = self.find_pod(p)?;
        let ports = routes::ports(req.uri().query().unwrap_or_default()).map_err(route_error)?;
        if !proxy::is_upgrade(req.headers()) {
            return Err(refuse(StatusCode::BAD_REQUEST, "Upgrade request required"));
        }
        let filter = PodSandboxFilter {
            state: Some(PodSandboxState::Ready),
            label_selector: [(POD_UID_LABEL.to_owned(), pod.static_uid.clone())].into(),
            ..Default::default()
        };
        let sandboxes = self.runtime.list_pod_sandbox(&filter).await.map_err(|e| {
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("listing sandboxes: {e}"),
            )
        })?;
        let Some(sandbox) = sandboxes.into_iter().max_by_key(|s| s.created_at) else {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                format!("pod {}/{} has no ready sandbox", pod.namespace, pod.name),
            ));
        };
        let url = self
            .runtime
            .port_forward(&sandbox.id, &ports)
            .await
            .map_err(|e| {
                refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!(
                        "preparing port forwarding to pod {}/{}: {e}",
                        pod.namespace, pod.name
                    ),
                )
            })?;
        Ok(proxy::proxy(req, &url).await)
    }

    /// `GET /containerLogs/{ns}/{pod}/{container}?<PodLogOptions>`: 400 for
    /// a query that does not decode, 422 for invalid options, 404 for an
    /// unknown pod or container, then the decoded log, chunked.
    async fn container_logs(&self, req: &Request<Incoming>, c: &ContainerPath) -> Answer {
        use crate::logs::LocateError;
        use crate::logs::{LogOptions, LogOptionsError};
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return Err(method_not_allowed(req.method(), "GET"));
        }
        let opts = LogOptions::from_query(req.uri().query().unwrap_or_default()).map_err(|e| {
            let status = match e {
                LogOptionsError::Decode(_) => StatusCode::BAD_REQUEST,
                LogOptionsError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            };
            refuse(status, e.to_string())
        })?;
        let pod = self.find_pod(&c.pod)?;
        let view = self.sources.view();
        let target = crate::logs::locate(
            &view,
            &self.sources.statuses,
            self.runtime.as_ref(),
            &self.pod_logs_dir,
            &PodRef::Uid(pod.static_uid.clone()),
            Some(&c.container),
            opts.previous,
        )
        .await
        .map_err(|e| match e {
            LocateError::NotFound(m) => refuse(StatusCode::NOT_FOUND, m),
            LocateError::BadRequest(m) => refuse(StatusCode::BAD_REQUEST, m),
        })?;
        // The file must open before the 200 goes out.
        if let Err(e) = tokio::fs::metadata(&target.path).await {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "the log file {} of container {}: {e}",
                    target.path.display(),
                    c.container
                ),
            ));
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<hyper::body::Bytes>(16);
        let runtime = self.runtime.clone();
        let what = format!("{}/{}", target.pod_full_name, target.container);
        tokio::spawn(async move {
            if let Err(e) = crate::logs::stream(target, opts, runtime, tx).await {
                tracing::warn!(container = %what, error = %e, "streaming a container log stopped");
            }
        });
        let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
            .map(|b| Ok::<_, proxy::BoxError>(hyper::body::Frame::data(b)));
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/plain")
            .body(BodyExt::boxed(http_body_util::StreamBody::new(frames)))
            .expect("static headers are valid"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_lose_their_runtime_prefix() {
        assert_eq!(bare_container_id("containerd://abc"), "abc");
        assert_eq!(bare_container_id("cri-o://abc"), "abc");
        assert_eq!(bare_container_id("abc"), "abc");
        assert_eq!(bare_container_id(""), "");
    }
}
