//! The URL source without a network: the poll state fed with answers, the
//! failure log, and the merge with the directory source.

use super::*;
use crate::config::merge::PodConfig;
use crate::pod::{CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

pub(super) const URL: &str = "http://127.0.0.1:8080/pods";
pub(super) const NODE: &str = "node1";

pub(super) fn pod_yaml(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}

fn list_json(pods: &[(&str, &str)]) -> String {
    let items: Vec<String> = pods
        .iter()
        .map(|(n, i)| {
            format!(r#"{{"metadata":{{"name":"{n}"}},"spec":{{"containers":[{{"name":"main","image":"{i}"}}]}}}}"#)
        })
        .collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"PodList","items":[{}]}}"#,
        items.join(",")
    )
}

pub(super) fn at(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000 + second).unwrap()
}

pub(super) fn ok(
    body: &str,
    etag: Option<&str>,
    last_modified: Option<&str>,
) -> Result<Fetched, UrlSourceError> {
    Ok(Fetched::Body {
        status: 200,
        validators: Validators {
            etag: etag.map(String::from),
            last_modified: last_modified.map(String::from),
        },
        body: body.as_bytes().to_vec(),
    })
}

pub(super) fn status(code: u16) -> Result<Fetched, UrlSourceError> {
    Ok(Fetched::Body {
        status: code,
        validators: Validators::default(),
        body: b"oops".to_vec(),
    })
}

pub(super) fn refused() -> Result<Fetched, UrlSourceError> {
    Err(UrlSourceError::Request {
        url: URL.into(),
        detail: "cannot connect: Connection refused".into(),
    })
}

pub(super) fn names(pods: &[SourcePod]) -> Vec<String> {
    pods.iter().map(|p| pod::name(&p.pod).to_string()).collect()
}

pub(super) fn images(pods: &[SourcePod]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            p.pod.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect()
}

/// What an outcome amounts to: the names in the SET sent (if any), and the
/// kind of report with the error text.
fn summary(o: &Outcome) -> (Option<Vec<String>>, Option<(Report, String)>) {
    (
        o.set.as_deref().map(names),
        o.report
            .as_ref()
            .map(|(r, e)| (*r, e.as_ref().map(ToString::to_string).unwrap_or_default())),
    )
}

#[test]
fn first_answer_is_a_set_of_url_pods() {
    let mut poll = UrlPoll::new(URL, NODE);
    let outcome = poll.on_fetch(ok(&pod_yaml("web", "busybox"), None, None), at(0));
    let pods = outcome.set.unwrap();
    assert_eq!(names(&pods), ["web-node1"]);
    assert_eq!(pods[0].origin, URL);
    let p = &pods[0].pod;
    assert_eq!(pod::annotation(p, CONFIG_SOURCE_ANNOTATION), Some("http"));
    // The UID recipe with url:<url>, not file:<path>.
    let mut raw = crate::pod::model::parse_pod(URL, pod_yaml("web", "busybox").as_bytes()).unwrap();
    apply_api_defaults(&mut raw);
    let want = crate::pod::defaults::static_pod_uid(&raw, NODE, &PodSource::Url(URL));
    assert_eq!(pod::uid(p), want);
    assert_eq!(outcome.report, None);
}

#[test]
fn an_empty_list_is_still_a_first_set() {
    let mut poll = UrlPoll::new(URL, NODE);
    let outcome = poll.on_fetch(ok(&list_json(&[]), None, None), at(0));
    assert_eq!(outcome.set, Some(vec![]));
    assert_eq!(
        poll.on_fetch(
            ok(
                "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[]}",
                None,
                None
            ),
            at(1)
        )
        .set,
        None
    );
}

