//! Starting the kubelet server from `crilet run`'s settings: the listener
//! and TLS configuration are made at start, so a taken port or a bad
//! certificate fails the start; it serves once the agent's sources exist.
//! Invariant: webhooks are built only from the node's kubeconfig.

use std::sync::Arc;

use crate::agent::config::{AuthorizationMode, Settings};
use crate::server::authn::{Authenticator, TokenAuthenticator};
use crate::server::authz::{Authorizer, WebhookAuthorizer};
use crate::server::handlers::Handlers;
use crate::server::review::{KubeReviewer, Reviewer};
use crate::server::tls::{self, ServingCert};
use crate::server::{self, KubeletServer, ServerError};
use tokio_util::sync::CancellationToken;

pub struct Listener {
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    client_ca: Option<tls::ClientCa>,
}

/// None with `--port 0`.
pub async fn bind(settings: &Settings, node_name: &str) -> Result<Option<Listener>, ServerError> {
    let k = &settings.kubelet_server;
    if !k.enabled() {
        tracing::info!("kubelet server off (--port 0)");
        return Ok(None);
    }
    let serving = match (
        &settings.serve.tls_cert_file,
        &settings.serve.tls_private_key_file,
    ) {
        _ if settings.certificates.rotate_server_certificates => ServingCert::Bootstrap {
            pair: settings.certificates.serving_pair(),
        },
        (Some(cert), Some(key)) => ServingCert::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => {
            let mut dns_names = vec![node_name.to_owned()];
            if let Ok(host) = crate::nodestatus::machine::node_name(None) {
                if !dns_names.contains(&host) {
                    dns_names.push(host);
                }
            }
            dns_names.push("localhost".into());
            let mut ips = vec![std::net::IpAddr::from([127, 0, 0, 1])];
            if let Ok(ip) = crate::nodestatus::machine::node_ip(settings.node_ip.as_deref()).parse()
            {
                if !ips.contains(&ip) {
                    ips.push(ip);
                }
            }
            ServingCert::SelfSigned {
                dir: settings.root_dir.join("pki"),
                dns_names,
                ips,
            }
        }
    };
    let client_ca = settings
        .serve
        .client_ca_file
        .as_deref()
        .map(tls::ClientCa::load)
        .transpose()?;
    let tls = tls::server_config(&serving, client_ca.as_ref())?;
    let addr = std::net::SocketAddr::new(k.address, k.port);
    let listener = server::bind(addr).await?;
    Ok(Some(Listener {
        listener,
        tls,
        client_ca,
    }))
}

pub async fn spawn(
    l: Listener,
    settings: &Settings,
    node_name: &str,
    handlers: Handlers,
    cancel: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, ServerError> {
    let k = &settings.kubelet_server;
    let webhooks = k.token_webhook || k.authorization_mode == AuthorizationMode::Webhook;
    let reviewer: Option<Arc<dyn Reviewer>> = match (&settings.kubeconfig, webhooks) {
        (Some(path), true) => Some(Arc::new(KubeReviewer::from_kubeconfig(path).await?)),
        _ => None,
    };
    let tokens = match (&reviewer, k.token_webhook) {
        (Some(r), true) => Some(TokenAuthenticator::new(
            r.clone(),
            k.token_webhook_cache_ttl,
        )),
        _ => None,
    };
    let authz = match (&reviewer, k.authorization_mode) {
        (Some(r), AuthorizationMode::Webhook) => Authorizer::Webhook(WebhookAuthorizer::new(
            r.clone(),
            k.authorized_ttl,
            k.unauthorized_ttl,
        )),
        _ => Authorizer::AlwaysAllow,
    };
    tracing::info!(
        address = %k.address,
        port = k.port,
        client_ca = settings.serve.client_ca_file.as_ref().map_or("-".to_string(), |p| p.display().to_string()),
        token_webhook = tokens.is_some(),
        anonymous = k.anonymous_auth,
        authorization = ?k.authorization_mode,
        "serving the kubelet server (HTTPS)"
    );
    let server = Arc::new(KubeletServer {
        node_name: node_name.to_owned(),
        authn: Authenticator {
            x509: l.client_ca,
            tokens,
            anonymous: k.anonymous_auth,
        },
        authz,
        handlers,
    });
    Ok(tokio::spawn(server::serve(
        l.listener, l.tls, server, cancel,
    )))
}
