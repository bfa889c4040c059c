//! The node's client certificate over its life: the TLS bootstrap
//! (`pkg/kubelet/certificate/bootstrap`) and the rotation (client-go's
//! certificate manager). Before the agent starts, [`prepare`] checks the
//! kubeconfig as the kubelet's `isClientConfigStillValid` does and, when it
//! is missing or its certificate has expired, writes it at once from the
//! bootstrap kubeconfig, naming `<cert-dir>/kubelet-client-current.pem`: the
//! agent's clients are built on it straight away and present the
//! certificate as soon as [`run`] stores it (`kubeapi::transport`), so the
//! static pods never wait for the API server. [`run`] asks for a
//! certificate when there is no valid one (with the bootstrap token), and
//! with rotation at 70-90 % of the current one's lifetime (with the node's
//! own certificate).
//!
//! Invariant: a new certificate becomes current only after the API server
//! has authenticated it as this node (a SelfSubjectReview made with it);
//! until then the old one stays in use, and stays on disk after.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use tokio_util::sync::CancellationToken;

use super::csr::{self, CLIENT_SIGNER, CLIENT_USAGES, NODES_GROUP, SERVING_SIGNER, SERVING_USAGES};
use super::kubeconfig::{current_cluster, render};
use super::store::{CLIENT_PAIR, FileStore, SERVING_PAIR, write_atomically};

/// The API server, as the certificate manager needs it.
#[async_trait::async_trait]
pub trait CsrApi: Send + Sync {
    /// Sends `csr` (a CSR of the same name made with the same key is
    /// reused) and waits until it is issued: the certificate chain, PEM.
    async fn request(
        &self,
        csr: &CertificateSigningRequest,
        key: &rcgen::KeyPair,
    ) -> Result<String, String>;
    /// The user the API server authenticates the pair in `pair_file`
    /// (certificate and key, PEM) as.
    async fn who_am_i(&self, pair_file: &Path) -> Result<String, String>;
}

/// What a certificate is for: its signer, usages and names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub signer: &'static str,
    pub usages: [&'static str; 2],
    pub dns_names: Vec<String>,
    pub ips: Vec<std::net::IpAddr>,
}

impl Template {
    fn is_client(&self) -> bool {
        self.signer == CLIENT_SIGNER
    }
}

/// What the certificate manager works on.
#[derive(Debug, Clone)]
pub struct ClientCertificate {
    pub node: String,
    pub kubeconfig: PathBuf,
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub store: FileStore,
    pub rotate: bool,
    pub template: Template,
    /// Failed requests so far (the kubelet's `..._expiration_renew_errors`).
    pub renew_errors: Arc<AtomicU64>,
}

impl ClientCertificate {
    /// The node's client certificate.
    pub fn new(
        node: &str,
        kubeconfig: &Path,
        bootstrap: Option<&Path>,
        cert_dir: &Path,
        rotate: bool,
    ) -> Self {
        ClientCertificate {
            node: node.to_string(),
            kubeconfig: kubeconfig.to_path_buf(),
            bootstrap_kubeconfig: bootstrap.map(Path::to_path_buf),
            store: FileStore::new(cert_dir, CLIENT_PAIR),
            rotate,
            template: Template {
                signer: CLIENT_SIGNER,
                usages: CLIENT_USAGES,
                dns_names: Vec::new(),
                ips: Vec::new(),
            },
            renew_errors: Arc::default(),
        }
    }

    /// The kubelet server's certificate (`--rotate-server-certificates`):
    /// from the `kubernetes.io/kubelet-serving` signer, for the node's
    /// names and addresses, always asked for with the node's own client.
    pub fn serving(
        node: &str,
        kubeconfig: &Path,
        cert_dir: &Path,
        dns_names: Vec<String>,
        ips: Vec<std::net::IpAddr>,
    ) -> Self {
        ClientCertificate {
            node: node.to_string(),
            kubeconfig: kubeconfig.to_path_buf(),
            bootstrap_kubeconfig: None,
            store: FileStore::new(cert_dir, SERVING_PAIR),
            rotate: true,
            template: Template {
                signer: SERVING_SIGNER,
                usages: SERVING_USAGES,
                dns_names,
                ips,
            },
            renew_errors: Arc::default(),
        }
    }
}

