//! Server-side printing: the `meta.k8s.io/v1` Table kube-apiserver answers a get, list
//! or watch with when the client asks for one (`Accept: application/json;as=Table;
//! v=v1;g=meta.k8s.io`), as `kubectl get` does. The columns and cells are those of
//! kube-apiserver's printers (`pkg/printers/internalversion/printers.go`) for the kinds
//! listed in [`columns_of`]; a custom resource gets its CRD's
//! `additionalPrinterColumns` (or Name and Age). A kind without a printer here is
//! answered in plain JSON, which kubectl's Accept header also allows, and kubectl then
//! prints names and ages itself.
//!
//! Cells are computed when the answer is written, as the real server computes them
//! (ages are relative to now). The column descriptions the real server sends are left
//! out but for Name's: kubectl prints none of them.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

use super::{Body, Reply};
use crate::conversion;
use crate::registry::{self, ResourceType};
use crate::status::ApiError;

mod cells;
mod columns;
#[cfg(test)]
mod tests;

use cells::builtin_cells;
use columns::columns_of;

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// What the row of each object carries (`includeObject`): its metadata by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Include {
    None,
    Metadata,
    Object,
}

/// A Table request: the client asked for one and how rows carry their objects.
pub(super) struct TableRequest {
    include: Include,
}

/// Whether the client asks for a Table first (before any plain JSON), and with what.
pub(super) fn requested(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Option<TableRequest> {
    let accept = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find(|t| !t.is_empty())?;
    let is_table = accept.contains("as=Table")
        && accept.contains("g=meta.k8s.io")
        && (accept.contains("v=v1;") || accept.ends_with("v=v1") || accept.contains("v=v1beta1"));
    if !is_table {
        return None;
    }
    let include = match query.get("includeObject").map(String::as_str) {
        Some("None") => Include::None,
        Some("Object") => Include::Object,
        _ => Include::Metadata,
    };
    Some(TableRequest { include })
}

/// One column: name, type, format and priority (0 shown always, 1 with `-o wide`).
type Column = (&'static str, &'static str, &'static str, u8);

/// Turns a get, list or watch answer into a Table, when a printer exists for the kind.
pub(super) fn convert(
    resource: &Arc<ResourceType>,
    printer_columns: Option<Value>,
    request: &TableRequest,
    reply: Reply,
) -> Result<Reply, ApiError> {
    let Some(printer) = Printer::of(resource, printer_columns) else {
        return Ok(reply);
    };
    let include = request.include;
    match reply {
        Reply::Raw(code, bytes, _) if code == StatusCode::OK => {
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::Internal(format!("cannot read a stored answer: {e}")))?;
            Ok(Reply::Json(code, printer.table(&value, include, true)))
        }
        Reply::Json(code, value) if code == StatusCode::OK => {
            Ok(Reply::Json(code, printer.table(&value, include, true)))
        }
        Reply::Stream(body, format) => {
            Ok(Reply::Stream(watch_tables(body, printer, include), format))
        }
        other => Ok(other),
    }
}

/// Each watch event's object as a one-row Table; only the first carries the column
/// definitions, as kube-apiserver saves the bandwidth (kubectl reuses the last ones).
fn watch_tables(body: Body, printer: Printer, include: Include) -> Body {
    let mut first = true;
    BodyExt::boxed(body.map_frame(move |frame| {
        frame.map_data(|line| {
            let Ok(mut event) = serde_json::from_slice::<Value>(&line) else {
                return line;
            };
            if !matches!(
                event["type"].as_str(),
                Some("ADDED" | "MODIFIED" | "DELETED")
            ) {
                return line;
            }
            let object = event["object"].take();
            event["object"] = printer.table(&object, include, first);
            first = false;
            let mut out = serde_json::to_vec(&event).unwrap_or_default();
            out.push(b'\n');
            Bytes::from(out)
        })
    }))
}

/// How one kind is printed.
#[derive(Clone)]
enum Printer {
    Builtin(Arc<ResourceType>, &'static [Column]),
    /// kube-apiserver's default convertor: Name and Created At.
    Default,
    /// A CRD's columns (`additionalPrinterColumns`, or Age).
    Custom(Vec<Value>),
}

impl Printer {
    fn of(resource: &Arc<ResourceType>, printer_columns: Option<Value>) -> Option<Printer> {
        if resource.custom {
            let columns = printer_columns
                .and_then(|c| c.as_array().cloned())
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| {
                    vec![json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})]
                });
            return Some(Printer::Custom(columns));
        }
        // A kind stored in another version prints as its stored form does (one
        // printer for the internal type).
        let group = registry::storage_group(&resource.group, &resource.plural);
        if let Some(columns) = columns_of(group, &resource.kind) {
            return Some(Printer::Builtin(resource.clone(), columns));
        }
        let default = matches!(
            (resource.group.as_str(), resource.kind.as_str()),
            ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
                | ("apiextensions.k8s.io", "CustomResourceDefinition")
                | ("", "LimitRange")
        );
        default.then_some(Printer::Default)
    }

    fn definitions(&self) -> Vec<Value> {
        let name = json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0});
        let mut definitions = vec![name];
        match self {
            Printer::Builtin(resource, columns) => {
                definitions.extend(columns.iter().map(|(name, kind, format, priority)| {
                    json!({"name": name, "type": kind, "format": format, "description": "", "priority": priority})
                }));
                if name_last(resource) {
                    let mut name = definitions.remove(0);
                    name["priority"] = 1.into();
                    definitions.push(name);
                }
            }
            Printer::Default => definitions.push(json!({"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0})),
            Printer::Custom(columns) => {
                definitions.extend(columns.iter().map(|c| {
                    json!({
                        "name": c["name"],
                        "type": c["type"],
                        "format": c.get("format").cloned().unwrap_or(json!("")),
                        "description": c.get("description").cloned().unwrap_or(json!("")),
                        "priority": c.get("priority").cloned().unwrap_or(json!(0)),
                    })
                }));
            }
        }
        definitions
    }

    fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let name = object
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(json!(""));
        let mut cells = vec![name];
        match self {
            Printer::Builtin(resource, _) if !conversion::served_as_stored(resource) => {
                let stored = conversion::to_storage(resource, object.clone());
                cells.extend(builtin_cells(resource, &stored, now));
                if name_last(resource) {
                    cells.rotate_left(1);
                }
            }
            Printer::Builtin(resource, _) => {
                cells.extend(builtin_cells(resource, object, now));
                if name_last(resource) {
                    cells.rotate_left(1);
                }
            }
            Printer::Default => cells.push(
                object
                    .pointer("/metadata/creationTimestamp")
                    .cloned()
                    .unwrap_or(Value::Null),
            ),
            Printer::Custom(columns) => {
                for column in columns {
                    let path = column["jsonPath"].as_str().unwrap_or_default();
                    let value = json_path(object, path);
                    cells.push(match (column["type"].as_str(), value) {
                        (Some("date"), Some(Value::String(t))) => age_since(Some(&t), now).into(),
                        (_, Some(value)) => value,
                        (_, None) => Value::Null,
                    });
                }
            }
        }
        cells
    }

    /// An object as a row carries it whole (`includeObject=Object`): with its kind and
    /// apiVersion, which items of a built-in list leave out, so that the client can
    /// decode it (kubectl's `--sort-by` reads it).
    fn whole(&self, object: &Value) -> Value {
        let Printer::Builtin(resource, _) = self else {
            return object.clone();
        };
        let mut whole = Map::new();
        whole.insert("kind".into(), resource.kind.clone().into());
        whole.insert("apiVersion".into(), resource.api_version().into());
        if let Some(fields) = object.as_object() {
            for (key, value) in fields {
                whole.insert(key.clone(), value.clone());
            }
        }
        Value::Object(whole)
    }

    /// The Table of a list (`items`) or of one object.
    fn table(&self, value: &Value, include: Include, with_definitions: bool) -> Value {
        let now = Utc::now();
        let is_list = value.get("items").is_some_and(Value::is_array);
        let objects: Vec<&Value> = if is_list {
            value["items"].as_array().into_iter().flatten().collect()
        } else {
            vec![value]
        };
        let rows: Vec<Value> = objects
            .into_iter()
            .map(|object| {
                let mut row = json!({"cells": self.cells(object, now)});
                match include {
                    Include::None => {}
                    Include::Metadata => {
                        row["object"] = json!({
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
                        });
                    }
                    Include::Object => row["object"] = self.whole(object),
                }
                row
            })
            .collect();
        let mut metadata = Map::new();
        let source = &value["metadata"];
        for field in ["resourceVersion", "continue", "remainingItemCount"] {
            if let Some(v) = source.get(field) {
                metadata.insert(field.into(), v.clone());
            }
        }
        let mut table =
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata});
        table["columnDefinitions"] = if with_definitions {
            Value::Array(self.definitions())
        } else {
            Value::Null
        };
        table["rows"] = Value::Array(rows);
        table
    }
}

