//! Reviews (`authorization.k8s.io` and `authentication.k8s.io`): questions a client
//! asks the API server's authorizer and authenticator, answered at once and never
//! stored, as kube-apiserver answers them. `kubectl auth can-i` asks with a
//! SelfSubjectAccessReview, `auth can-i --list` with a SelfSubjectRulesReview and
//! `auth whoami` with a SelfSubjectReview.
//!
//! The answers come from the sandbox's own authorizer ([`rbac`]): its token's user is in
//! `system:masters` and allowed everything; the user of another token, an impersonated
//! identity (`kubectl --as`) or the subject of a SubjectAccessReview is allowed what
//! its RBAC bindings allow. A TokenReview asks its authenticator
//! ([`State::authenticate`]).

use http::StatusCode;
use serde_json::{Value, json};

use super::write::{check_type, decode_body};
use super::{Reply, Request, State, Target};
use crate::rbac::{self, Attributes, UserInfo};
use crate::registry::ResourceType;
use crate::status::ApiError;
use crate::strings;

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
        // The identity the request runs as (the filter in front already allowed the
        // impersonation, so this cannot be refused now).
        let requester =
            rbac::impersonate(&self.store, request.requester.clone(), &request.headers)?;
        review["status"] = match resource.kind.as_str() {
            "SelfSubjectAccessReview" => self.access_review_status(&review, &requester)?,
            "SubjectAccessReview" | "LocalSubjectAccessReview" => {
                let subject = UserInfo {
                    name: review
                        .pointer("/spec/user")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    groups: strings(review.pointer("/spec/groups")),
                };
                self.access_review_status(&review, &subject)?
            }
            "SelfSubjectRulesReview" => {
                let namespace = review
                    .pointer("/spec/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let (rules, incomplete) = rbac::rules_for(&self.store, &requester, namespace);
                let non_resource = json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]);
                json!({
                    "resourceRules": rules,
                    "nonResourceRules": non_resource,
                    "incomplete": incomplete,
                })
            }
            "SelfSubjectReview" => json!({"userInfo": user_json(&requester)}),
            "TokenReview" => token_review_status(self, &review),
            _ => return Err(ApiError::MethodNotAllowed),
        };
        Ok(Reply::Json(StatusCode::CREATED, review))
    }

    /// An access review's answer: whether `user` may do what the spec asks, once the
    /// spec names it (kube-apiserver validates exactly one of the two attributes).
    /// Non-resource paths are open to every authenticated user, as the sandbox's
    /// filter opens them.
    fn access_review_status(&self, review: &Value, user: &UserInfo) -> Result<Value, ApiError> {
        let attributes = requested_attributes(review)?;
        let Some(attributes) = attributes else {
            return Ok(json!({"allowed": true}));
        };
        Ok(match rbac::authorize(&self.store, user, &attributes) {
            Ok(()) => json!({"allowed": true}),
            Err(_) => json!({"allowed": false}),
        })
    }
}

/// The resource attributes a review asks about, None for a non-resource question; an
/// error unless exactly one of the two is given.
fn requested_attributes(review: &Value) -> Result<Option<Attributes>, ApiError> {
    let spec = review.get("spec");
    let resource = spec.and_then(|s| s.get("resourceAttributes"));
    let non_resource = spec.and_then(|s| s.get("nonResourceAttributes"));
    if resource.is_some() == non_resource.is_some() {
        let kind = review["kind"].as_str().unwrap_or_default().to_string();
        return Err(ApiError::Invalid {
            group: "authorization.k8s.io".into(),
            kind: kind.clone(),
            name: String::new(),
            message: format!(
                "{kind}.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ),
            causes: vec![],
        });
    }
    Ok(resource.map(|attributes| {
        let field = |key: &str| {
            attributes
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Attributes {
            verb: field("verb"),
            group: field("group"),
            resource: field("resource"),
            subresource: field("subresource"),
            namespace: field("namespace"),
            name: field("name"),
        }
    }))
}

fn user_json(user: &UserInfo) -> Value {
    json!({"username": user.name, "groups": user.groups})
}

/// A TokenReview: whom the token authenticates for the audiences asked about (the API
/// server's when none), with the ServiceAccount's uid and the token's id for a
/// ServiceAccount token, and the audiences it was accepted for; or why not.
fn token_review_status(state: &State, review: &Value) -> Value {
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let audiences = strings(review.pointer("/spec/audiences"));
    match state.authenticate(token, &audiences) {
        Ok(accepted) => {
            let credential = accepted.credential;
            let mut user = user_json(&credential.user);
            if let Some(uid) = credential.uid {
                user["uid"] = uid.into();
            }
            if let Some(id) = credential.credential_id {
                user["extra"] = json!({"authentication.kubernetes.io/credential-id": [id]});
            }
            json!({"authenticated": true, "user": user, "audiences": accepted.audiences})
        }
        Err(err) => json!({"user": {}, "error": format!("[invalid bearer token, {err}]")}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_review_must_name_what_it_asks_about() {
        let resource = json!({"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "t1"}}});
        let attributes = requested_attributes(&resource).unwrap().unwrap();
        assert_eq!(
            (
                attributes.verb.as_str(),
                attributes.resource.as_str(),
                attributes.namespace.as_str()
            ),
            ("get", "pods", "t1")
        );
        let path = json!({"kind": "SelfSubjectAccessReview", "spec": {"nonResourceAttributes": {"verb": "get", "path": "/version"}}});
        assert!(requested_attributes(&path).unwrap().is_none());
        let empty = json!({"kind": "SelfSubjectAccessReview", "spec": {}});
        assert!(matches!(
            requested_attributes(&empty),
            Err(ApiError::Invalid { .. })
        ));
        let both = json!({"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {}, "nonResourceAttributes": {}}});
        assert!(requested_attributes(&both).is_err());
    }
}
