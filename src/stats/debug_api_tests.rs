//! Request checking of the debug service: pod and container lookup (by
//! static UID, mirror UID, name), defaulting, and the options' validation.
//! What reaches the runtime is tested on real containerd
//! (integration/cli_debug.rs).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use tokio::sync::watch;

use super::*;
use crate::api::stats::v1 as spb;
use crate::pod::Pod;
use crate::pod::manager::PodManager;
use crate::pod::view::AgentView;

const STATIC: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const MIRROR: &str = "11111111-2222-3333-4444-555555555555";

fn pod(uid: &str, annotations: &[(&str, &str)], containers: &[&str]) -> Pod {
    let mut p = crate::pod::lookup::tests::pod("web-n1", uid, annotations);
    p.spec = Some(PodSpec {
        containers: containers
            .iter()
            .map(|n| Container {
                name: (*n).into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    p
}

fn api(containers: &[&str]) -> DebugApi {
    let mut m = PodManager::new();
    m.add_pod(pod(
        STATIC,
        &[("kubernetes.io/config.hash", STATIC)],
        containers,
    ));
    m.add_pod(pod(
        MIRROR,
        &[("kubernetes.io/config.mirror", STATIC)],
        containers,
    ));
    let (_, view) = watch::channel(Arc::new(AgentView {
        manager: Arc::new(m),
        ..Default::default()
    }));
    let (_, samples) = watch::channel(None);
    DebugApi {
        sources: StatsSources {
            view,
            statuses: Default::default(),
            samples,
        },
        runtime: Arc::new(crate::cri::FakeRuntime::new()),
        pod_logs_dir: "/var/log/pods".into(),
    }
}

fn uid(uid: &str) -> Option<spb::PodRef> {
    Some(spb::PodRef {
        r#ref: Some(spb::pod_ref::Ref::Uid(uid.into())),
    })
}

fn name(ns: &str, name: &str) -> Option<spb::PodRef> {
    Some(spb::PodRef {
        r#ref: Some(spb::pod_ref::Ref::Name(spb::NamespacedName {
            namespace: ns.into(),
            name: name.into(),
        })),
    })
}

#[test]
fn every_ref_finds_the_static_pod_and_its_only_container() {
    let api = api(&["app"]);
    for r in [
        uid(STATIC),
        uid(MIRROR),
        name("default", "web-n1"),
        name("", "web-n1"),
    ] {
        let t = api
            .target(r.clone(), "")
            .unwrap_or_else(|e| panic!("{r:?}: {e}"));
        assert_eq!(
            (t.pod.static_uid.as_str(), t.container.as_str()),
            (STATIC, "app")
        );
        assert_eq!(t.describe(), "container \"app\" of pod default/web-n1");
    }
}

#[test]
fn lookup_failures_are_not_found_or_invalid_and_name_what_was_asked() {
    let api = api(&["app", "side"]);
    let cases = [
        (
            None,
            "",
            tonic::Code::InvalidArgument,
            "a pod ref is required",
        ),
        (
            uid(""),
            "",
            tonic::Code::InvalidArgument,
            "the uid is empty",
        ),
        (
            name("default", ""),
            "",
            tonic::Code::InvalidArgument,
            "the name is empty",
        ),
        (
            name("kube-system", "web-n1"),
            "app",
            tonic::Code::NotFound,
            "pod kube-system/web-n1",
        ),
        (
            uid(&"c".repeat(32)),
            "app",
            tonic::Code::NotFound,
            &"c".repeat(32),
        ),
        (
            uid(MIRROR),
            "nope",
            tonic::Code::NotFound,
            "container \"nope\" is not in pod default/web-n1; choose one of: [app side]",
        ),
        (
            name("default", "web-n1"),
            "",
            tonic::Code::InvalidArgument,
            "a container name must be specified for pod \"web-n1\", choose one of: [app side]",
        ),
    ];
    for (r, container, code, text) in cases {
        let Err(e) = api.target(r.clone(), container) else {
            panic!("{r:?} {container:?} was found");
        };
        assert_eq!(e.code(), code, "{r:?} {container:?}: {}", e.message());
        assert!(e.message().contains(text), "{r:?}: {}", e.message());
    }
}

#[tokio::test]
async fn exec_checks_the_command_and_timeout_before_the_runtime() {
    let api = api(&["app"]);
    let exec = |cmd: &[&str], timeout_seconds| pb::ExecSyncRequest {
        pod: uid(STATIC),
        container: String::new(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        timeout_seconds,
    };
    for (req, text) in [
        (exec(&[], 0), "a command is required"),
        (exec(&[""], 0), "a command is required"),
        (
            exec(&["true"], -1),
            "timeout_seconds must be 0 (none) or positive, not -1",
        ),
    ] {
        let e = api.exec_sync(Request::new(req)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(e.message(), text);
    }
    // The pod is known but nothing runs on the (empty) runtime.
    let e = api
        .exec_sync(Request::new(exec(&["true"], 5)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        e.message(),
        "container \"app\" of pod default/web-n1 is not running"
    );
    assert_eq!(exec_timeout(0).unwrap(), Duration::ZERO);
    assert_eq!(exec_timeout(7).unwrap(), Duration::from_secs(7));
}

fn logs_req() -> pb::ContainerLogsRequest {
    pb::ContainerLogsRequest {
        pod: uid(STATIC),
        ..Default::default()
    }
}

#[test]
fn log_options_carry_the_request_and_are_validated_as_the_kubelets() {
    let req = pb::ContainerLogsRequest {
        follow: true,
        previous: true,
        timestamps: true,
        since_seconds: Some(300),
        tail_lines: Some(0),
        limit_bytes: Some(1),
        ..logs_req()
    };
    let o = log_options(&req).unwrap();
    assert_eq!(
        o,
        LogOptions {
            follow: true,
            previous: true,
            timestamps: true,
            since_seconds: Some(300),
            since_time: None,
            tail_lines: Some(0),
            limit_bytes: Some(1),
        }
    );
    let req = pb::ContainerLogsRequest {
        since_time: "2026-12-01T00:00:00Z".into(),
        ..logs_req()
    };
    let t: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
    assert_eq!(log_options(&req).unwrap().since_time, Some(t));

    let bad = [
        (
            pb::ContainerLogsRequest {
                tail_lines: Some(-1),
                ..logs_req()
            },
            "tailLines must be greater than or equal to 0",
        ),
        (
            pb::ContainerLogsRequest {
                limit_bytes: Some(0),
                ..logs_req()
            },
            "limitBytes must be greater than 0",
        ),
        (
            pb::ContainerLogsRequest {
                since_seconds: Some(0),
                ..logs_req()
            },
            "sinceSeconds must be greater than 0",
        ),
        (
            pb::ContainerLogsRequest {
                since_seconds: Some(5),
                since_time: "2026-12-01T00:00:00Z".into(),
                ..logs_req()
            },
            "at most one of sinceTime or sinceSeconds",
        ),
        (
            pb::ContainerLogsRequest {
                since_time: "yesterday".into(),
                ..logs_req()
            },
            "since_time \"yesterday\" is not an RFC3339 time",
        ),
    ];
    for (req, text) in bad {
        let e = log_options(&req).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{req:?}");
        assert!(e.message().contains(text), "{}", e.message());
    }
}

#[test]
fn runtime_failures_keep_the_runtimes_code_and_say_what_was_done() {
    let e = RuntimeError::DeadlineExceeded {
        endpoint: "unix:///run/containerd.sock".into(),
        op: "ExecSync",
        timeout: Duration::from_secs(3),
    };
    let s = runtime_status("exec in container \"app\" of pod default/web-n1", &e);
    assert_eq!(s.code(), tonic::Code::DeadlineExceeded);
    assert!(
        s.message()
            .starts_with("exec in container \"app\" of pod default/web-n1: ExecSync on"),
        "{}",
        s.message()
    );
}

#[test]
fn an_exec_that_outlives_its_timeout_says_so() {
    let e = RuntimeError::DeadlineExceeded {
        endpoint: "unix:///run/containerd.sock".into(),
        op: "ExecSync",
        timeout: Duration::from_secs(121),
    };
    let what = "container \"app\" of pod default/web-n1";
    let s = exec_status(what, Duration::from_secs(1), &e);
    assert_eq!(s.code(), tonic::Code::DeadlineExceeded);
    assert_eq!(
        s.message(),
        "exec in container \"app\" of pod default/web-n1: the command did not finish within its timeout of 1s"
    );
    // Without a timeout of its own, it is the runtime that did not answer.
    let s = exec_status(what, Duration::ZERO, &e);
    assert!(
        s.message().contains("no answer within 121s"),
        "{}",
        s.message()
    );
    let gone = RuntimeError::Rpc {
        endpoint: "unix:///run/containerd.sock".into(),
        op: "ExecSync",
        status: tonic::Status::not_found("container x not found"),
    };
    assert_eq!(
        exec_status(what, Duration::from_secs(1), &gone).code(),
        tonic::Code::NotFound
    );
}

mod container_logs {
    //! The stream from the log reader to the client, on the fake runtime
    //! and a real file: all of it, follow, the end of a followed container,
    //! and a client that goes away.

    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::cri::FakeRuntime;

    /// An API over one pod `web-n1` whose running container `app` logs to
    /// `log`; the fake runtime and the container's ID.
    async fn api_logging_to(log: &std::path::Path) -> (DebugApi, Arc<FakeRuntime>, String) {
        let rt = Arc::new(FakeRuntime::new());
        let cid = rt
            .run_container("web-n1", STATIC, "app", log.to_str().unwrap())
            .await;
        let mut api = api(&["app"]);
        let status: k8s_openapi::api::core::v1::PodStatus =
            serde_json::from_value(json!({"containerStatuses": [
                {"name": "app", "containerID": format!("fake://{cid}"), "state": {"running": {}}},
            ]}))
            .unwrap();
        api.sources
            .statuses
            .write()
            .unwrap()
            .insert(STATIC.into(), Arc::new(status));
        api.runtime = rt.clone();
        (api, rt, cid)
    }

    fn cri(line: &str) -> String {
        format!("2026-12-01T00:00:00.000000001Z stdout F {line}\n")
    }

    async fn next_text(s: &mut LogStream) -> String {
        let chunk = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("a chunk within 10 s")
            .expect("the stream goes on")
            .expect("no error");
        String::from_utf8(chunk.data).unwrap()
    }

    #[tokio::test]
    async fn the_whole_log_then_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, cri("hello") + &cri("world")).unwrap();
        let (api, _, _) = api_logging_to(&log).await;
        let req = pb::ContainerLogsRequest {
            pod: uid(MIRROR),
            ..Default::default()
        };
        let s = api.container_logs(Request::new(req)).await.unwrap();
        let chunks: Vec<_> = s.into_inner().collect().await;
        let text: String = chunks
            .into_iter()
            .map(|c| String::from_utf8(c.unwrap().data).unwrap())
            .collect();
        assert_eq!(text, "hello\nworld\n");
    }

    #[tokio::test]
    async fn follow_sends_new_lines_and_ends_with_the_container() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, cri("one")).unwrap();
        let (api, rt, cid) = api_logging_to(&log).await;
        let req = pb::ContainerLogsRequest {
            pod: name("default", "web-n1"),
            follow: true,
            ..Default::default()
        };
        let mut s = api
            .container_logs(Request::new(req))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(next_text(&mut s).await, "one\n");
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut f, cri("two").as_bytes()).unwrap();
        assert_eq!(next_text(&mut s).await, "two\n");
        // The container stops: the stream ends by itself, without error.
        rt.exit_container(&cid, 0);
        let end = tokio::time::timeout(Duration::from_secs(10), s.next()).await;
        assert!(matches!(end, Ok(None)), "{end:?}");
    }

    #[tokio::test]
    async fn a_client_that_goes_away_stops_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, cri("one")).unwrap();
        let (api, rt, _) = api_logging_to(&log).await;
        // The API's clone, the test's, and the reader's while it runs.
        let baseline = Arc::strong_count(&rt);
        let req = pb::ContainerLogsRequest {
            pod: uid(STATIC),
            follow: true,
            ..Default::default()
        };
        let mut s = api
            .container_logs(Request::new(req))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(next_text(&mut s).await, "one\n");
        assert!(
            Arc::strong_count(&rt) > baseline,
            "the reader holds the runtime"
        );
        drop(s);
        let mut left = Arc::strong_count(&rt);
        for _ in 0..100 {
            if left == baseline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            left = Arc::strong_count(&rt);
        }
        assert_eq!(left, baseline, "the reader still runs");
    }

    #[tokio::test]
    async fn a_container_without_a_previous_instance_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, cri("one")).unwrap();
        let (api, _, _) = api_logging_to(&log).await;
        let req = pb::ContainerLogsRequest {
            pod: uid(STATIC),
            previous: true,
            ..Default::default()
        };
        let Err(e) = api.container_logs(Request::new(req)).await else {
            panic!("a previous log was found");
        };
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message()
                .contains("previous terminated container \"app\""),
            "{}",
            e.message()
        );
    }
}
