//! [`CsrApi`] over kube-rs: the CertificateSigningRequest created (or, for
//! a bootstrap CSR already there from an earlier try with the same key,
//! reused, as client-go's `ensureCompatible`), then watched by name until
//! it is issued, denied, failed or deleted, as client-go's
//! `WaitForCertificate`; and the new certificate checked with a
//! SelfSubjectReview made over it.
//!
//! Invariant: every error names the CSR (or the file) it is about.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use super::csr::{Outcome, outcome};
use super::manager::CsrApi;
use crate::kubeapi::transport;

/// How long the bootstrap waits for its CSR to be issued (the kubelet's
/// bootstrap: an hour).
pub const BOOTSTRAP_WAIT: Duration = Duration::from_secs(3600);
/// How long a rotation waits (the certificate manager: 15 minutes).
pub const ROTATION_WAIT: Duration = Duration::from_secs(15 * 60);

pub struct KubeCsrApi {
    client: kube::Client,
    /// The server and its CA, without credentials: the new certificate is
    /// tried over it.
    server: kube::Config,
    wait: Duration,
}

fn user_agent() -> String {
    format!("crilet/{}", env!("CARGO_PKG_VERSION"))
}

fn describe(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        e => e.to_string(),
    }
}

impl KubeCsrApi {
    /// Over the credentials of the kubeconfig at `path` (a bootstrap token,
    /// or the node's certificate files).
    pub async fn from_kubeconfig(path: &Path, wait: Duration) -> Result<KubeCsrApi, String> {
        let err = |e: String| format!("kubeconfig {}: {e}", path.display());
        let (mut config, identity) = transport::load_kubeconfig(path).await.map_err(err)?;
        config.connect_timeout = Some(Duration::from_secs(10));
        // Long enough for a watch the server keeps open until it times out.
        let client = transport::client(
            &config,
            identity.as_ref(),
            Duration::from_secs(330),
            &user_agent(),
        )
        .map_err(err)?;
        let mut server = config;
        server.auth_info = Default::default();
        server.read_timeout = Some(Duration::from_secs(30));
        Ok(KubeCsrApi {
            client,
            server,
            wait,
        })
    }
}

/// Whether `existing` is the CSR `wanted` would have been: same signer, and
/// a request made with `key`.
fn compatible(
    existing: &CertificateSigningRequest,
    wanted: &CertificateSigningRequest,
    key: &rcgen::KeyPair,
) -> Result<(), String> {
    if existing.spec.signer_name != wanted.spec.signer_name {
        return Err(format!("its signer is {}", existing.spec.signer_name));
    }
    let request = pem::parse(&existing.spec.request.0).map_err(|e| format!("its request: {e}"))?;
    use x509_parser::prelude::FromDer;
    let (_, parsed) =
        x509_parser::certification_request::X509CertificationRequest::from_der(request.contents())
            .map_err(|e| format!("its request: {e}"))?;
    if parsed.certification_request_info.subject_pki.raw
        != rcgen::PublicKeyData::subject_public_key_info(key).as_slice()
    {
        return Err("its request was made with another key".into());
    }
    Ok(())
}

