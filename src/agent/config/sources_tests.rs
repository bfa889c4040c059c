//! Tests of the pod-source settings (manifest URL and its headers).

use std::time::Duration;

use super::parse_header;
use crate::agent::config::{ConfigFile, RunArgs, parse_config_file, resolve};

#[test]
fn manifest_url_settings_from_flags_and_file() {
    let text = "staticPodURL: http://cfg/pods\nhttpCheckFrequency: 1m\nstaticPodURLHeader:\n  X-B: [b1, b2]\n  X-A: [a]\n";
    let f = parse_config_file("k.yaml", text).unwrap();
    let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
    assert_eq!(s.manifest_url.as_deref(), Some("http://cfg/pods"));
    assert_eq!(s.http_check_frequency, Duration::from_secs(60));
    let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        s.manifest_url_headers,
        pairs(&[("X-A", "a"), ("X-B", "b1"), ("X-B", "b2")])
    );

    let args = RunArgs {
        manifest_url: Some("https://other/pods".into()),
        manifest_url_header: pairs(&[("Authorization", "Bearer t")]),
        http_check_frequency: Some(Duration::from_secs(5)),
        manifest_url_ca_file: Some("/etc/ca.pem".into()),
        ..Default::default()
    };
    let s = resolve(&args, &f, "k.yaml").unwrap();
    assert_eq!(s.manifest_url.as_deref(), Some("https://other/pods"));
    assert_eq!(
        s.manifest_url_headers,
        pairs(&[("Authorization", "Bearer t")])
    );
    assert_eq!(s.http_check_frequency, Duration::from_secs(5));
    assert_eq!(s.manifest_url_ca_file, Some("/etc/ca.pem".into()));

    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "").unwrap();
    assert_eq!(
        (s.manifest_url, s.http_check_frequency),
        (None, Duration::from_secs(20))
    );

    let f = parse_config_file("k.yaml", "httpCheckFrequency: often\n").unwrap();
    let err = resolve(&RunArgs::default(), &f, "k.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("httpCheckFrequency") && err.contains("k.yaml"),
        "{err}"
    );
}

#[test]
fn header_flag_parsing() {
    let ok = |t: &str| parse_header(t).unwrap();
    assert_eq!(ok("X-Token: a:b, c"), ("X-Token".into(), "a:b, c".into()));
    assert_eq!(
        ok("Accept:application/json"),
        ("Accept".into(), "application/json".into())
    );
    assert_eq!(ok("X-Empty:"), ("X-Empty".into(), String::new()));
    for bad in ["no colon", ": value", "two words: v"] {
        assert!(parse_header(bad).is_err(), "{bad}");
    }
}
