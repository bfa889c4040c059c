//! The node's certificate requests, as the kubelet builds them
//! (`pkg/kubelet/certificate/bootstrap/bootstrap.go`, client-go's
//! `util/certificate/csr` and `certificate_manager.go`): the CSR for the
//! client certificate (`kubernetes.io/kube-apiserver-client-kubelet`) and for
//! the serving certificate (`kubernetes.io/kubelet-serving`), the CSR
//! object's name, what a CSR's status says, and when to rotate.
//!
//! Invariant: pure (no I/O, no clock): the time and the jitter come in as
//! arguments.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The signer of the kubelet's client certificate.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of the kubelet's serving certificate.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The group every node's certificate names.
pub const NODES_GROUP: &str = "system:nodes";

/// The usages of an ECDSA client certificate, in the kubelet's order (an
/// RSA key would add "key encipherment"; crilet's keys are ECDSA P-256).
pub const CLIENT_USAGES: [&str; 2] = ["digital signature", "client auth"];
/// The usages of an ECDSA serving certificate.
pub const SERVING_USAGES: [&str; 2] = ["digital signature", "server auth"];

/// The common name of node `node`'s certificates.
pub fn node_common_name(node: &str) -> String {
    format!("system:node:{node}")
}

/// RFC 4648 base64url without padding (Go's `base64.RawURLEncoding`).
pub fn base64_url_raw(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// The name the kubelet's bootstrap gives its CSR, so that a restart with
/// the same key asks again under the same name instead of adding a CSR:
/// `node-csr-` + base64url(SHA-512/256 of each of the public key (DER), the
/// common name, the organizations and the usages, each base64url'd and
/// followed by `|`).
pub fn digested_name(
    public_key_der: &[u8],
    common_name: &str,
    orgs: &[&str],
    usages: &[&str],
) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA512_256);
    let mut feed = |data: &[u8]| {
        ctx.update(base64_url_raw(data).as_bytes());
        ctx.update(b"|");
    };
    feed(public_key_der);
    feed(common_name.as_bytes());
    for o in orgs {
        feed(o.as_bytes());
    }
    for u in usages {
        feed(u.as_bytes());
    }
    format!("node-csr-{}", base64_url_raw(ctx.finish().as_ref()))
}

/// The subject alternative names of a certificate for `dns_names` and
/// `ips`: a name that is not ASCII is an error.
pub fn subject_alt_names(
    dns_names: &[String],
    ips: &[IpAddr],
) -> Result<Vec<rcgen::SanType>, rcgen::Error> {
    let mut sans = Vec::with_capacity(dns_names.len() + ips.len());
    for name in dns_names {
        sans.push(rcgen::SanType::DnsName(rcgen::string::Ia5String::try_from(
            name.as_str(),
        )?));
    }
    sans.extend(ips.iter().map(|ip| rcgen::SanType::IpAddress(*ip)));
    Ok(sans)
}

/// A PEM certificate request for node `node` signed by `key`, with the
/// serving certificate's names when given.
pub fn request_pem(
    key: &rcgen::KeyPair,
    node: &str,
    dns_names: &[String],
    ips: &[IpAddr],
) -> Result<String, String> {
    use rcgen::{CertificateParams, DistinguishedName, DnType};
    let err = |e: rcgen::Error| format!("building the certificate request: {e}");
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, NODES_GROUP);
    dn.push(DnType::CommonName, node_common_name(node));
    params.distinguished_name = dn;
    params.subject_alt_names = subject_alt_names(dns_names, ips).map_err(err)?;
    let csr = params.serialize_request(key).map_err(err)?;
    Ok(pem::encode(&pem::Pem::new(
        "CERTIFICATE REQUEST",
        csr.der().to_vec(),
    )))
}

/// The CSR object: named `name`, or `csr-` plus a suffix the server picks
/// (the certificate manager's `generateName`); no `expirationSeconds`, as
/// the kubelet (the signer's `--cluster-signing-duration` decides).
pub fn csr_object(
    name: Option<&str>,
    request_pem: &str,
    signer: &str,
    usages: &[&str],
) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            name: name.map(str::to_string),
            generate_name: name.is_none().then(|| "csr-".to_string()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: k8s_openapi::ByteString(request_pem.as_bytes().to_vec()),
            signer_name: signer.to_string(),
            usages: Some(usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    }
}

