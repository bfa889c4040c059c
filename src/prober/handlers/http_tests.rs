use super::super::test_server::{TestServer, path, response, self_signed_tls};
use super::*;
use std::sync::Arc;

fn target(port: u16, path: &str) -> HttpGetTarget {
    HttpGetTarget {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port,
        path: path.into(),
        headers: vec![],
    }
}

fn probe_client() -> HttpGetClient {
    HttpGetClient::new(PROBE_USER_AGENT)
}

const T: Duration = Duration::from_secs(5);

#[tokio::test]
async fn ok_is_success_with_the_body() {
    let server = TestServer::start(|_| Some(response(200, &[], "ok"))).await;
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/healthz"), T).await;
    assert_eq!(outcome, ProbeOutcome::Success("ok".into()));
}

#[tokio::test]
async fn the_request_carries_the_kubelet_headers() {
    let server = TestServer::start(|_| Some(response(204, &[], ""))).await;
    let port = server.addr.port();
    let mut t = target(port, "healthz?verbose=1");
    t.headers = vec![
        ("X-Probe".into(), "a".into()),
        ("x-probe".into(), "b".into()),
    ];
    let outcome = http_probe(&probe_client(), &t, T).await;
    assert_eq!(outcome, ProbeOutcome::Success(String::new()));
    let seen = server.requests();
    let head = &seen[0];
    assert!(
        head.starts_with("GET /healthz?verbose=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.starts_with(&format!(
            "GET /healthz?verbose=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        )),
        "{head}"
    );
    for line in [
        "User-Agent: kube-probe/1.32",
        "Accept: */*",
        "Connection: close",
        "X-Probe: a",
        "X-Probe: b",
    ] {
        assert!(
            head.contains(&format!("\r\n{line}\r\n")),
            "{line} in {head}"
        );
    }
    // No compression asked for, no body sent.
    let lower = head.to_lowercase();
    assert!(!lower.contains("accept-encoding") && !lower.contains("content-length"));
}

#[tokio::test]
async fn given_user_agent_host_and_an_empty_accept_replace_the_defaults() {
    let server = TestServer::start(|_| Some(response(200, &[], ""))).await;
    let mut t = target(server.addr.port(), "/");
    t.headers = vec![
        ("user-agent".into(), "mine/1".into()),
        ("Accept".into(), "".into()),
        ("Host".into(), "app.example".into()),
    ];
    http_probe(&probe_client(), &t, T).await;
    let head = &server.requests()[0];
    assert!(head.contains("\r\nHost: app.example\r\n"), "{head}");
    assert!(head.contains("\r\nUser-Agent: mine/1\r\n"), "{head}");
    assert!(
        !head.contains("kube-probe") && !head.contains("Accept"),
        "{head}"
    );
    assert_eq!(head.matches("Host:").count(), 1, "{head}");
}

#[tokio::test]
async fn a_redirect_on_the_same_host_is_followed() {
    let server = TestServer::start(|head| {
        Some(match path(head) {
            "/" => response(301, &[("Location", "/ready")], "moved"),
            "/ready" => response(200, &[], "ready"),
            _ => response(404, &[], ""),
        })
    })
    .await;
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), T).await;
    assert_eq!(outcome, ProbeOutcome::Success("ready".into()));
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].starts_with("GET /ready "), "{}", seen[1]);
}

#[tokio::test]
async fn a_redirect_to_another_host_is_a_warning_and_not_followed() {
    let other = TestServer::start(|_| Some(response(200, &[], "elsewhere"))).await;
    // localhost is another hostname than 127.0.0.1, though the same machine.
    let location = format!("http://localhost:{}/", other.addr.port());
    let server =
        TestServer::start(move |_| Some(response(302, &[("Location", &location)], "see other")))
            .await;
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), T).await;
    assert_eq!(
        outcome,
        ProbeOutcome::Warning("Probe terminated redirects, Response body: see other".into())
    );
    assert!(other.requests().is_empty());
}

#[tokio::test]
async fn a_redirect_loop_stops_after_ten_requests() {
    let server = TestServer::start(|_| Some(response(307, &[("Location", "/again")], ""))).await;
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), T).await;
    let ProbeOutcome::Failure(output) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(output.ends_with("stopped after 10 redirects"), "{output}");
    assert_eq!(server.requests().len(), 10);
}

#[tokio::test]
async fn a_given_host_survives_relative_redirects_only() {
    let port = Arc::new(std::sync::OnceLock::<u16>::new());
    let known = port.clone();
    let server = TestServer::start(move |head| {
        let absolute = format!("http://127.0.0.1:{}/three", known.get().unwrap());
        Some(match path(head) {
            "/" => response(302, &[("Location", "/two")], ""),
            "/two" => response(302, &[("Location", &absolute)], ""),
            _ => response(200, &[], "three"),
        })
    })
    .await;
    port.set(server.addr.port()).unwrap();
    let mut t = target(server.addr.port(), "/");
    t.headers = vec![("Host".into(), "app.example".into())];
    let outcome = http_probe(&probe_client(), &t, T).await;
    assert_eq!(outcome, ProbeOutcome::Success("three".into()));
    let seen = server.requests();
    assert!(seen[0].contains("\r\nHost: app.example\r\n"), "{}", seen[0]);
    assert!(seen[1].contains("\r\nHost: app.example\r\n"), "{}", seen[1]);
    let own = format!("\r\nHost: 127.0.0.1:{}\r\n", server.addr.port());
    assert!(seen[2].contains(&own), "{}", seen[2]);
}