/// An Event's table leads with when it was last seen; its name comes last, in wide
/// output only (`eventColumnDefinitions`).
fn name_last(resource: &ResourceType) -> bool {
    resource.kind == "Event" && resource.key().group.is_empty()
}

/// The columns after Name of the kinds printed here, as kube-apiserver's printers
/// declare them.
/// A printer column's JSONPath, in the subset CRDs use: fields (`.spec.size`), indexes
/// (`.status.conditions[0].type`) and equality filters
/// (`.status.conditions[?(@.type=="Ready")].message`).
fn json_path(object: &Value, path: &str) -> Option<Value> {
    let mut current = object;
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end > 0 {
                current = current.get(&after[..end])?;
            }
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
    Some(current.clone())
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` without one.
fn age_since(timestamp: Option<&str>, now: DateTime<Utc>) -> String {
    match timestamp.and_then(|t| DateTime::parse_from_rfc3339(t).ok()) {
        Some(time) => human_duration(now - time.with_timezone(&Utc)),
        None => "<unknown>".into(),
    }
}

/// `<whole><unit>`, followed by `<rest><rest_unit>` unless the rest is zero (`5m`, `5m30s`).
fn with_rest(whole: i64, unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{whole}{unit}")
    } else {
        format!("{whole}{unit}{rest}{rest_unit}")
    }
}

/// `duration.HumanDuration` of apimachinery: two significant units at most.
pub(super) fn human_duration(d: chrono::TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_rest(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_rest(hours, "h", minutes % 60, "m");
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
