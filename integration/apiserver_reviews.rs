//! The API server double's TokenReview and SubjectAccessReview answers,
//! for the kubelet server's webhook tests: tokens a test registers
//! authenticate as their user; a user is allowed exactly the (verb,
//! subresource) pairs a test granted on `nodes`. As a real kube-apiserver,
//! a rejected token is answered 201 with `status.authenticated` omitted.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[derive(Default)]
pub struct Reviews {
    tokens: BTreeMap<String, (String, Vec<String>)>,
    grants: Vec<(String, String, String)>,
}

pub const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
pub const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

impl Reviews {
    pub fn add_token(&mut self, token: &str, user: &str, groups: &[&str]) {
        let groups = groups.iter().map(|g| (*g).to_owned()).collect();
        self.tokens
            .insert(token.to_owned(), (user.to_owned(), groups));
    }

    pub fn grant(&mut self, user: &str, verb: &str, subresource: &str) {
        self.grants
            .push((user.to_owned(), verb.to_owned(), subresource.to_owned()));
    }

    /// The answer to a POST on `path`, if it is one of the reviews.
    pub fn answer(&self, path: &str, body: &Value) -> Option<Value> {
        match path {
            TOKEN_REVIEWS => {
                let token = body["spec"]["token"].as_str().unwrap_or_default();
                let status = match self.tokens.get(token) {
                    Some((user, groups)) => json!({
                        "authenticated": true,
                        "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups},
                    }),
                    None => json!({"user": {}, "error": "invalid bearer token"}),
                };
                let mut review = body.clone();
                review["status"] = status;
                Some(review)
            }
            ACCESS_REVIEWS => {
                let spec = &body["spec"];
                let attrs = &spec["resourceAttributes"];
                let user = spec["user"].as_str().unwrap_or_default();
                let verb = attrs["verb"].as_str().unwrap_or_default();
                let sub = attrs["subresource"].as_str().unwrap_or_default();
                let on_nodes = attrs["resource"] == "nodes" && attrs["version"] == "v1";
                let allowed = on_nodes
                    && self
                        .grants
                        .iter()
                        .any(|(u, v, s)| u == user && v == verb && s == sub);
                let mut review = body.clone();
                review["status"] = json!({"allowed": allowed});
                Some(review)
            }
            _ => None,
        }
    }
}
