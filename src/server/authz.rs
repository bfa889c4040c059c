//! What a request asks and whether the user may: the kubelet's attribute
//! mapping (resource `nodes`, name = the node, subresource from the path,
//! verb from the method) and its two modes, AlwaysAllow and Webhook
//! (SubjectAccessReviews, allowed answers cached 5m and denied ones 30s by
//! default). Invariant: the mapping is pure and every path maps to exactly
//! one subresource; a failed review is a denial that is not cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReviewSpec};
use tokio::time::Instant;

use super::review::Reviewer;
use super::review::UserInfo;

/// A request's authorization attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    pub verb: &'static str,
    pub node: String,
    pub subresource: &'static str,
}

/// The API verb of an HTTP method (as the kubelet's; HEAD reads like GET).
pub fn verb(method: &str) -> &'static str {
    match method {
        "GET" | "HEAD" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Whether `path` is `prefix` or below it (the kubelet's `isSubpath`).
fn is_subpath(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The `nodes` subresource a path is authorized as.
pub fn subresource(path: &str) -> &'static str {
    if is_subpath(path, "/stats") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs") {
        "log"
    } else {
        "proxy"
    }
}

pub fn attributes(user: UserInfo, method: &str, path: &str, node: &str) -> Attributes {
    Attributes {
        user,
        verb: verb(method),
        node: node.to_owned(),
        subresource: subresource(path),
    }
}

/// The SubjectAccessReview spec the kubelet sends for `a`.
pub fn review_spec(a: &Attributes) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: Some(a.user.name.clone()),
        uid: (!a.user.uid.is_empty()).then(|| a.user.uid.clone()),
        groups: Some(a.user.groups.clone()),
        extra: (!a.user.extra.is_empty()).then(|| a.user.extra.clone()),
        resource_attributes: Some(ResourceAttributes {
            verb: Some(a.verb.to_owned()),
            resource: Some("nodes".into()),
            name: Some(a.node.clone()),
            subresource: Some(a.subresource.to_owned()),
            version: Some("v1".into()),
            group: Some(String::new()),
            ..Default::default()
        }),
        non_resource_attributes: None,
    }
}

/// The kubelet's 403 text.
pub fn forbidden_message(a: &Attributes) -> String {
    format!(
        "Forbidden (user={}, verb={}, resource=nodes, subresource(s)=[{}])\n",
        a.user.name, a.verb, a.subresource
    )
}

pub enum Authorizer {
    AlwaysAllow,
    Webhook(WebhookAuthorizer),
}

impl Authorizer {
    pub async fn authorize(&self, a: &Attributes) -> bool {
        match self {
            Authorizer::AlwaysAllow => true,
            Authorizer::Webhook(w) => w.authorize(a).await,
        }
    }
}

/// SubjectAccessReviews with the answers cached by the whole spec.
pub struct WebhookAuthorizer {
    reviewer: Arc<dyn Reviewer>,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, bool)>>,
}

const CACHE_SWEEP: usize = 4096;

impl WebhookAuthorizer {
    pub fn new(
        reviewer: Arc<dyn Reviewer>,
        allowed_ttl: Duration,
        denied_ttl: Duration,
    ) -> WebhookAuthorizer {
        WebhookAuthorizer {
            reviewer,
            allowed_ttl,
            denied_ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn ttl(&self, allowed: bool) -> Duration {
        if allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        }
    }

    pub async fn authorize(&self, a: &Attributes) -> bool {
        let spec = review_spec(a);
        let key = serde_json::to_string(&spec).unwrap_or_default();
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, allowed)) = cache.get(&key)
                && at.elapsed() < self.ttl(*allowed)
            {
                return *allowed;
            }
        }
        match self.reviewer.subject_access_review(&spec).await {
            Ok(answer) => {
                let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() >= CACHE_SWEEP {
                    let (yes, no) = (self.allowed_ttl, self.denied_ttl);
                    cache.retain(|_, (at, ok)| at.elapsed() < if *ok { yes } else { no });
                }
                cache.insert(key, (Instant::now(), answer.allowed));
                if !answer.allowed && !answer.reason.is_empty() {
                    tracing::debug!(user = %a.user.name, reason = %answer.reason, "SubjectAccessReview denied");
                }
                answer.allowed
            }
            Err(e) => {
                tracing::warn!(error = %e, user = %a.user.name, "SubjectAccessReview failed; denying");
                false
            }
        }
    }
}

#[cfg(test)]
#[path = "authz_tests.rs"]
mod tests;
