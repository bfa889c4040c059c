//! The API server's reviews the kubelet server asks for: TokenReview
//! (who holds this bearer token) and SubjectAccessReview (may this user do
//! this to the node). Invariant: the rest of `server` sees only the
//! [`Reviewer`] trait; kube-rs stays in [`KubeReviewer`], and the tests use
//! [`FakeReviewer`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};

/// The authenticated user, as Kubernetes' `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("{kind} on the API server: {message}")]
    Api { kind: &'static str, message: String },
    #[error("kubeconfig {path}: {message}")]
    Config { path: String, message: String },
}

/// A TokenReview's answer: the user, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenAnswer {
    Authenticated(UserInfo),
    Rejected(String),
}

/// A SubjectAccessReview's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessAnswer {
    pub allowed: bool,
    pub reason: String,
}

#[async_trait::async_trait]
pub trait Reviewer: Send + Sync {
    async fn token_review(&self, token: &str) -> Result<TokenAnswer, ReviewError>;
    async fn subject_access_review(
        &self,
        spec: &SubjectAccessReviewSpec,
    ) -> Result<AccessAnswer, ReviewError>;
}

/// Reviews on a real API server, with the node's kubeconfig credentials
/// (the Node authorizer lets a node create both kinds).
pub struct KubeReviewer {
    client: kube::Client,
}

impl KubeReviewer {
    pub async fn from_kubeconfig(path: &std::path::Path) -> Result<KubeReviewer, ReviewError> {
        let err = |message: String| ReviewError::Config {
            path: path.display().to_string(),
            message,
        };
        // The node's kubeconfig: a client certificate the TLS bootstrap
        // rotates is read again as it changes.
        use crate::kubeapi::transport;
        let (mut config, identity) = transport::load_kubeconfig(path).await.map_err(err)?;
        config.connect_timeout = Some(Duration::from_secs(10));
        let ua = format!("crilet/{}", env!("CARGO_PKG_VERSION"));
        let client = transport::client(&config, identity.as_ref(), Duration::from_secs(30), &ua)
            .map_err(err)?;
        Ok(KubeReviewer { client })
    }
}

/// The token's user from a TokenReview status; a status without
/// `authenticated` (what a real server answers for a bad token, with 201)
/// is a rejection.
pub fn token_answer(review: &TokenReview) -> TokenAnswer {
    let Some(status) = &review.status else {
        return TokenAnswer::Rejected("the TokenReview has no status".into());
    };
    if status.authenticated != Some(true) {
        let why = status.error.clone().unwrap_or_default();
        return TokenAnswer::Rejected(if why.is_empty() {
            "token not authenticated".into()
        } else {
            why
        });
    }
    let user = status.user.clone().unwrap_or_default();
    TokenAnswer::Authenticated(UserInfo {
        name: user.username.unwrap_or_default(),
        uid: user.uid.unwrap_or_default(),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default(),
    })
}

fn access_answer(status: Option<&SubjectAccessReviewStatus>) -> AccessAnswer {
    match status {
        Some(s) => AccessAnswer {
            allowed: s.allowed && s.denied != Some(true),
            reason: s.reason.clone().unwrap_or_default(),
        },
        None => AccessAnswer {
            allowed: false,
            reason: "the SubjectAccessReview has no status".into(),
        },
    }
}

#[async_trait::async_trait]
impl Reviewer for KubeReviewer {
    async fn token_review(&self, token: &str) -> Result<TokenAnswer, ReviewError> {
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError::Api {
                kind: "TokenReview",
                message: e.to_string(),
            })?;
        Ok(token_answer(&answer))
    }

    async fn subject_access_review(
        &self,
        spec: &SubjectAccessReviewSpec,
    ) -> Result<AccessAnswer, ReviewError> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec: spec.clone(),
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError::Api {
                kind: "SubjectAccessReview",
                message: e.to_string(),
            })?;
        Ok(access_answer(answer.status.as_ref()))
    }
}

/// An in-memory reviewer: tokens map to users; a user is allowed the
/// `(verb, subresource)` pairs it was granted. Counts every review.
#[derive(Default)]
pub struct FakeReviewer {
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    tokens: BTreeMap<String, UserInfo>,
    grants: BTreeMap<String, Vec<(String, String)>>,
    token_reviews: usize,
    access_reviews: usize,
    down: bool,
}

impl FakeReviewer {
    fn lock(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.lock().tokens.insert(token.to_owned(), user);
    }
    pub fn grant(&self, user: &str, verb: &str, subresource: &str) {
        self.lock()
            .grants
            .entry(user.to_owned())
            .or_default()
            .push((verb.to_owned(), subresource.to_owned()));
    }
    pub fn revoke_all(&self) {
        self.lock().grants.clear();
    }
    /// While down, every review fails.
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }
    pub fn token_reviews(&self) -> usize {
        self.lock().token_reviews
    }
    pub fn access_reviews(&self) -> usize {
        self.lock().access_reviews
    }
}

#[async_trait::async_trait]
impl Reviewer for FakeReviewer {
    async fn token_review(&self, token: &str) -> Result<TokenAnswer, ReviewError> {
        let mut s = self.lock();
        s.token_reviews += 1;
        if s.down {
            return Err(ReviewError::Api {
                kind: "TokenReview",
                message: "the fake is down".into(),
            });
        }
        Ok(match s.tokens.get(token) {
            Some(user) => TokenAnswer::Authenticated(user.clone()),
            None => TokenAnswer::Rejected("unknown token".into()),
        })
    }

    async fn subject_access_review(
        &self,
        spec: &SubjectAccessReviewSpec,
    ) -> Result<AccessAnswer, ReviewError> {
        let mut s = self.lock();
        s.access_reviews += 1;
        if s.down {
            return Err(ReviewError::Api {
                kind: "SubjectAccessReview",
                message: "the fake is down".into(),
            });
        }
        let attrs = spec.resource_attributes.clone().unwrap_or_default();
        let verb = attrs.verb.unwrap_or_default();
        let sub = attrs.subresource.unwrap_or_default();
        let user = spec.user.clone().unwrap_or_default();
        let allowed = s
            .grants
            .get(&user)
            .is_some_and(|g| g.iter().any(|(v, r)| *v == verb && *r == sub));
        Ok(AccessAnswer {
            allowed,
            reason: String::new(),
        })
    }
}
