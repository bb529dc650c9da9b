//! OpenAPI v3 (with the `x-kubernetes-*` extensions) → the arena of merge types, the
//! way the API server derives its structured-merge-diff schema from the same
//! documents.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{
    Arena, Document, FieldDef, Fields, Kind, ListType, PatchStrategy, ScalarType, TypeDef, TypeId,
};

const REF_PREFIX: &str = "#/components/schemas/";

/// The named components of one embedded document, unparsed: each a slice of the
/// embedded text, parsed when a conversion reaches it.
pub(super) type Components = HashMap<String, &'static RawValue>;

/// The top of an OpenAPI v3 document, as far as the index reads it.
#[derive(Deserialize)]
struct RawDocument<'a> {
    #[serde(borrow)]
    components: RawComponents<'a>,
}

#[derive(Deserialize)]
struct RawComponents<'a> {
    #[serde(borrow)]
    schemas: HashMap<String, &'a RawValue>,
}

/// Of a component, only the kinds it is (serde skips the rest unparsed).
#[derive(Deserialize)]
struct KindsOf {
    #[serde(rename = "x-kubernetes-group-version-kind", default)]
    kinds: Vec<GroupVersionKind>,
}

#[derive(Deserialize)]
struct GroupVersionKind {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    kind: String,
}

/// Indexes one embedded OpenAPI document: its components and which of them are the
/// kinds of `group`/`version`; `None` if it is not valid JSON (the documents are
/// embedded at build time, so a test would catch that).
pub(super) fn index_document(json: &'static str, group: &str, version: &str) -> Option<Document> {
    let doc: RawDocument = serde_json::from_str(json).ok()?;
    let components = doc.components.schemas;
    let mut kinds = HashMap::new();
    for (name, raw) in &components {
        let Ok(of) = serde_json::from_str::<KindsOf>(raw.get()) else {
            continue;
        };
        for gvk in of.kinds {
            if gvk.group == group && gvk.version == version {
                kinds.insert(
                    gvk.kind,
                    Kind {
                        component: name.to_string(),
                        converted: OnceLock::new(),
                    },
                );
            }
        }
    }
    Some(Document { components, kinds })
}

/// Converts the component `name` and what it reaches into an arena of its own.
pub(super) fn convert_component(components: &Components, name: &str) -> (Arena, TypeId) {
    let mut arena = Arena::new();
    let mut converter = Converter {
        arena: &mut arena,
        named: HashMap::new(),
        components: Some(components),
    };
    let root = converter.resolve_name(name);
    (arena, root)
}

/// Converts an inline schema (a CRD version's `openAPIV3Schema`) into `arena`.
pub(super) fn convert_inline(arena: &mut Arena, schema: &Value) -> TypeId {
    let mut converter = Converter {
        arena,
        named: HashMap::new(),
        components: None,
    };
    converter.convert(schema)
}

struct Converter<'a> {
    arena: &'a mut Arena,
    named: HashMap<String, TypeId>,
    components: Option<&'a Components>,
}

