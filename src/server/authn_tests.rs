//! Tests of the authentication chain.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus, UserInfo as KubeUser};

use super::*;
use crate::server::review::{FakeReviewer, token_answer};

fn cert(cn: Option<&str>, orgs: &[&str]) -> Vec<u8> {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    if let Some(cn) = cn {
        dn.push(DnType::CommonName, cn);
    }
    for o in orgs {
        dn.push(DnType::OrganizationName, *o);
    }
    params.distinguished_name = dn;
    let key = KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().der().to_vec()
}

#[test]
fn a_certificate_names_the_user_and_groups() {
    let der = cert(Some("kube-apiserver-kubelet-client"), &["system:masters"]);
    let u = user_from_certificate(&der).unwrap();
    assert_eq!(u.name, "kube-apiserver-kubelet-client");
    assert_eq!(u.groups, ["system:masters"]);
    assert!(user_from_certificate(&cert(None, &["x"])).is_err());
    assert!(user_from_certificate(b"not DER").is_err());
}

#[test]
fn bearer_tokens_are_recognised() {
    assert_eq!(bearer_token("Bearer abc"), Some("abc"));
    assert_eq!(bearer_token("bearer  abc "), Some("abc"));
    assert_eq!(bearer_token("Basic abc"), None);
    assert_eq!(bearer_token("Bearer "), None);
    assert_eq!(bearer_token(""), None);
}

#[test]
fn a_review_without_authenticated_is_a_rejection() {
    // What a real kube-apiserver answers (201) for a bad token.
    let review = TokenReview {
        status: Some(TokenReviewStatus {
            user: Some(KubeUser::default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(token_answer(&review), TokenAnswer::Rejected(_)));
    assert!(matches!(
        token_answer(&TokenReview::default()),
        TokenAnswer::Rejected(_)
    ));
    let ok = TokenReview {
        status: Some(TokenReviewStatus {
            authenticated: Some(true),
            user: Some(KubeUser {
                username: Some("bob".into()),
                groups: Some(vec!["devs".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    match token_answer(&ok) {
        TokenAnswer::Authenticated(u) => {
            assert_eq!(u.name, "bob");
            assert_eq!(u.groups, ["devs"]);
        }
        other => panic!("{other:?}"),
    }
}

/// A CA (its PEM written to a temp file, loaded as `--client-ca-file`)
/// and a client certificate it signs.
struct TestCa {
    ca: crate::server::tls::ClientCa,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    _dir: tempfile::TempDir,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, cert.pem()).unwrap();
        TestCa {
            ca: crate::server::tls::ClientCa::load(&path).unwrap(),
            issuer: rcgen::Issuer::new(params, key),
            _dir: dir,
        }
    }

    fn client(&self, cn: &str, orgs: &[&str]) -> Vec<CertificateDer<'static>> {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        vec![cert.der().clone()]
    }
}

fn chain(fake: &Arc<FakeReviewer>, anonymous: bool) -> Authenticator {
    chain_with_ca(fake, anonymous, None)
}

fn chain_with_ca(fake: &Arc<FakeReviewer>, anonymous: bool, ca: Option<&TestCa>) -> Authenticator {
    Authenticator {
        x509: ca.map(|c| c.ca.clone()),
        tokens: Some(TokenAuthenticator::new(
            fake.clone(),
            Duration::from_secs(120),
        )),
        anonymous,
    }
}

#[tokio::test(start_paused = true)]
async fn token_answers_are_cached_for_the_ttl_both_ways() {
    let fake = Arc::new(FakeReviewer::default());
    fake.add_token(
        "good",
        UserInfo {
            name: "bob".into(),
            ..Default::default()
        },
    );
    let a = chain(&fake, false);
    assert_eq!(
        a.authenticate(None, Some("Bearer good"))
            .await
            .unwrap()
            .name,
        "bob"
    );
    assert!(a.authenticate(None, Some("Bearer bad")).await.is_err());
    assert_eq!(fake.token_reviews(), 2);
    fake.add_token(
        "bad",
        UserInfo {
            name: "eve".into(),
            ..Default::default()
        },
    );
    tokio::time::advance(Duration::from_secs(119)).await;
    assert!(a.authenticate(None, Some("Bearer good")).await.is_ok());
    assert!(
        a.authenticate(None, Some("Bearer bad")).await.is_err(),
        "the rejection is cached"
    );
    assert_eq!(fake.token_reviews(), 2);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(
        a.authenticate(None, Some("Bearer bad")).await.unwrap().name,
        "eve"
    );
    assert_eq!(fake.token_reviews(), 3);
}

#[tokio::test]
async fn the_chain_order_and_anonymous() {
    let fake = Arc::new(FakeReviewer::default());
    fake.add_token(
        "good",
        UserInfo {
            name: "bob".into(),
            ..Default::default()
        },
    );
    let ca = TestCa::new("cluster-ca");
    let alice = ca.client("alice", &["admins"]);
    let strict = chain_with_ca(&fake, false, Some(&ca));
    // The certificate wins over a token.
    let u = strict
        .authenticate(Some(&alice), Some("Bearer good"))
        .await
        .unwrap();
    assert_eq!(u.name, "alice");
    assert_eq!(u.groups, ["admins"]);
    // Another CA's certificate authenticates no one: 401, unless a token
    // does (the kubelet's union authenticator).
    let mallory = TestCa::new("other-ca").client("mallory", &["system:masters"]);
    let err = strict.authenticate(Some(&mallory), None).await.unwrap_err();
    assert!(err.to_string().contains("client certificate"), "{err}");
    let u = strict
        .authenticate(Some(&mallory), Some("Bearer good"))
        .await
        .unwrap();
    assert_eq!(u.name, "bob");
    // Without --client-ca-file, certificates are not looked at.
    assert!(
        chain(&fake, false)
            .authenticate(Some(&alice), None)
            .await
            .is_err()
    );
    assert!(strict.authenticate(None, None).await.is_err());
    assert!(strict.authenticate(None, Some("Basic x")).await.is_err());
    let open = chain(&fake, true);
    assert_eq!(
        open.authenticate(None, None).await.unwrap(),
        UserInfo::anonymous()
    );
    // A bad token is refused even with anonymous on.
    assert!(open.authenticate(None, Some("Bearer nope")).await.is_err());
    // A failed review is not cached.
    fake.set_down(true);
    assert!(
        strict
            .authenticate(None, Some("Bearer other"))
            .await
            .is_err()
    );
    fake.set_down(false);
    fake.add_token(
        "other",
        UserInfo {
            name: "carol".into(),
            ..Default::default()
        },
    );
    assert_eq!(
        strict
            .authenticate(None, Some("Bearer other"))
            .await
            .unwrap()
            .name,
        "carol"
    );
    let no_tokens = Authenticator {
        x509: None,
        tokens: None,
        anonymous: true,
    };
    assert!(
        no_tokens
            .authenticate(None, Some("Bearer good"))
            .await
            .is_err()
    );
}
