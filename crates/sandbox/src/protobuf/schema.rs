//! The message table the codec walks: every protobuf message the sandbox's built-in
//! kinds reach, with field numbers and wire types from `k8s-pb`'s generated messages and
//! the JSON names of the OpenAPI documents the sandbox serves (`messages.json`, written
//! by `generate.py`; the unit tests check it against `k8s-pb` itself).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use serde::Deserialize;

use super::ProtobufError;

const TABLE: &str = include_str!("messages.json");

/// The rustc hasher's mixing, a word at a time: the codec looks a field up by name
/// for every key of every object it encodes, and SipHash's resistance to flooding buys
/// nothing for a fixed table of short names while it costs on every lookup.
#[derive(Default)]
pub(crate) struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// A field's wire type, as `k8s-pb` declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    String,
    Int32,
    Int64,
    Bool,
    Double,
    Bytes,
    /// Index of the message in [`Schema::messages`].
    Message(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    Optional,
    Repeated,
    /// `map<string, T>`: repeated entries with the key as field 1 and the value as 2.
    Map,
    /// A Go embedded struct (`json:",inline"`): its own message in protobuf, its keys
    /// spread into the parent's object in JSON.
    Inline,
}

/// Messages whose JSON form is not an object of their fields: kube-apiserver gives each
/// its own marshaller, and so does the codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    Quantity,
    IntOrString,
    Time,
    MicroTime,
    Duration,
    RawExtension,
    FieldsV1,
    Json,
    PropsOrArray,
    PropsOrBool,
    PropsOrStringArray,
    /// A Go named slice (`Verbs []string`): a message of repeated `items`, an array in JSON.
    Items,
}

#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) tag: u32,
    /// In one buffer with the other names of its message, so that looking fields up
    /// by name, once per key of every object encoded, reads few cache lines.
    pub(crate) json: &'static str,
    pub(crate) ty: Type,
    pub(crate) label: Label,
    /// A decoded zero is a value, not "unset": the field is required (no `omitempty`)
    /// or a Go pointer ([`POINTERS`]). Go writes every other field even when zero, and
    /// its JSON leaves those zeros out.
    pub(crate) keep_zero: bool,
}

#[derive(Debug)]
pub(crate) struct Message {
    /// The `k8s-pb` module path, e.g. `api.core.v1.Pod`.
    pub(crate) name: String,
    pub(crate) special: Option<Special>,
    /// Ordered by field number, the order Go writes them in.
    pub(crate) fields: Vec<Field>,
    by_json: Map<&'static str, usize>,
    /// Field index + 1 by field number (0: no such field): numbers are small and dense,
    /// and the decoder looks one up for every field it reads.
    by_tag: Vec<u16>,
    /// JSON keys that belong to an inline field's message.
    inline_keys: Vec<&'static str>,
}

impl Message {
    pub(crate) fn field_by_json(&self, name: &str) -> Option<&Field> {
        self.by_json.get(name).map(|&i| &self.fields[i])
    }

    /// Whether a JSON key is a field of this message's own or of an inline one.
    pub(crate) fn knows(&self, key: &str) -> bool {
        self.by_json.contains_key(key) || self.inline_keys.contains(&key)
    }

    #[inline]
    pub(crate) fn field_by_tag(&self, tag: u32) -> Option<&Field> {
        match self.by_tag.get(tag as usize) {
            Some(&i) if i > 0 => self.fields.get(usize::from(i) - 1),
            _ => None,
        }
    }
}

pub(crate) struct Schema {
    pub(crate) messages: Vec<Message>,
    by_name: Map<String, usize>,
    /// `apiVersion/kind` → message index.
    kinds: Map<String, usize>,
}

#[derive(Deserialize)]
struct RawTable {
    kinds: HashMap<String, String>,
    messages: HashMap<String, RawMessage>,
}

#[derive(Deserialize)]
struct RawMessage {
    fields: Vec<(u32, String, String, String, bool)>,
}

