//! Who is asking: the kubelet's authentication chain. A client certificate
//! that one of the `--client-ca-file` CAs signed names the user (CN) and
//! groups (O); one that none signed fails (a 401 unless a token or
//! anonymous access lets the request through, as the kubelet's union
//! authenticator); else a bearer token is checked with a
//! TokenReview, whose answers are cached (successes and failures alike,
//! keyed by the token's SHA-256); else the request is anonymous, allowed
//! only with `--anonymous-auth`.
//!
//! Invariant: no token is kept in memory beyond the request (only its
//! hash), and a failed review (API server unreachable) is not cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use tokio::time::Instant;

use super::review::{Reviewer, TokenAnswer, UserInfo};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    /// Answered 401 "Unauthorized"; the text is logged only.
    #[error("{0}")]
    Unauthorized(String),
}

/// The user a verified client certificate (DER) names: CN, and O as groups.
pub fn user_from_certificate(der: &[u8]) -> Result<UserInfo, AuthnError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| AuthnError::Unauthorized(format!("client certificate: {e}")))?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    if name.is_empty() {
        return Err(AuthnError::Unauthorized(
            "client certificate without a common name".into(),
        ));
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    Ok(UserInfo {
        name,
        groups,
        ..Default::default()
    })
}

/// The bearer token of an `Authorization` header value, if that is what it holds.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

type TokenKey = [u8; 32];

/// Bearer tokens through TokenReviews, cached for `ttl`.
pub struct TokenAuthenticator {
    reviewer: Arc<dyn Reviewer>,
    ttl: Duration,
    cache: Mutex<HashMap<TokenKey, (Instant, TokenAnswer)>>,
}

/// Entries beyond this make the cache drop its expired ones first.
const CACHE_SWEEP: usize = 4096;

impl TokenAuthenticator {
    pub fn new(reviewer: Arc<dyn Reviewer>, ttl: Duration) -> TokenAuthenticator {
        TokenAuthenticator {
            reviewer,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn key(token: &str) -> TokenKey {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(digest.as_ref());
        key
    }

    pub async fn authenticate(&self, token: &str) -> Result<UserInfo, AuthnError> {
        let key = Self::key(token);
        let cached = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache
                .get(&key)
                .filter(|(at, _)| at.elapsed() < self.ttl)
                .map(|(_, a)| a.clone())
        };
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let answer = self
                    .reviewer
                    .token_review(token)
                    .await
                    .map_err(|e| AuthnError::Unauthorized(e.to_string()))?;
                let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() >= CACHE_SWEEP {
                    let ttl = self.ttl;
                    cache.retain(|_, (at, _)| at.elapsed() < ttl);
                }
                cache.insert(key, (Instant::now(), answer.clone()));
                answer
            }
        };
        match answer {
            TokenAnswer::Authenticated(user) => Ok(user),
            TokenAnswer::Rejected(why) => Err(AuthnError::Unauthorized(why)),
        }
    }
}

/// The whole chain.
pub struct Authenticator {
    /// None: client certificates are not accepted (no `--client-ca-file`).
    pub x509: Option<super::tls::ClientCa>,
    /// None: bearer tokens are not accepted.
    pub tokens: Option<TokenAuthenticator>,
    pub anonymous: bool,
}

impl Authenticator {
    /// `peer_chain`: the client's certificate chain (leaf first), if it
    /// sent one; `authorization`: the request's Authorization header.
    pub async fn authenticate(
        &self,
        peer_chain: Option<&[CertificateDer<'static>]>,
        authorization: Option<&str>,
    ) -> Result<UserInfo, AuthnError> {
        let mut refused = None;
        if let (Some(chain), Some(ca)) = (peer_chain.filter(|c| !c.is_empty()), &self.x509) {
            match ca.verify(chain) {
                Ok(()) => return user_from_certificate(&chain[0]),
                Err(e) => refused = Some(format!("client certificate: {e}")),
            }
        }
        let result = self.token_or_anonymous(authorization).await;
        match (result, refused) {
            (Err(_), Some(why)) => Err(AuthnError::Unauthorized(why)),
            (result, _) => result,
        }
    }

    async fn token_or_anonymous(
        &self,
        authorization: Option<&str>,
    ) -> Result<UserInfo, AuthnError> {
        if let Some(header) = authorization {
            let Some(token) = bearer_token(header) else {
                return Err(AuthnError::Unauthorized(
                    "the Authorization header is not a bearer token".into(),
                ));
            };
            return match &self.tokens {
                Some(tokens) => tokens.authenticate(token).await,
                None => Err(AuthnError::Unauthorized(
                    "bearer tokens need --authentication-token-webhook".into(),
                )),
            };
        }
        if self.anonymous {
            return Ok(UserInfo::anonymous());
        }
        Err(AuthnError::Unauthorized("no credentials".into()))
    }
}

#[cfg(test)]
#[path = "authn_tests.rs"]
mod tests;
