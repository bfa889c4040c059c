use super::*;
use crate::cri::types::{ContainerMetadata, DnsConfig, Mount};
use crate::kuberuntime::labels::TERMINATION_MESSAGE_POLICY_FILE;
use serde_json::json;

const TS: &str = "2024-05-01T10:00:00.123456789Z";

fn line(stream: &str, tag: &str, content: &str) -> String {
    format!("{TS} {stream} {tag} {content}\n")
}

fn full(lines: &[&str]) -> String {
    lines.iter().map(|l| line("stdout", "F", l)).collect()
}

#[test]
fn parses_cri_log_lines() {
    let ok = |text: &str, stream, partial, content: &str| {
        let got = parse_cri_line(text.as_bytes()).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(got.stream, stream, "{text}");
        assert_eq!(got.partial, partial, "{text}");
        assert_eq!(got.content, content.as_bytes(), "{text}");
    };
    ok(
        &format!("{TS} stdout F hello world"),
        "stdout",
        false,
        "hello world",
    );
    ok(
        &format!("{TS} stderr P  two  spaces"),
        "stderr",
        true,
        " two  spaces",
    );
    ok(&format!("{TS} stdout F "), "stdout", false, "");
    ok(
        &format!("{TS} stdout F:x:y tagged"),
        "stdout",
        false,
        "tagged",
    );
    ok(
        "2024-05-01T12:00:00.5+02:00 stdout F offset",
        "stdout",
        false,
        "offset",
    );
    let bad = [
        String::new(),
        "plain text from somewhere".to_string(),
        "yesterday stdout F x".to_string(),
        format!("{TS} stdin F x"),
        format!("{TS} stdout X x"),
        format!("{TS} stdout F"),
        format!("{TS} stdout"),
        TS.to_string(),
    ];
    for text in bad {
        assert_eq!(parse_cri_line(text.as_bytes()), None, "{text:?}");
    }
}

#[test]
fn log_message_joins_partial_lines() {
    let log = [
        line("stdout", "P", "hel"),
        line("stdout", "P", "lo "),
        line("stdout", "F", "world"),
        line("stderr", "F", "panic: boom"),
    ]
    .concat();
    assert_eq!(
        log_message(log.as_bytes(), true),
        "hello world\npanic: boom\n"
    );
}

#[test]
fn log_message_table() {
    let hundred: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
    let hundred: Vec<&str> = hundred.iter().map(String::as_str).collect();
    let last_80: String = (20..100).map(|i| format!("line {i}\n")).collect();
    let long = "x".repeat(500);
    let ten_long = full(&[long.as_str(); 10]);
    let long_line = format!("{long}\n");
    let capped = long_line.repeat(10);
    let capped = &capped[capped.len() - MAX_LOG_BYTES..];
    let no_newline = format!("{}{TS} stdout F last", full(&["first"]));
    let garbage = format!(
        "not a log line\n{}\u{0}\u{1}binary\n{}",
        full(&["a"]),
        full(&["b"])
    );
    // 79 good lines after 21 garbage ones: the garbage counts as lines.
    let mixed: String =
        (0..21).map(|_| "garbage\n".to_string()).collect::<String>() + &full(&hundred[..79]);
    let mixed_want: String = (0..79).map(|i| format!("line {i}\n")).collect();
    let cut_first = format!("stdout F half a line\n{}", full(&["whole"]));
    let two = full(&["first", "second"]);
    let all_hundred = full(&hundred);
    let rows: Vec<(&str, &str, bool, &str)> = vec![
        ("empty", "", true, ""),
        (
            "one line",
            "2024-05-01T10:00:00Z stdout F hi\n",
            true,
            "hi\n",
        ),
        ("keeps the last 80 lines", &all_hundred, true, &last_80),
        ("keeps the last 2048 bytes", &ten_long, true, capped),
        (
            "last line without newline",
            &no_newline,
            true,
            "first\nlast",
        ),
        ("garbage is skipped", &garbage, true, "a\nb\n"),
        ("garbage counts as lines", &mixed, true, &mixed_want),
        ("a cut first line is dropped", &cut_first, false, "whole\n"),
        (
            "not from the start: the first line goes",
            &two,
            false,
            "second\n",
        ),
        (
            "from the start: the first line stays",
            &two,
            true,
            "first\nsecond\n",
        ),
    ];
    for (what, log, from_start, want) in rows {
        assert_eq!(log_message(log.as_bytes(), from_start), want, "{what}");
    }
}

