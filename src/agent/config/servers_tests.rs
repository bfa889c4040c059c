//! Tests of the stats/server settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::config::{ConfigFile, RunArgs, parse_config_file, resolve};

#[test]
fn serve_settings_default_to_the_socket_only() {
    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "")
        .unwrap()
        .serve;
    assert_eq!(s.socket, PathBuf::from("/run/crilet/crilet.sock"));
    assert_eq!(s.stats_period, Duration::from_secs(10));
    assert_eq!(s.http_address, None);
    assert_eq!(s.grpc_address, None);
}

#[test]
fn the_tcp_listener_needs_tls_and_bad_serve_flags_are_named() {
    let no_tls = RunArgs {
        grpc_address: Some("127.0.0.1:10250".into()),
        ..Default::default()
    };
    let err = resolve(&no_tls, &ConfigFile::default(), "")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--grpc-address") && err.contains("--tls-cert-file"),
        "{err}"
    );

    let f = parse_config_file(
        "k.yaml",
        "tlsCertFile: /etc/crilet/tls.crt\ntlsPrivateKeyFile: /etc/crilet/tls.key\nauthentication:\n  x509:\n    clientCAFile: /etc/crilet/ca.crt\n",
    )
    .unwrap();
    let s = resolve(&no_tls, &f, "k.yaml").unwrap().serve;
    assert_eq!(s.tls_cert_file, Some("/etc/crilet/tls.crt".into()));
    assert_eq!(s.client_ca_file, Some("/etc/crilet/ca.crt".into()));

    let short = RunArgs {
        stats_period: Some(Duration::from_millis(10)),
        ..Default::default()
    };
    let err = resolve(&short, &ConfigFile::default(), "")
        .unwrap_err()
        .to_string();
    assert!(err.contains("--stats-period"), "{err}");
    let bad_http = RunArgs {
        http_address: Some("localhost".into()),
        ..Default::default()
    };
    let err = resolve(&bad_http, &ConfigFile::default(), "")
        .unwrap_err()
        .to_string();
    assert!(err.contains("--http-address"), "{err}");
    let http = RunArgs {
        http_address: Some(":10255".into()),
        ..Default::default()
    };
    let s = resolve(&http, &ConfigFile::default(), "").unwrap().serve;
    assert_eq!(s.http_address, Some("127.0.0.1:10255".parse().unwrap()));
}
