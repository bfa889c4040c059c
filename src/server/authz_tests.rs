//! Tests of the attribute mapping and the webhook authorizer's cache.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::server::review::FakeReviewer;

#[test]
fn every_path_maps_to_the_kubelets_subresource() {
    let cases = [
        ("/stats", "stats"),
        ("/stats/", "stats"),
        ("/stats/summary", "stats"),
        ("/statsx", "proxy"),
        ("/metrics", "metrics"),
        ("/metrics/probes", "metrics"),
        ("/metrics/cadvisor", "metrics"),
        ("/metricsfoo", "proxy"),
        ("/logs", "log"),
        ("/logs/syslog", "log"),
        ("/containerLogs/ns/p/c", "proxy"),
        ("/exec/ns/p/c", "proxy"),
        ("/attach/ns/p/c", "proxy"),
        ("/portForward/ns/p", "proxy"),
        ("/run/ns/p/c", "proxy"),
        ("/pods", "proxy"),
        ("/healthz", "proxy"),
        ("/configz", "proxy"),
        ("/", "proxy"),
        ("", "proxy"),
    ];
    for (path, want) in cases {
        assert_eq!(subresource(path), want, "{path:?}");
    }
}

#[test]
fn methods_map_to_verbs() {
    for (m, v) in [
        ("GET", "get"),
        ("HEAD", "get"),
        ("POST", "create"),
        ("PUT", "update"),
        ("PATCH", "patch"),
        ("DELETE", "delete"),
        ("OPTIONS", ""),
    ] {
        assert_eq!(verb(m), v, "{m}");
    }
}

fn user(name: &str) -> UserInfo {
    UserInfo {
        name: name.into(),
        uid: "u-1".into(),
        groups: vec!["g1".into(), "system:authenticated".into()],
        extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
    }
}

#[test]
fn the_review_spec_and_the_403_text_are_the_kubelets() {
    let a = attributes(user("alice"), "POST", "/exec/ns/p/c", "node-a");
    let spec = review_spec(&a);
    assert_eq!(spec.user.as_deref(), Some("alice"));
    assert_eq!(spec.uid.as_deref(), Some("u-1"));
    assert_eq!(
        spec.groups.as_deref(),
        Some(&["g1".to_string(), "system:authenticated".to_string()][..])
    );
    assert_eq!(spec.extra.as_ref().unwrap()["scopes"], ["a"]);
    let r = spec.resource_attributes.unwrap();
    assert_eq!(r.verb.as_deref(), Some("create"));
    assert_eq!(r.resource.as_deref(), Some("nodes"));
    assert_eq!(r.name.as_deref(), Some("node-a"));
    assert_eq!(r.subresource.as_deref(), Some("proxy"));
    assert_eq!(r.version.as_deref(), Some("v1"));
    assert_eq!(r.group.as_deref(), Some(""));
    assert_eq!(
        forbidden_message(&a),
        "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n"
    );
}

#[tokio::test(start_paused = true)]
async fn allowed_answers_are_cached_5m_and_denied_ones_30s() {
    let fake = Arc::new(FakeReviewer::default());
    fake.grant("alice", "get", "stats");
    let authz = Authorizer::Webhook(WebhookAuthorizer::new(
        fake.clone(),
        Duration::from_secs(300),
        Duration::from_secs(30),
    ));
    let allowed = attributes(user("alice"), "GET", "/stats/summary", "n");
    let denied = attributes(user("alice"), "GET", "/pods", "n");
    assert!(authz.authorize(&allowed).await);
    assert!(!authz.authorize(&denied).await);
    assert_eq!(fake.access_reviews(), 2);
    // Revoked and granted on the server: the cache still answers.
    fake.revoke_all();
    fake.grant("alice", "get", "proxy");
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(authz.authorize(&allowed).await);
    assert!(!authz.authorize(&denied).await);
    assert_eq!(fake.access_reviews(), 2);
    // The denial expires after 30s, the allowance after 5m.
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(authz.authorize(&denied).await);
    assert!(authz.authorize(&allowed).await);
    assert_eq!(fake.access_reviews(), 3);
    tokio::time::advance(Duration::from_secs(300)).await;
    assert!(!authz.authorize(&allowed).await);
    assert_eq!(fake.access_reviews(), 4);
}

#[tokio::test]
async fn a_failed_review_denies_and_is_not_cached() {
    let fake = Arc::new(FakeReviewer::default());
    fake.grant("alice", "get", "proxy");
    fake.set_down(true);
    let authz = Authorizer::Webhook(WebhookAuthorizer::new(
        fake.clone(),
        Duration::from_secs(300),
        Duration::from_secs(30),
    ));
    let a = attributes(user("alice"), "GET", "/pods", "n");
    assert!(!authz.authorize(&a).await);
    fake.set_down(false);
    assert!(authz.authorize(&a).await);
    assert_eq!(fake.access_reviews(), 2);
    assert!(Authorizer::AlwaysAllow.authorize(&a).await);
}