#[test]
fn log_message_trailing_partial_has_no_newline() {
    let log = [line("stdout", "F", "done"), line("stdout", "P", "cut")].concat();
    assert_eq!(log_message(log.as_bytes(), true), "done\ncut");
}

#[test]
fn byte_caps_never_split_a_character() {
    // 2048 bytes of content ending the log, preceded by a 3-byte character
    // whose last byte falls inside the kept range.
    let content = format!("€{}", "a".repeat(MAX_LOG_BYTES - 2));
    let got = log_message(full(&[&content]).as_bytes(), true);
    assert_eq!(got, format!("{}\n", "a".repeat(MAX_LOG_BYTES - 2)));
    assert_eq!(file_message("é and €".as_bytes()), "é and €");
    assert_eq!(file_message(&"é and €".as_bytes()[1..]), " and €");
    assert_eq!(file_message(b"\xff ok"), "\u{fffd} ok");
    assert_eq!(cap_message("abc", 3), "abc");
    assert_eq!(cap_message("abcd", 3), "abc");
    assert_eq!(cap_message("a€", 3), "a");
    assert_eq!(cap_message("a€", 4), "a€");
    assert_eq!(cap_message("", 0), "");
}

#[test]
fn message_cap_shares_12k_among_all_containers() {
    let pod = |inits: usize, apps: usize| -> Pod {
        let ctrs = |n: usize, prefix: &str| -> Vec<serde_json::Value> {
            (0..n)
                .map(|i| json!({"name": format!("{prefix}{i}"), "image": "busybox"}))
                .collect()
        };
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"initContainers": ctrs(inits, "i"), "containers": ctrs(apps, "c")}
        }))
        .unwrap()
    };
    for (inits, apps, want) in [(0, 1, 12288), (0, 2, 6144), (1, 2, 4096), (2, 5, 1755)] {
        assert_eq!(message_cap(&pod(inits, apps)), want, "{inits}+{apps}");
    }
    assert_eq!(message_cap(&Pod::default()), MAX_POD_MESSAGE_BYTES);
}

fn ctx() -> NodeContext {
    NodeContext {
        node_name: "n".into(),
        root_dir: "/var/lib/crilet".into(),
        cgroup_root: "/".into(),
        cgroup_driver: crate::cri::CgroupDriver::Cgroupfs,
        host_dns: DnsConfig::default(),
        host_ip: "10.0.0.1".into(),
        memory_capacity: 1 << 30,
        oom_score_adj_floor: None,
    }
}

fn the_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]}
    }))
    .unwrap()
}

/// An exited instance (attempt 2, restart count 5) with the given policy.
fn exited(policy: &str, exit_code: i32) -> ContainerStatus {
    let labels = ContainerLabels {
        pod_name: "web".into(),
        pod_namespace: "default".into(),
        pod_uid: "u1".into(),
        container_name: "app".into(),
        hash: 1,
        restart_count: 5,
        termination_message_path: "/tmp/msg".into(),
        termination_message_policy: policy.into(),
        termination_grace_period: None,
        deletion_grace_period: None,
    };
    ContainerStatus {
        id: "c1".into(),
        metadata: ContainerMetadata {
            name: "app".into(),
            attempt: 2,
        },
        state: ContainerState::Exited,
        created_at: 1,
        started_at: 2,
        finished_at: 3,
        exit_code,
        image: "busybox".into(),
        image_ref: "sha256:1".into(),
        reason: String::new(),
        message: String::new(),
        labels: labels.to_labels(),
        annotations: labels.to_annotations(),
        mounts: vec![
            Mount {
                container_path: "/data".into(),
                host_path: "/srv/data".into(),
                ..Default::default()
            },
            Mount {
                container_path: "/tmp/msg".into(),
                host_path: "/var/lib/crilet/pods/u1/containers/app/2".into(),
                ..Default::default()
            },
        ],
        log_path: "/var/lib/crilet/logs/default_web_u1/app/5.log".into(),
    }
}

