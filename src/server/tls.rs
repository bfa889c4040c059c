//! The kubelet server's TLS: its serving certificate (the operator's
//! `--tls-cert-file` / `--tls-private-key-file`, else a self-signed one kept
//! under `<root-dir>/pki/` and reused across restarts, as the kubelet does)
//! and, with `--client-ca-file`, client certificates *requested* (not
//! required), as Go's `tls.RequestClientCert`: the handshake only proves the
//! client holds the certificate's key; whether that CA signed it is checked
//! by authentication ([`ClientCa::verify`]), so a certificate from another
//! CA is a 401, as on the kubelet, not a failed handshake.
//!
//! Invariant: a certificate we generate has its key written 0600 before the
//! certificate, so a present certificate always has its key; every error
//! names the file it is about.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::DigitallySignedStruct;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::UnixTime;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what} {path}: {message}")]
    File {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn file_err(what: &'static str, path: &Path, message: impl ToString) -> TlsError {
    TlsError::File {
        what,
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum ServingCert {
    Files {
        cert: PathBuf,
        key: PathBuf,
    },
    /// Through a CSR (`--rotate-server-certificates`): the pair the
    /// certificate manager keeps current at this path, read as it changes.
    Bootstrap {
        pair: PathBuf,
    },
    /// Self-signed under `<dir>/kubelet.crt` + `kubelet.key` for these names.
    SelfSigned {
        dir: PathBuf,
        dns_names: Vec<String>,
        ips: Vec<IpAddr>,
    },
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

pub fn read_certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(|e| file_err(what, path, e))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(what, path, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(file_err(what, path, "no certificate in it"));
    }
    Ok(certs)
}

fn read_key(what: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = std::fs::read(path).map_err(|e| file_err(what, path, e))?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| file_err(what, path, format!("no PEM private key: {e}")))
}

fn read_identity(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    Ok((
        read_certificates("--tls-cert-file", cert)?,
        read_key("--tls-private-key-file", key)?,
    ))
}

/// Generates a self-signed certificate for `dns_names` and `ips`; answers
/// (certificate PEM, key PEM).
pub fn generate_self_signed(
    dns_names: &[String],
    ips: &[IpAddr],
) -> Result<(String, String), TlsError> {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
    let err =
        |e: rcgen::Error| TlsError::Config(format!("generating a self-signed certificate: {e}"));
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    let cn = dns_names
        .first()
        .cloned()
        .unwrap_or_else(|| "crilet".into());
    dn.push(DnType::CommonName, format!("{cn}@crilet"));
    params.distinguished_name = dn;
    params.subject_alt_names =
        crate::certificate::csr::subject_alt_names(dns_names, ips).map_err(err)?;
    // rcgen's default validity (1975 to 4096): like the kubelet's own
    // self-signed certificate, it is replaced by deleting the files.
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    let pem = |tag: &str, der: &[u8]| pem::encode(&pem::Pem::new(tag, der));
    Ok((
        pem("CERTIFICATE", cert.der()),
        pem("PRIVATE KEY", &key.serialize_der()),
    ))
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), TlsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| file_err("self-signed certificate", &tmp, e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| file_err("self-signed certificate", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| file_err("self-signed certificate", path, e))
}

/// The self-signed identity under `dir`: reused if both files read back,
/// regenerated otherwise.
pub fn self_signed_identity(
    dir: &Path,
    dns_names: &[String],
    ips: &[IpAddr],
) -> Result<Identity, TlsError> {
    let (cert, key) = (dir.join("kubelet.crt"), dir.join("kubelet.key"));
    match read_identity(&cert, &key) {
        Ok(identity) => {
            tracing::info!(cert = %cert.display(), "kubelet server: reusing the self-signed certificate");
            return Ok(identity);
        }
        Err(e) if cert.exists() || key.exists() => {
            tracing::warn!(error = %e, "kubelet server: the self-signed certificate is unreadable; generating a new one");
        }
        Err(_) => {}
    }
    std::fs::create_dir_all(dir).map_err(|e| file_err("certificate directory", dir, e))?;
    let (cert_pem, key_pem) = generate_self_signed(dns_names, ips)?;
    write_file(&key, &key_pem, 0o600)?;
    write_file(&cert, &cert_pem, 0o644)?;
    tracing::info!(cert = %cert.display(), names = ?dns_names, ips = ?ips, "kubelet server: generated a self-signed certificate");
    read_identity(&cert, &key)
}

/// The `--client-ca-file` CAs, which authentication checks a client's
/// certificate chain against.
#[derive(Clone)]
pub struct ClientCa(Arc<dyn ClientCertVerifier>);

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientCa")
    }
}

