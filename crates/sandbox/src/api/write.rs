//! Writes as clients send them: create, update, the three patch formats and
//! server-side apply, each decoded and checked, then handed to the commit pipeline.

use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;

use super::commit::{Write, conflict, object_name};
use super::scale::scale_of;
use super::{
    FieldValidation, Reply, Request, State, Target, field_manager, field_validation, is_dry_run,
    now,
};
use crate::conversion;
use crate::fields::{self, ApplyError, ApplyOptions};
use crate::protobuf::{self, Format};
use crate::registry::ResourceType;
use crate::status::{ApiError, Cause};
use crate::store::Stored;

impl State {
    pub(super) fn create(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        if target.subresource.is_some() {
            return Err(ApiError::MethodNotAllowed);
        }
        let mut object = decode_body(request)?;
        check_type(resource, &object)?;
        let namespace = self.place(target, &mut object)?;
        let name = object_name(&object);
        let name = match name {
            Some(name) => name,
            None => match object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
            {
                Some(prefix) if !prefix.is_empty() => {
                    let name = format!("{prefix}{}", random_suffix());
                    object["metadata"]["name"] = Value::String(name.clone());
                    name
                }
                _ => String::new(),
            },
        };
        let manager = field_manager(request);
        let mut write = Write::new(resource.clone(), (namespace, name), None, object, &manager);
        write.dry_run = is_dry_run(&request.query);
        write.field_validation = field_validation(&request.query);
        write.warnings = request.warnings.clone();
        self.commit(write)
            .map(|(code, value)| self.written(target, request, code, value))
    }

    pub(super) fn update(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let stored = self.stored(target)?;
        let mut object = decode_body(request)?;
        if target.subresource.as_deref() == Some("scale") {
            return self.write_scale(target, request, &stored, object);
        }
        check_type(resource, &object)?;
        self.place(target, &mut object)?;
        let name = target.name.clone().unwrap_or_default();
        if object_name(&object).as_deref() != Some(name.as_str()) {
            return Err(ApiError::BadRequest(
                "the name of the object does not match the name on the URL".into(),
            ));
        }
        check_resource_version(resource, &object, &stored)?;
        let write = Write::for_request(target, Some(stored), object, request);
        self.commit(write)
            .map(|(code, value)| self.written(target, request, code, value))
    }

