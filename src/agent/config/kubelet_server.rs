//! Settings of the kubelet server (the HTTPS port the API server calls for
//! logs, exec, attach and port-forward): where it listens and how it
//! authenticates and authorizes. Its certificate, key and client CA are the
//! shared `--tls-*` / `--client-ca-file` settings of [`super::ServeSettings`].
//!
//! Invariant: a resolved [`KubeletServerSettings`] never asks for a webhook
//! (TokenReview or SubjectAccessReview) without a kubeconfig to send it with,
//! and every bad value is reported naming its flag or config field.
//!
//! Port decision: the TCP gRPC listener (`--grpc-address`) stays on its own
//! address; it does not share this port. One port per protocol keeps the
//! kubelet server's authentication (webhooks, anonymous, 401/403 texts) apart
//! from the gRPC API's mutual TLS, so the gRPC example in docs/stats.md uses 10350.

use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, ConfigFile, RunArgs, file_duration};

/// The kubelet's default port.
pub const DEFAULT_PORT: u16 = 10250;
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(120);
pub const DEFAULT_AUTHORIZED_TTL: Duration = Duration::from_secs(300);
pub const DEFAULT_UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);

/// `--authorization-mode`: the kubelet's two modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthorizationMode {
    #[value(name = "AlwaysAllow")]
    AlwaysAllow,
    #[value(name = "Webhook")]
    Webhook,
}

impl AuthorizationMode {
    fn parse(s: &str) -> Option<AuthorizationMode> {
        match s {
            "AlwaysAllow" => Some(AuthorizationMode::AlwaysAllow),
            "Webhook" => Some(AuthorizationMode::Webhook),
            _ => None,
        }
    }
}

/// The KubeletConfiguration's `authorization` block.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationConfig {
    pub mode: Option<String>,
    pub webhook: Option<AuthorizationWebhookConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationWebhookConfig {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: Option<String>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: Option<String>,
}

/// `authentication.anonymous`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AnonymousConfig {
    pub enabled: Option<bool>,
}

/// `authentication.webhook`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationWebhookConfig {
    pub enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Option<String>,
}

/// The resolved kubelet server settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletServerSettings {
    pub address: IpAddr,
    /// 0: the server is off. Also what the Node's
    /// `status.daemonEndpoints.kubeletEndpoint.Port` should carry.
    pub port: u16,
    pub anonymous_auth: bool,
    pub authorization_mode: AuthorizationMode,
    /// Bearer tokens go through a TokenReview.
    pub token_webhook: bool,
    pub token_webhook_cache_ttl: Duration,
    pub authorized_ttl: Duration,
    pub unauthorized_ttl: Duration,
}

impl KubeletServerSettings {
    pub fn enabled(&self) -> bool {
        self.port != 0
    }
}

fn file_error(origin: &str, message: String) -> ConfigError {
    ConfigError::File {
        path: origin.to_string(),
        message,
    }
}

/// Flags over the file over the kubelet's defaults; the webhook defaults
/// follow whether a kubeconfig is given.
pub(super) fn resolve_kubelet_server(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<KubeletServerSettings, ConfigError> {
    let has_kubeconfig = args.kubeconfig.is_some();
    let address = match (&args.address, &file.address) {
        (Some(a), _) => a.trim().parse().map_err(|_| ConfigError::Flag {
            message: format!("--address {a:?} is not an IP address"),
        })?,
        (None, Some(a)) => a
            .trim()
            .parse()
            .map_err(|_| file_error(origin, format!("address: {a:?} is not an IP address")))?,
        (None, None) => IpAddr::from([0, 0, 0, 0]),
    };
    let port = match (args.port, file.port) {
        (Some(p), _) => p,
        (None, Some(p)) => u16::try_from(p)
            .map_err(|_| file_error(origin, format!("port: {p} is not in 0..65535")))?,
        (None, None) => DEFAULT_PORT,
    };
    let authn = file.authentication.as_ref();
    let anonymous_auth = args
        .anonymous_auth
        .or(authn
            .and_then(|a| a.anonymous.as_ref())
            .and_then(|a| a.enabled))
        .unwrap_or(false);
    let webhook = authn.and_then(|a| a.webhook.as_ref());
    let token_webhook = args
        .authentication_token_webhook
        .or(webhook.and_then(|w| w.enabled))
        .unwrap_or(has_kubeconfig);
    let token_webhook_cache_ttl = args
        .authentication_token_webhook_cache_ttl
        .or(file_duration(
            origin,
            "authentication.webhook.cacheTTL",
            webhook.and_then(|w| w.cache_ttl.as_deref()),
        )?)
        .unwrap_or(DEFAULT_TOKEN_CACHE_TTL);
    let authz = file.authorization.as_ref();
    let authorization_mode = match (
        args.authorization_mode,
        authz.and_then(|a| a.mode.as_deref()),
    ) {
        (Some(m), _) => m,
        (None, Some(m)) => AuthorizationMode::parse(m).ok_or_else(|| {
            file_error(
                origin,
                format!("authorization.mode: {m:?} is not AlwaysAllow or Webhook"),
            )
        })?,
        (None, None) if has_kubeconfig => AuthorizationMode::Webhook,
        (None, None) => AuthorizationMode::AlwaysAllow,
    };
    let authz_webhook = authz.and_then(|a| a.webhook.as_ref());
    let authorized_ttl = args
        .authorization_webhook_cache_authorized_ttl
        .or(file_duration(
            origin,
            "authorization.webhook.cacheAuthorizedTTL",
            authz_webhook.and_then(|w| w.cache_authorized_ttl.as_deref()),
        )?)
        .unwrap_or(DEFAULT_AUTHORIZED_TTL);
    let unauthorized_ttl = args
        .authorization_webhook_cache_unauthorized_ttl
        .or(file_duration(
            origin,
            "authorization.webhook.cacheUnauthorizedTTL",
            authz_webhook.and_then(|w| w.cache_unauthorized_ttl.as_deref()),
        )?)
        .unwrap_or(DEFAULT_UNAUTHORIZED_TTL);
    let cert = args.tls_cert_file.is_some() || file.tls_cert_file.is_some();
    let key = args.tls_private_key_file.is_some() || file.tls_private_key_file.is_some();
    if cert != key && port != 0 {
        return Err(ConfigError::Flag {
            message: "--tls-cert-file and --tls-private-key-file (tlsCertFile, tlsPrivateKeyFile) go together: give both, or neither for a self-signed certificate".into(),
        });
    }
    if !has_kubeconfig && port != 0 {
        if authorization_mode == AuthorizationMode::Webhook {
            return Err(ConfigError::Flag {
                message: "--authorization-mode Webhook (authorization.mode) sends SubjectAccessReviews: it needs --kubeconfig".into(),
            });
        }
        if token_webhook {
            return Err(ConfigError::Flag {
                message: "--authentication-token-webhook (authentication.webhook.enabled) sends TokenReviews: it needs --kubeconfig".into(),
            });
        }
    }
    Ok(KubeletServerSettings {
        address,
        port,
        anonymous_auth,
        authorization_mode,
        token_webhook,
        token_webhook_cache_ttl,
        authorized_ttl,
        unauthorized_ttl,
    })
}

#[cfg(test)]
#[path = "kubelet_server_tests.rs"]
mod tests;
