//! Bearer tokens other than the sandbox's own: the ServiceAccount tokens a
//! `TokenRequest` issues (`kubectl create token`) and static tokens a test configures
//! (kube-apiserver's `--token-auth-file`). Requests made with them run as their user
//! and meet RBAC; a `TokenReview` asks about them.
//!
//! As in kube-apiserver, a ServiceAccount token is bound to audiences (by default the
//! API server's own, [`API_AUDIENCE`]), expires (an hour unless asked otherwise, at
//! least ten minutes), and stops working once its ServiceAccount is deleted (or
//! replaced by one of the same name: the uid must match). Unlike kube-apiserver's, the
//! tokens are opaque random strings, not signed JWTs: nothing outside the sandbox can
//! verify them, and they do not outlive it. Only their SHA-256 is kept, so a lookup
//! takes the same time whatever the token's first characters.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use parking_lot::RwLock;
use rand::distr::{Alphanumeric, SampleString as _};
use sha2::{Digest as _, Sha256};

use crate::rbac::UserInfo;

/// The API server's audience (kubeadm's `--service-account-issuer`, which
/// `--api-audiences` defaults to): tokens requested without audiences are for it, and
/// only tokens for it authenticate requests to the API.
pub(crate) const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// A TokenRequest's `spec.expirationSeconds` when it gives none (the API's default).
pub(crate) const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime kube-apiserver's validation accepts (ten minutes).
pub(crate) const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest (`1 << 32` seconds, the API's validation).
pub(crate) const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// The length of an issued token, in alphanumeric characters (~285 bits).
const TOKEN_LENGTH: usize = 48;

/// Whom a token authenticates, and for what.
#[derive(Debug, Clone)]
pub(crate) struct Credential {
    pub(crate) user: UserInfo,
    /// The ServiceAccount's uid, for a ServiceAccount token.
    pub(crate) uid: Option<String>,
    /// The token's id (kube-apiserver's `authentication.kubernetes.io/credential-id`
    /// extra, `JTI=…`), for a ServiceAccount token.
    pub(crate) credential_id: Option<String>,
    pub(crate) audiences: Vec<String>,
    pub(crate) expires: Option<DateTime<Utc>>,
    /// The ServiceAccount (namespace, name) the token was issued for.
    pub(crate) service_account: Option<(String, String)>,
}

/// Why a token does not authenticate (the text after `invalid bearer token, `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("token lookup failed")]
    Unknown,
    #[error("token has expired")]
    Expired,
    #[error("token audiences {token:?} is invalid for the target audiences {wanted:?}")]
    Audience {
        token: Vec<String>,
        wanted: Vec<String>,
    },
    #[error("service account token has been invalidated")]
    Invalidated,
}

/// A successful authentication: the credential, and the audiences it was accepted
/// for (those of the request that the token holds).
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    pub(crate) credential: Credential,
    pub(crate) audiences: Vec<String>,
}

/// The tokens the sandbox knows besides its own, by SHA-256.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    known: RwLock<HashMap<[u8; 32], Credential>>,
}

impl Tokens {
    /// Issues a token for a ServiceAccount (with its uid), for `audiences` (the API's
    /// when empty), valid for `seconds`.
    pub(crate) fn issue(
        &self,
        service_account: (&str, &str),
        uid: &str,
        audiences: Vec<String>,
        seconds: i64,
        now: DateTime<Utc>,
    ) -> (String, Credential) {
        let (namespace, name) = service_account;
        let token = Alphanumeric.sample_string(&mut rand::rng(), TOKEN_LENGTH);
        let audiences = if audiences.is_empty() {
            vec![API_AUDIENCE.to_string()]
        } else {
            audiences
        };
        let credential = Credential {
            user: UserInfo::service_account(namespace, name),
            uid: Some(uid.to_string()),
            credential_id: Some(format!("JTI={}", uuid::Uuid::new_v4())),
            audiences,
            expires: Some(now + chrono::Duration::seconds(seconds)),
            service_account: Some((namespace.to_string(), name.to_string())),
        };
        self.write().insert(digest(&token), credential.clone());
        (token, credential)
    }

