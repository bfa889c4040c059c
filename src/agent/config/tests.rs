//! Tests of the shared loader: file parsing, flag/file/default merging
//! and `load`.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::cri::DEFAULT_ENDPOINT;

const FILE: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\nfileCheckFrequency: 5s\ncontainerRuntimeEndpoint: unix:///run/x.sock\ncgroupRoot: /crilet\nlogging:\n  format: json\nauthentication: {}\n";

#[test]
fn defaults_without_file_or_flags() {
    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "").unwrap();
    assert_eq!(s.pod_manifest_path, None);
    assert_eq!(s.file_check_frequency, Duration::from_secs(20));
    assert_eq!(s.container_runtime_endpoint, DEFAULT_ENDPOINT);
    assert_eq!(s.root_dir, PathBuf::from("/var/lib/crilet"));
    assert_eq!(s.cgroup_root, "/");
    assert_eq!(s.log_format, LogFormat::Text);
}

#[test]
fn file_fields_apply_and_unknown_fields_are_tolerated() {
    let f = parse_config_file("k.yaml", FILE).unwrap();
    let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
    assert_eq!(
        s.pod_manifest_path,
        Some("/etc/kubernetes/manifests".into())
    );
    assert_eq!(s.file_check_frequency, Duration::from_secs(5));
    assert_eq!(s.container_runtime_endpoint, "unix:///run/x.sock");
    assert_eq!(s.cgroup_root, "/crilet");
    assert_eq!(s.log_format, LogFormat::Json);
}

#[test]
fn flags_override_the_file() {
    let f = parse_config_file("k.yaml", FILE).unwrap();
    let args = RunArgs {
        pod_manifest_path: Some("/srv/pods".into()),
        file_check_frequency: Some(Duration::from_secs(1)),
        container_runtime_endpoint: Some("unix:///y.sock".into()),
        cgroup_root: Some("/other".into()),
        log_format: Some(LogFormat::Text),
        ..Default::default()
    };
    let s = resolve(&args, &f, "k.yaml").unwrap();
    assert_eq!(s.pod_manifest_path, Some("/srv/pods".into()));
    assert_eq!(s.file_check_frequency, Duration::from_secs(1));
    assert_eq!(s.container_runtime_endpoint, "unix:///y.sock");
    assert_eq!(s.cgroup_root, "/other");
    assert_eq!(s.log_format, LogFormat::Text);
}

#[test]
fn bad_files_name_the_file_and_the_problem() {
    let cases = [
        ("kind: Pod\n", "expected KubeletConfiguration"),
        ("apiVersion: v1\n", "expected kubelet.config.k8s.io/v1beta1"),
        ("staticPodPath: [1, 2\n", "k.yaml"),
    ];
    for (text, want) in cases {
        let err = parse_config_file("k.yaml", text).unwrap_err().to_string();
        assert!(
            err.contains(want) && err.contains("k.yaml"),
            "{text:?}: {err}"
        );
    }
    let f = parse_config_file("k.yaml", "fileCheckFrequency: soon\n").unwrap();
    let err = resolve(&RunArgs::default(), &f, "k.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("fileCheckFrequency"), "{err}");
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let args = RunArgs {
        config: Some("/no/such/crilet.yaml".into()),
        ..Default::default()
    };
    let err = load(&args).unwrap_err().to_string();
    assert!(err.contains("/no/such/crilet.yaml"), "{err}");
}

#[test]
fn max_parallel_runtime_mutations_is_flag_over_file_over_the_measured_default() {
    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "").unwrap();
    assert_eq!(
        s.max_parallel_runtime_mutations,
        runtime::DEFAULT_MAX_PARALLEL_RUNTIME_MUTATIONS
    );
    let f = parse_config_file("k.yaml", "maxParallelRuntimeMutations: 2\n").unwrap();
    let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
    assert_eq!(s.max_parallel_runtime_mutations, 2);
    let args = RunArgs {
        max_parallel_runtime_mutations: Some(0),
        ..Default::default()
    };
    assert_eq!(
        resolve(&args, &f, "k.yaml")
            .unwrap()
            .max_parallel_runtime_mutations,
        0
    );
    let bad = parse_config_file("k.yaml", "maxParallelRuntimeMutations: -1\n").unwrap_err();
    assert!(bad.to_string().contains("k.yaml"), "{bad}");
}

