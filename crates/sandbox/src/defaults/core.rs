//! Core kinds without pods: Namespaces, Secrets, LimitRanges, PersistentVolumeClaims.

use base64::Engine as _;
use serde_json::{Value, json};

use super::{Obj, array, canonicalize_quantities, child, ensure_obj, set_ptr, set_str, str_of};

pub(super) fn default_namespace(o: &mut Obj, old: Option<&Value>) {
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !name.is_empty()
        && let Some(meta) = ensure_obj(o, "metadata")
        && let Some(labels) = ensure_obj(meta, "labels")
    {
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    match old {
        // Finalizers only change through the /finalize subresource.
        Some(old) => {
            let kept = old.get("spec").and_then(|s| s.get("finalizers")).cloned();
            if let Some(spec) = ensure_obj(o, "spec") {
                match kept {
                    Some(f) => {
                        spec.insert("finalizers".into(), f);
                    }
                    None => {
                        spec.remove("finalizers");
                    }
                }
            }
        }
        None => {
            if let Some(spec) = ensure_obj(o, "spec") {
                let finalizers = spec
                    .entry("finalizers")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if finalizers.is_null() {
                    *finalizers = Value::Array(Vec::new());
                }
                if let Some(list) = finalizers.as_array_mut()
                    && !list.iter().any(|f| f == "kubernetes")
                {
                    list.push(json!("kubernetes"));
                }
            }
        }
    }
}

pub(super) fn default_secret(o: &mut Obj) {
    set_str(o, "type", "Opaque");
    // stringData is a write-only convenience: merged into data (its keys win), never
    // stored.
    if let Some(Value::Object(string_data)) = o.remove("stringData")
        && !string_data.is_empty()
        && let Some(data) = ensure_obj(o, "data")
    {
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(key, json!(encoded));
        }
    }
}

/// `SetDefaults_LimitRangeItem`: for containers, a missing default limit is the max,
/// a missing default request the default limit, else the min.
pub(super) fn default_limit_range(o: &mut Obj) {
    let Some(items) = child(o, "spec").and_then(|s| array(s, "limits")) else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        for key in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            canonicalize_quantities(item, key, false);
        }
        if str_of(item, "type") != "Container" {
            continue;
        }
        let max = item.get("max").and_then(Value::as_object).cloned();
        let min = item.get("min").and_then(Value::as_object).cloned();
        let Some(default) = ensure_obj(item, "default") else {
            continue;
        };
        for (k, v) in max.into_iter().flatten() {
            default.entry(k).or_insert(v);
        }
        let default = default.clone();
        let Some(request) = ensure_obj(item, "defaultRequest") else {
            continue;
        };
        for (k, v) in default.into_iter().chain(min.into_iter().flatten()) {
            request.entry(k).or_insert(v);
        }
    }
}

pub(super) fn default_pvc_spec(spec: &mut Obj) {
    set_ptr(spec, "volumeMode", json!("Filesystem"));
    if let Some(resources) = child(spec, "resources") {
        canonicalize_quantities(resources, "requests", true);
        canonicalize_quantities(resources, "limits", true);
    }
}
