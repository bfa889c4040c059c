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

fn chain(fake: &Arc<FakeReviewer>, anonymous: bool) -> Authenticator {
    Authenticator {
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
    let der = cert(Some("alice"), &["admins"]);
    let strict = chain(&fake, false);
    // The certificate wins over a token.
    let u = strict
        .authenticate(Some(&der), Some("Bearer good"))
        .await
        .unwrap();
    assert_eq!(u.name, "alice");
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
