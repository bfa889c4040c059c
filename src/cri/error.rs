//! Errors of the runtime adapter. Each names the endpoint and the operation,
//! and keeps the gRPC code and the transport error's source chain, so a
//! caller can both branch on `code()` and print the whole cause.

use std::time::Duration;

/// Clone: one pull's error is handed to every pod worker that waited on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    /// The endpoint string itself is unusable; nothing was dialled.
    #[error("container runtime endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },

    /// The runtime answered with a gRPC error, or the call failed in transport.
    #[error("{op} on {endpoint}: {}", describe_status(.status))]
    Rpc {
        endpoint: String,
        op: &'static str,
        #[source]
        status: tonic::Status,
    },

    /// A stream the runtime had opened failed (it restarted, say). No hint
    /// about the endpoint: it did speak CRI.
    #[error("{op} on {endpoint}: the stream broke: {}", describe_cause(.status))]
    StreamBroken {
        endpoint: String,
        op: &'static str,
        #[source]
        status: tonic::Status,
    },

    /// No answer before the call's deadline.
    #[error("{op} on {endpoint}: no answer within {timeout:?} (is the endpoint a CRI runtime?)")]
    DeadlineExceeded {
        endpoint: String,
        op: &'static str,
        timeout: Duration,
    },

    /// The runtime answered OK but left out something CRI requires.
    #[error("{op} on {endpoint}: malformed reply: {what}")]
    Malformed {
        endpoint: String,
        op: &'static str,
        what: String,
    },

    /// A fake or a caller-side check refused the request.
    #[error("{op}: {message}")]
    Refused { op: &'static str, message: String },

    /// The `Runtime` implementation has no such call (the trait's default).
    #[error("{op}: not implemented by this runtime")]
    Unsupported { op: &'static str },
}

impl RuntimeError {
    /// The gRPC code, as the runtime (or the transport) reported it.
    pub fn code(&self) -> tonic::Code {
        match self {
            RuntimeError::Rpc { status, .. } | RuntimeError::StreamBroken { status, .. } => {
                status.code()
            }
            RuntimeError::DeadlineExceeded { .. } => tonic::Code::DeadlineExceeded,
            RuntimeError::InvalidEndpoint { .. } => tonic::Code::InvalidArgument,
            RuntimeError::Malformed { .. } => tonic::Code::Internal,
            RuntimeError::Refused { .. } => tonic::Code::FailedPrecondition,
            RuntimeError::Unsupported { .. } => tonic::Code::Unimplemented,
        }
    }

    /// What the runtime itself said: a gRPC status's message alone, as the
    /// kubelet shows a failed CreateContainer or StartContainer in the
    /// container's waiting message and its `Failed` event; anything else
    /// (no answer, a transport failure) in full, since the runtime said
    /// nothing.
    pub fn runtime_message(&self) -> String {
        match self {
            RuntimeError::Rpc { status, .. }
                if std::error::Error::source(status).is_none() && !status.message().is_empty() =>
            {
                status.message().to_string()
            }
            other => other.to_string(),
        }
    }

    /// True when the object the call named does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == tonic::Code::NotFound
    }
}

/// How tonic words the statuses it makes itself, without a source.
const TRANSPORT_PREFIXES: [&str; 4] = [
    "transport error",
    "h2 protocol error",
    "operation was canceled",
    "error trying to connect",
];

/// One line for a status. tonic puts a transport failure's text in the
/// source chain, not in the message, so the innermost cause is appended
/// here: "connection refused" or "No such file" must reach the operator.
fn describe_status(status: &tonic::Status) -> String {
    let mut line = describe_cause(status);
    // A peer that is not a gRPC server either answers garbage to the HTTP/2
    // preface or hangs up on it, depending on timing: say so in both cases.
    // A status the runtime itself sent (CRI-O's "write child: broken pipe"
    // from a failed conmon) is no hang-up: only tonic's own failures count.
    let lower = line.to_lowercase();
    let from_transport = std::error::Error::source(status).is_some()
        || TRANSPORT_PREFIXES
            .iter()
            .any(|p| status.message().to_lowercase().starts_with(p));
    if !from_transport {
        return line;
    }
    if lower.contains("h2 protocol error") || lower.contains("invalid http") {
        line.push_str(" (the endpoint does not speak gRPC; is it a CRI runtime socket?)");
    } else if ["broken pipe", "connection reset", "connection closed"]
        .iter()
        .any(|s| lower.contains(s))
    {
        line.push_str(" (the endpoint hung up; is it a CRI runtime socket?)");
    }
    line
}