#[async_trait::async_trait]
impl CsrApi for KubeCsrApi {
    async fn request(
        &self,
        csr: &CertificateSigningRequest,
        key: &rcgen::KeyPair,
    ) -> Result<String, String> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let created = match api.create(&PostParams::default(), csr).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = csr.metadata.name.clone().unwrap_or_default();
                let existing = api.get(&name).await.map_err(|e| {
                    format!("reading CertificateSigningRequest {name}: {}", describe(e))
                })?;
                compatible(&existing, csr, key)
                    .map_err(|e| format!("CertificateSigningRequest {name} is already there and cannot be reused: {e}"))?;
                existing
            }
            Err(e) => {
                return Err(format!(
                    "creating a CertificateSigningRequest: {}",
                    describe(e)
                ));
            }
        };
        let name = created.metadata.name.clone().unwrap_or_default();
        let uid = created.metadata.uid.clone();
        tracing::info!(csr = %name, signer = %csr.spec.signer_name, "CertificateSigningRequest sent: waiting for it to be approved and issued");
        let decide = |o: &CertificateSigningRequest| -> Option<Result<String, String>> {
            if o.metadata.uid != uid {
                return Some(Err(format!(
                    "CertificateSigningRequest {name} was replaced"
                )));
            }
            match outcome(o) {
                Outcome::Waiting => None,
                Outcome::Issued(pem) => Some(Ok(pem)),
                Outcome::Denied(why) => Some(Err(format!(
                    "CertificateSigningRequest {name} was denied: {why}"
                ))),
                Outcome::Failed(why) => Some(Err(format!(
                    "CertificateSigningRequest {name} failed: {why}"
                ))),
            }
        };
        if let Some(done) = decide(&created) {
            return done;
        }
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(api, config).default_backoff().boxed();
        let wait = async {
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                        if let Some(done) = decide(&o) {
                            return done;
                        }
                    }
                    Ok(watcher::Event::Delete(_)) => {
                        return Err(format!("CertificateSigningRequest {name} was deleted"));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(csr = %name, error = %e, "watching the CertificateSigningRequest")
                    }
                }
            }
            Err(format!(
                "the watch of CertificateSigningRequest {name} ended"
            ))
        };
        tokio::time::timeout(self.wait, wait).await.map_err(|_| {
            format!(
                "CertificateSigningRequest {name} was not issued within {} s",
                self.wait.as_secs()
            )
        })?
    }

    async fn who_am_i(&self, pair_file: &Path) -> Result<String, String> {
        let identity = transport::FileIdentity::load(pair_file, pair_file)?;
        let client = transport::client_with_identity(&self.server, identity, &user_agent())?;
        let api: Api<SelfSubjectReview> = Api::all(client);
        let review = api
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .map_err(|e| format!("SelfSubjectReview: {}", describe(e)))?;
        review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .ok_or_else(|| "the SelfSubjectReview names no user".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificate::csr::{
        CLIENT_SIGNER, CLIENT_USAGES, SERVING_SIGNER, csr_object, request_pem,
    };

    #[test]
    fn a_csr_already_there_is_reused_only_if_made_with_our_key_for_our_signer() {
        let key = rcgen::KeyPair::generate().unwrap();
        let ours = csr_object(
            Some("node-csr-x"),
            &request_pem(&key, "n1", &[], &[]).unwrap(),
            CLIENT_SIGNER,
            &CLIENT_USAGES,
        );
        // The same key signs a new request each time (ECDSA): the bytes
        // differ, the public key does not.
        let again = csr_object(
            Some("node-csr-x"),
            &request_pem(&key, "n1", &[], &[]).unwrap(),
            CLIENT_SIGNER,
            &CLIENT_USAGES,
        );
        assert_eq!(compatible(&again, &ours, &key), Ok(()));
        let other_key = rcgen::KeyPair::generate().unwrap();
        let theirs = csr_object(
            Some("node-csr-x"),
            &request_pem(&other_key, "n1", &[], &[]).unwrap(),
            CLIENT_SIGNER,
            &CLIENT_USAGES,
        );
        assert_eq!(
            compatible(&theirs, &ours, &key),
            Err("its request was made with another key".into())
        );
        let mut serving = again.clone();
        serving.spec.signer_name = SERVING_SIGNER.into();
        assert!(
            compatible(&serving, &ours, &key)
                .unwrap_err()
                .contains("kubelet-serving")
        );
        let mut junk = again;
        junk.spec.request = k8s_openapi::ByteString(b"not PEM".to_vec());
        assert!(
            compatible(&junk, &ours, &key)
                .unwrap_err()
                .starts_with("its request")
        );
    }
}
