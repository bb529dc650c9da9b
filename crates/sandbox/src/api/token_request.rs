//! `POST …/serviceaccounts/NAME/token`: a `TokenRequest` (`kubectl create token`)
//! answered with a token for the ServiceAccount, as kube-apiserver answers it (201, the
//! request with `status.token` and `status.expirationTimestamp`), and the
//! authentication of every bearer token (see [`crate::tokens`]).

use chrono::Utc;
use http::StatusCode;
use serde_json::{Value, json};

use super::write::decode_body;
use super::{Reply, Request, State, Target};
use crate::rbac::UserInfo;
use crate::status::{ApiError, Cause};
use crate::store::ResourceKey;
use crate::tokens::{self, Authenticated, Credential, TokenError};

const GROUP: &str = "authentication.k8s.io";
const KIND: &str = "TokenRequest";
const API_VERSION: &str = "authentication.k8s.io/v1";

impl State {
    /// Whom `token` authenticates for one of `audiences` (the API server's when
    /// empty): the sandbox's own token is the admin, audience-agnostic as
    /// kube-apiserver's static tokens are; any other is looked up among [`State::tokens`].
    pub(crate) fn authenticate(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Authenticated, TokenError> {
        use subtle::ConstantTimeEq as _;
        if bool::from(token.as_bytes().ct_eq(self.token.as_bytes())) {
            let credential = Credential {
                user: UserInfo::admin(),
                uid: None,
                credential_id: None,
                audiences: vec![tokens::API_AUDIENCE.to_string()],
                expires: None,
                service_account: None,
            };
            let audiences = tokens::accepted_audiences(&credential.audiences, audiences)?;
            return Ok(Authenticated {
                credential,
                audiences,
            });
        }
        self.tokens
            .authenticate(token, audiences, Utc::now(), |namespace, name| {
                self.service_account_uid(namespace, name)
            })
    }

    /// The uid of the ServiceAccount, while it exists.
    fn service_account_uid(&self, namespace: &str, name: &str) -> Option<String> {
        let key = ResourceKey {
            group: String::new(),
            resource: "serviceaccounts".to_string(),
        };
        let stored = self
            .store
            .get(&key, &(namespace.to_string(), name.to_string()))?;
        stored
            .value()
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// Issues a token for the ServiceAccount the path names (404 when it does not
    /// exist). `boundObjectRef` is echoed but binds nothing: the sandbox runs no Pods.
    pub(super) fn token_request(
        &self,
        target: &Target,
        request: &Request,
    ) -> Result<Reply, ApiError> {
        if request.method != http::Method::POST {
            return Err(ApiError::MethodNotAllowed);
        }
        let (namespace, name) = target.key();
        let stored = self.stored(target)?;
        let uid = stored
            .value()
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let body = decode_body(request)?;
        check_kind(&body)?;
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let seconds = expiration_seconds(&spec, &name)?;
        let audiences = crate::strings(spec.get("audiences"));
        let now = Utc::now();
        let (token, credential) =
            self.tokens
                .issue((&namespace, &name), &uid, audiences, seconds, now);
        let expires = credential.expires.unwrap_or(now);
        let stamp = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let answer = json!({
            "kind": KIND,
            "apiVersion": API_VERSION,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": stamp(now),
            },
            "spec": {
                "audiences": credential.audiences,
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef").cloned().unwrap_or(Value::Null),
            },
            "status": {"token": token, "expirationTimestamp": stamp(expires)},
        });
        Ok(Reply::Json(StatusCode::CREATED, answer))
    }
}

/// A body that says what it is must say TokenRequest (kube-apiserver decodes the
/// body as the subresource's kind).
fn check_kind(body: &Value) -> Result<(), ApiError> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or(KIND);
    let version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(API_VERSION);
    if kind == KIND && version == API_VERSION {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "{kind} in version \"{version}\" cannot be handled as a {KIND}"
    )))
}

/// `spec.expirationSeconds`, defaulted, within kube-apiserver's bounds.
fn expiration_seconds(spec: &Value, name: &str) -> Result<i64, ApiError> {
    let seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => return Ok(tokens::DEFAULT_EXPIRATION_SECONDS),
        Some(value) => value.as_i64(),
    };
    let problem = match seconds {
        Some(s) if s < tokens::MIN_EXPIRATION_SECONDS => {
            "may not specify a duration less than 10 minutes"
        }
        Some(s) if s > tokens::MAX_EXPIRATION_SECONDS => {
            "may not specify a duration larger than 2^32 seconds"
        }
        Some(s) => return Ok(s),
        None => "must be a whole number of seconds",
    };
    let value = spec["expirationSeconds"].to_string();
    let message = format!("spec.expirationSeconds: Invalid value: {value}: {problem}");
    Err(ApiError::Invalid {
        group: GROUP.to_string(),
        kind: KIND.to_string(),
        name: name.to_string(),
        message: format!("{KIND}.{GROUP} {name:?} is invalid: {message}"),
        causes: vec![Cause {
            reason: "FieldValueInvalid".to_string(),
            message: format!("Invalid value: {value}: {problem}"),
            field: "spec.expirationSeconds".to_string(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lifetime_is_defaulted_and_kept_within_the_apis_bounds() {
        let seconds = |spec: Value| expiration_seconds(&spec, "viewer");
        assert_eq!(seconds(json!({})).unwrap(), 3600);
        assert_eq!(seconds(json!({"expirationSeconds": null})).unwrap(), 3600);
        assert_eq!(seconds(json!({"expirationSeconds": 600})).unwrap(), 600);
        let short = seconds(json!({"expirationSeconds": 60})).unwrap_err();
        assert_eq!(
            short.to_string(),
            "TokenRequest.authentication.k8s.io \"viewer\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        );
        assert!(seconds(json!({"expirationSeconds": 1_i64 << 33})).is_err());
        assert!(seconds(json!({"expirationSeconds": "1h"})).is_err());
    }
}