#[test]
fn cgroup_driver_is_flag_over_file_over_cgroupfs() {
    use crate::cri::CgroupDriver;
    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "").unwrap();
    assert_eq!(s.cgroup_driver, CgroupDriver::Cgroupfs);
    let f = parse_config_file("k.yaml", "cgroupDriver: systemd\n").unwrap();
    let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
    assert_eq!(s.cgroup_driver, CgroupDriver::Systemd);
    let args = RunArgs {
        cgroup_driver: Some(CgroupDriver::Cgroupfs),
        ..Default::default()
    };
    assert_eq!(
        resolve(&args, &f, "k.yaml").unwrap().cgroup_driver,
        CgroupDriver::Cgroupfs
    );
}

#[test]
fn unknown_cgroup_drivers_name_the_field_or_flag_and_the_choices() {
    let f = parse_config_file("k.yaml", "cgroupDriver: Systemd\n").unwrap();
    let err = resolve(&RunArgs::default(), &f, "k.yaml")
        .unwrap_err()
        .to_string();
    for want in [
        "k.yaml",
        "cgroupDriver",
        "\"Systemd\"",
        "cgroupfs or systemd",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }

    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let parse = |v: &str| <Cmd as clap::Parser>::try_parse_from(["crilet", "--cgroup-driver", v]);
    let err = parse("upstart").err().unwrap().to_string();
    for want in ["--cgroup-driver", "upstart", "cgroupfs or systemd"] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let driver = parse("systemd").ok().unwrap().run.cgroup_driver;
    assert_eq!(driver, Some(crate::cri::CgroupDriver::Systemd));
}

#[test]
fn config_file_size_is_bounded_just_under_and_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.yaml");
    let mut text = FILE.to_string();
    text.push_str(&"#".repeat(MAX_CONFIG_FILE_BYTES - text.len()));
    std::fs::write(&path, &text).unwrap();
    let args = RunArgs {
        config: Some(path.clone()),
        ..Default::default()
    };
    let s = load(&args).expect("exactly at the limit");
    assert_eq!(s.cgroup_root, "/crilet");
    text.push('#');
    std::fs::write(&path, &text).unwrap();
    let err = load(&args).unwrap_err().to_string();
    assert!(
        err.contains(&path.display().to_string())
            && err.contains(&MAX_CONFIG_FILE_BYTES.to_string()),
        "{err}"
    );
    let err = parse_config_file("k.yaml", &text).unwrap_err().to_string();
    assert!(err.contains("k.yaml") && err.contains("limit"), "{err}");
}

#[test]
fn config_file_has_the_manifest_yaml_limits() {
    use crate::pod::document::{MAX_NESTING_DEPTH, MAX_YAML_ALIAS_EVENTS};
    let nested = |lists: usize| format!("{FILE}x: {}{}\n", "[".repeat(lists), "]".repeat(lists));
    assert!(parse_config_file("k.yaml", &nested(MAX_NESTING_DEPTH - 1)).is_ok());
    let err = parse_config_file("k.yaml", &nested(MAX_NESTING_DEPTH))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("k.yaml") && err.contains(&MAX_NESTING_DEPTH.to_string()),
        "{err}"
    );
    // 1000 references replaying 100 events each: the limit, then over it.
    let aliases = |items: usize| {
        let items = vec!["v"; items].join(", ");
        let refs = vec!["*x"; 1000].join(", ");
        format!("{FILE}x: &x [{items}]\ny: [{refs}]\n")
    };
    assert!(parse_config_file("k.yaml", &aliases(98)).is_ok());
    let err = parse_config_file("k.yaml", &aliases(99))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("k.yaml") && err.contains(&MAX_YAML_ALIAS_EVENTS.to_string()),
        "{err}"
    );
}

/// The example the package installs as /etc/crilet/config.yaml resolves,
/// alone and with the kubeconfig the unit's CRILET_ARGS would add.
#[test]
fn the_packaged_example_config_resolves() {
    let text = include_str!("../../../contrib/systemd/config.yaml");
    let f = parse_config_file("/etc/crilet/config.yaml", text).unwrap();
    let s = resolve(&RunArgs::default(), &f, "/etc/crilet/config.yaml").unwrap();
    assert_eq!(
        s.pod_manifest_path,
        Some("/etc/kubernetes/manifests".into())
    );
    assert_eq!(
        s.container_runtime_endpoint,
        "unix:///run/containerd/containerd.sock"
    );
    assert_eq!(s.cgroup_driver, CgroupDriver::Cgroupfs);
    assert_eq!(s.log_dirs, crate::logs::layout::LogDirs::default());
    assert_eq!(s.kubelet_server.port, 10250);
    assert!(!s.kubelet_server.anonymous_auth);
    let args = RunArgs {
        kubeconfig: Some("/etc/kubernetes/kubelet.conf".into()),
        ..RunArgs::default()
    };
    let s = resolve(&args, &f, "/etc/crilet/config.yaml").unwrap();
    assert_eq!(
        s.kubelet_server.authorization_mode,
        kubelet_server::AuthorizationMode::Webhook
    );
}

