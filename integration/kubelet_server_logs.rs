//! `/containerLogs` on the kubelet server of the real `crilet run`: tail,
//! limitBytes, since, timestamps, previous after a crash, follow, and the
//! kubelet's 400/422 answers, with a client certificate from a private CA.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;

use crate::agent::*;
use crate::kubelet_server_client::*;
use crate::support::free_port;

const CHATTY: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: chatty\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'for i in $(seq 1 20); do echo line $i; done; sleep 0.1; echo err >&2; exec sleep 100000']\n  - name: ticker\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done']\n  - name: crash\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'echo run at $(date +%s); sleep 1; exit 1']\n";

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn container_logs_tail_limit_since_previous_and_follow() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let pki = tempfile::tempdir().unwrap();
    let ca = Ca::new("crilet-test-ca");
    let port = free_port();
    let mut agent = AgentProcess::start_with(&[
        "--port".into(),
        port.to_string(),
        "--client-ca-file".into(),
        files(pki.path(), &ca),
    ]);
    agent.write("chatty.yaml", CHATTY);
    let admin = Client::new(
        port,
        Some(&ca.client("kube-apiserver-kubelet-client", &["system:masters"])),
    );
    wait_healthy(&admin, &agent).await;
    wait_for(&rt, &agent, "chatty", LIMIT, "crash restarted once", |v| {
        v.running("main").is_some() && v.named("crash").len() >= 2
    })
    .await;
    let base = format!("/containerLogs/default/{}", agent.pod_name("chatty"));
    let all: String = (1..=20).map(|i| format!("line {i}\n")).collect::<String>() + "err\n";
    let logs = |q: &'static str| {
        let (admin, base) = (admin.clone(), base.clone());
        async move { admin.get(&format!("{base}/{q}")).await }
    };
    assert_eq!(logs("main").await, (200, all.clone()));
    assert_eq!(
        logs("main?tailLines=3").await,
        (200, "line 19\nline 20\nerr\n".into())
    );
    assert_eq!(logs("main?tailLines=0").await, (200, String::new()));
    assert_eq!(logs("main?limitBytes=7").await, (200, "line 1\n".into()));
    assert_eq!(logs("main?sinceSeconds=3600").await, (200, all.clone()));
    assert_eq!(
        logs("main?sinceTime=2099-01-01T00:00:00Z").await,
        (200, String::new())
    );
    let (status, stamped) = logs("main?timestamps=true&tailLines=1").await;
    assert_eq!(status, 200);
    let (stamp, line) = stamped.split_once(' ').unwrap();
    assert!(
        stamp.parse::<jiff::Timestamp>().is_ok() && line == "err\n",
        "{stamped:?}"
    );
    assert_eq!(logs("main?sinceSeconds=0").await.0, 422);
    assert_eq!(logs("main?tailLines=x").await.0, 400);
    // previous: the instance before the last restart.
    let (status, previous) = logs("crash?previous=true").await;
    assert_eq!(status, 200, "{previous}");
    assert!(previous.starts_with("run at "), "{previous:?}");
    let (status, body) = logs("main?previous=true").await;
    assert_eq!(status, 400, "no previous instance: {body}");

    // follow: a chunked body that keeps coming, line after line.
    let tls = admin.connect().await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(format!("{base}/ticker?follow=true&tailLines=1"))
        .header("host", "x")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let answer = sender.send_request(req).await.unwrap();
    assert_eq!(answer.status(), 200);
    let mut body = answer.into_body();
    let mut seen = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                seen.push_str(&String::from_utf8_lossy(data));
            }
            if seen.lines().count() >= 5 {
                return;
            }
        }
    })
    .await;
    assert!(got.is_ok(), "follow stalled after {seen:?}");
    let numbers: Vec<u64> = seen
        .lines()
        .map(|l| l.strip_prefix("tick ").unwrap().parse().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    agent.remove("chatty.yaml");

    // The self-signed certificate outlives a restart.
    let crt = agent.root.path().join("pki").join("kubelet.crt");
    let first = std::fs::read(&crt).unwrap();
    assert!(agent.logs().contains("generated a self-signed certificate"));
    agent.terminate();
    agent.spawn();
    let back = crate::support::eventually(LIMIT, || async {
        let log = agent.logs();
        log.contains("reusing the self-signed certificate")
            .then_some(())
    })
    .await;
    assert!(back.is_some(), "{}", agent.logs());
    wait_healthy(&admin, &agent).await;
    assert_eq!(
        std::fs::read(&crt).unwrap(),
        first,
        "reused, not made again"
    );
}