/// The certificates a kubeconfig's current user presents, PEM; None when
/// it presents none (a token).
fn kubeconfig_certificates(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
    let auth = crate::kubeapi::transport::current_auth_info_mut(&mut kubeconfig);
    let Some(auth) = auth else { return Ok(None) };
    if let Some(data) = &auth.client_certificate_data {
        return pem_from_base64(data).map(Some);
    }
    match &auth.client_certificate {
        Some(file) => std::fs::read(file)
            .map(Some)
            .map_err(|e| format!("{file}: {e}")),
        None => Ok(None),
    }
}

fn pem_from_base64(data: &str) -> Result<Vec<u8>, String> {
    // k8s-openapi's ByteString decodes standard base64 from JSON.
    serde_json::from_value::<k8s_openapi::ByteString>(serde_json::Value::String(data.trim().into()))
        .map(|b| b.0)
        .map_err(|e| format!("client-certificate-data: {e}"))
}

/// Whether the kubeconfig at `path` can be used as it is: it exists, and
/// every certificate it presents is within its `notAfter`.
pub fn kubeconfig_still_valid(path: &Path, now: SystemTime) -> bool {
    if !path.exists() {
        return false;
    }
    let pem = match kubeconfig_certificates(path) {
        Ok(Some(pem)) => pem,
        Ok(None) => return true,
        Err(e) => {
            tracing::info!(kubeconfig = %path.display(), error = %e, "the kubeconfig does not load: bootstrapping");
            return false;
        }
    };
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return false;
    }
    certs
        .iter()
        .all(|c| match crate::kubeapi::transport::validity(c) {
            Ok((_, not_after)) => csr::still_valid(not_after, now),
            Err(_) => false,
        })
}

/// Before any client is built: with a bootstrap kubeconfig and a node
/// kubeconfig that is missing or expired, writes the node's kubeconfig
/// (0600) naming the store's current pair, as the kubelet's
/// `LoadClientConfig`. Answers whether it did (a certificate is then
/// requested at once).
pub fn prepare(cert: &ClientCertificate, now: SystemTime) -> Result<bool, String> {
    let Some(bootstrap) = &cert.bootstrap_kubeconfig else {
        return Ok(false);
    };
    if kubeconfig_still_valid(&cert.kubeconfig, now) {
        return Ok(false);
    }
    let source = kube::config::Kubeconfig::read_from(bootstrap)
        .map_err(|e| format!("--bootstrap-kubeconfig {}: {e}", bootstrap.display()))?;
    let cluster = current_cluster(&source)
        .map_err(|e| format!("--bootstrap-kubeconfig {}: {e}", bootstrap.display()))?;
    if let Some(dir) = cert.kubeconfig.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    write_atomically(
        &cert.kubeconfig,
        render(&cluster, &cert.store.current_path()).as_bytes(),
    )?;
    tracing::info!(
        kubeconfig = %cert.kubeconfig.display(),
        bootstrap = %bootstrap.display(),
        "no valid client certificate: the kubeconfig now names the one the TLS bootstrap is asking for"
    );
    Ok(true)
}

/// A number uniform in [0, 1).
fn jitter() -> f64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 8];
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

fn timestamp() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d-%H-%M-%S")
        .to_string()
}

