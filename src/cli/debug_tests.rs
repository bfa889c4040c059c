//! `crilet logs` / `crilet exec` argument handling, through clap as a user
//! types them.

use clap::Parser;

use super::*;
use crate::api::stats::v1 as spb;

#[derive(Parser)]
struct Logs {
    #[command(flatten)]
    a: LogsArgs,
}

#[derive(Parser)]
struct Exec {
    #[command(flatten)]
    a: ExecArgs,
}

fn logs(args: &[&str]) -> Result<pb::ContainerLogsRequest, String> {
    let a = Logs::try_parse_from(std::iter::once("logs").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?
        .a;
    logs_request(&a).map_err(|e| e.to_string())
}

fn exec(args: &[&str]) -> Result<pb::ExecSyncRequest, String> {
    let a = Exec::try_parse_from(std::iter::once("exec").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?
        .a;
    exec_request(&a).map_err(|e| e.to_string())
}

fn by_name(ns: &str, name: &str) -> Option<spb::PodRef> {
    Some(pod_ref(&PodRef::Name {
        namespace: ns.into(),
        name: name.into(),
    }))
}

#[test]
fn logs_defaults_ask_for_everything_of_the_default_container() {
    let r = logs(&["web-n1"]).unwrap();
    assert_eq!(
        r,
        pb::ContainerLogsRequest {
            pod: by_name("default", "web-n1"),
            ..Default::default()
        }
    );
}

#[test]
fn logs_flags_map_to_pod_log_options() {
    let r = logs(&[
        "kube-system/etcd-n1",
        "-c",
        "etcd",
        "-f",
        "--previous",
        "--tail",
        "20",
        "--since",
        "5m",
        "--timestamps",
        "--limit-bytes",
        "4096",
    ])
    .unwrap();
    assert_eq!(
        r,
        pb::ContainerLogsRequest {
            pod: by_name("kube-system", "etcd-n1"),
            container: "etcd".into(),
            follow: true,
            previous: true,
            timestamps: true,
            since_seconds: Some(300),
            since_time: String::new(),
            tail_lines: Some(20),
            limit_bytes: Some(4096),
        }
    );
    let uid = "11111111-2222-3333-4444-555555555555";
    let r = logs(&[
        uid,
        "-p",
        "--tail=0",
        "--since-time",
        "2026-12-01T01:02:03+01:00",
    ])
    .unwrap();
    assert_eq!(r.pod, Some(pod_ref(&PodRef::Uid(uid.into()))));
    assert!(r.previous);
    assert_eq!(r.tail_lines, Some(0));
    assert_eq!(r.since_time, "2026-12-01T00:02:03Z", "normalised to UTC");
}

#[test]
fn since_rounds_to_whole_seconds_as_kubectl() {
    for (since, secs) in [
        ("1s", 1),
        ("1500ms", 2),
        ("1499ms", 1),
        ("2h", 7200),
        ("90s", 90),
    ] {
        let r = logs(&["p", "--since", since]).unwrap();
        assert_eq!(r.since_seconds, Some(secs), "{since}");
    }
}

#[test]
fn tail_minus_one_means_all_lines() {
    assert_eq!(logs(&["p", "--tail", "-1"]).unwrap().tail_lines, None);
    assert_eq!(logs(&["p", "--tail=-1"]).unwrap().tail_lines, None);
}

#[test]
fn bad_logs_arguments_are_refused_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["p", "--tail", "-2"],
            "--tail must be -1 (all lines) or at least 0, not -2",
        ),
        (
            &["p", "--limit-bytes", "0"],
            "--limit-bytes must be at least 1, not 0",
        ),
        (
            &["p", "--limit-bytes", "-5"],
            "--limit-bytes must be at least 1, not -5",
        ),
        (
            &["p", "--since", "400ms"],
            "--since must be at least 1s, not 400ms",
        ),
        (&["p", "--since", "0s"], "--since must be at least 1s"),
        (
            &["p", "--since", "5 minutes"],
            "invalid value '5 minutes' for '--since",
        ),
        (
            &["p", "--since-time", "yesterday"],
            "--since-time \"yesterday\" is not an RFC3339 time",
        ),
        (
            &["p", "--since", "5m", "--since-time", "2026-12-01T00:00:00Z"],
            "at most one of --since and --since-time may be given",
        ),
        (&["p", "-c", ""], "--container must not be empty"),
        (&["a/b/c"], "invalid pod reference: pod reference \"a/b/c\""),
        (&[""], "an empty pod reference"),
        (&[], "required arguments were not provided"),
        (&["p", "--tail", "many"], "invalid value 'many' for '--tail"),
    ];
    for (args, text) in cases {
        let e = logs(args).unwrap_err();
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

#[test]
fn exec_takes_the_command_after_the_double_dash() {
    let r = exec(&["web-n1", "--", "sh", "-c", "echo out; exit 3"]).unwrap();
    assert_eq!(
        r,
        pb::ExecSyncRequest {
            pod: by_name("default", "web-n1"),
            container: String::new(),
            cmd: vec!["sh".into(), "-c".into(), "echo out; exit 3".into()],
            timeout_seconds: 0,
        }
    );
    // Flags after `--` belong to the command.
    let r = exec(&[
        "ns/p",
        "-c",
        "app",
        "--timeout",
        "10s",
        "--",
        "ls",
        "-c",
        "--timeout",
    ])
    .unwrap();
    assert_eq!(r.container, "app");
    assert_eq!(r.timeout_seconds, 10);
    assert_eq!(r.cmd, ["ls", "-c", "--timeout"]);
}

#[test]
fn exec_timeouts_round_up_to_whole_seconds() {
    for (t, secs) in [("0s", 0), ("1ms", 1), ("1s", 1), ("1500ms", 2), ("2m", 120)] {
        let r = exec(&["p", "--timeout", t, "--", "true"]).unwrap();
        assert_eq!(r.timeout_seconds, secs, "{t}");
    }
}

#[test]
fn bad_exec_arguments_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["p"], "required arguments were not provided"),
        (&["p", "--"], "required arguments were not provided"),
        (&["p", "--", ""], "a command is required after `--`"),
        (&["p", "ls"], "unexpected argument 'ls'"),
        (&["a/b/c", "--", "ls"], "invalid pod reference"),
        (
            &["p", "--timeout", "soon", "--", "ls"],
            "invalid value 'soon' for '--timeout",
        ),
        (
            &["p", "-c", " ", "--", "ls"],
            "--container must not be empty",
        ),
    ];
    for (args, text) in cases {
        let e = exec(args).unwrap_err();
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

#[test]
fn exit_status_is_the_commands_as_a_shell_passes_it() {
    for (code, status) in [
        (0, 0),
        (1, 1),
        (3, 3),
        (127, 127),
        (255, 255),
        (256, 0),
        (257, 1),
        (-1, 255),
    ] {
        assert_eq!(exit_status(code), status, "{code}");
    }
}

#[tokio::test]
async fn a_missing_agent_is_reported_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("crilet.sock");
    let req = exec(&["p", "--", "true"]).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let e = super::exec(&socket, req, &mut out, &mut err)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("crilet is not running: no socket at "),
        "{e}"
    );
    let req = logs(&["p"]).unwrap();
    let e = super::logs(&socket, req, &mut out).await.unwrap_err();
    assert!(e.to_string().contains("crilet is not running"), "{e}");
}
