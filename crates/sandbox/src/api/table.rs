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
fn columns_of(group: &str, kind: &str) -> Option<&'static [Column]> {
    const AGE: Column = ("Age", "string", "", 0);
    Some(match (group, kind) {
        ("apps", "Deployment") => &[
            ("Ready", "string", "", 0),
            ("Up-to-date", "integer", "", 0),
            ("Available", "integer", "", 0),
            AGE,
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
            ("Selector", "string", "", 1),
        ],
        ("apps", "ReplicaSet") => &[
            ("Desired", "integer", "", 0),
            ("Current", "integer", "", 0),
            ("Ready", "integer", "", 0),
            AGE,
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
            ("Selector", "string", "", 1),
        ],
        ("apps", "StatefulSet") => &[
            ("Ready", "string", "", 0),
            AGE,
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
        ],
        ("apps", "DaemonSet") => &[
            ("Desired", "integer", "", 0),
            ("Current", "integer", "", 0),
            ("Ready", "integer", "", 0),
            ("Up-to-date", "integer", "", 0),
            ("Available", "integer", "", 0),
            ("Node Selector", "string", "", 0),
            AGE,
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
            ("Selector", "string", "", 1),
        ],
        ("", "Pod") => &[
            ("Ready", "string", "", 0),
            ("Status", "string", "", 0),
            ("Restarts", "string", "", 0),
            AGE,
            ("IP", "string", "", 1),
            ("Node", "string", "", 1),
            ("Nominated Node", "string", "", 1),
            ("Readiness Gates", "string", "", 1),
        ],
        ("", "Service") => &[
            ("Type", "string", "", 0),
            ("Cluster-IP", "string", "", 0),
            ("External-IP", "string", "", 0),
            ("Port(s)", "string", "", 0),
            AGE,
            ("Selector", "string", "", 1),
        ],
        ("", "ConfigMap") => &[("Data", "integer", "", 0), AGE],
        ("", "Secret") => &[("Type", "string", "", 0), ("Data", "integer", "", 0), AGE],
        ("", "Namespace") => &[("Status", "string", "", 0), AGE],
        ("", "ServiceAccount") => &[("Secrets", "integer", "", 0), AGE],
        ("", "Event") => &[
            ("Last Seen", "string", "", 0),
            ("Type", "string", "", 0),
            ("Reason", "string", "", 0),
            ("Object", "string", "", 0),
            ("Subobject", "string", "", 1),
            ("Source", "string", "", 1),
            ("Message", "string", "", 0),
            ("First Seen", "string", "", 1),
            ("Count", "string", "", 1),
        ],
        ("batch", "Job") => &[
            ("Status", "string", "", 0),
            ("Completions", "string", "", 0),
            ("Duration", "string", "", 0),
            AGE,
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
            ("Selector", "string", "", 1),
        ],
        ("batch", "CronJob") => &[
            ("Schedule", "string", "", 0),
            ("Timezone", "string", "", 0),
            ("Suspend", "boolean", "", 0),
            ("Active", "integer", "", 0),
            ("Last Schedule", "string", "", 0),
            AGE,
            ("Containers", "string", "", 1),
            ("Images", "string", "", 1),
            ("Selector", "string", "", 1),
        ],
        ("networking.k8s.io", "Ingress") => &[
            ("Class", "string", "", 0),
            ("Hosts", "string", "", 0),
            ("Address", "string", "", 0),
            ("Ports", "string", "", 0),
            AGE,
        ],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => &[
            ("Role", "string", "", 0),
            AGE,
            ("Users", "string", "", 1),
            ("Groups", "string", "", 1),
            ("ServiceAccounts", "string", "", 1),
        ],
        ("policy", "PodDisruptionBudget") => &[
            ("Min Available", "string", "", 0),
            ("Max Unavailable", "string", "", 0),
            ("Allowed Disruptions", "integer", "", 0),
            AGE,
        ],
        ("", "PersistentVolumeClaim") => &[
            ("Status", "string", "", 0),
            ("Volume", "string", "", 0),
            ("Capacity", "string", "", 0),
            ("Access Modes", "string", "", 0),
            ("StorageClass", "string", "", 0),
            ("VolumeAttributesClass", "string", "", 0),
            AGE,
            ("VolumeMode", "string", "", 1),
        ],
        ("coordination.k8s.io", "Lease") => &[("Holder", "string", "", 0), AGE],
        ("autoscaling", "HorizontalPodAutoscaler") => &[
            ("Reference", "string", "", 0),
            ("Targets", "string", "", 0),
            ("MinPods", "string", "", 0),
            ("MaxPods", "string", "", 0),
            ("Replicas", "string", "", 0),
            AGE,
        ],
        _ => return None,
    })
}

