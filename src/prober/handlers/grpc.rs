//! The grpc probe: `grpc.health.v1.Health/Check` over plain HTTP/2 (h2c),
//! as the kubelet's `pkg/probe/grpc` does it.
//!
//! Invariant: never an Error outcome: whatever goes wrong (no connection,
//! Unimplemented, timeout, any status but SERVING) is a Failure naming it;
//! the dial and the call each take at most the timeout, as the kubelet's.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::{PROBE_USER_AGENT, ProbeOutcome, error_chain, join_host_port};

/// How long a refused dial waits before the next (grpc-go's first
/// connection back-off).
const DIAL_BACKOFF: Duration = Duration::from_secs(1);

/// SERVING → Success("service healthy"); any other status, an unreachable
/// server, a server without the health service, or no answer within
/// `timeout` → Failure. `service` empty asks about the server as a whole.
pub async fn grpc_probe(host: &str, port: u16, service: &str, timeout: Duration) -> ProbeOutcome {
    let address = join_host_port(host, port);
    let channel = match dial(&address, timeout).await {
        Ok(channel) => channel,
        Err(failure) => return ProbeOutcome::Failure(failure),
    };
    match tokio::time::timeout(timeout, check(channel, service, timeout)).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(failure)) => ProbeOutcome::Failure(failure),
        Err(_) => ProbeOutcome::Failure(format!(
            "timeout: health rpc did not complete within {timeout:?}"
        )),
    }
}

/// A blocking dial, as the kubelet's (`grpc.WithBlock`): a refused or
/// failed connection is retried until `timeout`, so a server that is not
/// up yet fails with the dial's deadline, whatever refused it.
async fn dial(address: &str, timeout: Duration) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .and_then(|e| e.user_agent(PROBE_USER_AGENT))
        .map_err(|e| {
            format!(
                "error: failed to connect service at {address:?}: {}",
                error_chain(&e)
            )
        })?;
    let deadline = tokio::time::Instant::now() + timeout;
    let expired = || {
        format!(
            "timeout: failed to connect service {address:?} within {timeout:?}: context deadline exceeded"
        )
    };
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(expired());
        }
        let attempt = endpoint.clone().connect_timeout(left);
        match tokio::time::timeout(left, attempt.connect()).await {
            Ok(Ok(channel)) => return Ok(channel),
            Ok(Err(_)) => {
                let next = tokio::time::Instant::now() + DIAL_BACKOFF;
                tokio::time::sleep_until(next.min(deadline)).await;
            }
            Err(_) => return Err(expired()),
        }
    }
}

async fn check(channel: Channel, service: &str, timeout: Duration) -> Result<ProbeOutcome, String> {
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    // Tells the server our deadline (grpc-timeout).
    request.set_timeout(timeout);
    let response = match HealthClient::new(channel).check(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Err(describe_status(&status, timeout)),
    };
    let status = ServingStatus::try_from(response.status)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| response.status.to_string());
    Ok(if response.status == ServingStatus::Serving as i32 {
        ProbeOutcome::Success("service healthy".into())
    } else {
        ProbeOutcome::Failure(format!("service unhealthy (responded with {status:?})"))
    })
}

/// The kubelet's wording for a failed Check.
fn describe_status(status: &tonic::Status, timeout: Duration) -> String {
    match status.code() {
        tonic::Code::Unimplemented => format!(
            "this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
            status.message()
        ),
        tonic::Code::DeadlineExceeded => {
            format!("timeout: health rpc did not complete within {timeout:?}")
        }
        code => format!(
            "error: health rpc probe failed: {code:?}: {}",
            error_chain(status)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio_stream::wrappers::TcpListenerStream;
    use tokio_util::sync::CancellationToken;

    /// A tonic server on 127.0.0.1:0, with the health service if given.
    async fn serve(
        health: Option<tonic_health::server::HealthReporter>,
    ) -> (SocketAddr, CancellationToken) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let mut routes = tonic::service::Routes::default();
        if let Some(reporter) = health {
            let service = tonic_health::pb::health_server::HealthServer::new(
                tonic_health::server::HealthService::from_health_reporter(reporter),
            );
            routes = routes.add_service(service);
        }
        let server = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming_shutdown(
                TcpListenerStream::new(listener),
                stop.clone().cancelled_owned(),
            );
        tokio::spawn(server);
        (addr, stop)
    }

    #[tokio::test]
    async fn serving_succeeds_not_serving_fails() {
        let reporter = tonic_health::server::HealthReporter::new();
        reporter
            .set_service_status("", tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("db", tonic_health::ServingStatus::NotServing)
            .await;
        let (addr, stop) = serve(Some(reporter)).await;
        let t = Duration::from_secs(2);
        assert_eq!(
            grpc_probe("127.0.0.1", addr.port(), "", t).await,
            ProbeOutcome::Success("service healthy".into())
        );
        assert_eq!(
            grpc_probe("127.0.0.1", addr.port(), "db", t).await,
            ProbeOutcome::Failure(r#"service unhealthy (responded with "NOT_SERVING")"#.into())
        );
        // A service the server does not know: NotFound, a Failure too.
        let ProbeOutcome::Failure(output) = grpc_probe("127.0.0.1", addr.port(), "nope", t).await
        else {
            panic!("not a failure")
        };
        assert!(output.contains("NotFound"), "{output}");
        stop.cancel();
    }

    #[tokio::test]
    async fn a_server_without_the_health_service_fails() {
        let (addr, stop) = serve(None).await;
        let outcome = grpc_probe("127.0.0.1", addr.port(), "", Duration::from_secs(2)).await;
        let ProbeOutcome::Failure(output) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            output.starts_with("this server does not implement the grpc health protocol"),
            "{output}"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn nothing_listening_or_no_answer_fails_within_the_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let outcome = grpc_probe("127.0.0.1", port, "", Duration::from_secs(2)).await;
        let ProbeOutcome::Failure(output) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            output.starts_with("timeout: failed to connect service")
                && output.ends_with("within 2s: context deadline exceeded"),
            "{output}"
        );
        // A listener that accepts and never speaks HTTP/2.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let started = std::time::Instant::now();
        let outcome = grpc_probe("127.0.0.1", port, "", Duration::from_millis(300)).await;
        assert!(matches!(outcome, ProbeOutcome::Failure(_)), "{outcome:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(silent);
    }
}
