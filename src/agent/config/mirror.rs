//! The node's API server credentials: `--kubeconfig` (unset: standalone),
//! and the TLS bootstrap that writes it (`--bootstrap-kubeconfig`,
//! `--cert-dir`, `--rotate-certificates` / `rotateCertificates`,
//! `--rotate-server-certificates` / `serverTLSBootstrap`).
//! Invariant: a flag wins over the file; `--cert-dir` defaults to
//! `<root-dir>/pki`, as the kubelet's.

use std::path::{Path, PathBuf};

use super::{ConfigFile, RunArgs};

/// `--kubeconfig`, if given.
pub(super) fn resolve_kubeconfig(args: &RunArgs) -> Option<PathBuf> {
    args.kubeconfig.clone()
}

pub use crate::certificate::CertificateSettings;

pub(super) fn resolve_certificates(
    args: &RunArgs,
    file: &ConfigFile,
    root_dir: &Path,
) -> Result<CertificateSettings, super::ConfigError> {
    let rotate_server_certificates = args
        .rotate_server_certificates
        .or(file.server_tls_bootstrap)
        .unwrap_or(false);
    if rotate_server_certificates && args.kubeconfig.is_none() {
        return Err(super::ConfigError::Flag {
            message: "--rotate-server-certificates needs --kubeconfig: the serving certificate is asked for with the node's credentials".into(),
        });
    }
    if rotate_server_certificates && (args.tls_cert_file.is_some() || file.tls_cert_file.is_some())
    {
        return Err(super::ConfigError::Flag {
            message: "--rotate-server-certificates and --tls-cert-file both name the kubelet server's certificate: give one".into(),
        });
    }
    if args.bootstrap_kubeconfig.is_some() && args.kubeconfig.is_none() {
        return Err(super::ConfigError::Flag {
            message: "--bootstrap-kubeconfig needs --kubeconfig: the path the bootstrap writes the node's kubeconfig to".into(),
        });
    }
    Ok(CertificateSettings {
        bootstrap_kubeconfig: args.bootstrap_kubeconfig.clone(),
        cert_dir: args
            .cert_dir
            .clone()
            .unwrap_or_else(|| root_dir.join("pki")),
        rotate_certificates: args
            .rotate_certificates
            .or(file.rotate_certificates)
            .unwrap_or(false),
        rotate_server_certificates,
    })
}
