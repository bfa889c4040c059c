use super::*;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};

#[test]
fn base64_url_raw_is_rfc_4648_url_safe_without_padding() {
    for (input, want) in [
        (&b""[..], ""),
        (b"f", "Zg"),
        (b"fo", "Zm8"),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg"),
        (b"fooba", "Zm9vYmE"),
        (b"foobar", "Zm9vYmFy"),
        (&[0xfb, 0xff], "-_8"),
    ] {
        assert_eq!(base64_url_raw(input), want, "{input:?}");
    }
}

#[test]
fn the_bootstrap_csr_name_is_the_kubelets_digest() {
    // Reference: Python's hashlib sha512_256 and urlsafe_b64encode over
    // the same items, each base64url'd and followed by '|'.
    let spki: Vec<u8> = (0..10).collect();
    let name = digested_name(&spki, "system:node:n1", &[NODES_GROUP], &CLIENT_USAGES);
    assert_eq!(name, "node-csr-NjSH76AfDbNwVWH2Q55l284A9OY19QFHmjBNw3vdj_4");
    assert_eq!(name.len(), "node-csr-".len() + 43);
    // Any input changes it: a restart with another key asks under another name.
    assert_ne!(
        name,
        digested_name(&spki[1..], "system:node:n1", &[NODES_GROUP], &CLIENT_USAGES)
    );
    assert_ne!(
        name,
        digested_name(&spki, "system:node:n2", &[NODES_GROUP], &CLIENT_USAGES)
    );
    assert_ne!(
        name,
        digested_name(&spki, "system:node:n1", &[NODES_GROUP], &SERVING_USAGES)
    );
}

#[test]
fn the_request_names_the_node_and_its_group() {
    let key = rcgen::KeyPair::generate().unwrap();
    let ips = ["127.0.0.1".parse().unwrap()];
    let text = request_pem(&key, "n1", &["n1.example".into()], &ips).unwrap();
    let der = pem::parse(&text).unwrap();
    assert_eq!(der.tag(), "CERTIFICATE REQUEST");
    use x509_parser::prelude::FromDer;
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(der.contents())
            .unwrap();
    let subject = csr.certification_request_info.subject.to_string();
    assert!(subject.contains("O=system:nodes"), "{subject}");
    assert!(subject.contains("CN=system:node:n1"), "{subject}");
    assert_eq!(
        csr.certification_request_info.subject_pki.raw,
        rcgen::PublicKeyData::subject_public_key_info(&key).as_slice()
    );
    let sans = format!(
        "{:?}",
        csr.requested_extensions().map(|e| e.collect::<Vec<_>>())
    );
    assert!(
        sans.contains("n1.example") && sans.contains("127"),
        "{sans}"
    );
}

