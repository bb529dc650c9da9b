//! Reviews (`authorization.k8s.io` and `authentication.k8s.io`): questions a client
//! asks the API server's authorizer and authenticator, answered at once and never
//! stored, as kube-apiserver answers them. `kubectl auth can-i` asks with a
//! SelfSubjectAccessReview, `auth can-i --list` with a SelfSubjectRulesReview and
//! `auth whoami` with a SelfSubjectReview.
//!
//! The sandbox authorizes every request of its one user (kube-apiserver's
//! `AlwaysAllow` mode: allowed, with no reason, and every rule in a rules review) and
//! authenticates it as an administrator, as a kubeadm cluster's admin kubeconfig is.

use http::StatusCode;
use serde_json::{Value, json};

use super::write::{check_type, decode_body};
use super::{Reply, Request, State, Target};
use crate::sandbox::registry::ResourceType;
use crate::sandbox::status::ApiError;

/// The user the sandbox's token authenticates, as a SelfSubjectReview reports it.
const USERNAME: &str = "kubernetes-admin";
const GROUPS: &[&str] = &["kubeadm:cluster-admins", "system:authenticated"];

/// Whether the resource is a review: created to be answered, never stored.
pub(super) fn is_review(resource: &ResourceType) -> bool {
    resource.group == "authorization.k8s.io" || resource.group == "authentication.k8s.io"
}

impl State {
    /// `POST` of a review: the object sent, with the answer as its status (201, as
    /// for a create). Reviews take no other verb.
    pub(super) fn review(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        if request.method != http::Method::POST || target.name.is_some() {
            return Err(ApiError::MethodNotAllowed);
        }
        let resource = &target.resource;
        let mut review = decode_body(request)?;
        check_type(resource, &review)?;
        review["kind"] = resource.kind.clone().into();
        review["apiVersion"] = resource.api_version().into();
        if !review.get("metadata").is_some_and(Value::is_object) {
            review["metadata"] = json!({});
        }
        if let (Some(namespace), Some(attributes)) = (
            target.namespace.as_deref(),
            review.pointer_mut("/spec/resourceAttributes"),
        ) {
            // A LocalSubjectAccessReview asks about its own namespace only.
            if attributes
                .get("namespace")
                .and_then(Value::as_str)
                .is_some_and(|ns| !ns.is_empty() && ns != namespace)
            {
                return Err(ApiError::BadRequest(format!(
                    "spec.resourceAttributes.namespace must equal namespace: {namespace}"
                )));
            }
            attributes["namespace"] = namespace.into();
        }
        review["status"] = match resource.kind.as_str() {
            "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
                access_review_status(&review)?
            }
            "SelfSubjectRulesReview" => json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            }),
            "SelfSubjectReview" => json!({
                "userInfo": {"username": USERNAME, "groups": GROUPS},
            }),
            "TokenReview" => token_review_status(self, &review),
            _ => return Err(ApiError::MethodNotAllowed),
        };
        Ok(Reply::Json(StatusCode::CREATED, review))
    }
}

/// An access review's answer: allowed, as `AlwaysAllow` answers, once the spec names
/// what it asks about (kube-apiserver validates exactly one of the two attributes).
fn access_review_status(review: &Value) -> Result<Value, ApiError> {
    let spec = review.get("spec");
    let resource = spec.and_then(|s| s.get("resourceAttributes"));
    let non_resource = spec.and_then(|s| s.get("nonResourceAttributes"));
    if resource.is_some() == non_resource.is_some() {
        let kind = review["kind"].as_str().unwrap_or_default().to_string();
        return Err(ApiError::Invalid {
            kind: kind.clone(),
            name: String::new(),
            message: format!(
                "{kind}.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ),
            causes: vec![],
        });
    }
    Ok(json!({"allowed": true}))
}

/// A TokenReview: the sandbox's own token authenticates as its user; any other does not.
fn token_review_status(state: &State, review: &Value) -> Value {
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    use subtle::ConstantTimeEq as _;
    let known: bool = token.as_bytes().ct_eq(state.token.as_bytes()).into();
    if known {
        json!({
            "authenticated": true,
            "user": {"username": USERNAME, "groups": GROUPS},
        })
    } else {
        json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_review_must_name_what_it_asks_about() {
        let ok = json!({"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
        assert_eq!(access_review_status(&ok).unwrap(), json!({"allowed": true}));
        let empty = json!({"kind": "SelfSubjectAccessReview", "spec": {}});
        assert!(matches!(
            access_review_status(&empty),
            Err(ApiError::Invalid { .. })
        ));
        let both = json!({"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {}, "nonResourceAttributes": {}}});
        assert!(access_review_status(&both).is_err());
    }
}