#[test]
fn poll_sequence() {
    type Step = (
        &'static str,
        Result<Fetched, UrlSourceError>,
        Option<&'static [&'static str]>,
        Option<Report>,
        &'static str,
        bool,
    );
    let web = pod_yaml("web", "busybox");
    let web2 = pod_yaml("web", "busybox:1.36");
    let big = format!("{web}#{}\n", "x".repeat(MAX_BODY_BYTES));
    let steps: Vec<Step> = vec![
        (
            "304 before any body",
            Ok(Fetched::NotModified),
            None,
            Some(Report::Warn { failures: 1 }),
            "no earlier body",
            false,
        ),
        (
            "first body",
            ok(&web, Some("\"v1\""), None),
            Some(&["web-node1"]),
            Some(Report::Recovered { failures: 1 }),
            "",
            true,
        ),
        (
            "same bytes, no ETag",
            ok(&web, None, None),
            None,
            None,
            "",
            false,
        ),
        ("304", Ok(Fetched::NotModified), None, None, "", false),
        (
            "a comment only: parsed, same pods",
            ok(&format!("# hi\n{web}"), None, None),
            None,
            None,
            "",
            true,
        ),
        (
            "500",
            status(500),
            None,
            Some(Report::Warn { failures: 1 }),
            "HTTP status 500",
            false,
        ),
        (
            "404",
            status(404),
            None,
            Some(Report::Warn { failures: 2 }),
            "HTTP status 404",
            false,
        ),
        (
            "connection refused",
            refused(),
            None,
            Some(Report::Warn { failures: 3 }),
            "Connection refused",
            false,
        ),
        (
            "invalid YAML",
            ok("metadata: [unclosed\n", None, None),
            None,
            Some(Report::Quiet { failures: 4 }),
            "invalid YAML",
            true,
        ),
        (
            "not a pod",
            ok("kind: Service\napiVersion: v1\n", None, None),
            None,
            Some(Report::Quiet { failures: 5 }),
            "\"Service\" is not supported",
            true,
        ),
        (
            "over the limit",
            ok(&big, None, None),
            None,
            Some(Report::Quiet { failures: 6 }),
            "limit",
            false,
        ),
        (
            "back, unchanged",
            ok(&format!("# hi\n{web}"), None, None),
            None,
            Some(Report::Recovered { failures: 6 }),
            "",
            false,
        ),
        (
            "new image",
            ok(&web2, None, None),
            Some(&["web-node1"]),
            None,
            "",
            true,
        ),
    ];
    let mut poll = UrlPoll::new(URL, NODE);
    let mut last_uid = String::new();
    for (i, (what, fetched, set, report, text, parses)) in steps.into_iter().enumerate() {
        let before = poll.bodies_parsed();
        let outcome = poll.on_fetch(fetched, at(i as i64));
        assert_eq!(
            poll.bodies_parsed() - before,
            u64::from(parses),
            "{what}: parsed"
        );
        let (got_set, got_report) = summary(&outcome);
        let want_set = set.map(|s| s.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        assert_eq!(got_set, want_set, "{what}: set");
        assert_eq!(got_report.as_ref().map(|r| r.0), report, "{what}: report");
        if let Some((Report::Warn { .. } | Report::Quiet { .. }, message)) = &got_report {
            assert!(message.contains(URL), "{what}: {message}");
            assert!(message.contains(text), "{what}: {message}");
        }
        if let Some(pods) = &outcome.set {
            let uid = pod::uid(&pods[0].pod).to_string();
            assert_ne!(uid, last_uid, "{what}: a changed pod has a new UID");
            last_uid = uid;
        }
    }
}

#[test]
fn validators_come_from_the_last_good_body_only() {
    let mut poll = UrlPoll::new(URL, NODE);
    assert_eq!(poll.validators(), Validators::default());
    let lm = "Wed, 21 Oct 2026 07:28:00 GMT";
    poll.on_fetch(
        ok(&pod_yaml("web", "busybox"), Some("\"a\""), Some(lm)),
        at(0),
    );
    let good = Validators {
        etag: Some("\"a\"".into()),
        last_modified: Some(lm.into()),
    };
    assert_eq!(poll.validators(), good);
    // A broken body with its own ETag: a 304 for it would hide the error.
    poll.on_fetch(ok("kind: [", Some("\"b\""), None), at(1));
    assert_eq!(poll.validators(), good);
    // The same good bytes under a new ETag: the new validators are kept.
    poll.on_fetch(ok(&pod_yaml("web", "busybox"), Some("\"c\""), None), at(2));
    assert_eq!(poll.validators().etag.as_deref(), Some("\"c\""));
}