impl Schema {
    /// The table, parsed once.
    pub(crate) fn get() -> Result<&'static Schema, ProtobufError> {
        static SCHEMA: OnceLock<Result<Schema, String>> = OnceLock::new();
        SCHEMA
            .get_or_init(|| Schema::parse(TABLE))
            .as_ref()
            .map_err(|e| ProtobufError::Schema(e.clone()))
    }

    fn parse(text: &str) -> Result<Schema, String> {
        let raw: RawTable = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut names: Vec<&String> = raw.messages.keys().collect();
        names.sort();
        let by_name: Map<String, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).clone(), i))
            .collect();
        // Every field name in one buffer, message by message; the table lives as long
        // as the process, so the buffer is leaked into a `&'static str`.
        let mut arena = String::new();
        let mut spans = Vec::new();
        for name in &names {
            for (_, json, ..) in &raw.messages[*name].fields {
                spans.push((arena.len(), json.len()));
                arena.push_str(json);
            }
        }
        let arena: &'static str = Box::leak(arena.into_boxed_str());
        let mut spans = spans.into_iter();
        let mut messages = Vec::with_capacity(names.len());
        for name in names {
            let mut fields = Vec::new();
            for (tag, json, ty, label, required) in &raw.messages[name].fields {
                let ty = match ty.as_str() {
                    "string" => Type::String,
                    "int32" => Type::Int32,
                    "int64" => Type::Int64,
                    "bool" => Type::Bool,
                    "double" => Type::Double,
                    "bytes" => Type::Bytes,
                    other => match other.strip_prefix("message:") {
                        Some(target) => Type::Message(
                            *by_name
                                .get(target)
                                .ok_or_else(|| format!("{name}: no message {target}"))?,
                        ),
                        None => return Err(format!("{name}.{json}: unknown type {other}")),
                    },
                };
                let label = match label.as_str() {
                    "rep" => Label::Repeated,
                    "map" => Label::Map,
                    "inline" => Label::Inline,
                    _ => Label::Optional,
                };
                let pointer = POINTERS.contains(&(name.as_str(), json.as_str()));
                let (start, len) = spans
                    .next()
                    .ok_or_else(|| format!("{name}.{json}: no name in the buffer"))?;
                fields.push(Field {
                    tag: *tag,
                    json: &arena[start..start + len],
                    ty,
                    label,
                    keep_zero: *required || pointer,
                });
            }
            fields.sort_by_key(|f| f.tag);
            let by_json = fields
                .iter()
                .enumerate()
                .map(|(i, f)| (f.json, i))
                .collect();
            let top = fields.iter().map(|f| f.tag as usize).max().unwrap_or(0);
            if top > 4096 || fields.len() >= usize::from(u16::MAX) {
                return Err(format!("{name}: field numbers too large for the table"));
            }
            let mut by_tag = vec![0u16; top + 1];
            for (i, f) in fields.iter().enumerate() {
                by_tag[f.tag as usize] = (i + 1) as u16;
            }
            messages.push(Message {
                special: special(name),
                name: name.clone(),
                fields,
                by_json,
                by_tag,
                inline_keys: Vec::new(),
            });
        }
        for i in 0..messages.len() {
            let keys: Vec<&'static str> = messages[i]
                .fields
                .iter()
                .filter(|f| f.label == Label::Inline)
                .filter_map(|f| match f.ty {
                    Type::Message(inner) => Some(inner),
                    _ => None,
                })
                .flat_map(|inner| messages[inner].fields.iter().map(|f| f.json))
                .collect();
            messages[i].inline_keys = keys;
        }
        let kinds = raw
            .kinds
            .iter()
            .filter_map(|(kind, message)| by_name.get(message).map(|&i| (kind.clone(), i)))
            .collect();
        Ok(Schema {
            messages,
            by_name,
            kinds,
        })
    }

    pub(crate) fn message(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The message of a built-in kind, `None` for custom resources and kinds without one.
    pub(crate) fn kind(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.kinds.get(&format!("{api_version}/{kind}")).copied()
    }

    /// [`Self::kind`], or the error that names a kind with no message.
    pub(super) fn known_kind(&self, api_version: &str, kind: &str) -> Result<usize, ProtobufError> {
        self.kind(api_version, kind)
            .ok_or_else(|| ProtobufError::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })
    }
}

