//! Tests of the container log rotation settings.

use std::time::Duration;

use crate::agent::config::{ConfigError, ConfigFile, RunArgs, parse_config_file, resolve};

fn flags(args: &[&str]) -> RunArgs {
    crate::agent::config::parse_flags(args)
}

fn file(text: &str) -> ConfigFile {
    parse_config_file("k.yaml", text).unwrap()
}

fn resolve_err(args: &RunArgs, f: &ConfigFile) -> String {
    match resolve(args, f, "k.yaml") {
        Ok(s) => panic!("expected an error, got {:?}", s.container_logs),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_are_the_kubelets() {
    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "")
        .unwrap()
        .container_logs;
    assert_eq!(s.max_size, Some(10 * 1024 * 1024));
    assert_eq!(s.max_files, 5);
    assert_eq!(s.monitor_interval, Duration::from_secs(10));
    assert_eq!(s.max_workers, 1);
    let p = s.rotation().unwrap();
    assert_eq!((p.max_size, p.max_files), (10 * 1024 * 1024, 5));
}

#[test]
fn file_fields_apply_and_flags_override_them() {
    let f = file(
        "containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\ncontainerLogMonitorInterval: 1m\ncontainerLogMaxWorkers: 4\n",
    );
    let s = resolve(&RunArgs::default(), &f, "k.yaml")
        .unwrap()
        .container_logs;
    assert_eq!(s.max_size, Some(1 << 20));
    assert_eq!(s.max_files, 3);
    assert_eq!(s.monitor_interval, Duration::from_secs(60));
    assert_eq!(s.max_workers, 4);

    let args = flags(&[
        "--container-log-max-size",
        "500k",
        "--container-log-max-files",
        "2",
        "--container-log-monitor-interval",
        "3s",
        "--container-log-max-workers",
        "2",
    ]);
    let s = resolve(&args, &f, "k.yaml").unwrap().container_logs;
    assert_eq!(s.max_size, Some(500_000));
    assert_eq!(s.max_files, 2);
    assert_eq!(s.monitor_interval, Duration::from_secs(3));
    assert_eq!(s.max_workers, 2);
}

#[test]
fn a_negative_size_turns_rotation_off_from_the_flag_or_the_file() {
    // A bare "-1" after the flag is its value, not another flag.
    for args in [
        flags(&["--container-log-max-size", "-1"]),
        flags(&["--container-log-max-size=-1Mi"]),
    ] {
        let s = resolve(&args, &ConfigFile::default(), "")
            .unwrap()
            .container_logs;
        assert_eq!(s.max_size, None, "{args:?}");
        assert_eq!(s.rotation(), None);
    }
    let s = resolve(
        &RunArgs::default(),
        &file("containerLogMaxSize: \"-1\"\n"),
        "k.yaml",
    )
    .unwrap()
    .container_logs;
    assert_eq!(s.rotation(), None);
    // Zero is not off: every log is rotated at every check, as the kubelet does.
    let s = resolve(
        &flags(&["--container-log-max-size", "0"]),
        &ConfigFile::default(),
        "",
    )
    .unwrap()
    .container_logs;
    assert_eq!(s.max_size, Some(0));
}

#[test]
fn bad_flags_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--container-log-max-size", "ten"],
            "--container-log-max-size ten: not a quantity",
        ),
        (
            &["--container-log-max-size", "1.5"],
            "--container-log-max-size 1.5: not a whole number",
        ),
        (
            &["--container-log-max-size", "100m"],
            "--container-log-max-size 100m: not a whole number",
        ),
        (
            &["--container-log-max-size", "8Ei"],
            "--container-log-max-size 8Ei: not a whole number",
        ),
        (
            &["--container-log-max-files", "1"],
            "--container-log-max-files 1: must be greater than 1",
        ),
        (
            &["--container-log-max-files", "-3"],
            "--container-log-max-files -3: must be greater than 1",
        ),
        (
            &["--container-log-monitor-interval", "2999ms"],
            "--container-log-monitor-interval 2.999s: must be a duration of at least 3s",
        ),
        (
            &["--container-log-max-workers", "0"],
            "--container-log-max-workers 0: must be at least 1",
        ),
    ];
    for (args, want) in cases {
        let err = resolve_err(&flags(args), &ConfigFile::default());
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A malformed duration is refused by clap, naming the flag.
    let err = crate::agent::config::try_parse_flags(&["--container-log-monitor-interval", "10"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--container-log-monitor-interval"), "{err}");
}

#[test]
fn bad_file_fields_name_the_file_and_the_field() {
    let cases = [
        (
            "containerLogMaxSize: 10MB\n",
            "containerLogMaxSize: 10MB: not a quantity",
        ),
        (
            "containerLogMaxSize: \"0.5\"\n",
            "containerLogMaxSize: 0.5: not a whole number",
        ),
        (
            "containerLogMaxFiles: 1\n",
            "containerLogMaxFiles: 1: must be greater than 1",
        ),
        (
            "containerLogMonitorInterval: 1s\n",
            "containerLogMonitorInterval: 1s: must be a duration of at least 3s",
        ),
        (
            "containerLogMonitorInterval: soon\n",
            "containerLogMonitorInterval: ",
        ),
        (
            "containerLogMaxWorkers: 0\n",
            "containerLogMaxWorkers: 0: must be at least 1",
        ),
    ];
    for (text, want) in cases {
        let err = resolve(&RunArgs::default(), &file(text), "k.yaml").unwrap_err();
        assert!(matches!(err, ConfigError::File { .. }), "{text}: {err}");
        let err = err.to_string();
        assert!(err.starts_with("config file k.yaml: "), "{text}: {err}");
        assert!(err.contains(want), "{text}: {err}");
    }
    // A wrong type is refused when the file is parsed.
    let err = parse_config_file("k.yaml", "containerLogMaxFiles: many\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("k.yaml"), "{err}");
}

#[test]
fn a_good_flag_hides_a_bad_file_value_but_a_bad_flag_is_named() {
    let f = file("containerLogMaxFiles: 1\n");
    let s = resolve(&flags(&["--container-log-max-files", "4"]), &f, "k.yaml").unwrap();
    assert_eq!(s.container_logs.max_files, 4);
    let err = resolve_err(
        &flags(&["--container-log-max-files", "0"]),
        &file("containerLogMaxFiles: 7\n"),
    );
    assert!(err.contains("--container-log-max-files 0"), "{err}");
}