#[test]
fn a_list_that_drops_a_pod_keeps_the_others_as_they_were() {
    let mut poll = UrlPoll::new(URL, NODE);
    let mut config = PodConfig::new(["http"]);
    let three = list_json(&[("a", "busybox"), ("b", "busybox"), ("c", "busybox")]);
    let first = poll.on_fetch(ok(&three, None, None), at(0)).set.unwrap();
    assert_eq!(first[1].origin, format!("{URL} items[1]"));
    config.set(HTTP_SOURCE_NAME, first.clone());
    let two = list_json(&[("a", "busybox"), ("c", "busybox")]);
    let second = poll.on_fetch(ok(&two, None, None), at(5)).set.unwrap();
    assert_eq!(names(&second), ["a-node1", "c-node1"]);
    // Untouched pods keep their first config.seen.
    let seen = |p: &SourcePod| pod::annotation(&p.pod, CONFIG_SEEN_ANNOTATION).map(String::from);
    assert_eq!(seen(&second[0]), seen(&first[0]));
    let changes = config.set(HTTP_SOURCE_NAME, second);
    let removed: Vec<String> = changes.removes.iter().map(|p| pod::full_name(p)).collect();
    assert_eq!(removed, ["b-node1_default"]);
    assert!(
        changes.adds.is_empty() && changes.updates.is_empty(),
        "{changes:?}"
    );
}

#[test]
fn a_name_in_both_sources_is_refused_naming_both_origins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.yaml");
    std::fs::write(&path, pod_yaml("web", "busybox")).unwrap();
    let path = path.display().to_string();
    let read_dir = || crate::config::file::read_manifests(dir.path(), NODE, at(0)).0;
    let read_url =
        || read_body(URL, NODE, pod_yaml("web", "busybox:1.36").as_bytes(), at(0)).unwrap();

    // The directory first: the URL's pod is the later one.
    let mut config = PodConfig::new(["file", "http"]);
    config.set("file", read_dir());
    let changes = config.set(HTTP_SOURCE_NAME, read_url());
    let message = changes.rejected[0].to_string();
    assert!(
        message.starts_with(URL) && message.contains(&path),
        "{message}"
    );
    assert_eq!(images_of(&config), ["busybox"]);

    // The URL first: the directory's pod is refused.
    let mut config = PodConfig::new(["file", "http"]);
    config.set(HTTP_SOURCE_NAME, read_url());
    let changes = config.set("file", read_dir());
    let message = changes.rejected[0].to_string();
    assert!(
        message.starts_with(&path) && message.contains(URL),
        "{message}"
    );
    assert_eq!(images_of(&config), ["busybox:1.36"]);

    // Twice in one list: both items are named.
    let twice = list_json(&[("web", "busybox"), ("web", "nginx")]);
    let mut config = PodConfig::new(["http"]);
    let changes = config.set(
        HTTP_SOURCE_NAME,
        read_body(URL, NODE, twice.as_bytes(), at(0)).unwrap(),
    );
    assert_eq!(
        changes.rejected[0].to_string(),
        format!(
            "{URL} items[1]: pod web-node1_default is already defined by {URL} items[0]; ignoring this one"
        )
    );
}

fn images_of(config: &PodConfig) -> Vec<String> {
    let pods: Vec<SourcePod> = config
        .pods()
        .into_iter()
        .map(|pod| SourcePod {
            origin: String::new(),
            pod,
        })
        .collect();
    images(&pods)
}

#[test]
fn failures_warn_first_then_quietly_then_recover() {
    let mut log = FailureLog::default();
    assert_eq!(log.succeeded(), None);
    let reports: Vec<Report> = (0..61).map(|_| log.failed()).collect();
    let warned: Vec<u32> = reports
        .iter()
        .filter_map(|r| match r {
            Report::Warn { failures } => Some(*failures),
            _ => None,
        })
        .collect();
    assert_eq!(warned, [1, 2, 3, 30, 60]);
    assert_eq!(reports[3], Report::Quiet { failures: 4 });
    assert_eq!(log.succeeded(), Some(Report::Recovered { failures: 61 }));
    assert_eq!(log.succeeded(), None);
    assert_eq!(log.failed(), Report::Warn { failures: 1 });
}