    /// Accepts `token` as `user` for the API server's audience, without expiry (a
    /// line of kube-apiserver's `--token-auth-file`).
    pub(crate) fn add_static(&self, token: &str, user: UserInfo) {
        let credential = Credential {
            user,
            uid: None,
            credential_id: None,
            audiences: vec![API_AUDIENCE.to_string()],
            expires: None,
            service_account: None,
        };
        self.write().insert(digest(token), credential);
    }

    /// Whom `token` authenticates for one of `wanted` (the API's audience when empty)
    /// at `now`. `uid_of` says the uid of a ServiceAccount that exists now.
    pub(crate) fn authenticate(
        &self,
        token: &str,
        wanted: &[String],
        now: DateTime<Utc>,
        uid_of: impl Fn(&str, &str) -> Option<String>,
    ) -> Result<Authenticated, TokenError> {
        let credential = self
            .known
            .read()
            .get(&digest(token))
            .cloned()
            .ok_or(TokenError::Unknown)?;
        if credential.expires.is_some_and(|expires| expires <= now) {
            return Err(TokenError::Expired);
        }
        let audiences = accepted_audiences(&credential.audiences, wanted)?;
        if let Some((namespace, name)) = &credential.service_account
            && uid_of(namespace, name) != credential.uid
        {
            return Err(TokenError::Invalidated);
        }
        Ok(Authenticated {
            credential,
            audiences,
        })
    }

    fn write(&self) -> parking_lot::RwLockWriteGuard<'_, HashMap<[u8; 32], Credential>> {
        self.known.write()
    }
}

/// The audiences of `wanted` (the API's when empty) that the token holds; an error
/// when there are none.
pub(crate) fn accepted_audiences(
    token: &[String],
    wanted: &[String],
) -> Result<Vec<String>, TokenError> {
    let api = [API_AUDIENCE.to_string()];
    let wanted = if wanted.is_empty() { &api[..] } else { wanted };
    let accepted: Vec<String> = wanted
        .iter()
        .filter(|audience| token.contains(audience))
        .cloned()
        .collect();
    if accepted.is_empty() {
        return Err(TokenError::Audience {
            token: token.to_vec(),
            wanted: wanted.to_vec(),
        });
    }
    Ok(accepted)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("a time")
            .with_timezone(&Utc)
    }

    #[test]
    fn an_issued_token_authenticates_its_service_account_until_it_expires() {
        let tokens = Tokens::default();
        let (token, _) = tokens.issue(("team-a", "viewer"), "u1", vec![], 600, now());
        let exists = |_: &str, _: &str| Some("u1".to_string());
        let accepted = tokens
            .authenticate(&token, &[], now(), exists)
            .expect("accepted");
        assert_eq!(
            accepted.credential.user.name,
            "system:serviceaccount:team-a:viewer"
        );
        assert_eq!(accepted.audiences, vec![API_AUDIENCE.to_string()]);
        let later = now() + chrono::Duration::seconds(600);
        assert_eq!(
            tokens.authenticate(&token, &[], later, exists).unwrap_err(),
            TokenError::Expired
        );
        assert_eq!(
            tokens
                .authenticate("not-a-token", &[], now(), exists)
                .unwrap_err(),
            TokenError::Unknown
        );
    }

    #[test]
    fn a_token_is_valid_only_for_its_audiences_and_its_service_account() {
        let tokens = Tokens::default();
        let audiences = vec!["tether".to_string()];
        let (token, _) = tokens.issue(("a", "b"), "u1", audiences.clone(), 600, now());
        let exists = |_: &str, _: &str| Some("u1".to_string());
        assert!(matches!(
            tokens.authenticate(&token, &[], now(), exists),
            Err(TokenError::Audience { .. })
        ));
        let wanted = vec!["other".to_string(), "tether".to_string()];
        let accepted = tokens.authenticate(&token, &wanted, now(), exists).unwrap();
        assert_eq!(accepted.audiences, audiences);
        // Deleted, or deleted and made again: the token no longer counts.
        for uid in [None, Some("u2".to_string())] {
            let replaced = |_: &str, _: &str| uid.clone();
            assert_eq!(
                tokens
                    .authenticate(&token, &wanted, now(), replaced)
                    .unwrap_err(),
                TokenError::Invalidated
            );
        }
    }
}