#[test]
fn verbosity_comes_from_v_or_the_file_and_picks_the_log_filter() {
    let file = |v: &str| {
        let text = FILE.replace(
            "  format: json\n",
            &format!("  format: json\n  verbosity: {v}\n"),
        );
        parse_config_file("k.yaml", &text).unwrap()
    };
    let v = |args: &[&str], f: &ConfigFile| {
        let args = try_parse_flags(args).unwrap();
        resolve(&args, f, "k.yaml").unwrap().verbosity
    };
    assert_eq!(v(&[], &ConfigFile::default()), 0);
    assert_eq!(v(&["--v=4"], &ConfigFile::default()), 4);
    assert_eq!(v(&["-v", "6"], &ConfigFile::default()), 6);
    assert_eq!(v(&[], &file("5")), 5);
    assert_eq!(v(&["--v", "2"], &file("5")), 2, "the flag wins");
    assert!(try_parse_flags(&["--v=loud"]).is_err());
    let filters: Vec<&str> = [0, 3, 4, 5, 6, 10].map(log_filter).to_vec();
    assert_eq!(
        filters,
        [
            "info",
            "info",
            "info,crilet=debug",
            "info,crilet=debug",
            "info,crilet=trace",
            "info,crilet=trace"
        ]
    );
}

#[test]
fn the_tls_bootstrap_flags_resolve_as_the_kubelets() {
    let r = |args: &[&str], f: &ConfigFile| {
        let args = try_parse_flags(args).unwrap();
        resolve(&args, f, "k.yaml").map(|s| s.certificates)
    };
    let none = ConfigFile::default();
    let s = r(&[], &none).unwrap();
    assert_eq!(s.cert_dir, PathBuf::from("/var/lib/crilet/pki"));
    assert_eq!(
        (s.bootstrap_kubeconfig, s.rotate_certificates),
        (None, false)
    );
    let s = r(&["--root-dir", "/r"], &none).unwrap();
    assert_eq!(s.cert_dir, PathBuf::from("/r/pki"), "under --root-dir");
    let join = [
        "--kubeconfig",
        "/k",
        "--bootstrap-kubeconfig",
        "/b",
        "--cert-dir",
        "/c",
    ];
    let s = r(&join, &none).unwrap();
    assert_eq!(s.bootstrap_kubeconfig, Some(PathBuf::from("/b")));
    assert_eq!(s.cert_dir, PathBuf::from("/c"));
    let file = parse_config_file("k.yaml", "rotateCertificates: true\n").unwrap();
    assert!(r(&[], &file).unwrap().rotate_certificates);
    assert!(
        r(&["--rotate-certificates"], &none)
            .unwrap()
            .rotate_certificates
    );
    assert!(
        !r(&["--rotate-certificates=false"], &file)
            .unwrap()
            .rotate_certificates,
        "the flag wins"
    );
    let e = r(&["--bootstrap-kubeconfig", "/b"], &none)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--bootstrap-kubeconfig needs --kubeconfig"),
        "{e}"
    );
}

#[test]
fn the_serving_certificate_through_a_csr_needs_a_kubeconfig_and_no_certificate_file() {
    let r = |args: &[&str], f: &ConfigFile| {
        let args = try_parse_flags(args).unwrap();
        resolve(&args, f, "k.yaml").map(|s| s.certificates)
    };
    let none = ConfigFile::default();
    assert!(
        !r(&["--kubeconfig", "/k"], &none)
            .unwrap()
            .rotate_server_certificates
    );
    let on = r(
        &["--kubeconfig", "/k", "--rotate-server-certificates"],
        &none,
    )
    .unwrap();
    assert!(on.rotate_server_certificates);
    assert_eq!(
        on.serving_pair(),
        PathBuf::from("/var/lib/crilet/pki/kubelet-server-current.pem")
    );
    let file = parse_config_file("k.yaml", "serverTLSBootstrap: true\n").unwrap();
    assert!(
        r(&["--kubeconfig", "/k"], &file)
            .unwrap()
            .rotate_server_certificates
    );
    let e = r(&[], &file).unwrap_err().to_string();
    assert!(
        e.contains("--rotate-server-certificates needs --kubeconfig"),
        "{e}"
    );
    let both = [
        "--kubeconfig",
        "/k",
        "--rotate-server-certificates",
        "--tls-cert-file",
        "/c",
        "--tls-private-key-file",
        "/k2",
    ];
    let e = r(&both, &none).unwrap_err().to_string();
    assert!(e.contains("--tls-cert-file"), "{e}");
}