/// The cells after Name, in [`columns_of`]'s order.
fn builtin_cells(resource: &ResourceType, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let int = |path: &str| o.pointer(path).and_then(Value::as_i64).unwrap_or(0);
    let text = |path: &str| o.pointer(path).and_then(Value::as_str).unwrap_or_default();
    let or_none = |s: String| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s
        }
    };
    let age = age_since(
        o.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now,
    );
    let template = |prefix: &str| {
        let containers = o
            .pointer(&format!("{prefix}/containers"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let join = |field: &str| {
            containers
                .iter()
                .filter_map(|c| c[field].as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        (join("name"), join("image"))
    };
    let group = registry::storage_group(&resource.group, &resource.plural);
    match (group, resource.kind.as_str()) {
        ("apps", "Deployment") => {
            let (containers, images) = template("/spec/template/spec");
            vec![
                format!("{}/{}", int("/status/readyReplicas"), int("/spec/replicas")).into(),
                int("/status/updatedReplicas").into(),
                int("/status/availableReplicas").into(),
                age.into(),
                containers.into(),
                images.into(),
                selector_text(o.pointer("/spec/selector")).into(),
            ]
        }
        ("apps", "ReplicaSet") => {
            let (containers, images) = template("/spec/template/spec");
            vec![
                int("/spec/replicas").into(),
                int("/status/replicas").into(),
                int("/status/readyReplicas").into(),
                age.into(),
                containers.into(),
                images.into(),
                selector_text(o.pointer("/spec/selector")).into(),
            ]
        }
        ("apps", "StatefulSet") => {
            let (containers, images) = template("/spec/template/spec");
            vec![
                format!("{}/{}", int("/status/readyReplicas"), int("/spec/replicas")).into(),
                age.into(),
                containers.into(),
                images.into(),
            ]
        }
        ("apps", "DaemonSet") => {
            let (containers, images) = template("/spec/template/spec");
            let node_selector = o
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(labels_text)
                .unwrap_or_default();
            vec![
                int("/status/desiredNumberScheduled").into(),
                int("/status/currentNumberScheduled").into(),
                int("/status/numberReady").into(),
                int("/status/updatedNumberScheduled").into(),
                int("/status/numberAvailable").into(),
                or_none(node_selector).into(),
                age.into(),
                containers.into(),
                images.into(),
                selector_text(o.pointer("/spec/selector")).into(),
            ]
        }
        ("", "Pod") => {
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = statuses.iter().filter(|s| s["ready"] == true).count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|s| s["restartCount"].as_i64())
                .sum();
            let status = if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                let reason = text("/status/reason");
                if reason.is_empty() {
                    text("/status/phase").to_string()
                } else {
                    reason.to_string()
                }
            };
            vec![
                format!("{ready}/{total}").into(),
                status.into(),
                restarts.to_string().into(),
                age.into(),
                or_none(text("/status/podIP").to_string()).into(),
                or_none(text("/spec/nodeName").to_string()).into(),
                or_none(text("/status/nominatedNodeName").to_string()).into(),
                "<none>".into(),
            ]
        }
        ("", "Service") => vec![
            text("/spec/type").into(),
            or_none(text("/spec/clusterIP").to_string()).into(),
            service_external_ip(o).into(),
            service_ports(o).into(),
            age.into(),
            o.pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(labels_text)
                .map(or_none)
                .unwrap_or_else(|| "<none>".into())
                .into(),
        ],
        ("", "ConfigMap") => {
            let count = |field: &str| {
                o.get(field)
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len())
            };
            vec![(count("data") + count("binaryData")).into(), age.into()]
        }
        ("", "Secret") => vec![
            text("/type").into(),
            o.get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
                .into(),
            age.into(),
        ],
        ("", "Namespace") => vec![text("/status/phase").into(), age.into()],
        ("", "ServiceAccount") => vec![
            o.get("secrets")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
                .into(),
            age.into(),
        ],
        ("", "Event") => event_cells(o, now),
        ("batch", "Job") => job_cells(o, now, age),
        ("batch", "CronJob") => {
            let (containers, images) = template("/spec/jobTemplate/spec/template/spec");
            let last = o
                .pointer("/status/lastScheduleTime")
                .and_then(Value::as_str)
                .map(|t| age_since(Some(t), now))
                .unwrap_or_else(|| "<none>".into());
            vec![
                text("/spec/schedule").into(),
                or_none(text("/spec/timeZone").to_string()).into(),
                // `printBoolPtr`: a word, not a JSON boolean.
                match o.pointer("/spec/suspend").and_then(Value::as_bool) {
                    Some(true) => "True",
                    Some(false) => "False",
                    None => "<unset>",
                }
                .into(),
                o.pointer("/status/active")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
                    .into(),
                last.into(),
                age.into(),
                containers.into(),
                images.into(),
                selector_text(o.pointer("/spec/jobTemplate/spec/selector")).into(),
            ]
        }
        ("networking.k8s.io", "Ingress") => ingress_cells(o, age),
        ("rbac.authorization.k8s.io", _) => {
            let subjects = o
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let of_kind = |kind: &str| {
                subjects
                    .iter()
                    .filter(|s| s["kind"] == kind)
                    .map(|s| match (kind, s["namespace"].as_str()) {
                        ("ServiceAccount", Some(ns)) => {
                            format!("{ns}/{}", s["name"].as_str().unwrap_or_default())
                        }
                        _ => s["name"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                format!("{}/{}", text("/roleRef/kind"), text("/roleRef/name")).into(),
                age.into(),
                of_kind("User").into(),
                of_kind("Group").into(),
                of_kind("ServiceAccount").into(),
            ]
        }
        ("policy", "PodDisruptionBudget") => {
            let int_or_string = |path: &str| match o.pointer(path) {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => "N/A".to_string(),
            };
            vec![
                int_or_string("/spec/minAvailable").into(),
                int_or_string("/spec/maxUnavailable").into(),
                int("/status/disruptionsAllowed").into(),
                age.into(),
            ]
        }
        ("", "PersistentVolumeClaim") => {
            let modes = o
                .pointer("/status/accessModes")
                .and_then(Value::as_array)
                .map(|modes| {
                    modes
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|m| match m {
                            "ReadWriteOnce" => "RWO",
                            "ReadOnlyMany" => "ROX",
                            "ReadWriteMany" => "RWX",
                            "ReadWriteOncePod" => "RWOP",
                            other => other,
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let class = o
                .pointer("/spec/storageClassName")
                .and_then(Value::as_str)
                .unwrap_or("<unset>");
            vec![
                text("/status/phase").into(),
                text("/spec/volumeName").into(),
                text("/status/capacity/storage").into(),
                modes.into(),
                class.into(),
                o.pointer("/spec/volumeAttributesClassName")
                    .and_then(Value::as_str)
                    .unwrap_or("<unset>")
                    .into(),
                age.into(),
                text("/spec/volumeMode").into(),
            ]
        }
        ("coordination.k8s.io", "Lease") => vec![
            or_none(text("/spec/holderIdentity").to_string()).into(),
            age.into(),
        ],
        ("autoscaling", "HorizontalPodAutoscaler") => vec![
            format!(
                "{}/{}",
                text("/spec/scaleTargetRef/kind"),
                text("/spec/scaleTargetRef/name")
            )
            .into(),
            hpa_targets(o).into(),
            o.pointer("/spec/minReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .into(),
            int("/spec/maxReplicas").into(),
            int("/status/currentReplicas").into(),
            age.into(),
        ],
        _ => vec![age.into()],
    }
}

/// `formatHPAMetrics`: each metric's current value (`<unknown>` until measured) over
/// its target, two at most.
fn hpa_targets(o: &Value) -> String {
    let specs = o
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = o
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let quantity = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let kind = spec["type"].as_str().unwrap_or_default();
            // The spec's and the status's field for the metric's source.
            let key = match kind {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                "External" => "external",
                _ => return "<unknown type>".to_string(),
            };
            let source = &spec[key];
            let target = &source["target"];
            let status = statuses.get(i).map(|s| s[key]["current"].clone());
            let current = |field: &str| {
                quantity(status.as_ref().and_then(|s| s.get(field)))
                    .unwrap_or_else(|| "<unknown>".into())
            };
            match kind {
                "Resource" | "ContainerResource" => {
                    let name = source["name"].as_str().unwrap_or_default();
                    match quantity(target.get("averageValue")) {
                        Some(average) => format!("{name}: {}/{average}", current("averageValue")),
                        None => {
                            let now = status
                                .as_ref()
                                .and_then(|s| s["averageUtilization"].as_i64())
                                .map(|u| format!("{u}%"))
                                .unwrap_or_else(|| "<unknown>".into());
                            let wanted = target["averageUtilization"]
                                .as_i64()
                                .map(|u| format!("{u}%"))
                                .unwrap_or_else(|| "<auto>".into());
                            format!("{name}: {now}/{wanted}")
                        }
                    }
                }
                "Pods" => format!(
                    "{}/{}",
                    current("averageValue"),
                    quantity(target.get("averageValue")).unwrap_or_default()
                ),
                _ => match quantity(target.get("value")) {
                    Some(value) => format!("{}/{value}", current("value")),
                    None => format!(
                        "{}/{} (avg)",
                        current("averageValue"),
                        quantity(target.get("averageValue")).unwrap_or_default()
                    ),
                },
            }
        })
        .collect();
    const SHOWN: usize = 2;
    if list.len() > SHOWN {
        format!(
            "{} + {} more...",
            list[..SHOWN].join(", "),
            list.len() - SHOWN
        )
    } else {
        list.join(", ")
    }
}

/// `printEvent`: when it was last seen, its type and reason, `kind/name` of its object,
/// the message; in wide output also where from, when first seen and how often.
fn event_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let text = |path: &str| o.pointer(path).and_then(Value::as_str).unwrap_or_default();
    let first_time = o
        .pointer("/firstTimestamp")
        .and_then(Value::as_str)
        .or_else(|| o.pointer("/eventTime").and_then(Value::as_str));
    let last_time = o
        .pointer("/lastTimestamp")
        .and_then(Value::as_str)
        .or(first_time);
    let first = age_since(first_time, now);
    let count = o
        .get("count")
        .and_then(Value::as_i64)
        .filter(|c| *c > 0)
        .unwrap_or(1);
    let last = age_since(last_time, now);
    let mut source = text("/source/component").to_string();
    if source.is_empty() {
        source = text("/reportingComponent").to_string();
    }
    let host = text("/source/host");
    if !host.is_empty() {
        source = format!("{source}, {host}");
    }
    vec![
        last.into(),
        text("/type").into(),
        text("/reason").into(),
        format!(
            "{}/{}",
            text("/involvedObject/kind").to_lowercase(),
            text("/involvedObject/name")
        )
        .into(),
        text("/involvedObject/fieldPath").into(),
        source.into(),
        text("/message").trim().into(),
        first.into(),
        count.into(),
    ]
}

/// `printJob`: its state from the conditions, succeeded of completions, how long it
/// ran.
fn job_cells(o: &Value, now: DateTime<Utc>, age: String) -> Vec<Value> {
    let condition = |kind: &str| {
        o.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
    };
    let status = if condition("Complete") {
        "Complete"
    } else if condition("Failed") {
        "Failed"
    } else if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if condition("FailureTarget") {
        "FailureTarget"
    } else if condition("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if condition("Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    let succeeded = o
        .pointer("/status/succeeded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => {
            let parallelism = o
                .pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let time = |path: &str| {
        o.pointer(path)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let duration = match (time("/status/startTime"), time("/status/completionTime")) {
        (Some(start), Some(end)) => human_duration(end - start),
        (Some(start), None) => human_duration(now - start),
        _ => String::new(),
    };
    let containers = o
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let join = |field: &str| {
        containers
            .iter()
            .filter_map(|c| c[field].as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    vec![
        status.into(),
        completions.into(),
        duration.into(),
        age.into(),
        join("name").into(),
        join("image").into(),
        selector_text(o.pointer("/spec/selector")).into(),
    ]
}

fn ingress_cells(o: &Value, age: String) -> Vec<Value> {
    let class = o
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let hosts: Vec<&str> = o
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().filter_map(|r| r["host"].as_str()).collect())
        .unwrap_or_default();
    let hosts = match hosts.len() {
        0 => "*".to_string(),
        1..=3 => hosts.join(","),
        n => format!("{} + {} more...", hosts[..3].join(","), n - 3),
    };
    let address = load_balancer_addresses(o.pointer("/status/loadBalancer/ingress"));
    let tls = o
        .pointer("/spec/tls")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    vec![
        class.into(),
        hosts.into(),
        address.into(),
        (if tls { "80, 443" } else { "80" }).into(),
        age.into(),
    ]
}

fn load_balancer_addresses(ingress: Option<&Value>) -> String {
    ingress
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e["ip"].as_str().or_else(|| e["hostname"].as_str()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// `getServiceExternalIP`.
fn service_external_ip(o: &Value) -> String {
    let external: Vec<&str> = o
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .map(|ips| ips.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match o.pointer("/spec/type").and_then(Value::as_str) {
        Some("ExternalName") => o
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Some("LoadBalancer") => {
            let mut addresses = load_balancer_addresses(o.pointer("/status/loadBalancer/ingress"));
            if !external.is_empty() {
                if !addresses.is_empty() {
                    addresses.push(',');
                }
                addresses.push_str(&external.join(","));
            }
            if addresses.is_empty() {
                "<pending>".into()
            } else {
                addresses
            }
        }
        _ if !external.is_empty() => external.join(","),
        _ => "<none>".into(),
    }
}

/// `makePortString`: `port[:nodePort]/protocol`, comma-separated.
fn service_ports(o: &Value) -> String {
    let ports = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() {
        return "<none>".into();
    }
    ports
        .iter()
        .map(|p| {
            let port = p["port"].as_i64().unwrap_or(0);
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64().filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `labels.FormatLabels` of a map: `k=v` sorted by key.
fn labels_text(labels: &Map<String, Value>) -> String {
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// `metav1.FormatLabelSelector`.
fn selector_text(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return "<none>".into();
    };
    let mut terms: Vec<String> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let text = labels_text(labels);
        if !text.is_empty() {
            terms.push(text);
        }
    }
    for expression in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        terms.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    if terms.is_empty() {
        "<none>".into()
    } else {
        terms.join(",")
    }
}

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
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
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
    fn ages_read_as_kubectl_prints_them() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400, "3y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(
                human_duration(chrono::TimeDelta::seconds(seconds)),
                text,
                "{seconds}s"
            );
        }
        assert_eq!(human_duration(chrono::TimeDelta::seconds(-5)), "<invalid>");
        assert_eq!(age_since(None, Utc::now()), "<unknown>");
    }

    #[test]
    fn only_a_table_asked_for_first_is_a_table_request() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        let query = HashMap::new();
        assert_eq!(
            requested(&headers, &query).unwrap().include,
            Include::Metadata
        );
        headers.insert(http::header::ACCEPT, "application/json".parse().unwrap());
        assert!(requested(&headers, &query).is_none());
    }

    #[test]
    fn selectors_and_ports_print_as_kubectl_shows_them() {
        let selector = json!({"matchLabels": {"tier": "web", "app": "x"}, "matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(
            selector_text(Some(&selector)),
            "app=x,tier=web,env in (a,b)"
        );
        let service = json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        assert_eq!(service_ports(&service), "80:30080/TCP,53/UDP");
        assert_eq!(service_external_ip(&service), "<none>");
        let pending = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(service_external_ip(&pending), "<pending>");
    }

    #[test]
    fn autoscalers_show_each_metric_over_its_target() {
        let hpa = json!({"spec": {"metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
        ]}, "status": {"currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
        assert_eq!(
            hpa_targets(&hpa),
            "cpu: 12%/80%, memory: <unknown>/500Mi + 1 more..."
        );
        assert_eq!(hpa_targets(&json!({"spec": {}})), "<none>");
    }

    #[test]
    fn a_repeated_event_shows_its_count() {
        let now = Utc::now();
        let first = (now - chrono::TimeDelta::seconds(300)).to_rfc3339();
        let last = (now - chrono::TimeDelta::seconds(10)).to_rfc3339();
        let event = json!({"type": "Normal", "reason": "ScalingReplicaSet", "message": "Scaled up ",
            "involvedObject": {"kind": "Deployment", "name": "web"}, "source": {"component": "deployment-controller"},
            "firstTimestamp": first, "lastTimestamp": last, "count": 3});
        let cells = event_cells(&event, now);
        assert_eq!(cells[0], "10s");
        assert_eq!(cells[3], "deployment/web");
        assert_eq!(cells[6], "Scaled up");
        assert_eq!(cells[7], "5m");
        assert_eq!(cells[8], 3);
    }

    #[test]
    fn custom_resources_print_their_columns() {
        let printer = Printer::Custom(vec![
            json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"}),
            json!({"name": "Color", "type": "string", "jsonPath": ".spec.color"}),
        ]);
        let table = printer.table(
            &json!({"items": [{"metadata": {"name": "w1"}, "spec": {"size": 3}}]}),
            Include::None,
            true,
        );
        assert_eq!(table["rows"][0]["cells"], json!(["w1", 3, null]));
        assert_eq!(table["columnDefinitions"][1]["name"], "Size");
        assert!(table["rows"][0].get("object").is_none());
    }

    #[test]
    fn json_paths_of_printer_columns_read_fields_indexes_and_filters() {
        let object = json!({"status": {"sync": "Synced", "conditions": [
            {"type": "Healthy", "message": "h"}, {"type": "Ready", "message": "all good"}]}});
        assert_eq!(json_path(&object, ".status.sync"), Some(json!("Synced")));
        assert_eq!(
            json_path(&object, r#".status.conditions[?(@.type=="Ready")].message"#),
            Some(json!("all good"))
        );
        assert_eq!(
            json_path(&object, ".status.conditions[0].type"),
            Some(json!("Healthy"))
        );
        assert_eq!(json_path(&object, ".status.health"), None);
        assert_eq!(
            json_path(&object, r#".status.conditions[?(@.type=="X")].message"#),
            None
        );
    }
}