impl Converter<'_> {
    fn resolve_ref(&mut self, reference: &str) -> TypeId {
        match reference.strip_prefix(REF_PREFIX) {
            Some(name) => self.resolve_name(name),
            None => Arena::UNTYPED,
        }
    }

    /// The id of a named component, converting it on first use. The id is reserved
    /// before its body is converted, so recursive references resolve to it.
    fn resolve_name(&mut self, name: &str) -> TypeId {
        if let Some(&id) = self.named.get(name) {
            return id;
        }
        let Some(raw) = self.components.and_then(|c| c.get(name)) else {
            return Arena::UNTYPED;
        };
        let Ok(schema) = serde_json::from_str::<Value>(raw.get()) else {
            return Arena::UNTYPED;
        };
        let id = self.arena.push(TypeDef::Pending);
        self.named.insert(name.to_string(), id);
        let def = self.convert_def(&schema, id);
        self.arena.types[id] = def;
        id
    }

    fn convert(&mut self, schema: &Value) -> TypeId {
        if let Some(target) = single_ref(schema) {
            return self.resolve_ref(target);
        }
        let id = self.arena.push(TypeDef::Pending);
        let def = self.convert_def(schema, id);
        self.arena.types[id] = def;
        id
    }

    fn convert_def(&mut self, schema: &Value, id: TypeId) -> TypeDef {
        if let Some(target) = single_ref(schema) {
            // A named type that is only a reference to another.
            let target = self.resolve_ref(target);
            return self.arena.types[target].clone();
        }
        let ty = schema.get("type").and_then(Value::as_str);
        if flag(schema, "x-kubernetes-int-or-string")
            || schema.get("format").and_then(Value::as_str) == Some("int-or-string")
        {
            return TypeDef::Scalar(ScalarType::IntOrString);
        }
        if let Some(one_of) = schema.get("oneOf").and_then(Value::as_array) {
            let types: Vec<&str> = one_of
                .iter()
                .filter_map(|s| s.get("type").and_then(Value::as_str))
                .collect();
            if types.contains(&"integer") && types.contains(&"string") {
                return TypeDef::Scalar(ScalarType::IntOrString);
            }
            if types.contains(&"number") && types.contains(&"string") {
                return TypeDef::Scalar(ScalarType::StringOrNumber);
            }
        }
        match ty {
            Some("string") => TypeDef::Scalar(ScalarType::String),
            Some("integer") => TypeDef::Scalar(ScalarType::Integer),
            Some("number") => TypeDef::Scalar(ScalarType::Number),
            Some("boolean") => TypeDef::Scalar(ScalarType::Boolean),
            Some("array") => self.convert_list(schema),
            Some("object") => self.convert_object(schema, id),
            _ if schema.get("properties").is_some() => self.convert_object(schema, id),
            _ => TypeDef::Untyped,
        }
    }

    fn convert_list(&mut self, schema: &Value) -> TypeDef {
        let items = match schema.get("items") {
            Some(items) => self.convert(items),
            None => Arena::UNTYPED,
        };
        let patch = patch_strategy(schema);
        let list_type = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map {
                keys: schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(|k| k.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            Some(_) => ListType::Atomic,
            // Without a list type, the patch strategy decides, as the API server's
            // schema conversion does.
            None if patch.merge => match &patch.merge_key {
                Some(key) => ListType::Map {
                    keys: vec![key.clone()],
                },
                None => ListType::Set,
            },
            None => ListType::Atomic,
        };
        TypeDef::List {
            items,
            list_type,
            patch,
        }
    }

    fn convert_object(&mut self, schema: &Value, id: TypeId) -> TypeDef {
        let atomic = schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
        let additional = match schema.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Arena::UNTYPED),
            Some(v @ Value::Object(s)) if !s.is_empty() => Some(self.convert(v)),
            Some(Value::Object(_)) => Some(Arena::UNTYPED),
            _ => None,
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        let Some(properties) = properties.filter(|p| !p.is_empty()) else {
            return match additional {
                Some(values) => TypeDef::Map { values, atomic },
                None if atomic => TypeDef::Map {
                    values: Arena::UNTYPED,
                    atomic,
                },
                None => TypeDef::Untyped,
            };
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Fields::with_capacity_and_hasher(properties.len(), Default::default());
        let mut order = Vec::with_capacity(properties.len());
        for (name, prop) in properties {
            let ty = self.convert(prop);
            let strategy = patch_strategy(prop);
            if strategy != PatchStrategy::default() {
                self.arena.object_patch.insert((id, name.clone()), strategy);
            }
            fields.insert(
                name.clone(),
                FieldDef {
                    ty,
                    default: prop.get("default").cloned(),
                    required: required.contains(&name.as_str()),
                },
            );
            order.push(name.clone());
        }
        let extra = additional.or(preserve.then_some(Arena::UNTYPED));
        TypeDef::Struct {
            fields,
            order,
            atomic,
            extra,
        }
    }
}

/// The target of a schema that is only a reference: `{"$ref"}` or
/// `{"allOf": [{"$ref"}]}` (descriptions and defaults beside it do not change the type).
fn single_ref(schema: &Value) -> Option<&str> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return Some(r);
    }
    let all_of = schema.get("allOf")?.as_array()?;
    if all_of.len() != 1 || schema.get("properties").is_some() {
        return None;
    }
    all_of[0].get("$ref").and_then(Value::as_str)
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

fn patch_strategy(schema: &Value) -> PatchStrategy {
    let strategy = schema
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
        .unwrap_or("");
    let parts: Vec<&str> = strategy.split(',').map(str::trim).collect();
    PatchStrategy {
        merge: parts.contains(&"merge"),
        replace: parts.contains(&"replace"),
        retain_keys: parts.contains(&"retainKeys"),
        merge_key: schema
            .get("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}
