//! The URL source over real HTTP on 127.0.0.1, without a runtime: the
//! hyper fetcher, the poll state and the merge, one poll at a time.

use std::time::Duration;

use crilet::config::http::fetch::{FetchOptions, HttpFetcher};
use crilet::config::http::{Fetch, HTTP_SOURCE_NAME, MAX_BODY_BYTES, Outcome, UrlPoll};
use crilet::config::merge::PodConfig;
use crilet::pod;

use crate::manifest_server::{ManifestServer, Reply, TestTls};

const NODE: &str = "url-node";

pub fn pod_yaml(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}

pub fn pod_list(pods: &[(&str, &str)]) -> String {
    let mut text = "apiVersion: v1\nkind: PodList\nitems:\n".to_string();
    for (name, image) in pods {
        text.push_str(&format!(
            "- metadata:\n    name: {name}\n  spec:\n    containers:\n    - name: main\n      image: {image}\n"
        ));
    }
    if pods.is_empty() {
        text = "apiVersion: v1\nkind: PodList\nitems: []\n".into();
    }
    text
}

/// One URL source and the merge it feeds, polled by hand.
struct Probe {
    fetcher: HttpFetcher,
    poll: UrlPoll,
    config: PodConfig,
}

impl Probe {
    fn new(url: &str, options: FetchOptions) -> Self {
        Probe {
            fetcher: HttpFetcher::new(url, &options).unwrap(),
            poll: UrlPoll::new(url, NODE),
            config: PodConfig::new([HTTP_SOURCE_NAME]),
        }
    }

    async fn poll(&mut self) -> Outcome {
        let fetched = self.fetcher.fetch(&self.poll.validators()).await;
        let outcome = self.poll.on_fetch(fetched, jiff::Timestamp::now());
        if let Some(pods) = &outcome.set {
            self.config.set(HTTP_SOURCE_NAME, pods.clone());
        }
        outcome
    }

    /// `name=image` of every merged pod.
    fn pods(&self) -> Vec<String> {
        self.config
            .pods()
            .iter()
            .map(|p| {
                let image = p.spec.as_ref().unwrap().containers[0].image.clone();
                format!("{}={}", pod::name(p), image.unwrap_or_default())
            })
            .collect()
    }

    fn error(outcome: &Outcome) -> String {
        match &outcome.report {
            Some((_, Some(e))) => e.to_string(),
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn url_source_single_pod_list_and_image_change() {
    let server = ManifestServer::start(Reply::manifest(pod_yaml("web", "busybox"))).await;
    let mut probe = Probe::new(&server.url(), FetchOptions::default());
    assert!(probe.poll().await.set.is_some());
    assert_eq!(probe.pods(), ["web-url-node=busybox"]);
    let uid = pod::uid(&probe.config.pods()[0]).to_string();

    server.set(Reply::manifest(pod_yaml("web", "busybox:1.36")));
    assert!(probe.poll().await.set.is_some());
    assert_eq!(probe.pods(), ["web-url-node=busybox:1.36"]);
    assert_ne!(
        pod::uid(&probe.config.pods()[0]),
        uid,
        "an edit is a new pod"
    );

    server.set(Reply::manifest(pod_list(&[
        ("a", "busybox"),
        ("b", "nginx"),
    ])));
    probe.poll().await;
    assert_eq!(probe.pods(), ["a-url-node=busybox", "b-url-node=nginx"]);

    // JSON is served the same way.
    server.set(Reply::manifest(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"m","image":"busybox"}]}}"#,
    ));
    probe.poll().await;
    assert_eq!(probe.pods(), ["j-url-node=busybox"]);
}

/// A body of exactly MAX_BODY_BYTES (a pod padded with a comment) is read
/// and parsed, with and without a Content-Length; one byte more is refused.
#[tokio::test]
async fn url_source_body_just_under_and_just_over_the_limit() {
    let mut body = pod_yaml("web", "busybox");
    body.push_str(&"#".repeat(MAX_BODY_BYTES - body.len()));
    let server = ManifestServer::start(Reply::manifest(body.clone())).await;
    let mut probe = Probe::new(&server.url(), FetchOptions::default());
    let outcome = probe.poll().await;
    assert!(outcome.set.is_some(), "{:?}", outcome.report);
    assert_eq!(probe.pods(), ["web-url-node=busybox"]);

    body.push('#');
    server.set(Reply::manifest(body));
    let error = Probe::error(&probe.poll().await);
    assert!(
        error.contains(&server.url()) && error.contains(&MAX_BODY_BYTES.to_string()),
        "{error}"
    );
    assert_eq!(probe.pods(), ["web-url-node=busybox"], "pods kept");
}

