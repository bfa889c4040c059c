//! Bad runtime endpoints: each gives one clear line naming the endpoint and
//! the cause, a non-zero exit, no panic, and no wait past the deadline.
//! These need no runtime and always run.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crilet::cri::{CriRuntime, Runtime, RuntimeOptions};

struct Outcome {
    code: Option<i32>,
    stderr: String,
    stdout: String,
    took: Duration,
}

fn runtime_info(endpoint: &str) -> Outcome {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args([
            "runtime-info",
            "--container-runtime-endpoint",
            endpoint,
            "--runtime-request-timeout",
            "2s",
        ])
        .env_remove("CRILET_LOG")
        .output()
        .expect("run crilet");
    Outcome {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        took: start.elapsed(),
    }
}

/// The failure shape every bad endpoint must have.
fn assert_clear_failure(o: &Outcome, endpoint: &str, cause: &str) {
    assert_eq!(o.code, Some(1), "exit code; stderr: {}", o.stderr);
    assert!(o.stdout.is_empty(), "nothing on stdout: {}", o.stdout);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line, got: {}", o.stderr);
    let line = lines[0];
    assert!(line.starts_with("crilet: error: "), "{line}");
    assert!(line.contains(endpoint), "names the endpoint: {line}");
    assert!(line.contains(cause), "says {cause:?}: {line}");
    assert!(!line.contains("panicked"), "{line}");
    assert!(o.took < Duration::from_secs(10), "took {:?}", o.took);
}

fn short_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("crilet-ep-")
        .tempdir_in("/tmp")
        .unwrap()
}

#[test]
fn missing_socket() {
    let dir = short_tempdir();
    let ep = format!("unix://{}/containerd.sock", dir.path().display());
    assert_clear_failure(&runtime_info(&ep), &ep, "does not exist");
}

#[test]
fn path_that_is_not_a_socket() {
    let dir = short_tempdir();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "not a socket").unwrap();
    let ep = format!("unix://{}", file.display());
    assert_clear_failure(&runtime_info(&ep), &ep, "is not a unix socket");
    let ep = format!("unix://{}", dir.path().display());
    assert_clear_failure(&runtime_info(&ep), &ep, "is not a unix socket");
}

#[test]
fn stale_socket_with_no_listener() {
    let dir = short_tempdir();
    let path = dir.path().join("stale.sock");
    drop(UnixListener::bind(&path).unwrap()); // the file stays, nobody listens
    let ep = format!("unix://{}", path.display());
    assert_clear_failure(&runtime_info(&ep), &ep, "Connection refused");
}

/// Serves every connection with `reply`, then closes it (`None`: stay silent).
fn serve(path: &Path, reply: Option<&'static [u8]>) {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            match reply {
                Some(bytes) => {
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf);
                    let _ = conn.write_all(bytes);
                }
                None => held.push(conn),
            }
        }
    });
}

#[test]
fn socket_that_speaks_http() {
    let dir = short_tempdir();
    let path = dir.path().join("http.sock");
    serve(
        &path,
        Some(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    );
    let ep = format!("unix://{}", path.display());
    // It answers the HTTP/2 preface with an HTTP/1 error, or hangs up while
    // the preface is still being written: either way the line says why.
    assert_clear_failure(&runtime_info(&ep), &ep, "is it a CRI runtime socket?");
}

#[test]
fn socket_that_never_answers_hits_the_deadline() {
    let dir = short_tempdir();
    let path = dir.path().join("silent.sock");
    serve(&path, None);
    let ep = format!("unix://{}", path.display());
    let o = runtime_info(&ep);
    assert_clear_failure(&o, &ep, "no answer within 2s");
    assert!(
        o.took >= Duration::from_secs(2),
        "gave up early: {:?}",
        o.took
    );
}

#[test]
fn unsupported_scheme() {
    for ep in [
        "tcp://127.0.0.1:10010",
        "http://localhost:1234",
        "npipe:////./pipe/x",
    ] {
        let o = runtime_info(ep);
        assert_clear_failure(&o, ep, "is not supported");
    }
}

#[test]
fn path_too_long_for_a_unix_socket() {
    let ep = format!("unix:///tmp/{}.sock", "x".repeat(120));
    assert_clear_failure(&runtime_info(&ep), &ep, "at most 107");
}

#[test]
fn relative_path_is_refused() {
    let ep = "unix://run/containerd/containerd.sock";
    assert_clear_failure(&runtime_info(ep), ep, "not absolute");
}

#[tokio::test]
async fn trait_calls_fail_with_typed_errors() {
    let dir = short_tempdir();
    let missing = format!("unix://{}/none.sock", dir.path().display());
    let rt = CriRuntime::connect_lazy(&missing, RuntimeOptions::default()).unwrap();
    let err = rt.version().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    assert!(err.to_string().contains("does not exist"), "{err}");
    // The error keeps its source chain (the tonic status and below).
    assert!(std::error::Error::source(&err).is_some());

    let silent = dir.path().join("silent.sock");
    serve(&silent, None);
    let rt = CriRuntime::connect_lazy(
        &format!("unix://{}", silent.display()),
        RuntimeOptions {
            request_timeout: Duration::from_millis(300),
            ..RuntimeOptions::default()
        },
    )
    .unwrap();
    let start = Instant::now();
    let err = rt.list_images().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));

    let err = CriRuntime::connect_lazy("tcp://127.0.0.1:1", RuntimeOptions::default()).unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}