/// Scalar fields whose zero is written in JSON: Go pointers (`replicas: 0`,
/// `automountServiceAccountToken: false`), and fields without `omitempty` that the
/// OpenAPI schema does not mark required (`disruptionsAllowed: 0`). Protobuf cannot tell
/// them from the fields Go writes even when zero, so they are named here, from the Go
/// types of the kinds `kubectl create` sends and of the recorded answers.
/// `ScaleSpec.replicas` is neither, but a Scale of 0 is the whole point of the request.
pub(super) const POINTERS: &[(&str, &str)] = &[
    (
        "apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "deletionGracePeriodSeconds",
    ),
    ("api.apps.v1.RollingUpdateStatefulSetStrategy", "partition"),
    ("api.apps.v1.StatefulSetStatus", "availableReplicas"),
    ("api.batch.v1.JobSpec", "manualSelector"),
    (
        "api.policy.v1.PodDisruptionBudgetStatus",
        "disruptionsAllowed",
    ),
    ("api.policy.v1.PodDisruptionBudgetStatus", "currentHealthy"),
    ("api.policy.v1.PodDisruptionBudgetStatus", "desiredHealthy"),
    ("api.policy.v1.PodDisruptionBudgetStatus", "expectedPods"),
    ("api.apps.v1.DaemonSetSpec", "revisionHistoryLimit"),
    ("api.apps.v1.DeploymentSpec", "replicas"),
    ("api.apps.v1.DeploymentSpec", "revisionHistoryLimit"),
    ("api.apps.v1.DeploymentSpec", "progressDeadlineSeconds"),
    ("api.apps.v1.ReplicaSetSpec", "replicas"),
    ("api.apps.v1.StatefulSetSpec", "replicas"),
    ("api.apps.v1.StatefulSetSpec", "revisionHistoryLimit"),
    ("api.autoscaling.v1.ScaleSpec", "replicas"),
    (
        "api.autoscaling.v2.HorizontalPodAutoscalerSpec",
        "minReplicas",
    ),
    ("api.batch.v1.CronJobSpec", "startingDeadlineSeconds"),
    ("api.batch.v1.CronJobSpec", "suspend"),
    ("api.batch.v1.CronJobSpec", "successfulJobsHistoryLimit"),
    ("api.batch.v1.CronJobSpec", "failedJobsHistoryLimit"),
    ("api.batch.v1.JobSpec", "parallelism"),
    ("api.batch.v1.JobSpec", "completions"),
    ("api.batch.v1.JobSpec", "activeDeadlineSeconds"),
    ("api.batch.v1.JobSpec", "backoffLimit"),
    ("api.batch.v1.JobSpec", "ttlSecondsAfterFinished"),
    ("api.batch.v1.JobSpec", "suspend"),
    ("api.core.v1.ConfigMap", "immutable"),
    ("api.core.v1.Secret", "immutable"),
    ("api.core.v1.ConfigMapVolumeSource", "defaultMode"),
    ("api.core.v1.DownwardAPIVolumeSource", "defaultMode"),
    ("api.core.v1.ProjectedVolumeSource", "defaultMode"),
    ("api.core.v1.SecretVolumeSource", "defaultMode"),
    ("api.core.v1.PodSecurityContext", "runAsUser"),
    ("api.core.v1.PodSecurityContext", "runAsNonRoot"),
    ("api.core.v1.PodSecurityContext", "fsGroup"),
    ("api.core.v1.PodSecurityContext", "runAsGroup"),
    ("api.core.v1.PodSpec", "terminationGracePeriodSeconds"),
    ("api.core.v1.PodSpec", "activeDeadlineSeconds"),
    ("api.core.v1.PodSpec", "automountServiceAccountToken"),
    ("api.core.v1.PodSpec", "shareProcessNamespace"),
    ("api.core.v1.PodSpec", "enableServiceLinks"),
    ("api.core.v1.PodSpec", "setHostnameAsFQDN"),
    ("api.core.v1.PodSpec", "hostUsers"),
    ("api.core.v1.Probe", "terminationGracePeriodSeconds"),
    ("api.core.v1.ReplicationControllerSpec", "replicas"),
    ("api.core.v1.SecurityContext", "privileged"),
    ("api.core.v1.SecurityContext", "runAsUser"),
    ("api.core.v1.SecurityContext", "runAsNonRoot"),
    ("api.core.v1.SecurityContext", "readOnlyRootFilesystem"),
    ("api.core.v1.SecurityContext", "allowPrivilegeEscalation"),
    ("api.core.v1.SecurityContext", "runAsGroup"),
    ("api.core.v1.ServiceAccount", "automountServiceAccountToken"),
];

fn special(name: &str) -> Option<Special> {
    let special = match name {
        "apimachinery.pkg.api.resource.Quantity" => Special::Quantity,
        "apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
        "apimachinery.pkg.apis.meta.v1.Time" => Special::Time,
        "apimachinery.pkg.apis.meta.v1.MicroTime" => Special::MicroTime,
        "apimachinery.pkg.apis.meta.v1.Duration" => Special::Duration,
        "apimachinery.pkg.runtime.RawExtension" => Special::RawExtension,
        "apimachinery.pkg.apis.meta.v1.Verbs" => Special::Items,
        "apimachinery.pkg.apis.meta.v1.FieldsV1" => Special::FieldsV1,
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json" => Special::Json,
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray" => {
            Special::PropsOrArray
        }
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool" => {
            Special::PropsOrBool
        }
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray" => {
            Special::PropsOrStringArray
        }
        _ => return None,
    };
    Some(special)
}