impl ClientCa {
    /// Reads the CA bundle; an error names the file.
    pub fn load(path: &Path) -> Result<ClientCa, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in read_certificates("--client-ca-file", path)? {
            roots
                .add(cert)
                .map_err(|e| file_err("--client-ca-file", path, e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| file_err("--client-ca-file", path, e))?;
        Ok(ClientCa(verifier))
    }

    /// Whether one of the CAs signed the chain (leaf first) for client use,
    /// and it is valid now.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("an empty certificate chain")?;
        self.0
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Requests a client certificate and checks only the handshake signature
/// made with its key; the chain is checked by [`ClientCa::verify`].
#[derive(Debug)]
struct RequestClientCert(ClientCa);

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.0.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.0.supported_verify_schemes()
    }
}

/// The rustls server configuration: HTTP/1.1, the serving identity, and
/// client certificates requested when there is a `client_ca`.
pub fn server_config(
    serving: &ServingCert,
    client_ca: Option<&ClientCa>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(Arc::new(RequestClientCert(ca.clone()))),
        None => builder.with_no_client_auth(),
    };
    let (certs, key) = match serving {
        ServingCert::Files { cert, key } => read_identity(cert, key)?,
        ServingCert::SelfSigned {
            dir,
            dns_names,
            ips,
        } => self_signed_identity(dir, dns_names, ips)?,
        ServingCert::Bootstrap { pair } => {
            let identity = crate::kubeapi::transport::FileIdentity::load(pair, pair)
                .map_err(|e| file_err("the serving certificate", pair, e))?;
            let mut config = builder.with_cert_resolver(identity);
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            return Ok(Arc::new(config));
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        TlsError::Config(format!("the serving certificate and key do not fit: {e}"))
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_self_signed_certificate_is_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let names = vec!["node-a".to_string(), "localhost".to_string()];
        let ips = vec!["127.0.0.1".parse().unwrap()];
        let serving = ServingCert::SelfSigned {
            dir: pki.clone(),
            dns_names: names.clone(),
            ips: ips.clone(),
        };
        server_config(&serving, None).unwrap();
        let first = std::fs::read(pki.join("kubelet.crt")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(pki.join("kubelet.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        server_config(&serving, None).unwrap();
        assert_eq!(
            std::fs::read(pki.join("kubelet.crt")).unwrap(),
            first,
            "reused"
        );
        std::fs::write(pki.join("kubelet.key"), "garbage").unwrap();
        server_config(&serving, None).unwrap();
        assert_ne!(
            std::fs::read(pki.join("kubelet.crt")).unwrap(),
            first,
            "regenerated"
        );
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.crt");
        let err = server_config(
            &ServingCert::Files {
                cert: missing.clone(),
                key: missing.clone(),
            },
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--tls-cert-file") && err.contains("nope.crt"),
            "{err}"
        );
        let bad_ca = dir.path().join("ca.crt");
        std::fs::write(&bad_ca, "not pem").unwrap();
        let serving = ServingCert::SelfSigned {
            dir: dir.path().join("pki"),
            dns_names: vec!["n".into()],
            ips: vec![],
        };
        let _ = serving;
        let err = ClientCa::load(&bad_ca).unwrap_err().to_string();
        assert!(
            err.contains("--client-ca-file") && err.contains("ca.crt"),
            "{err}"
        );
    }
}