#[test]
fn takeover_dry_run_names_a_dead_runtime_and_touches_nothing() {
    let dir = short_tempdir();
    let ep = format!("unix://{}/containerd.sock", dir.path().display());
    let root = dir.path().join("root");
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(["takeover", "--dry-run", "--container-runtime-endpoint", &ep])
        .args(["--runtime-request-timeout", "2s"])
        .arg("--root-dir")
        .arg(&root)
        .arg("--pod-manifest-path")
        .arg(dir.path())
        .env_remove("CRILET_LOG")
        .output()
        .expect("run crilet");
    let o = Outcome {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        took: start.elapsed(),
    };
    assert_clear_failure(&o, &ep, "does not exist");
    assert!(!root.exists(), "a dry run writes nothing");
}

/// A gRPC server on `path` that answers every call with status OK and the
/// message `reply` (its bytes as they are), as a runtime with a bug would.
async fn serve_grpc_reply(path: &Path, reply: &'static [u8]) {
    use bytes::Bytes;
    use http_body_util::StreamBody;
    use hyper::body::{Frame, Incoming};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let listener = tokio::net::UnixListener::bind(path).unwrap();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let service = hyper::service::service_fn(|_req: hyper::Request<Incoming>| async {
                let mut message = vec![0u8];
                message.extend_from_slice(&(reply.len() as u32).to_be_bytes());
                message.extend_from_slice(reply);
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                let frames = vec![
                    Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(message))),
                    Ok(Frame::trailers(trailers)),
                ];
                let body = StreamBody::new(futures::stream::iter(frames));
                hyper::Response::builder()
                    .header("content-type", "application/grpc")
                    .body(body)
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(conn), service),
            );
        }
    });
}

/// The relist's brief lists, from a runtime whose replies cannot be read:
/// a typed error that names the endpoint and the call, no panic. The same
/// server with a well-formed (empty) reply gives empty lists, so what fails
/// is the reply, not the server.
#[tokio::test]
async fn brief_lists_of_a_garbled_reply_are_a_malformed_error() {
    let keys = crilet::kuberuntime::observe::RELIST_KEYS;
    let dir = short_tempdir();
    let connect = |sock: &Path| {
        CriRuntime::connect_lazy(
            &format!("unix://{}", sock.display()),
            RuntimeOptions {
                request_timeout: Duration::from_secs(5),
                ..RuntimeOptions::default()
            },
        )
        .unwrap()
    };

    let empty = dir.path().join("empty.sock");
    serve_grpc_reply(&empty, b"").await;
    let (sandboxes, containers) = connect(&empty).list_briefs(keys).await.unwrap();
    assert!(sandboxes.is_empty() && containers.is_empty());

    // Field 1 (the items), length-delimited, whose length runs past the end.
    let garbled = dir.path().join("garbled.sock");
    serve_grpc_reply(&garbled, b"\x0a\x7f\x0a\x02id").await;
    let err = connect(&garbled).list_briefs(keys).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Internal, "{err}");
    let text = err.to_string();
    assert!(text.contains("malformed reply"), "{text}");
    assert!(text.contains(&garbled.display().to_string()), "{text}");
    assert!(
        text.starts_with("ListPodSandbox") || text.starts_with("ListContainers"),
        "names the call: {text}"
    );
}
