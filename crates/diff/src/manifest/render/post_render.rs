//! Post-renderers (issue #26, Flux's `postRenderers[].kustomize`): a chart's output
//! patched before it is parsed and diffed, by tether's Kustomize renderer, not a
//! second patcher. Each post-renderer is a kustomization fragment (`patches` with
//! `target` selectors, strategic merge or JSON 6902; `images`; `commonLabels`;
//! `labels`) built over the chart's output in a private folder, in order. A patch
//! whose exact target selects nothing the chart rendered is an error naming the
//! patch and the target, where Kustomize would silently patch nothing.

use std::fs;

use serde_json::{Map, Value};

use super::super::error::{Location, ManifestError};
use super::super::yaml::read_documents;
use super::Renderers;
use super::redact::KnownSecrets;

/// Characters that make a Kustomize selector a regular expression (its fields are
/// anchored regular expressions).
const REGEX_SYNTAX: &str = "^$*+?()[]{}|\\";

/// The chart's output inside the post-renderer's folder.
const RENDERED_FILE: &str = "rendered.yaml";

/// The target fields compared with the rendered objects here; selectors by label or
/// annotation, and names written as regular expressions, are left to Kustomize.
const EXACT_FIELDS: [&str; 5] = ["group", "version", "kind", "name", "namespace"];

/// The chart's output `bytes` after every post-renderer of `renderers`, in order;
/// `bytes` unchanged without any. `at` names the chart.
pub(super) fn apply(
    mut bytes: Vec<u8>,
    renderers: &Renderers,
    at: &Location,
) -> Result<Vec<u8>, ManifestError> {
    for (i, fragment) in renderers.post_renderers.iter().enumerate() {
        let place = format!("postRenderers[{i}].kustomize");
        check_targets(&bytes, fragment, &place, at)?;
        let built = build(&bytes, fragment, renderers, at);
        bytes = built.map_err(|err| {
            let known = KnownSecrets::from_files([("rendered.yaml", bytes.as_slice())], &[])
                .with(renderers.helm.secret_values());
            match known.mask_error(err) {
                ManifestError::Kustomize { at, message } => ManifestError::PostRender {
                    at,
                    place: place.clone(),
                    message: format!("kustomize build failed: {message}"),
                },
                other => other,
            }
        })?;
    }
    Ok(bytes)
}

/// Builds one post-renderer over `bytes` in a private folder, removed afterwards.
fn build(
    bytes: &[u8],
    fragment: &Value,
    renderers: &Renderers,
    at: &Location,
) -> Result<Vec<u8>, ManifestError> {
    let io = |source| ManifestError::Io {
        at: at.clone(),
        source,
    };
    let tmp = tempfile::Builder::new()
        .prefix("tether-post-render-")
        .tempdir()
        .map_err(io)?;
    let mut kustomization = fragment.as_object().cloned().unwrap_or_default();
    kustomization.insert("resources".into(), Value::from(vec![RENDERED_FILE]));
    fs::write(tmp.path().join(RENDERED_FILE), bytes).map_err(io)?;
    fs::write(
        tmp.path().join("kustomization.yaml"),
        Value::Object(kustomization).to_string(),
    )
    .map_err(io)?;
    let out = renderers.kustomize.build(tmp.path(), renderers.timeout, at);
    drop(tmp);
    out
}

/// Refuses a patch whose target, by exact group, version, kind, name and namespace,
/// selects none of the objects in `bytes`.
fn check_targets(
    bytes: &[u8],
    fragment: &Value,
    place: &str,
    at: &Location,
) -> Result<(), ManifestError> {
    let patches = fragment.get("patches").and_then(Value::as_array);
    let mut objects = Vec::new();
    read_documents(RENDERED_FILE, bytes, false, &mut objects, &mut Vec::new());
    for (j, patch) in patches.into_iter().flatten().enumerate() {
        let Some(target) = patch.get("target").and_then(Value::as_object) else {
            continue;
        };
        if !is_exact(target) {
            continue;
        }
        if !objects.iter().any(|(object, _)| selects(target, object)) {
            return Err(ManifestError::PostRender {
                at: at.clone(),
                place: format!("{place}.patches[{j}]"),
                message: format!(
                    "target {} selects no object the chart rendered",
                    Value::Object(target.clone())
                ),
            });
        }
    }
    Ok(())
}

/// Whether a target names objects only by the fields compared here, literally.
fn is_exact(target: &Map<String, Value>) -> bool {
    target.iter().all(|(field, value)| {
        EXACT_FIELDS.contains(&field.as_str())
            && value
                .as_str()
                // A `.` matches itself too: a name with dots is still literal.
                .is_some_and(|v| !v.contains(|c: char| REGEX_SYNTAX.contains(c)))
    })
}

/// Whether `target` selects `object` (fields it does not set select anything).
fn selects(target: &Map<String, Value>, object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    target.iter().all(|(field, want)| {
        let have = match field.as_str() {
            "group" => group,
            "version" => version,
            "kind" => object["kind"].as_str().unwrap_or_default(),
            "name" => object["metadata"]["name"].as_str().unwrap_or_default(),
            "namespace" => object["metadata"]["namespace"].as_str().unwrap_or_default(),
            _ => return true,
        };
        want.as_str() == Some(have)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_target_is_matched_by_group_version_kind_name_and_namespace() {
        let deployment = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
        });
        let target = |t: Value| t.as_object().cloned().expect("a mapping");
        for (t, want) in [
            (serde_json::json!({"kind": "Deployment"}), true),
            (
                serde_json::json!({"group": "apps", "version": "v1", "name": "web"}),
                true,
            ),
            (
                serde_json::json!({"kind": "Deployment", "name": "api"}),
                false,
            ),
            (serde_json::json!({"namespace": "other"}), false),
            (serde_json::json!({"group": ""}), false),
        ] {
            assert!(is_exact(&target(t.clone())), "{t}");
            assert_eq!(selects(&target(t.clone()), &deployment), want, "{t}");
        }
        for t in [
            serde_json::json!({"name": "web-.*"}),
            serde_json::json!({"labelSelector": "app=web"}),
        ] {
            assert!(!is_exact(&target(t.clone())), "{t}");
        }
    }
}