#[tokio::test]
async fn url_source_unchanged_body_is_no_update_with_or_without_validators() {
    let body = pod_yaml("web", "busybox");
    let lm = "Mon, 30 Nov 2026 04:00:00 GMT";
    let cases = [
        ("ETag", Some("\"v1\""), None),
        ("Last-Modified", None, Some(lm)),
        ("no validators", None, None),
    ];
    for (what, etag, last_modified) in cases {
        let server = ManifestServer::start(Reply::Manifest {
            body: body.clone(),
            etag: etag.map(String::from),
            last_modified: last_modified.map(String::from),
        })
        .await;
        let mut probe = Probe::new(&server.url(), FetchOptions::default());
        assert!(probe.poll().await.set.is_some(), "{what}");
        let parsed = probe.poll.bodies_parsed();
        let again = probe.poll().await;
        assert_eq!(
            again,
            Outcome {
                set: None,
                report: None
            },
            "{what}"
        );
        assert_eq!(probe.poll.bodies_parsed(), parsed, "{what}: parsed again");

        let requests = server.requests();
        let second = &requests[1];
        let sent = |name: &str| second.get(name).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(sent("if-none-match").as_deref(), etag, "{what}");
        assert_eq!(
            sent("if-modified-since").as_deref(),
            last_modified,
            "{what}"
        );
        assert!(
            requests[0].get("if-none-match").is_none(),
            "{what}: first request is plain"
        );
    }
}

#[tokio::test]
async fn url_source_failures_keep_the_pods() {
    let good = pod_list(&[("a", "busybox"), ("b", "busybox")]);
    let mut server = ManifestServer::start(Reply::manifest(good.clone())).await;
    let options = FetchOptions {
        timeout: Duration::from_millis(500),
        ..FetchOptions::default()
    };
    let mut probe = Probe::new(&server.url(), options.clone());
    probe.poll().await;
    let before = probe.pods();
    assert_eq!(before, ["a-url-node=busybox", "b-url-node=busybox"]);

    let cases = [
        ("500", Reply::Status(500), "HTTP status 500"),
        ("timeout", Reply::Hang, "no complete answer within 500ms"),
        ("oversize", Reply::Oversize { chunked: false }, "limit"),
        (
            "oversize, chunked",
            Reply::Oversize { chunked: true },
            "limit",
        ),
        // Refused at the limit, not after the 500 ms timeout: the fetcher
        // stops reading there instead of buffering the whole body.
        ("endless body", Reply::Endless, "limit"),
        (
            "invalid YAML",
            Reply::manifest("items: [unclosed\n"),
            "invalid YAML",
        ),
        ("redirect loop", Reply::RedirectLoop, "redirects"),
    ];
    for (what, reply, text) in cases {
        server.set(reply);
        let outcome = probe.poll().await;
        assert_eq!(outcome.set, None, "{what}");
        let error = Probe::error(&outcome);
        assert!(
            error.contains(&server.url()) && error.contains(text),
            "{what}: {error}"
        );
        assert_eq!(probe.pods(), before, "{what}: pods kept");
    }

    // Connection refused: nothing listens on the port any more.
    server.stop().await;
    let error = Probe::error(&probe.poll().await);
    assert!(
        error.contains("cannot connect") && error.contains(&server.url()),
        "{error}"
    );
    assert_eq!(probe.pods(), before, "connection refused: pods kept");

    // Back with the same body: a recovery, and still no update.
    let back = ManifestServer::start_on(server.addr, Reply::manifest(good)).await;
    let outcome = probe.poll().await;
    assert_eq!(outcome.set, None);
    assert!(
        matches!(
            outcome.report,
            Some((crilet::config::http::Report::Recovered { .. }, None))
        ),
        "{outcome:?}"
    );
    drop(back);
}

