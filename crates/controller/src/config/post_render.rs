//! `source.helm.postRenderers` (issue #26): Flux's `postRenderers[].kustomize`, the
//! Kustomize `patches` (strategic merge or JSON 6902, with `target` selectors),
//! `images`, `commonLabels` and `labels` applied to a chart's output before it is
//! diffed. Checked here (each patch parses; a JSON 6902 patch has a target); turned
//! into the kustomization fragments the render stage builds with tether's Kustomize
//! renderer (`tether_diff::manifest::Renderers::post_renderers`).

use serde_json::{Map, Value};

use super::check::{Checker, line_of};
use super::raw::{RawImage, RawPatch, RawPostRenderer, S};

/// Checks `postRenderers` at `path`, reporting every problem; one kustomization
/// fragment per post-renderer.
pub(super) fn resolve_post_renderers(
    raw: &[S<RawPostRenderer>],
    path: &str,
    check: &mut Checker,
) -> Vec<Value> {
    raw.iter()
        .enumerate()
        .map(|(i, renderer)| {
            let place = format!("{path}[{i}].kustomize");
            let k = &renderer.value.kustomize.value;
            let mut out = Map::new();
            let patches: Vec<Value> = k
                .patches
                .iter()
                .enumerate()
                .map(|(j, p)| patch(&p.value, &format!("{place}.patches[{j}]"), check))
                .collect();
            let images: Vec<Value> = k
                .images
                .iter()
                .enumerate()
                .map(|(j, img)| image(&img.value, &format!("{place}.images[{j}]"), check))
                .collect();
            if !patches.is_empty() {
                out.insert("patches".into(), patches.into());
            }
            if !images.is_empty() {
                out.insert("images".into(), images.into());
            }
            if !k.common_labels.is_empty() {
                out.insert("commonLabels".into(), serde_json::json!(k.common_labels));
            }
            if !k.labels.is_empty() {
                // Kustomize's `labels` without selectors: a chart's selectors are
                // immutable once applied.
                out.insert("labels".into(), serde_json::json!([{"pairs": k.labels}]));
            }
            Value::Object(out)
        })
        .collect()
}

/// One patch as Kustomize takes it; a patch that does not parse, or a JSON 6902
/// patch (a list of operations) without a target, is reported. A flow-style JSON
/// 6902 patch (`[{op: add, …}]`) is passed on as JSON, which Kustomize reads such
/// text as (YAML 1.2's booleans only, as Kustomize's parser has them); any other
/// patch as written.
fn patch(raw: &RawPatch, place: &str, check: &mut Checker) -> Value {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.strict_booleans = true;
    let mut text = raw.patch.value.clone();
    let flow = text.trim_start().starts_with('[');
    match serde_saphyr::from_str_with_options::<Value>(&raw.patch.value, options) {
        Ok(Value::Object(_)) => {}
        Ok(ops @ Value::Array(_)) if raw.target.is_some() => {
            if flow {
                text = ops.to_string();
            }
        }
        Ok(Value::Array(_)) => check.report(
            format!("{place}.target"),
            line_of(&raw.patch),
            "a JSON 6902 patch (a list of operations) needs a target",
        ),
        Ok(_) => check.report(
            format!("{place}.patch"),
            line_of(&raw.patch),
            "must be a strategic merge patch (a mapping) or a JSON 6902 patch (a list)",
        ),
        Err(e) => check.report(
            format!("{place}.patch"),
            line_of(&raw.patch),
            format!("is not YAML: {e}"),
        ),
    }
    let mut out = Map::from_iter([("patch".to_string(), Value::from(text))]);
    if let Some(target) = &raw.target {
        let t = &target.value;
        let fields = [
            ("group", &t.group),
            ("version", &t.version),
            ("kind", &t.kind),
            ("name", &t.name),
            ("namespace", &t.namespace),
            ("labelSelector", &t.label_selector),
            ("annotationSelector", &t.annotation_selector),
        ];
        let selector: Map<String, Value> = fields
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), Value::from(v.clone()?))))
            .collect();
        if selector.is_empty() {
            check.report(
                format!("{place}.target"),
                line_of(target),
                "selects everything: name a kind, a name or a selector",
            );
        }
        out.insert("target".into(), Value::Object(selector));
    }
    Value::Object(out)
}

/// One image override as Kustomize takes it.
fn image(raw: &RawImage, place: &str, check: &mut Checker) -> Value {
    check.non_empty(&format!("{place}.name"), &raw.name);
    if raw.new_name.is_none() && raw.new_tag.is_none() && raw.digest.is_none() {
        check.report(
            place.to_string(),
            line_of(&raw.name),
            "changes nothing: set newName, newTag or digest",
        );
    }
    if let Some(digest) = &raw.digest
        && !digest.starts_with("sha256:")
    {
        check.report(
            format!("{place}.digest"),
            line_of(&raw.name),
            format!("{digest:?} is not a sha256:<hex> digest"),
        );
    }
    let fields = [
        ("newName", &raw.new_name),
        ("newTag", &raw.new_tag),
        ("digest", &raw.digest),
    ];
    let mut out = Map::from_iter([("name".to_string(), Value::from(raw.name.value.clone()))]);
    out.extend(
        fields
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), Value::from(v.clone()?)))),
    );
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const APP: &str = "apps:\n- name: a\n  source:\n    repo: r\n    helm:\n      postRenderers:\n      - kustomize:\n";

    #[test]
    fn post_renderers_become_kustomization_fragments() {
        let text = format!(
            "{APP}          patches:\n          - patch: '[{{op: add, path: /data/x, value: y}}]'\n            target: {{kind: ConfigMap, name: web}}\n          images:\n          - {{name: nginx, newTag: '1.27'}}\n          labels: {{team: shop}}\n"
        );
        let config = Config::parse(&text, "t").expect("valid");
        assert_eq!(
            config.apps[0].source.helm.post_renderers,
            [serde_json::json!({
                "patches": [{"patch": r#"[{"op":"add","path":"/data/x","value":"y"}]"#,
                             "target": {"kind": "ConfigMap", "name": "web"}}],
                "images": [{"name": "nginx", "newTag": "1.27"}],
                "labels": [{"pairs": {"team": "shop"}}],
            })]
        );
        assert_eq!(
            config.apps[0].renderers().post_renderers,
            config.apps[0].source.helm.post_renderers
        );
    }

    #[test]
    fn a_bad_post_renderer_is_named_by_its_field() {
        let text = format!(
            "{APP}          patches:\n          - patch: '- {{op: remove, path: /x}}'\n          - patch: 'a: [unclosed'\n          - patch: x\n            target: {{}}\n          images:\n          - {{name: nginx}}\n          - {{name: redis, digest: md5}}\n"
        );
        let err = Config::parse(&text, "t").unwrap_err().to_string();
        let at = "apps[0].source.helm.postRenderers[0].kustomize";
        for want in [
            format!("{at}.patches[0].target"),
            format!("{at}.patches[1].patch"),
            format!("{at}.patches[2].patch"),
            format!("{at}.patches[2].target"),
            format!("{at}.images[0]"),
            format!("{at}.images[1].digest"),
        ] {
            assert!(err.contains(&want), "{want}: {err}");
        }
    }
}
