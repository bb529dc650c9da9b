//! Table answers (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, what `kubectl
//! get` asks for) for custom resources, as apiextensions-apiserver's table convertor
//! builds them: a Name column, then the CRD's `additionalPrinterColumns` (or Age when it
//! declares none), each cell read with the column's simple JSONPath.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use http::HeaderMap;
use serde_json::{Value, json};

use super::{Reply, State, Target};
use crate::sandbox::status::ApiError;

/// Whether the client asks for a Table (kubectl sends JSON as its fallback after it).
pub(super) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|accept| {
            accept
                .split(',')
                .next()
                .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
        })
}

impl State {
    /// The Table of one custom resource or of a list of them.
    pub(super) fn table(
        &self,
        target: &Target,
        query: &HashMap<String, String>,
    ) -> Result<Reply, ApiError> {
        let resource = &target.resource;
        let (objects, resource_version) = match &target.name {
            Some(_) => {
                let object = self.stored(target)?.value();
                let rv = object
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null);
                (vec![object], rv)
            }
            None => {
                let bytes = match self.list(target, query)? {
                    Reply::Raw(_, bytes, _) => bytes,
                    Reply::Json(_, value) => serde_json::to_vec(&value).unwrap_or_default().into(),
                    // A list is never streamed; should it be, the table is empty.
                    Reply::Stream(..) => bytes::Bytes::new(),
                };
                let list: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let items = list["items"].as_array().cloned().unwrap_or_default();
                (items, list["metadata"]["resourceVersion"].clone())
            }
        };
        let mut columns =
            self.registry()
                .custom_columns(&resource.group, &resource.version, &resource.kind);
        if columns.is_empty() {
            columns.push(
                json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
            );
        }
        let mut definitions = vec![json!({
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
            "priority": 0,
        })];
        for column in &columns {
            let path = column["jsonPath"].as_str().unwrap_or_default();
            definitions.push(json!({
                "name": column["name"],
                "type": column["type"],
                "format": column.get("format").cloned().unwrap_or_else(|| "".into()),
                "description": column.get("description").cloned().unwrap_or_else(|| {
                    format!("Custom resource definition column (in JSONPath format): {path}").into()
                }),
                "priority": column.get("priority").cloned().unwrap_or_else(|| 0.into()),
            }));
        }
        let now = Utc::now();
        let rows: Vec<Value> = objects
            .iter()
            .map(|object| {
                let mut cells = vec![object["metadata"]["name"].clone()];
                for column in &columns {
                    let path = column["jsonPath"].as_str().unwrap_or_default();
                    let kind = column["type"].as_str().unwrap_or("string");
                    cells.push(cell(kind, simple_json_path(object, path), now));
                }
                let mut metadata = object["metadata"].clone();
                if let Some(m) = metadata.as_object_mut() {
                    m.remove("managedFields");
                }
                json!({
                    "cells": cells,
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": metadata,
                    },
                })
            })
            .collect();
        Ok(Reply::ok(json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": definitions,
            "rows": rows,
        })))
    }
}

/// A cell as the convertor writes it: strings printed, dates as an age, other types
/// as the JSON value; nothing found is null (kubectl prints `<none>`).
fn cell(kind: &str, value: Option<&Value>, now: DateTime<Utc>) -> Value {
    let Some(value) = value else {
        return Value::Null;
    };
    match (kind, value) {
        ("string", Value::String(_)) => value.clone(),
        ("string", other) => other.to_string().into(),
        ("date", Value::String(text)) => match DateTime::parse_from_rfc3339(text) {
            Ok(at) => human_duration(now.signed_duration_since(at.with_timezone(&Utc))).into(),
            Err(_) => "<invalid>".into(),
        },
        _ => value.clone(),
    }
}

/// The simple JSONPath printer columns allow: `.a.b`, `.a[0]` and one filter
/// `.a[?(@.k=="v")]` per step, the first match taken.
fn simple_json_path<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    let mut current = object;
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get(&after[..end])?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inside = &after[..end];
            rest = &after[end + 1..];
            if let Some(filter) = inside
                .strip_prefix("?(@.")
                .and_then(|f| f.strip_suffix(')'))
            {
                let (key, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(['"', '\'']);
                current = current
                    .as_array()?
                    .iter()
                    .find(|item| item.get(key.trim()).and_then(Value::as_str) == Some(want))?;
            } else {
                current = current.get(inside.parse::<usize>().ok()?)?;
            }
        } else {
            return None;
        }
    }
    Some(current)
}

/// Kubernetes' `duration.HumanDuration`: the age column's spelling.
fn human_duration(d: chrono::TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_of_printer_columns_read_fields_indexes_and_filters() {
        let object = json!({"status": {"sync": "Synced", "conditions": [
            {"type": "Healthy", "message": "h"}, {"type": "Ready", "message": "all good"}]}});
        assert_eq!(
            simple_json_path(&object, ".status.sync"),
            Some(&json!("Synced"))
        );
        assert_eq!(
            simple_json_path(&object, r#".status.conditions[?(@.type=="Ready")].message"#),
            Some(&json!("all good"))
        );
        assert_eq!(
            simple_json_path(&object, ".status.conditions[0].type"),
            Some(&json!("Healthy"))
        );
        assert_eq!(simple_json_path(&object, ".status.health"), None);
        assert_eq!(
            simple_json_path(&object, r#".status.conditions[?(@.type=="X")].message"#),
            None
        );
    }

    #[test]
    fn ages_are_spelled_as_kubectl_spells_them() {
        let age = |s: i64| human_duration(chrono::TimeDelta::seconds(s));
        assert_eq!(age(5), "5s");
        assert_eq!(age(150), "2m30s");
        assert_eq!(age(600), "10m");
        assert_eq!(age(4 * 3600 + 120), "4h2m");
        assert_eq!(age(3 * 86400), "3d");
        assert_eq!(age(-5), "<invalid>");
        assert_eq!(
            cell("date", Some(&json!("bad")), Utc::now()),
            json!("<invalid>")
        );
        assert_eq!(cell("integer", Some(&json!(3)), Utc::now()), json!(3));
        assert_eq!(cell("string", None, Utc::now()), Value::Null);
    }
}