#[tokio::test]
async fn url_source_list_dropping_one_pod_removes_only_it() {
    let three = pod_list(&[("a", "busybox"), ("b", "busybox"), ("c", "busybox")]);
    let server = ManifestServer::start(Reply::manifest(three)).await;
    let mut probe = Probe::new(&server.url(), FetchOptions::default());
    probe.poll().await;
    let uids = |p: &Probe| -> Vec<String> {
        p.config
            .pods()
            .iter()
            .map(|p| pod::uid(p).to_string())
            .collect()
    };
    let before = uids(&probe);

    server.set(Reply::manifest(pod_list(&[
        ("a", "busybox"),
        ("c", "busybox"),
    ])));
    let fetched = probe.fetcher.fetch(&probe.poll.validators()).await;
    let set = probe
        .poll
        .on_fetch(fetched, jiff::Timestamp::now())
        .set
        .unwrap();
    let changes = probe.config.set(HTTP_SOURCE_NAME, set);
    let removed: Vec<String> = changes.removes.iter().map(|p| pod::full_name(p)).collect();
    assert_eq!(removed, ["b-url-node_default"]);
    assert!(
        changes.adds.is_empty() && changes.updates.is_empty(),
        "{changes:?}"
    );
    assert_eq!(uids(&probe), [before[0].clone(), before[2].clone()]);
}

#[tokio::test]
async fn url_source_sends_the_configured_headers() {
    let server = ManifestServer::start(Reply::manifest(pod_yaml("web", "busybox"))).await;
    let options = FetchOptions {
        headers: vec![
            ("Authorization".into(), "Bearer s3cret".into()),
            ("X-Fleet".into(), "a".into()),
            ("X-Fleet".into(), "b".into()),
        ],
        ..FetchOptions::default()
    };
    let mut probe = Probe::new(&server.url(), options);
    probe.poll().await;
    let request = &server.requests()[0];
    let all = |name: &str| -> Vec<String> {
        request
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(all("authorization"), ["Bearer s3cret"]);
    assert_eq!(all("x-fleet"), ["a", "b"]);
    assert!(all("user-agent")[0].starts_with("crilet/"));
}

/// A redirect to another host (here: port) drops the credentials, as Go's
/// client does for the kubelet; the other headers follow.
#[tokio::test]
async fn a_redirect_elsewhere_drops_the_authorization_header() {
    let target = ManifestServer::start(Reply::manifest(pod_yaml("web", "busybox"))).await;
    let server = ManifestServer::start(Reply::RedirectTo(target.url())).await;
    let options = FetchOptions {
        headers: vec![
            ("Authorization".into(), "Bearer s3cret".into()),
            ("X-Fleet".into(), "a".into()),
        ],
        ..FetchOptions::default()
    };
    let mut probe = Probe::new(&server.url(), options);
    assert!(probe.poll().await.set.is_some());
    assert_eq!(probe.pods(), ["web-url-node=busybox"]);
    let first = &server.requests()[0];
    assert_eq!(first.get("authorization").unwrap(), "Bearer s3cret");
    let followed = &target.requests()[0];
    assert!(followed.get("authorization").is_none(), "{followed:?}");
    assert_eq!(followed.get("x-fleet").unwrap(), "a");
}

#[tokio::test]
async fn url_source_https_trusts_the_ca_file() {
    let tls = TestTls::new();
    let server =
        ManifestServer::start_tls(Reply::manifest(pod_yaml("web", "busybox")), tls.server).await;
    assert!(server.url().starts_with("https://127.0.0.1:"));

    // The system's roots do not know the private CA.
    let mut untrusting = Probe::new(&server.url(), FetchOptions::default());
    let error = Probe::error(&untrusting.poll().await);
    assert!(
        error.contains(&server.url()) && error.to_lowercase().contains("certificate"),
        "{error}"
    );

    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &tls.ca_pem).unwrap();
    let options = FetchOptions {
        ca_file: Some(ca_file),
        ..FetchOptions::default()
    };
    let mut probe = Probe::new(&server.url(), options);
    assert!(probe.poll().await.set.is_some());
    assert_eq!(probe.pods(), ["web-url-node=busybox"]);
}