    pub(super) fn patch(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let content_type = request
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        if content_type == "application/apply-patch+yaml" {
            return self.apply(target, request);
        }
        let stored = self.stored(target)?;
        let live = conversion::answer(resource, stored.value());
        let patched_source = if target.subresource.as_deref() == Some("scale") {
            scale_of(&live)
        } else {
            live.clone()
        };
        let patched = match content_type.as_str() {
            "application/json-patch+json" => {
                let patch: json_patch::Patch =
                    serde_json::from_slice(&request.body).map_err(|e| {
                        ApiError::BadRequest(format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ))
                    })?;
                let mut doc = patched_source;
                // kube-apiserver answers a patch that does not apply with a generic 422
                // (`NewGenericServerResponse`): no kind or name, the patch library's
                // error as the one cause.
                json_patch::patch(&mut doc, &patch).map_err(|e| ApiError::Invalid {
                    group: String::new(),
                    kind: String::new(),
                    name: String::new(),
                    message: "the server rejected our request due to an error in our request"
                        .into(),
                    causes: vec![Cause {
                        reason: "UnexpectedServerResponse".into(),
                        message: e.to_string(),
                        field: String::new(),
                    }],
                })?;
                doc
            }
            "application/merge-patch+json" => {
                let patch: Value = parse_json(&request.body)?;
                let mut doc = patched_source;
                json_patch::merge(&mut doc, &patch);
                doc
            }
            "application/strategic-merge-patch+json" => {
                if resource.custom {
                    return Err(ApiError::UnsupportedMediaType);
                }
                let patch: Value = parse_json(&request.body)?;
                let schema = self.schema_of(resource);
                fields::strategic_merge_patch(&schema, &patched_source, &patch)
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?
            }
            _ => return Err(ApiError::UnsupportedMediaType),
        };
        if target.subresource.as_deref() == Some("scale") {
            return self.write_scale(target, request, &stored, patched);
        }
        check_type(resource, &patched)?;
        // A patch that carries a resourceVersion is a precondition, as for an update.
        check_resource_version(resource, &patched, &stored)?;
        let mut write = Write::for_request(target, Some(stored), patched, request);
        write.patched = true;
        self.commit(write)
            .map(|(code, value)| self.written(target, request, code, value))
    }

    /// Server-side apply: merge the applied configuration into the live object (or
    /// create it), under the field manager's ownership.
    pub(super) fn apply(&self, target: &Target, request: &Request) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let manager = request
            .query
            .get("fieldManager")
            .cloned()
            .unwrap_or_default();
        if manager.is_empty() {
            return Err(ApiError::Invalid {
                group: "meta.k8s.io".into(),
                kind: "PatchOptions".into(),
                name: String::new(),
                message: "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
                causes: vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: is required for apply patch".into(),
                    field: "fieldManager".into(),
                }],
            });
        }
        let config = decode_apply_body(request)?;
        if !config.is_object() {
            return Err(ApiError::BadRequest(
                "the apply configuration must be an object".into(),
            ));
        }
        check_type(resource, &config)?;
        let mut config = config;
        self.place(target, &mut config)?;
        if object_name(&config).as_deref() != target.name.as_deref() {
            return Err(ApiError::BadRequest(
                "the name of the object does not match the name on the URL".into(),
            ));
        }
        let stored = self.store.get(&resource.key(), &target.key());
        let live = stored
            .as_ref()
            .map(|s| conversion::answer(resource, s.value()));
        let schema = self.schema_of(resource);
        let undeclared = schema.validate(&config).unknown_fields;
        if !undeclared.is_empty() {
            return Err(typed_patch_error(resource, &config, &undeclared));
        }
        let now = now();
        let api_version = resource.api_version();
        let reset: &[&str] = match target.subresource.as_deref() {
            None if resource.has_status => &["status"],
            Some("status") => &["spec"],
            _ => &[],
        };
        let options = ApplyOptions {
            manager: &manager,
            force: request.query.get("force").is_some_and(|f| f == "true"),
            api_version: &api_version,
            now: &now,
            reset_fields: reset,
            subresource: target.subresource.as_deref().unwrap_or_default(),
        };
        let merged =
            fields::apply(&schema, live.as_ref(), &config, &options).map_err(|err| match &err {
                ApplyError::Conflicts(conflicts) => ApiError::ApplyConflict {
                    message: err.to_string(),
                    causes: conflicts
                        .iter()
                        .map(|c| Cause {
                            reason: "FieldManagerConflict".into(),
                            message: c.message(),
                            field: c.field.clone(),
                        })
                        .collect(),
                },
                other => ApiError::BadRequest(other.to_string()),
            })?;
        let mut write = Write::new(resource.clone(), target.key(), stored, merged, &manager);
        write.ownership_tracked = true;
        write.dry_run = is_dry_run(&request.query);
        write.subresource = target.subresource.clone();
        self.commit(write)
            .map(|(code, value)| self.written(target, request, code, value))
    }
}

impl State {
    /// The answer to a write: in protobuf, the stored object's own encoding, made now
    /// from the value in hand (no JSON to parse back) and kept for every later read of
    /// this resourceVersion; otherwise the value, for `answer` to write.
    fn written(&self, target: &Target, request: &Request, code: StatusCode, value: Value) -> Reply {
        let resource = &target.resource;
        // A converted kind is encoded from the answer: the store keeps only the stored
        // version's encoding.
        if request.format != Format::Protobuf
            || resource.custom
            || !conversion::served_as_stored(resource)
        {
            return Reply::Json(code, value);
        }
        let metadata = &value["metadata"];
        let key = (
            metadata["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            metadata["name"].as_str().unwrap_or_default().to_string(),
        );
        let stored = self.store.get(&resource.key(), &key).filter(|stored| {
            // A dry run, or a write overtaken by another: not the stored version.
            metadata["resourceVersion"].as_str() == Some(&stored.resource_version.to_string())
                && value["apiVersion"].as_str() == Some(&resource.api_version())
        });
        let Some(encoded) = stored.as_ref().and_then(|s| s.encode_protobuf_from(&value)) else {
            return Reply::Json(code, value);
        };
        Reply::Raw(code, encoded.enveloped.clone(), protobuf::MEDIA_TYPE)
    }
}

/// Server-side apply of fields the schema does not declare, whatever `fieldValidation`
/// says: structured-merge-diff cannot make a typed object of the configuration, and
/// kube-apiserver answers its plain error as a 500 (kubernetes/kubernetes#139253):
/// `failed to create typed patch object (ns/name; example.com/v1, Kind=Widget):
/// .spec.x: field not declared in schema`, several errors as an indented list.
fn typed_patch_error(
    resource: &ResourceType,
    config: &Value,
    undeclared: &[tether_schema::FieldError],
) -> ApiError {
    let text = |path: &str| format!("{path}: field not declared in schema");
    let errors = match undeclared {
        [one] => text(&one.apply_path),
        many => std::iter::once("errors:".to_string())
            .chain(many.iter().map(|e| format!("  {}", text(&e.apply_path))))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    let meta = |key: &str| {
        config["metadata"][key]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    ApiError::Unclassified(format!(
        "failed to create typed patch object ({}/{}; {}/{}, Kind={}): {errors}",
        meta("namespace"),
        meta("name"),
        resource.group,
        resource.version,
        resource.kind
    ))
}

pub(super) fn random_suffix() -> String {
    // kube-apiserver's generateName suffix: 5 characters, no vowels.
    pub(super) const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    use rand::Rng as _;
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// An object that names a resourceVersion may only replace that version.
pub(super) fn check_resource_version(
    resource: &ResourceType,
    object: &Value,
    stored: &Stored,
) -> Result<(), ApiError> {
    match object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) if rv != stored.resource_version.to_string() => Err(conflict(
            resource,
            object_name(object).as_deref().unwrap_or_default(),
        )),
        _ => Ok(()),
    }
}

pub(super) fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })
}