#[tokio::test]
async fn client_and_server_errors_fail_with_the_status_code() {
    for code in [400, 404, 500, 503] {
        let server = TestServer::start(move |_| Some(response(code, &[], "nope"))).await;
        let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), T).await;
        assert_eq!(
            outcome,
            ProbeOutcome::Failure(format!("HTTP probe failed with statuscode: {code}"))
        );
    }
}

#[tokio::test]
async fn a_3xx_without_location_is_a_warning() {
    let server = TestServer::start(|_| Some(response(304, &[], ""))).await;
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), T).await;
    assert!(matches!(outcome, ProbeOutcome::Warning(_)), "{outcome:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_fails_at_the_timeout() {
    let server = TestServer::start(|_| None).await;
    let started = std::time::Instant::now();
    let timeout = Duration::from_millis(300);
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), timeout).await;
    let elapsed = started.elapsed();
    let ProbeOutcome::Failure(output) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(output.contains("timed out after 300ms"), "{output}");
    assert!(
        elapsed >= timeout && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_closed_port_fails_naming_the_url() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let outcome = http_probe(&probe_client(), &target(port, "/x"), T).await;
    let ProbeOutcome::Failure(output) = outcome else {
        panic!("{outcome:?}")
    };
    let want = format!("Get \"http://127.0.0.1:{port}/x\": dial tcp 127.0.0.1:{port}: ");
    assert!(output.starts_with(&want), "{output}");
}

#[tokio::test]
async fn https_does_not_verify_the_certificate() {
    let server =
        TestServer::start_tls(|_| Some(response(200, &[], "secure")), self_signed_tls()).await;
    let mut t = target(server.addr.port(), "/");
    t.scheme = Scheme::Https;
    // An IP the certificate does not name, signed by nobody we trust.
    let outcome = http_probe(&probe_client(), &t, T).await;
    assert_eq!(outcome, ProbeOutcome::Success("secure".into()));
    t.host = "localhost".into();
    let outcome = http_probe(&probe_client(), &t, T).await;
    assert_eq!(outcome, ProbeOutcome::Success("secure".into()));
}

#[tokio::test]
async fn https_to_a_plain_http_server_fails() {
    use tokio::io::AsyncWriteExt;
    // A plain HTTP server answers a TLS ClientHello with a 400.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    });
    let mut t = target(port, "/");
    t.scheme = Scheme::Https;
    let outcome = http_probe(&probe_client(), &t, T).await;
    let ProbeOutcome::Failure(output) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(output.contains(": tls handshake: "), "{output}");
}

#[tokio::test]
async fn a_long_body_is_cut_at_10_kib() {
    let body = "x".repeat(64 * 1024);
    let server = TestServer::start(move |_| Some(response(200, &[], &body))).await;
    let outcome = http_probe(&probe_client(), &target(server.addr.port(), "/"), T).await;
    let ProbeOutcome::Success(output) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(output.len(), MAX_OUTPUT_BYTES);
}

#[test]
fn urls_bracket_ipv6_and_keep_path_and_query() {
    let url = |scheme, host: &str, port, path: &str| {
        target_url(&HttpGetTarget {
            scheme,
            host: host.into(),
            port,
            path: path.into(),
            headers: vec![],
        })
        .map(String::from)
    };
    assert_eq!(
        url(Scheme::Http, "10.0.0.5", 8080, "/healthz").unwrap(),
        "http://10.0.0.5:8080/healthz"
    );
    assert_eq!(
        url(Scheme::Https, "::1", 6443, "livez?verbose").unwrap(),
        "https://[::1]:6443/livez?verbose"
    );
    assert_eq!(
        url(Scheme::Http, "[fd00::1]", 80, "").unwrap(),
        "http://[fd00::1]/"
    );
    assert!(url(Scheme::Http, "bad host", 80, "/").is_err());
}

#[test]
fn headers_follow_go_for_user_agent_and_accept() {
    let ua = HeaderValue::from_static(PROBE_USER_AGENT);
    let pairs = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    let (map, host) = request_headers(&[], &ua).unwrap();
    assert_eq!(map[USER_AGENT], PROBE_USER_AGENT);
    assert_eq!(map[ACCEPT], "*/*");
    assert_eq!(map[CONNECTION], "close");
    assert_eq!(host, None);
    // An empty User-Agent sends none; an empty Host is no Host.
    let (map, host) = request_headers(&pairs(&[("User-Agent", ""), ("Host", "")]), &ua).unwrap();
    assert!(!map.contains_key(USER_AGENT));
    assert_eq!(host, None);
    let (map, _) = request_headers(&pairs(&[("Accept", "application/json")]), &ua).unwrap();
    assert_eq!(map[ACCEPT], "application/json");
    assert!(request_headers(&pairs(&[("bad name", "x")]), &ua).is_err());
    assert!(request_headers(&pairs(&[("X-Ok", "line\nbreak")]), &ua).is_err());
}

#[tokio::test]
async fn an_invalid_header_is_a_failure_not_a_panic() {
    let t = HttpGetTarget {
        headers: vec![("bad name".into(), "x".into())],
        ..target(1, "/")
    };
    let outcome = http_probe(&probe_client(), &t, T).await;
    assert!(matches!(outcome, ProbeOutcome::Failure(_)), "{outcome:?}");
}