#[test]
fn the_csr_object_is_named_or_generated_and_leaves_the_lifetime_to_the_signer() {
    let named = csr_object(Some("node-csr-x"), "PEM", CLIENT_SIGNER, &CLIENT_USAGES);
    assert_eq!(named.metadata.name.as_deref(), Some("node-csr-x"));
    assert_eq!(named.metadata.generate_name, None);
    assert_eq!(
        named.spec.signer_name,
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    assert_eq!(
        named.spec.usages.as_deref(),
        Some(&["digital signature".to_string(), "client auth".into()][..])
    );
    assert_eq!(named.spec.expiration_seconds, None);
    assert_eq!(named.spec.request.0, b"PEM");
    let generated = csr_object(None, "PEM", SERVING_SIGNER, &SERVING_USAGES);
    assert_eq!(generated.metadata.name, None);
    assert_eq!(generated.metadata.generate_name.as_deref(), Some("csr-"));
}

fn with(conditions: &[(&str, &str)], cert: Option<&str>) -> CertificateSigningRequest {
    let mut csr = csr_object(None, "PEM", CLIENT_SIGNER, &CLIENT_USAGES);
    csr.status = Some(CertificateSigningRequestStatus {
        certificate: cert.map(|c| k8s_openapi::ByteString(c.as_bytes().to_vec())),
        conditions: Some(
            conditions
                .iter()
                .map(|(t, reason)| CertificateSigningRequestCondition {
                    type_: t.to_string(),
                    status: "True".into(),
                    reason: Some(reason.to_string()),
                    message: Some("m".into()),
                    ..Default::default()
                })
                .collect(),
        ),
    });
    csr
}

#[test]
fn a_csr_is_issued_only_when_approved_with_a_certificate() {
    let bare = csr_object(None, "PEM", CLIENT_SIGNER, &CLIENT_USAGES);
    assert_eq!(outcome(&bare), Outcome::Waiting);
    assert_eq!(
        outcome(&with(&[("Approved", "AutoApproved")], None)),
        Outcome::Waiting
    );
    assert_eq!(
        outcome(&with(&[("Approved", "AutoApproved")], Some(""))),
        Outcome::Waiting
    );
    assert_eq!(outcome(&with(&[], Some("CERT"))), Outcome::Waiting);
    assert_eq!(
        outcome(&with(&[("Approved", "AutoApproved")], Some("CERT"))),
        Outcome::Issued("CERT".into())
    );
    assert_eq!(
        outcome(&with(&[("Denied", "Nope")], None)),
        Outcome::Denied("Nope: m".into())
    );
    assert_eq!(
        outcome(&with(
            &[("Approved", "A"), ("Failed", "SignerValidationFailure")],
            Some("CERT")
        )),
        Outcome::Failed("SignerValidationFailure: m".into())
    );
}

#[test]
fn rotation_comes_at_70_to_90_percent_of_the_lifetime() {
    let nb = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let na = nb + Duration::from_secs(1000);
    let at = |j| {
        rotation_deadline(nb, na, j)
            .duration_since(nb)
            .unwrap()
            .as_secs_f64()
    };
    assert_eq!(at(0.0), 700.0);
    assert!((at(0.5) - 800.0).abs() < 1e-6);
    assert!((at(0.999_999) - 900.0).abs() < 0.01);
    assert_eq!(at(-1.0), 700.0);
    assert!((at(2.0) - 900.0).abs() < 1e-6);
    // A certificate whose notAfter precedes its notBefore rotates at once.
    assert_eq!(rotation_deadline(na, nb, 0.5), na);
}

#[test]
fn validity_checks_not_after_only() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
    assert!(still_valid(t, t));
    assert!(still_valid(t, t - Duration::from_secs(1)));
    assert!(!still_valid(t, t + Duration::from_secs(1)));
}

#[test]
fn retries_back_off_from_2_to_32_seconds() {
    let got: Vec<u64> = (0..7).map(|f| retry_delay(f).as_secs()).collect();
    assert_eq!(got, [2, 4, 8, 16, 32, 32, 32]);
    assert_eq!(retry_delay(u32::MAX).as_secs(), 32);
}

fn certificate(cn: &str, dns: &[&str], ips: &[&str]) -> Vec<u8> {
    let mut params =
        rcgen::CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>())
            .unwrap();
    for ip in ips {
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(ip.parse().unwrap()));
    }
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().der().to_vec()
}

#[test]
fn a_certificate_fits_while_it_names_the_node_as_it_is() {
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    let serving = certificate("system:node:n1", &["n1", "extra"], &["10.0.0.1", "::1"]);
    let cn = "system:node:n1";
    assert!(satisfies_template(
        &serving,
        cn,
        &["n1".into()],
        &[ip("10.0.0.1")]
    ));
    assert!(satisfies_template(&serving, cn, &[], &[ip("::1")]), "IPv6");
    assert!(
        satisfies_template(&serving, cn, &[], &[]),
        "more names are fine"
    );
    assert!(
        !satisfies_template(&serving, cn, &[], &[ip("10.0.0.2")]),
        "the IP changed"
    );
    assert!(
        !satisfies_template(&serving, cn, &["n2".into()], &[]),
        "renamed"
    );
    assert!(
        !satisfies_template(&serving, "system:node:n2", &[], &[]),
        "another node"
    );
    let client = certificate("system:node:n1", &[], &[]);
    assert!(satisfies_template(&client, cn, &[], &[]));
    assert!(!satisfies_template(b"junk", cn, &[], &[]));
}
