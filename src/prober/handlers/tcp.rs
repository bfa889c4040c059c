//! The tcpSocket probe: connect, then close.
//!
//! Invariant: nothing is sent; the answer comes within the timeout.

use std::time::Duration;

use tokio::net::TcpStream;

use super::{ProbeOutcome, go_dial_error, join_host_port};

/// Connected within `timeout` → Success (empty output); refused,
/// unreachable, unresolvable or too slow → Failure with Go's wording
/// ("dial tcp 10.0.0.5:80: i/o timeout").
pub async fn tcp_probe(host: &str, port: u16, timeout: Duration) -> ProbeOutcome {
    // Brackets are for URLs; the resolver wants the bare address.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let address = join_host_port(bare, port);
    match tokio::time::timeout(timeout, TcpStream::connect((bare, port))).await {
        Ok(Ok(stream)) => {
            drop(stream);
            ProbeOutcome::Success(String::new())
        }
        Ok(Err(e)) => ProbeOutcome::Failure(format!("dial tcp {address}: {}", go_dial_error(&e))),
        Err(_) => ProbeOutcome::Failure(format!("dial tcp {address}: i/o timeout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_open_port_succeeds() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let outcome = tcp_probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(outcome, ProbeOutcome::Success(String::new()));
    }

    #[tokio::test]
    async fn a_closed_port_fails_naming_the_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let outcome = tcp_probe("127.0.0.1", port, Duration::from_secs(1)).await;
        let ProbeOutcome::Failure(output) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            output.starts_with(&format!("dial tcp 127.0.0.1:{port}: "))
                && output.to_lowercase().contains("refused"),
            "{output}"
        );
    }
}
