//! Tests of the kubelet server settings.

use std::time::Duration;

use super::*;
use crate::agent::config::{ConfigFile, RunArgs, parse_config_file, resolve};

fn resolved(args: &RunArgs, file: &str) -> Result<KubeletServerSettings, String> {
    let f = parse_config_file("k.yaml", file).map_err(|e| e.to_string())?;
    resolve(args, &f, "k.yaml")
        .map(|s| s.kubelet_server)
        .map_err(|e| e.to_string())
}

fn with_kubeconfig() -> RunArgs {
    RunArgs {
        kubeconfig: Some("/etc/crilet/kubelet.conf".into()),
        ..Default::default()
    }
}

#[test]
fn standalone_defaults_are_the_kubelets_with_always_allow() {
    let s = resolve(&RunArgs::default(), &ConfigFile::default(), "")
        .unwrap()
        .kubelet_server;
    assert_eq!(s.address.to_string(), "0.0.0.0");
    assert_eq!(s.port, 10250);
    assert!(s.enabled());
    assert!(!s.anonymous_auth);
    assert_eq!(s.authorization_mode, AuthorizationMode::AlwaysAllow);
    assert!(!s.token_webhook);
    assert_eq!(s.token_webhook_cache_ttl, Duration::from_secs(120));
    assert_eq!(s.authorized_ttl, Duration::from_secs(300));
    assert_eq!(s.unauthorized_ttl, Duration::from_secs(30));
}

#[test]
fn a_kubeconfig_turns_both_webhooks_on() {
    let s = resolved(&with_kubeconfig(), "{}").unwrap();
    assert_eq!(s.authorization_mode, AuthorizationMode::Webhook);
    assert!(s.token_webhook);
}

#[test]
fn file_fields_apply_and_flags_override_them() {
    let file = "address: 127.0.0.1\nport: 11250\nauthentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\n    cacheTTL: 10s\nauthorization:\n  mode: AlwaysAllow\n  webhook:\n    cacheAuthorizedTTL: 1m\n    cacheUnauthorizedTTL: 5s\n";
    let s = resolved(&with_kubeconfig(), file).unwrap();
    assert_eq!(s.address.to_string(), "127.0.0.1");
    assert_eq!(s.port, 11250);
    assert!(s.anonymous_auth);
    assert!(!s.token_webhook);
    assert_eq!(s.token_webhook_cache_ttl, Duration::from_secs(10));
    assert_eq!(s.authorization_mode, AuthorizationMode::AlwaysAllow);
    assert_eq!(s.authorized_ttl, Duration::from_secs(60));
    assert_eq!(s.unauthorized_ttl, Duration::from_secs(5));

    let args = RunArgs {
        address: Some("::1".into()),
        port: Some(0),
        anonymous_auth: Some(false),
        authentication_token_webhook: Some(true),
        authentication_token_webhook_cache_ttl: Some(Duration::from_secs(1)),
        authorization_mode: Some(AuthorizationMode::Webhook),
        authorization_webhook_cache_authorized_ttl: Some(Duration::from_secs(2)),
        authorization_webhook_cache_unauthorized_ttl: Some(Duration::from_secs(3)),
        ..with_kubeconfig()
    };
    let s = resolved(&args, file).unwrap();
    assert_eq!(s.address.to_string(), "::1");
    assert_eq!(s.port, 0);
    assert!(!s.enabled());
    assert!(!s.anonymous_auth);
    assert!(s.token_webhook);
    assert_eq!(s.token_webhook_cache_ttl, Duration::from_secs(1));
    assert_eq!(s.authorization_mode, AuthorizationMode::Webhook);
    assert_eq!(s.authorized_ttl, Duration::from_secs(2));
    assert_eq!(s.unauthorized_ttl, Duration::from_secs(3));
}

#[test]
fn bad_values_name_their_flag_or_field() {
    let cases: &[(RunArgs, &str, &str)] = &[
        (
            RunArgs {
                address: Some("node-a".into()),
                ..Default::default()
            },
            "{}",
            "--address",
        ),
        (RunArgs::default(), "address: nowhere\n", "address:"),
        (RunArgs::default(), "port: 70000\n", "port:"),
        (RunArgs::default(), "port: -1\n", "port:"),
        (
            with_kubeconfig(),
            "authorization:\n  mode: RBAC\n",
            "authorization.mode",
        ),
        (
            with_kubeconfig(),
            "authentication:\n  webhook:\n    cacheTTL: soon\n",
            "authentication.webhook.cacheTTL",
        ),
        (
            with_kubeconfig(),
            "authorization:\n  webhook:\n    cacheAuthorizedTTL: x\n",
            "authorization.webhook.cacheAuthorizedTTL",
        ),
        (
            with_kubeconfig(),
            "authorization:\n  webhook:\n    cacheUnauthorizedTTL: x\n",
            "authorization.webhook.cacheUnauthorizedTTL",
        ),
        (
            RunArgs {
                authorization_mode: Some(AuthorizationMode::Webhook),
                ..Default::default()
            },
            "{}",
            "--authorization-mode Webhook",
        ),
        (
            RunArgs {
                authentication_token_webhook: Some(true),
                ..Default::default()
            },
            "{}",
            "--authentication-token-webhook",
        ),
        (
            RunArgs {
                tls_cert_file: Some("/etc/crilet/tls.crt".into()),
                ..Default::default()
            },
            "{}",
            "--tls-private-key-file",
        ),
        (
            RunArgs::default(),
            "tlsPrivateKeyFile: /etc/crilet/tls.key\n",
            "--tls-cert-file",
        ),
    ];
    for (args, file, expected) in cases {
        let err = resolved(args, file).unwrap_err();
        assert!(err.contains(expected), "{file:?}: {err}");
    }
    // With the server off, webhooks without a kubeconfig are not an error.
    let off = RunArgs {
        port: Some(0),
        authorization_mode: Some(AuthorizationMode::Webhook),
        ..Default::default()
    };
    assert!(resolved(&off, "{}").is_ok());
}

#[test]
fn the_boolean_flags_take_an_optional_value() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }
    let cli = Cli::try_parse_from([
        "crilet",
        "--anonymous-auth",
        "--authorization-mode",
        "AlwaysAllow",
    ])
    .unwrap();
    assert_eq!(cli.run.anonymous_auth, Some(true));
    assert_eq!(
        cli.run.authorization_mode,
        Some(AuthorizationMode::AlwaysAllow)
    );
    let cli = Cli::try_parse_from([
        "crilet",
        "--anonymous-auth=false",
        "--authentication-token-webhook=false",
        "--port",
        "0",
    ])
    .unwrap();
    assert_eq!(cli.run.anonymous_auth, Some(false));
    assert_eq!(cli.run.authentication_token_webhook, Some(false));
    assert_eq!(cli.run.port, Some(0));
    assert!(Cli::try_parse_from(["crilet", "--authorization-mode", "RBAC"]).is_err());
    assert!(Cli::try_parse_from(["crilet", "--port", "65536"]).is_err());
}