/// What a CSR's status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not yet approved, or approved and not yet signed.
    Waiting,
    /// The signed certificate chain, PEM.
    Issued(String),
    /// Denied, with the condition's reason and message.
    Denied(String),
    /// The signer failed, with its reason and message.
    Failed(String),
}

/// What `csr`'s conditions and certificate say, as client-go's
/// `WaitForCertificate` reads them: Denied and Failed end the wait; an
/// Approved CSR is issued once it has a certificate.
pub fn outcome(csr: &CertificateSigningRequest) -> Outcome {
    let Some(status) = &csr.status else {
        return Outcome::Waiting;
    };
    let why = |c: &k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition| {
        format!(
            "{}: {}",
            c.reason.as_deref().unwrap_or("no reason"),
            c.message.as_deref().unwrap_or("no message")
        )
    };
    let mut approved = false;
    for c in status.conditions.iter().flatten() {
        match c.type_.as_str() {
            "Denied" => return Outcome::Denied(why(c)),
            "Failed" => return Outcome::Failed(why(c)),
            "Approved" => approved = true,
            _ => {}
        }
    }
    match &status.certificate {
        Some(cert) if approved && !cert.0.is_empty() => {
            Outcome::Issued(String::from_utf8_lossy(&cert.0).into_owned())
        }
        _ => Outcome::Waiting,
    }
}

/// When to ask for the next certificate: at `fraction` (0.7 to 0.9; the
/// certificate manager's jitter, `wait.Jitter(0.7 total, 0.2)` less a
/// margin) of the certificate's lifetime, counted from its `notBefore`
/// (which the signer backdates 5 minutes). `jitter` is uniform in [0, 1).
pub fn rotation_deadline(not_before: SystemTime, not_after: SystemTime, jitter: f64) -> SystemTime {
    let total = not_after.duration_since(not_before).unwrap_or_default();
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    not_before + Duration::from_secs_f64(total.as_secs_f64() * fraction)
}

/// Whether the certificate `der` still fits what would be asked for now:
/// its common name is `common_name` and it names every one of `dns_names`
/// and `ips` (more names are fine), as the certificate manager's
/// `certSatisfiesTemplate`. One that does not is replaced at once (a node
/// renamed, or its IP changed).
pub fn satisfies_template(
    der: &[u8],
    common_name: &str,
    dns_names: &[String],
    ips: &[IpAddr],
) -> bool {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return false;
    };
    let cn_fits = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .is_some_and(|cn| cn == common_name);
    let sans: Vec<GeneralName<'_>> = match cert.subject_alternative_name() {
        Ok(Some(ext)) => ext.value.general_names.clone(),
        _ => Vec::new(),
    };
    let has_dns = |name: &str| {
        sans.iter()
            .any(|g| matches!(g, GeneralName::DNSName(d) if *d == name))
    };
    let has_ip = |ip: &IpAddr| {
        let octets = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        sans.iter()
            .any(|g| matches!(g, GeneralName::IPAddress(b) if *b == octets.as_slice()))
    };
    cn_fits && dns_names.iter().all(|d| has_dns(d)) && ips.iter().all(has_ip)
}

/// Whether a certificate valid until `not_after` is still good at `now`
/// (the bootstrap's `isClientConfigStillValid` checks `notAfter` alone).
pub fn still_valid(not_after: SystemTime, now: SystemTime) -> bool {
    now <= not_after
}

/// The retry delays after a failed request: 2, 4, 8, 16 s, then every
/// 32 s (the certificate manager's backoff, then its `PollInfinite`).
pub fn retry_delay(failures: u32) -> Duration {
    Duration::from_secs(2u64 << failures.min(4))
}

#[cfg(test)]
#[path = "csr_tests.rs"]
mod tests;
