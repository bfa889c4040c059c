//! The node's certificates, as the kubelet's `pkg/kubelet/certificate`:
//! the TLS bootstrap of the client certificate and its rotation
//! (`manager`, its kube-rs side `kube_csr`), the requests and deadlines
//! (`csr`, pure), the kubeconfig the bootstrap writes (`kubeconfig`, pure)
//! and the files under `--cert-dir` (`store`, laid out as the kubelet's).
//!
//! Invariant: the rest of crilet sees only files: the kubeconfig, and the
//! current pair it names, which `kubeapi::transport` reads again when it
//! changes.

pub mod csr;
pub mod kube_csr;
pub mod kubeconfig;
pub mod manager;
pub mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio_util::sync::CancellationToken;

use kube_csr::{BOOTSTRAP_WAIT, KubeCsrApi, ROTATION_WAIT};
use manager::{ClientCertificate, CsrApi};

/// How the node gets and keeps its client certificate
/// (`--bootstrap-kubeconfig`, `--cert-dir`, `--rotate-certificates`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSettings {
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub cert_dir: PathBuf,
    pub rotate_certificates: bool,
    /// `--rotate-server-certificates` / `serverTLSBootstrap`: the kubelet
    /// server's certificate comes through a CSR.
    pub rotate_server_certificates: bool,
}

impl CertificateSettings {
    /// The pair files whose TTL the metrics export, as the kubelet's
    /// certificate managers do: the client's when crilet keeps it, the
    /// server's with `--rotate-server-certificates`.
    pub fn managed_pairs(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        let client = (self.bootstrap_kubeconfig.is_some() || self.rotate_certificates)
            .then(|| store::FileStore::new(&self.cert_dir, store::CLIENT_PAIR).current_path());
        (
            client,
            self.rotate_server_certificates.then(|| self.serving_pair()),
        )
    }

    /// Where the kubelet server's certificate is with
    /// `--rotate-server-certificates`.
    pub fn serving_pair(&self) -> PathBuf {
        store::FileStore::new(&self.cert_dir, store::SERVING_PAIR).current_path()
    }
}

/// Before the API clients are built: with `--bootstrap-kubeconfig` or
/// `--rotate-certificates`, makes sure `kubeconfig` is there (writing it
/// from the bootstrap kubeconfig when it is missing or expired) and starts
/// the task that asks for and rotates the client certificate; with
/// `--rotate-server-certificates`, the one that keeps the kubelet server's
/// certificate, for the node's name and `host_ip`. Answers the counters
/// of failed requests, the client's then the server's.
pub async fn start(
    node: &str,
    host_ip: &str,
    kubeconfig: &Path,
    settings: &CertificateSettings,
    cancel: CancellationToken,
) -> Result<[Arc<AtomicU64>; 2], String> {
    let (bootstrap, rotate) = (
        settings.bootstrap_kubeconfig.as_deref(),
        settings.rotate_certificates,
    );
    let cert_dir = settings.cert_dir.as_path();
    let mut errors: [Arc<AtomicU64>; 2] = Default::default();
    if bootstrap.is_some() || rotate {
        let cert = ClientCertificate::new(node, kubeconfig, bootstrap, cert_dir, rotate);
        errors[0] = cert.renew_errors.clone();
        manager::prepare(&cert, std::time::SystemTime::now())?;
        start_client(cert, kubeconfig, bootstrap, rotate, cancel.clone()).await?;
    }
    if settings.rotate_server_certificates {
        // The node's name and address, as the kubelet's Hostname and
        // InternalIP addresses.
        let ips = host_ip.parse().into_iter().collect();
        let serving =
            ClientCertificate::serving(node, kubeconfig, cert_dir, vec![node.into()], ips);
        let api = Arc::new(KubeCsrApi::from_kubeconfig(kubeconfig, ROTATION_WAIT).await?);
        tokio::spawn(manager::run(serving, None, api, cancel));
    }
    Ok(errors)
}

async fn start_client(
    cert: ClientCertificate,
    kubeconfig: &Path,
    bootstrap: Option<&Path>,
    rotate: bool,
    cancel: CancellationToken,
) -> Result<(), String> {
    let bootstrap_api = match bootstrap {
        Some(path) => Some(
            Arc::new(KubeCsrApi::from_kubeconfig(path, BOOTSTRAP_WAIT).await?) as Arc<dyn CsrApi>,
        ),
        None => None,
    };
    let node_api = Arc::new(KubeCsrApi::from_kubeconfig(kubeconfig, ROTATION_WAIT).await?);
    if rotate && !names_current_pair(kubeconfig, &cert.store.current_path()) {
        tracing::warn!(
            kubeconfig = %kubeconfig.display(),
            current = %cert.store.current_path().display(),
            "--rotate-certificates: the kubeconfig's client certificate is not the cert dir's current pair, so a rotated one would not be used: not rotating"
        );
        return Ok(());
    }
    tokio::spawn(manager::run(cert, bootstrap_api, node_api, cancel));
    Ok(())
}

/// Whether the kubeconfig's current user presents `pair` as its client
/// certificate (what the bootstrap writes, and kubeadm's kubelet.conf).
fn names_current_pair(kubeconfig: &Path, pair: &Path) -> bool {
    let Ok(mut k) = kube::config::Kubeconfig::read_from(kubeconfig) else {
        return false;
    };
    crate::kubeapi::transport::current_auth_info_mut(&mut k)
        .and_then(|a| a.client_certificate.as_deref())
        .is_some_and(|c| Path::new(c) == pair)
}
