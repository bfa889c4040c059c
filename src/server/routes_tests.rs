//! Tests of the path and query parsing.

use proptest::prelude::*;

use super::*;

fn pod(ns: &str, name: &str, uid: Option<&str>) -> PodPath {
    PodPath {
        namespace: ns.into(),
        name: name.into(),
        uid: uid.map(Into::into),
    }
}

fn container(ns: &str, name: &str, uid: Option<&str>, c: &str) -> ContainerPath {
    ContainerPath {
        pod: pod(ns, name, uid),
        container: c.into(),
    }
}

#[test]
fn every_path_parses_to_its_route() {
    let cases = [
        ("/healthz", Route::Healthz),
        ("/pods", Route::Pods),
        ("/pods/", Route::Pods),
        ("/stats/summary", Route::StatsSummary),
        ("/metrics", Route::Metrics),
        ("/metrics/probes", Route::MetricsProbes),
        (
            "/run/ns/web/main",
            Route::Run(container("ns", "web", None, "main")),
        ),
        (
            "/run/ns/web/u1/main",
            Route::Run(container("ns", "web", Some("u1"), "main")),
        ),
        (
            "/exec/kube-system/etcd-n1/etcd",
            Route::Exec(container("kube-system", "etcd-n1", None, "etcd")),
        ),
        (
            "/exec/ns/web/u1/main",
            Route::Exec(container("ns", "web", Some("u1"), "main")),
        ),
        (
            "/attach/ns/web/main",
            Route::Attach(container("ns", "web", None, "main")),
        ),
        (
            "/attach/ns/web/u1/main/",
            Route::Attach(container("ns", "web", Some("u1"), "main")),
        ),
        (
            "/portForward/ns/web",
            Route::PortForward(pod("ns", "web", None)),
        ),
        (
            "/portForward/ns/web/u1",
            Route::PortForward(pod("ns", "web", Some("u1"))),
        ),
        (
            "/containerLogs/ns/web/main",
            Route::ContainerLogs(container("ns", "web", None, "main")),
        ),
        (
            "/exec/ns/we%62/main",
            Route::Exec(container("ns", "web", None, "main")),
        ),
    ];
    for (path, want) in cases {
        assert_eq!(parse(path), Ok(want), "{path}");
    }
}

#[test]
fn bad_paths_are_named_404s_or_400s() {
    let not_found = [
        "",
        "/",
        "/nope",
        "/healthzz",
        "/pods/x",
        "/stats",
        "/stats/summary/x",
        "/metrics/cadvisor",
        "/exec",
        "/exec/ns",
        "/exec/ns/web",
        "/exec/ns/web/u/c/extra",
        "/exec//web/c",
        "/portForward/ns",
        "/portForward/ns/web/u/x",
        "/containerLogs/ns/web",
        "/containerLogs/ns/web/uid/c",
        "/run/ns/web",
        "healthz",
        "/Exec/ns/web/c",
    ];
    for path in not_found {
        assert!(
            matches!(parse(path), Err(RouteError::NotFound(_))),
            "{path:?}: {:?}",
            parse(path)
        );
    }
    let bad = ["/exec/ns/web/%zz", "/exec/ns/web/%4", "/exec/ns/%ff/c"];
    for path in bad {
        let err = parse(path).unwrap_err();
        assert!(
            matches!(err, RouteError::BadRequest(ref m) if m.contains("percent")),
            "{path:?}: {err:?}"
        );
    }
    let huge = format!("/exec/{}", "a".repeat(MAX_PATH));
    assert!(matches!(parse(&huge), Err(RouteError::BadRequest(m)) if m.contains("long")));
    let usage = parse("/exec/ns/web").unwrap_err().to_string();
    assert!(
        usage.contains("/exec/{namespace}/{pod}[/{uid}]/{container}"),
        "{usage}"
    );
}

#[test]
fn stream_options_follow_the_kubelets_rules() {
    let o = stream_options(
        "command=sh&command=-c&command=echo%20hi&stdout=1&stderr=true",
        true,
    )
    .unwrap();
    assert_eq!(o.command, ["sh", "-c", "echo hi"]);
    assert!(o.stdout && o.stderr && !o.stdin && !o.tty);
    let o = stream_options("command=sh&stdin=1&stdout=1&stderr=1&tty=1", true).unwrap();
    assert!(o.tty && !o.stderr, "no stderr with a TTY");
    let o = stream_options("stdout=1", false).unwrap();
    assert!(o.command.is_empty());
    for (q, exec, want) in [
        ("command=ls", true, "at least 1 of stdin, stdout, stderr"),
        ("command=ls&stdout=0", true, "at least 1"),
        ("stdout=1", true, "needs a command"),
        ("command=&stdout=1", true, "needs a command"),
    ] {
        let err = stream_options(q, exec).unwrap_err().to_string();
        assert!(err.contains(want), "{q}: {err}");
    }
}

#[test]
fn ports_and_run_commands_parse() {
    assert_eq!(ports("").unwrap(), Vec::<i32>::new());
    assert_eq!(ports("port=80&port=8080,9090").unwrap(), [80, 8080, 9090]);
    for q in ["port=x", "port=0", "port=70000", "port=80,"] {
        assert!(matches!(ports(q), Err(RouteError::BadRequest(_))), "{q}");
    }
    assert_eq!(
        run_command("cmd=cat%20/etc/hostname").unwrap(),
        ["cat", "/etc/hostname"]
    );
    assert_eq!(run_command("cmd=echo+a+b").unwrap(), ["echo", "a", "b"]);
    assert!(run_command("").is_err());
    assert!(run_command("cmd=%20").is_err());
}

proptest! {
    #[test]
    fn no_path_makes_the_parser_panic(path in "(/[a-zA-Z%0-9_.~-]{0,12}){0,8}/?") {
        let _ = parse(&path);
    }

    #[test]
    fn no_bytes_make_the_parser_panic(path in any::<String>(), query in any::<String>()) {
        let _ = parse(&path);
        let _ = stream_options(&query, true);
        let _ = ports(&query);
        let _ = run_command(&query);
    }

    #[test]
    fn decoding_round_trips(s in "[a-z0-9]{1,10}") {
        let encoded: String = s.bytes().map(|b| format!("%{b:02X}")).collect();
        prop_assert_eq!(percent_decode(&encoded).unwrap(), s);
    }
}
