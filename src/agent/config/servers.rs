//! Stats/server settings: the unix gRPC socket, the stats period, the plain
//! HTTP address and the TLS-only TCP gRPC listener. Invariant: a resolved
//! `ServeSettings` never has a TCP gRPC address without a certificate and
//! key, nor a stats period under 100ms. The TCP gRPC listener keeps its own
//! `--grpc-address`: it never shares the kubelet server's port (see
//! `kubelet_server.rs`); the two share only the certificate files.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, ConfigFile, RunArgs};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuthenticationConfig {
    pub x509: Option<X509Config>,
    pub anonymous: Option<super::kubelet_server::AnonymousConfig>,
    pub webhook: Option<super::kubelet_server::AuthenticationWebhookConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct X509Config {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<PathBuf>,
}

/// Where and how crilet serves its APIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    pub socket: PathBuf,
    pub stats_period: Duration,
    pub http_address: Option<std::net::SocketAddr>,
    pub grpc_address: Option<String>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
}

fn flag_error(message: String) -> ConfigError {
    ConfigError::Flag { message }
}

/// The API settings: the TCP listener only with TLS, a sane stats period.
pub(super) fn resolve_serve(
    args: &RunArgs,
    file: &ConfigFile,
) -> Result<ServeSettings, ConfigError> {
    let stats_period = args
        .stats_period
        .unwrap_or(crate::stats::collector::DEFAULT_STATS_PERIOD);
    if stats_period < Duration::from_millis(100) {
        return Err(flag_error(format!(
            "--stats-period {stats_period:?} is too short (at least 100ms)"
        )));
    }
    let http_address = args
        .http_address
        .as_deref()
        .map(|a| {
            crate::stats::http::parse_address(a)
                .map_err(|e| flag_error(format!("--http-address: {e}")))
        })
        .transpose()?;
    let tls_cert_file = args
        .tls_cert_file
        .clone()
        .or_else(|| file.tls_cert_file.clone());
    let tls_private_key_file = args
        .tls_private_key_file
        .clone()
        .or_else(|| file.tls_private_key_file.clone());
    let client_ca_file = args.client_ca_file.clone().or_else(|| {
        file.authentication
            .as_ref()
            .and_then(|a| a.x509.as_ref())
            .and_then(|x| x.client_ca_file.clone())
    });
    if let Some(addr) = &args.grpc_address {
        if tls_cert_file.is_none() || tls_private_key_file.is_none() {
            return Err(flag_error(format!(
                "--grpc-address {addr} serves TLS only: --tls-cert-file and --tls-private-key-file are required"
            )));
        }
    }
    Ok(ServeSettings {
        socket: args
            .socket
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::stats::grpc::DEFAULT_SOCKET)),
        stats_period,
        http_address,
        grpc_address: args.grpc_address.clone(),
        tls_cert_file,
        tls_private_key_file,
        client_ca_file,
    })
}

#[cfg(test)]
#[path = "servers_tests.rs"]
mod tests;