/// One request: a key (the bootstrap's kept one, or a new one), the CSR,
/// the certificate, the check that it works, the switch. Answers the new
/// certificate's `notAfter`.
async fn renew(
    cert: &ClientCertificate,
    bootstrapping: bool,
    api: &dyn CsrApi,
) -> Result<SystemTime, String> {
    let t = &cert.template;
    // The client bootstrap's CSR is named after its key, which it keeps
    // until issued; every other request has a new key and a `csr-` name.
    let named = bootstrapping && t.is_client();
    let key = if named {
        cert.store.load_or_generate_tmp_key()?
    } else {
        rcgen::KeyPair::generate().map_err(|e| format!("generating a key: {e}"))?
    };
    let request = csr::request_pem(&key, &cert.node, &t.dns_names, &t.ips)?;
    let cn = csr::node_common_name(&cert.node);
    let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
    let name = named.then(|| csr::digested_name(&spki, &cn, &[NODES_GROUP], &t.usages));
    let object = csr::csr_object(name.as_deref(), &request, t.signer, &t.usages);
    let chain = api.request(&object, &key).await?;
    // One the signer issued without our names would be replaced at once,
    // again and again: it is refused instead (and the request retried).
    let fits = pem::parse(&chain)
        .is_ok_and(|p| csr::satisfies_template(p.contents(), &cn, &t.dns_names, &t.ips));
    if !fits {
        let name = object.metadata.name.as_deref().unwrap_or("csr-*");
        return Err(format!(
            "the certificate issued for {name} does not name {cn} with its addresses"
        ));
    }
    let pair = cert.store.write_pair(&chain, &key, &timestamp())?;
    if t.is_client() {
        let user = api
            .who_am_i(&pair)
            .await
            .map_err(|e| format!("the new certificate {}: {e}", pair.display()))?;
        if user != cn {
            return Err(format!(
                "the new certificate {} authenticates as {user:?}, not {cn:?}: the current one stays",
                pair.display()
            ));
        }
    }
    cert.store.make_current(&pair)?;
    if named {
        cert.store.remove_tmp_key();
    }
    Ok(cert
        .store
        .current_validity()
        .map(|v| v.1)
        .unwrap_or(SystemTime::UNIX_EPOCH))
}

/// Keeps a valid client certificate in the store until `cancel`:
/// `bootstrap` asks while there is none, `node` (the node's own client)
/// rotates. Without rotation it ends once a valid certificate is there.
pub async fn run(
    cert: ClientCertificate,
    bootstrap: Option<Arc<dyn CsrApi>>,
    node: Arc<dyn CsrApi>,
    cancel: CancellationToken,
) {
    let mut failures = 0u32;
    loop {
        let now = SystemTime::now();
        let current = cert.store.current_certificate();
        let valid = current
            .as_ref()
            .and_then(|c| crate::kubeapi::transport::validity(c).ok())
            .filter(|(_, na)| csr::still_valid(*na, now));
        let (cn, t) = (csr::node_common_name(&cert.node), &cert.template);
        let fits = current
            .as_ref()
            .is_some_and(|c| csr::satisfies_template(c, &cn, &t.dns_names, &t.ips));
        let at = match valid {
            None if bootstrap.is_none() && !cert.rotate => return,
            None => now,
            Some(_) if !cert.rotate => return,
            Some(_) if !fits => {
                tracing::info!(
                    signer = t.signer,
                    "the current certificate does not name this node as it is now: replacing it"
                );
                now
            }
            Some((nb, na)) => csr::rotation_deadline(nb, na, jitter()),
        };
        if let Ok(wait) = at.duration_since(now) {
            if !wait.is_zero() {
                tracing::info!(
                    in_seconds = wait.as_secs(),
                    "next client certificate rotation"
                );
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        let bootstrapping = valid.is_none();
        let api = match (&bootstrap, bootstrapping) {
            (Some(b), true) => b.as_ref(),
            _ => node.as_ref(),
        };
        let attempt = tokio::select! {
            _ = cancel.cancelled() => return,
            r = renew(&cert, bootstrapping, api) => r,
        };
        match attempt {
            Ok(not_after) => {
                failures = 0;
                let until = jiff::Timestamp::try_from(not_after)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                tracing::info!(node = %cert.node, signer = cert.template.signer, not_after = %until, bootstrap = bootstrapping, "certificate issued and in use");
            }
            Err(e) => {
                cert.renew_errors.fetch_add(1, Ordering::Relaxed);
                let delay = csr::retry_delay(failures);
                failures += 1;
                tracing::warn!(error = %e, signer = cert.template.signer, retry_in_seconds = delay.as_secs(), bootstrap = bootstrapping, "asking for a certificate");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
