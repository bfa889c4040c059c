//! The kubelet-compatible HTTP endpoints (read-only, no authentication, so
//! bound to loopback unless the operator names another address):
//! `/stats/summary` (Summary API JSON, `?only_cpu_and_memory=true`),
//! `/metrics` (Prometheus text), `/metrics/probes` (its prober families),
//! `/healthz` and `/pods` (a v1 PodList of the static pods with their
//! statuses). The kubelet server (the HTTPS port) answers the same paths
//! through [`HttpApi::handle`], behind its authentication.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use super::StatsSources;
use super::metrics::Metrics;
use super::reply;

/// Parses `--http-address`: `HOST:PORT`, or `:PORT` / `PORT` for loopback.
pub fn parse_address(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let with_host = if let Some(port) = s.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
        format!("127.0.0.1:{s}")
    } else {
        s.to_owned()
    };
    with_host
        .parse()
        .map_err(|_| format!("{s:?} is not HOST:PORT (e.g. 127.0.0.1:10255)"))
}

#[derive(Clone)]
pub struct HttpApi {
    pub sources: StatsSources,
    pub metrics: Arc<Metrics>,
}

type Reply = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Reply {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()))
        .expect("static headers are valid")
}

fn json(value: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(value) {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(e) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("encoding JSON: {e}\n"),
        ),
    }
}

impl HttpApi {
    pub fn handle(&self, method: &Method, path: &str, query: Option<&str>) -> Reply {
        if method != Method::GET && method != Method::HEAD {
            return respond(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "read-only: only GET\n",
            );
        }
        match path.trim_end_matches('/') {
            "/healthz" => respond(StatusCode::OK, "text/plain", "ok"),
            "/metrics" => respond(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                self.metrics.render(&self.sources),
            ),
            "/metrics/probes" => respond(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                probe_families(&self.metrics.render(&self.sources)),
            ),
            "/stats/summary" => {
                let only = query.is_some_and(|q| {
                    q.split('&')
                        .any(|kv| kv == "only_cpu_and_memory=true" || kv == "only_cpu_and_memory=1")
                });
                match self.sources.sample() {
                    Some(sample) => json(&reply::summary(&sample, only)),
                    None => respond(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "text/plain",
                        "no stats sample yet\n",
                    ),
                }
            }
            "/pods" => json(&self.pod_list()),
            _ => respond(StatusCode::NOT_FOUND, "text/plain", "404 page not found\n"),
        }
    }

    /// The static pods, each with the status its worker last wrote.
    fn pod_list(&self) -> serde_json::Value {
        let view = self.sources.view();
        let statuses = self.sources.statuses();
        let items: Vec<serde_json::Value> = view
            .manager
            .get_pods()
            .iter()
            .map(|p| {
                let mut pod = (**p).clone();
                pod.status = statuses.get(crate::pod::uid(p)).map(|s| (**s).clone());
                crate::pod::defaults::apply_display_defaults(&mut pod);
                let mut item = serde_json::to_value(&pod).unwrap_or_default();
                // A list's items carry no kind or apiVersion of their own,
                // as the kubelet's /pods writes them.
                if let Some(item) = item.as_object_mut() {
                    item.remove("kind");
                    item.remove("apiVersion");
                }
                item
            })
            .collect();
        serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
    }
}

/// The `prober_probe*` families of a rendered exposition (with its `# EOF`).
fn probe_families(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let name = l
                .strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
                .or_else(|| l.strip_prefix("# UNIT "))
                .unwrap_or(l);
            name.starts_with("prober_probe") || *l == "# EOF"
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Serves HTTP/1.1 on `listener` until `cancel`.
pub async fn serve(listener: tokio::net::TcpListener, api: HttpApi, cancel: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let api = api.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let reply = api.handle(req.method(), req.uri().path(), req.uri().query());
                async move { Ok::<_, Infallible>(reply) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_families_are_kept_alone() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n# HELP prober_probe_total P.\n# TYPE prober_probe_total counter\nprober_probe_total{x=\"y\"} 2\n# EOF\n";
        assert_eq!(
            probe_families(text),
            "# HELP prober_probe_total P.\n# TYPE prober_probe_total counter\nprober_probe_total{x=\"y\"} 2\n# EOF\n"
        );
    }

    #[test]
    fn addresses_default_to_loopback() {
        assert_eq!(
            parse_address(":10255").unwrap().to_string(),
            "127.0.0.1:10255"
        );
        assert_eq!(
            parse_address("10255").unwrap().to_string(),
            "127.0.0.1:10255"
        );
        assert_eq!(
            parse_address("0.0.0.0:80").unwrap().to_string(),
            "0.0.0.0:80"
        );
        assert_eq!(parse_address("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert!(parse_address("localhost").is_err());
        assert!(parse_address("").is_err());
    }
}
