//! The kubelet server of the real `crilet run`, against the agent tests'
//! containerd: client certificates from a private CA, the API server
//! double's TokenReviews and SubjectAccessReviews, and exec, attach,
//! port-forward and /run through to containerd's streaming server, spoken
//! to with WebSocket (`v4.channel.k8s.io`) as kubectl does.

use std::time::Duration;

use futures::SinkExt;
use http_body_util::Empty;
use hyper::body::Bytes;
use tokio_tungstenite::tungstenite::Message;

use crate::agent::*;
use crate::apiserver::ApiServer;
use crate::kubelet_server_client::*;
use crate::support::free_port;

const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: httpd\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'mkdir -p /www && echo hello from web > /www/index.html && exec httpd -f -p 8080 -h /www']\n  - name: ticker\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'while :; do echo tick; sleep 0.3; done']\n";

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn client_certificates_exec_attach_port_forward_and_run() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let pki = tempfile::tempdir().unwrap();
    let ca = Ca::new("crilet-test-ca");
    let port = free_port();
    let agent = AgentProcess::start_with(&[
        "--port".into(),
        port.to_string(),
        "--address".into(),
        "127.0.0.1".into(),
        "--client-ca-file".into(),
        files(pki.path(), &ca),
    ]);
    agent.write("web.yaml", WEB);
    agent.write("sh.yaml", &busybox_pod("sh", "Always", "exec sleep 100000"));
    let admin = Client::new(
        port,
        Some(&ca.client("kube-apiserver-kubelet-client", &["system:masters"])),
    );
    wait_healthy(&admin, &agent).await;
    let v = wait_for(&rt, &agent, "web", LIMIT, "both containers running", |v| {
        v.running("httpd").is_some() && v.running("ticker").is_some()
    })
    .await;
    let static_uid = v.uid().unwrap();
    wait_for(&rt, &agent, "sh", LIMIT, "running", |v| {
        v.running("main").is_some()
    })
    .await;
    // The self-signed certificate was made under the root directory.
    let pki_dir = agent.root.path().join("pki");
    assert!(pki_dir.join("kubelet.crt").exists() && pki_dir.join("kubelet.key").exists());

    // Authentication: no certificate is a 401, and so is another CA's.
    let anonymous = Client::new(port, None);
    assert_eq!(
        anonymous.get("/healthz").await,
        (401, "Unauthorized\n".into())
    );
    assert_eq!(anonymous.get("/pods").await.0, 401);
    // Another CA's certificate: requested, not required, as the kubelet's
    // tls.RequestClientCert, so the handshake succeeds and authentication
    // refuses it: 401.
    let stranger = Client::new(
        port,
        Some(&Ca::new("other-ca").client("mallory", &["system:masters"])),
    );
    assert_eq!(
        stranger.get("/healthz").await,
        (401, "Unauthorized\n".into())
    );

    // Read-only paths.
    assert_eq!(admin.get("/healthz").await, (200, "ok".into()));
    let (status, body) = admin.get("/pods").await;
    assert_eq!(status, 200, "{body}");
    let pods: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(pods["kind"], "PodList");
    let names: Vec<&str> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&agent.pod_name("web").as_str()), "{names:?}");
    assert_eq!(admin.get("/metrics").await.0, 200);
    assert_eq!(admin.get("/metrics/probes").await.0, 200);

    // Bad input: each answered with its status and a line naming it.
    let web = agent.pod_name("web");
    let cases = [
        ("GET", "/nope".to_string(), 404, "404 page not found"),
        (
            "GET",
            format!("/exec/default/nobody-{NODE}/main?command=ls&stdout=1"),
            404,
            "does not exist",
        ),
        (
            "GET",
            format!("/exec/default/{web}/nope?command=ls&stdout=1"),
            404,
            "nope",
        ),
        (
            "GET",
            format!("/exec/default/{web}/deadbeef/httpd?command=ls&stdout=1"),
            404,
            "no UID deadbeef",
        ),
        (
            "GET",
            format!("/exec/default/{web}/httpd?command=ls&stdout=1"),
            400,
            "Upgrade request required",
        ),
        (
            "GET",
            format!("/exec/default/{web}/httpd?command=ls"),
            400,
            "at least 1 of stdin",
        ),
        (
            "GET",
            format!("/portForward/default/{web}?port=x"),
            400,
            "unable to parse",
        ),
        (
            "GET",
            format!("/portForward/default/{web}"),
            400,
            "Upgrade request required",
        ),
        (
            "GET",
            format!("/exec/default/{web}/%zz"),
            400,
            "percent-encoding",
        ),
        (
            "GET",
            format!("/run/default/{web}/httpd?cmd=ls"),
            405,
            "POST",
        ),
        ("POST", format!("/run/default/{web}/httpd"), 400, "cmd"),
        (
            "GET",
            format!("/containerLogs/default/{web}/httpd?tailLines=-1"),
            422,
            "tailLines",
        ),
        (
            "GET",
            format!("/containerLogs/default/{web}/nope"),
            404,
            "nope",
        ),
        (
            "GET",
            format!("/containerLogs/default/nobody-{NODE}/httpd"),
            404,
            "does not exist",
        ),
    ];
    for (method, path, want, says) in cases {
        let (status, body) = admin.call(method, &path, &[]).await.unwrap();
        assert_eq!(status, want, "{method} {path}: {body}");
        assert!(body.contains(says), "{method} {path}: {body}");
    }
    let huge = format!("/exec/{}", "a".repeat(20_000));
    let answer = admin.call("GET", &huge, &[]).await;
    assert!(
        matches!(answer, Ok((400 | 414 | 431, _)) | Err(_)),
        "{answer:?}"
    );
    assert_eq!(admin.get("/healthz").await.0, 200, "still serving");

    // /run: ExecSync, output in the body.
    let (status, body) = admin
        .call(
            "POST",
            &format!("/run/default/{web}/httpd?cmd=cat%20/www/index.html"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!((status, body.as_str()), (200, "hello from web\n"));
    let (status, body) = admin
        .call(
            "POST",
            &format!("/run/default/{web}/{static_uid}/httpd?cmd=false"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("exited with 1"), "{body}");

    // exec over WebSocket: stdout, stderr and the exit status.
    let mut ws = admin
        .websocket(&format!(
            "/exec/default/{web}/{static_uid}/httpd?command=sh&command=-c&command=echo%20out;%20echo%20err%20%3E%262;%20exit%203&stdout=1&stderr=1"
        ))
        .await;
    let got = channels(&mut ws, Duration::from_secs(20), |c| !c[3].is_empty()).await;
    assert_eq!(text(&got[1]), "out\n");
    assert_eq!(text(&got[2]), "err\n");
    let status: serde_json::Value = serde_json::from_slice(&got[3])
        .unwrap_or_else(|e| panic!("channel 3 {:?}: {e}", text(&got[3])));
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");
    let mut ws = admin
        .websocket(&format!("/exec/default/{web}/httpd?command=true&stdout=1"))
        .await;
    let got = channels(&mut ws, Duration::from_secs(20), |c| !c[3].is_empty()).await;
    let status: serde_json::Value = serde_json::from_slice(&got[3]).unwrap();
    assert_eq!(status["status"], "Success", "{status}");

    // exec with stdin: what goes in comes out.
    let mut ws = admin
        .websocket(&format!(
            "/exec/default/{}/main?command=cat&stdin=1&stdout=1",
            agent.pod_name("sh")
        ))
        .await;
    ws.send(Message::Binary(Bytes::from_static(b"\x00ping\n")))
        .await
        .unwrap();
    let got = channels(&mut ws, Duration::from_secs(20), |c| {
        c[1].ends_with(b"ping\n")
    })
    .await;
    assert_eq!(text(&got[1]), "ping\n");
    drop(ws);

    // SPDY, as the API server speaks it: the upgrade goes through with the
    // runtime's protocol answer (the frames themselves are not spoken here).
    let spdy = [
        ("connection", "Upgrade"),
        ("upgrade", "SPDY/3.1"),
        ("x-stream-protocol-version", "v4.channel.k8s.io"),
        ("x-stream-protocol-version", "v3.channel.k8s.io"),
        ("content-length", "0"),
    ];
    let tls = admin.connect().await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn.with_upgrades());
    let mut req = hyper::Request::post(format!(
        "/exec/default/{web}/httpd?command=true&stdout=1&stderr=1"
    ))
    .header("host", "x");
    for (k, v) in spdy {
        req = req.header(k, v);
    }
    let answer = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(answer.status(), 101, "{:?}", answer.headers());
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header("upgrade").as_deref(), Some("SPDY/3.1"));
    assert_eq!(
        header("x-stream-protocol-version").as_deref(),
        Some("v4.channel.k8s.io")
    );
    drop(answer);

    // attach: the running container's output.
    let mut ws = admin
        .websocket(&format!("/attach/default/{web}/ticker?stdout=1"))
        .await;
    let got = channels(&mut ws, Duration::from_secs(20), |c| {
        text(&c[1]).contains("tick\ntick\n")
    })
    .await;
    assert!(
        text(&got[1]).contains("tick\n"),
        "attach saw {:?}",
        text(&got[1])
    );
    drop(ws);

    // port-forward to httpd in the pod's network namespace.
    let mut ws = admin
        .websocket(&format!("/portForward/default/{web}?port=8080"))
        .await;
    ws.send(Message::Binary(Bytes::from_static(
        b"\x00GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n",
    )))
    .await
    .unwrap();
    let got = channels(&mut ws, Duration::from_secs(20), |c| {
        text(&c[0]).contains("hello from web")
    })
    .await;
    let data = text(&got[0]);
    assert!(
        data.contains("200 OK") && data.contains("hello from web"),
        "port-forward data {data:?}, errors {:?}",
        text(&got[1])
    );

    agent.remove("web.yaml");
    agent.remove("sh.yaml");
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn webhook_authorization_and_bearer_tokens_through_the_api_server() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    let pki = tempfile::tempdir().unwrap();
    let ca = Ca::new("crilet-test-ca");
    let kubeconfig = api.kubeconfig(pki.path(), NODE);
    let port = free_port();
    let agent = AgentProcess::start_with(&[
        "--port".into(),
        port.to_string(),
        "--address".into(),
        "127.0.0.1".into(),
        "--client-ca-file".into(),
        files(pki.path(), &ca),
        "--kubeconfig".into(),
        kubeconfig.to_string_lossy().into_owned(),
        "--authorization-webhook-cache-unauthorized-ttl".into(),
        "2s".into(),
    ]);
    api.grant("alice", "get", "proxy");
    let alice = Client::new(port, Some(&ca.client("alice", &["devs"])));
    wait_healthy(&alice, &agent).await;

    // Allowed, and cached: no second review.
    let before = api.access_reviews();
    assert_eq!(alice.get("/healthz").await.0, 200);
    assert_eq!(alice.get("/pods").await.0, 200);
    assert_eq!(api.access_reviews(), before, "the allowed answer is cached");

    // Denied with the kubelet's text; the denial is cached for its TTL only.
    let (status, body) = alice.get("/stats/summary").await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[stats])\n"
    );
    let reviews = api.access_reviews();
    api.grant("alice", "get", "stats");
    assert_eq!(
        alice.get("/stats/summary").await.0,
        403,
        "still the cached denial"
    );
    assert_eq!(api.access_reviews(), reviews);
    // The denial's cache TTL (2 s) runs out: the point, so it is waited out.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_ne!(
        alice.get("/stats/summary").await.0,
        403,
        "asked again after 2s"
    );
    assert_eq!(api.access_reviews(), reviews + 1);
    let (status, body) = alice
        .call("POST", "/run/default/x/y?cmd=ls", &[])
        .await
        .unwrap();
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n"
        )
    );

    // Bearer tokens go through TokenReviews (cached); an unknown one is a 401.
    api.add_review_token("token-bob", "bob", &["ops"]);
    api.grant("bob", "get", "metrics");
    let anonymous = Client::new(port, None);
    let bearer = [("authorization", "Bearer token-bob")];
    assert_eq!(
        anonymous.call("GET", "/metrics", &bearer).await.unwrap().0,
        200
    );
    assert_eq!(
        anonymous
            .call("GET", "/metrics/probes", &bearer)
            .await
            .unwrap()
            .0,
        200
    );
    assert_eq!(api.token_reviews(), 1, "the token's review is cached");
    let (status, body) = anonymous.call("GET", "/pods", &bearer).await.unwrap();
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[proxy])\n"
        )
    );
    let bad = [("authorization", "Bearer nope")];
    assert_eq!(
        anonymous.call("GET", "/metrics", &bad).await.unwrap(),
        (401, "Unauthorized\n".into())
    );
    assert_eq!(anonymous.get("/metrics").await.0, 401);
    // The {uid} segment may be the mirror pod's UID (the API server's).
    api.grant("carol", "create", "proxy");
    let carol = Client::new(port, Some(&ca.client("carol", &[])));
    agent.write("sh.yaml", &busybox_pod("sh", "Always", "exec sleep 100000"));
    wait_for(&rt, &agent, "sh", LIMIT, "running", |v| {
        v.running("main").is_some()
    })
    .await;
    let full = agent.pod_name("sh");
    let mirror_uid = crate::support::eventually(LIMIT, || async {
        api.pod("default", &full).and_then(|p| p.metadata.uid)
    })
    .await
    .expect("a mirror pod");
    let run = |uid: String| {
        let (carol, full) = (carol.clone(), full.clone());
        async move {
            let path = format!("/run/default/{full}/{uid}/main?cmd=echo%20hi");
            carol.call("POST", &path, &[]).await.unwrap()
        }
    };
    assert_eq!(run(mirror_uid).await, (200, "hi\n".into()));
    assert_eq!(run("0000".into()).await.0, 404);
    agent.remove("sh.yaml");

    // The Node tells the API server where the kubelet server listens.
    let endpoint = crate::support::eventually(LIMIT, || async {
        api.nodes()
            .into_iter()
            .find_map(|n| n.status?.daemon_endpoints?.kubelet_endpoint)
    })
    .await;
    assert_eq!(endpoint.map(|e| e.port), Some(i32::from(port)));
    // The reviews are sent with the node's credentials.
    let asked: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("reviews"))
        .collect();
    assert!(asked.iter().all(|r| r.status == 201), "{asked:?}");
}