/// The code, the message and the innermost transport cause of a status.
fn describe_cause(status: &tonic::Status) -> String {
    let mut line = format!("{:?}", status.code());
    if !status.message().is_empty() {
        line.push_str(": ");
        line.push_str(status.message());
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    let mut last = None;
    while let Some(err) = cause {
        last = Some(err);
        cause = err.source();
    }
    if let Some(root) = last {
        let root = root.to_string();
        if !line.contains(&root) {
            line.push_str(": ");
            line.push_str(&root);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_error_names_endpoint_operation_and_code() {
        let err = RuntimeError::Rpc {
            endpoint: "unix:///run/x.sock".into(),
            op: "Version",
            status: tonic::Status::not_found("no such sandbox"),
        };
        assert_eq!(
            err.to_string(),
            "Version on unix:///run/x.sock: NotFound: no such sandbox"
        );
        assert!(err.is_not_found());
        // What the runtime said, alone, as the kubelet shows it.
        assert_eq!(err.runtime_message(), "no such sandbox");
    }

    #[test]
    fn rpc_error_appends_innermost_transport_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused here");
        let mut status = tonic::Status::unavailable("transport error");
        status.set_source(std::sync::Arc::new(io));
        let err = RuntimeError::Rpc {
            endpoint: "unix:///x".into(),
            op: "Status",
            status,
        };
        assert_eq!(
            err.to_string(),
            "Status on unix:///x: Unavailable: transport error: refused here"
        );
        assert_eq!(err.code(), tonic::Code::Unavailable);
        // The runtime said nothing: the whole error is the message.
        assert_eq!(err.runtime_message(), err.to_string());
    }

    #[test]
    fn a_peer_that_is_not_grpc_gets_a_hint() {
        for (message, hint) in [
            (
                "h2 protocol error: frame with invalid size",
                "does not speak gRPC",
            ),
            (
                "transport error: stream closed because of a broken pipe",
                "hung up",
            ),
            ("transport error: Connection reset by peer", "hung up"),
            ("operation was canceled: connection closed", "hung up"),
        ] {
            let err = RuntimeError::Rpc {
                endpoint: "unix:///x".into(),
                op: "Version",
                status: tonic::Status::unknown(message),
            };
            let text = err.to_string();
            assert!(
                text.contains(hint) && text.ends_with("is it a CRI runtime socket?)"),
                "{text}"
            );
        }
        // The runtime's own status that mentions a broken pipe: no hint.
        let runtime_said = RuntimeError::Rpc {
            endpoint: "unix:///x".into(),
            op: "CreateContainer",
            status: tonic::Status::unknown(
                "failed to wait exit status 1 after failing with: write child: broken pipe",
            ),
        };
        assert!(
            !runtime_said.to_string().contains("CRI runtime socket"),
            "{runtime_said}"
        );
        let plain = RuntimeError::Rpc {
            endpoint: "unix:///x".into(),
            op: "Version",
            status: tonic::Status::not_found("no such sandbox"),
        };
        assert!(!plain.to_string().contains("CRI runtime socket"));
    }

    #[test]
    fn deadline_error_has_its_own_code() {
        let err = RuntimeError::DeadlineExceeded {
            endpoint: "unix:///x".into(),
            op: "Version",
            timeout: Duration::from_secs(2),
        };
        assert_eq!(err.code(), tonic::Code::DeadlineExceeded);
        assert!(err.to_string().contains("no answer within 2s"));
    }

    #[test]
    fn a_broken_stream_names_its_cause_without_the_endpoint_hint() {
        let err = RuntimeError::StreamBroken {
            endpoint: "unix:///x".into(),
            op: "GetContainerEvents",
            status: tonic::Status::unknown(
                "h2 protocol error: stream closed because of a broken pipe",
            ),
        };
        assert_eq!(
            err.to_string(),
            "GetContainerEvents on unix:///x: the stream broke: Unknown: h2 protocol error: stream closed because of a broken pipe"
        );
        assert_eq!(err.code(), tonic::Code::Unknown);
    }
}