#[test]
fn message_source_table() {
    let fallback = TERMINATION_MESSAGE_POLICY_FALLBACK;
    let file = Some(PathBuf::from("/var/lib/crilet/pods/u1/containers/app/2"));
    let log = Some(PathBuf::from(
        "/var/lib/crilet/logs/default_web_u1/app/5.log",
    ));
    type Edit = fn(&mut ContainerStatus);
    let rows: Vec<(&str, &str, i32, Edit, Option<MessageSource>)> = vec![
        (
            "running: nothing yet",
            fallback,
            1,
            |c| c.state = ContainerState::Running,
            None,
        ),
        (
            "created: nothing yet",
            fallback,
            1,
            |c| c.state = ContainerState::Created,
            None,
        ),
        (
            "File policy: the mount only",
            TERMINATION_MESSAGE_POLICY_FILE,
            1,
            |_| {},
            Some(MessageSource {
                file: file.clone(),
                fallback_log: None,
            }),
        ),
        (
            "fallback on a failure",
            fallback,
            1,
            |_| {},
            Some(MessageSource {
                file: file.clone(),
                fallback_log: log.clone(),
            }),
        ),
        (
            "no fallback on success",
            fallback,
            0,
            |_| {},
            Some(MessageSource {
                file: file.clone(),
                fallback_log: None,
            }),
        ),
        (
            "no fallback for a container that never ran",
            fallback,
            128,
            |c| c.reason = "ContainerCannotRun".into(),
            Some(MessageSource {
                file: file.clone(),
                fallback_log: None,
            }),
        ),
        (
            "a relative log path is under the pod's log directory",
            fallback,
            1,
            |c| c.log_path = "app/5.log".into(),
            Some(MessageSource {
                file: file.clone(),
                fallback_log: log.clone(),
            }),
        ),
        (
            "no log path: the mapping's, from the restart count",
            fallback,
            1,
            |c| c.log_path.clear(),
            Some(MessageSource {
                file: file.clone(),
                fallback_log: log.clone(),
            }),
        ),
        (
            "no mount at the path: no file (an empty path mounts nothing)",
            fallback,
            1,
            |c| c.mounts.retain(|m| m.container_path != "/tmp/msg"),
            Some(MessageSource {
                file: None,
                fallback_log: log.clone(),
            }),
        ),
        (
            "no mounts reported: the mapping's file, from the attempt",
            fallback,
            1,
            |c| {
                c.mounts.clear();
                c.metadata.attempt = 7;
            },
            Some(MessageSource {
                file: Some("/var/lib/crilet/pods/u1/containers/app/7".into()),
                fallback_log: log.clone(),
            }),
        ),
        (
            "unreadable labels: the default path and policy File",
            fallback,
            1,
            |c| {
                c.annotations.clear();
                c.mounts[1].container_path = "/dev/termination-log".into();
            },
            Some(MessageSource {
                file: file.clone(),
                fallback_log: None,
            }),
        ),
    ];
    for (what, policy, code, edit, want) in rows {
        let mut c = exited(policy, code);
        edit(&mut c);
        assert_eq!(message_source(&ctx(), &the_pod(), &c), want, "{what}");
    }
}

#[test]
fn message_source_matches_the_mapping() {
    // The mount the mapping makes is the file the reader finds.
    let pod = the_pod();
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let config =
        crate::kuberuntime::mapping::container_config(&ctx(), &pod, container, 5, 2, "", None, &[])
            .unwrap();
    let mut c = exited(TERMINATION_MESSAGE_POLICY_FILE, 1);
    c.labels = config.labels.clone();
    c.annotations = config.annotations.clone();
    c.mounts = config.mounts.clone();
    let want = termination_message_file(&ctx(), "u1", "app", 2);
    let got = message_source(&ctx(), &pod, &c).unwrap();
    assert_eq!(got.file, Some(want));
}
