//! Errors as the Kubernetes API reports them: `Status` objects with the real reasons,
//! codes, messages and causes (recorded in the fixtures' `errors/` folder).

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

/// One cause of an `Invalid` or `Conflict` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cause {
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) field: String,
}

/// An answer other than success, as the API server gives it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("{plural} \"{name}\" not found")]
    NotFound { plural: String, name: String },
    /// A path no handler serves: the real server answers with a plain-text 404.
    #[error("404 page not found")]
    PageNotFound,
    #[error("{plural} \"{name}\" already exists")]
    AlreadyExists { plural: String, name: String },
    /// A stale resourceVersion on update.
    #[error("Operation cannot be fulfilled on {plural} \"{name}\": {reason}")]
    Conflict {
        plural: String,
        name: String,
        reason: String,
    },
    /// Server-side apply found fields owned by other managers.
    #[error("{message}")]
    ApplyConflict { message: String, causes: Vec<Cause> },
    /// `NewInvalid`: details name the object, its group (empty for the core group)
    /// and kind.
    #[error("{message}")]
    Invalid {
        group: String,
        kind: String,
        name: String,
        message: String,
        causes: Vec<Cause>,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    /// The authorizer (or the impersonation filter) refused a request: kube-apiserver's
    /// `NewForbidden`, whose details name the object and its group and resource.
    #[error("{message}")]
    Denied {
        group: String,
        resource: String,
        name: String,
        message: String,
    },
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("Unauthorized")]
    Unauthorized,
    #[error("415: Unsupported Media Type")]
    UnsupportedMediaType,
    /// No media type of `Accept` can be produced for the resource (kube-apiserver's
    /// `errNotAcceptable`, written as raw JSON whatever the client asked for).
    #[error("only the following media types are accepted: {0}")]
    NotAcceptable(String),
    /// A watch or list from a resourceVersion older than the history kept.
    #[error("{0}")]
    Expired(String),
    #[error("{0}")]
    Internal(String),
    /// A plain error kube-apiserver did not make a `Status` of: 500 with no reason
    /// (`StatusReasonUnknown`), the error's text as the message. Server-side apply's
    /// "failed to create typed patch object" is one (kubernetes/kubernetes#139253).
    #[error("{0}")]
    Unclassified(String),
    /// Injected faults (`--fail-rate`).
    #[error("{0}")]
    ServiceUnavailable(String),
    #[error("{0}")]
    TooManyRequests(String),
}

impl ApiError {
    pub(crate) fn not_found(plural: &str, name: &str) -> ApiError {
        ApiError::NotFound {
            plural: plural.to_string(),
            name: name.to_string(),
        }
    }

    pub(crate) fn code(&self) -> StatusCode {
        match self {
            ApiError::NotFound { .. } | ApiError::PageNotFound => StatusCode::NOT_FOUND,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => StatusCode::CONFLICT,
            ApiError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) | ApiError::Denied { .. } => StatusCode::FORBIDDEN,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::Expired(_) => StatusCode::GONE,
            ApiError::Internal(_) | ApiError::Unclassified(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::PageNotFound => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden(_) | ApiError::Denied { .. } => "Forbidden",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::UnsupportedMediaType => "UnsupportedMediaType",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) => "Expired",
            ApiError::Internal(_) => "InternalError",
            ApiError::Unclassified(_) => "",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::TooManyRequests(_) => "TooManyRequests",
        }
    }

    /// The `Status` object, key for key as kube-apiserver writes it.
    pub(crate) fn status(&self) -> Value {
        let mut status = serde_json::Map::new();
        status.insert("kind".into(), "Status".into());
        status.insert("apiVersion".into(), "v1".into());
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), "Failure".into());
        status.insert("message".into(), self.to_string().into());
        // `reason` is `omitempty`: an unclassified error has none.
        if !self.reason().is_empty() {
            status.insert("reason".into(), self.reason().into());
        }
        let details = match self {
            ApiError::NotFound { plural, name }
            | ApiError::AlreadyExists { plural, name }
            | ApiError::Conflict { plural, name, .. } => {
                Some(json!({"name": name, "kind": plural}))
            }
            ApiError::ApplyConflict { causes, .. } => Some(json!({"causes": causes_json(causes)})),
            ApiError::Invalid {
                group,
                kind,
                name,
                causes,
                ..
            } => {
                let mut details = serde_json::Map::new();
                if !name.is_empty() {
                    details.insert("name".into(), name.clone().into());
                }
                if !group.is_empty() {
                    details.insert("group".into(), group.clone().into());
                }
                if !kind.is_empty() {
                    details.insert("kind".into(), kind.clone().into());
                }
                details.insert("causes".into(), causes_json(causes));
                Some(Value::Object(details))
            }
            ApiError::Denied {
                group,
                resource,
                name,
                ..
            } => {
                // `StatusDetails` leaves out what is empty (`omitempty`), in this order.
                let mut details = serde_json::Map::new();
                for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
                    if !value.is_empty() {
                        details.insert(key.into(), value.clone().into());
                    }
                }
                Some(Value::Object(details))
            }
            ApiError::MethodNotAllowed | ApiError::UnsupportedMediaType => Some(json!({})),
            ApiError::ServiceUnavailable(_) | ApiError::TooManyRequests(_) => {
                Some(json!({"retryAfterSeconds": 1}))
            }
            _ => None,
        };
        if let Some(details) = details {
            status.insert("details".into(), details);
        }
        status.insert("code".into(), self.code().as_u16().into());
        Value::Object(status)
    }

    /// The response body: a JSON `Status`, or plain text for an unknown path.
    pub(crate) fn body(&self) -> (Bytes, &'static str) {
        match self {
            ApiError::PageNotFound => (
                Bytes::from_static(b"404 page not found\n"),
                "text/plain; charset=utf-8",
            ),
            _ => (
                Bytes::from(serde_json::to_vec(&self.status()).unwrap_or_default()),
                "application/json",
            ),
        }
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    causes
        .iter()
        .map(|c| {
            // `field` is `omitempty` in `metav1.StatusCause`.
            if c.field.is_empty() {
                json!({"reason": c.reason, "message": c.message})
            } else {
                json!({"reason": c.reason, "message": c.message, "field": c.field})
            }
        })
        .collect()
}

/// The success `Status` answered for an object deleted at once.
pub(crate) fn deleted(plural: &str, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "kind": plural, "uid": uid},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_the_real_status() {
        let status = ApiError::not_found("configmaps", "nope").status();
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "configmaps \"nope\" not found", "reason": "NotFound",
                "details": {"name": "nope", "kind": "configmaps"}, "code": 404})
        );
    }

    #[test]
    fn unknown_paths_answer_plain_text() {
        let (body, content_type) = ApiError::PageNotFound.body();
        assert_eq!(&body[..], b"404 page not found\n");
        assert!(content_type.starts_with("text/plain"));
    }

    #[test]
    fn invalid_without_a_name_omits_it_from_details() {
        let status = ApiError::Invalid {
            group: String::new(),
            kind: "ConfigMap".into(),
            name: String::new(),
            message: "m".into(),
            causes: vec![],
        }
        .status();
        assert_eq!(
            status["details"],
            json!({"kind": "ConfigMap", "causes": []})
        );
        assert_eq!(status["code"], 422);
    }
}