/// Decodes a server-side apply body as kube-apiserver's apply patcher does: leniently
/// (a key given twice keeps its last value), then, unless `fieldValidation=Ignore`, as
/// `yaml.UnmarshalStrict` would: a repeated key is a 400 under Strict (`error strict
/// decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 4: key
/// "a" already set in map`) and a `Warning` otherwise. Only the first repeated key is
/// named where Go's decoder lists every one. A body without one is parsed once.
fn decode_apply_body(request: &Request) -> Result<Value, ApiError> {
    let mut strict = serde_saphyr::Options::default();
    strict.with_snippet = false;
    let err = match serde_saphyr::from_slice_with_options::<Value>(&request.body, strict) {
        Ok(config) => return Ok(config),
        Err(err) => err,
    };
    let serde_saphyr::Error::DuplicateMappingKey { key, location } = err.without_snippet() else {
        // Worded as the sandbox has always worded it, with the YAML around the error.
        let text = match serde_saphyr::from_slice::<Value>(&request.body) {
            Err(with_snippet) => with_snippet.to_string(),
            Ok(_) => err.to_string(),
        };
        return Err(ApiError::BadRequest(format!("error decoding YAML: {text}")));
    };
    let repeated = format!(
        "line {}: key {} already set in map",
        location.line(),
        crate::validate::go_quote(key.as_deref().unwrap_or_default())
    );
    match field_validation(&request.query) {
        FieldValidation::Strict => {
            return Err(ApiError::BadRequest(format!(
                "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {repeated}"
            )));
        }
        FieldValidation::Warn => request.warnings.add(repeated),
        FieldValidation::Ignore => {}
    }
    let mut lenient = serde_saphyr::Options::default();
    lenient.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    serde_saphyr::from_slice_with_options(&request.body, lenient)
        .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))
}

/// Decodes a create or update body: JSON, or YAML when the client sends YAML.
pub(super) fn decode_body(request: &Request) -> Result<Value, ApiError> {
    if let Some(decoded) = request.take_decoded() {
        return Ok(decoded);
    }
    let content_type = request
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if content_type.contains("protobuf") || content_type.contains("cbor") {
        // Protobuf bodies of built-in kinds are decoded before the handlers (see
        // `sandbox::protobuf`); one that gets here is for a custom resource, which has no
        // protobuf form: 415, as kube-apiserver answers.
        return Err(ApiError::UnsupportedMediaType);
    }
    let value: Value = if content_type.contains("yaml") {
        serde_saphyr::from_slice(&request.body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?
    } else {
        parse_json(&request.body)?
    };
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "the request body must be an object".into(),
        ));
    }
    Ok(value)
}

/// Refuses an object of another kind or group version than the URL names, with the
/// message kube-apiserver gives.
pub(super) fn check_type(resource: &ResourceType, object: &Value) -> Result<(), ApiError> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind.is_empty() || api_version.is_empty() {
        // kubectl always sends both; the real server also fills in what the URL implies.
        return Ok(());
    }
    let wanted = resource.api_version();
    if kind != resource.kind || api_version != wanted {
        let internal_group = if resource.group.is_empty() {
            "core"
        } else {
            resource.group.split('.').next().unwrap_or_default()
        };
        return Err(ApiError::BadRequest(format!(
            "{kind} in version \"{}\" cannot be handled as a {}: converting ({}.{kind}) to ({internal_group}.{}): unknown conversion",
            api_version.rsplit('/').next().unwrap_or_default(),
            resource.kind,
            api_version.rsplit('/').next().unwrap_or_default(),
            resource.kind,
        )));
    }
    Ok(())
}
