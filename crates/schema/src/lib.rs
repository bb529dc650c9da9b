//! tether's lowest floor: the words every other crate speaks. What tether owns
//! ([`ownership`]), how configuration spells a duration ([`duration`]), and the structural
//! schemas of Kubernetes kinds below.
//!
//! Structural schemas of Kubernetes kinds, from OpenAPI v3: which lists merge by key,
//! which maps are atomic. Server-side apply, strategic merge patch and field paths in
//! drift reports all follow these rules.
//!
//! A [`Schema`] is one root type in an arena of types converted from OpenAPI v3
//! (`$ref`s become arena indices, so recursive types such as `JSONSchemaProps` cost
//! nothing to walk and never loop). [`Schemas::builtin`] serves the built-in kinds from
//! the OpenAPI documents recorded from a real kube-apiserver (`assets/openapi-v3/`),
//! each kind converted the first time it is asked for, from the components it reaches.
//!
//! Navigation is by [`Node`]: `schema.root().field("spec")?.field("template")…`, and
//! [`Node::kind`] tells how a value at that place merges ([`NodeKind`], [`ListType`]).
//! [`PathElement`] and [`render_path`] address a place in an object the way the API
//! server names it (`.spec.template.spec.containers[name="web"].image`).

pub mod duration;
mod fieldset;
mod openapi;
pub mod ownership;
mod path;
mod quantity;
mod validate;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

pub use fieldset::{FieldSet, FieldsV1Error};
pub use path::{PathElement, compare_values, render_path};
pub use quantity::{Quantity, QuantityFormat, canonical_quantity, same_quantity};
pub use validate::{FieldError, FieldErrorKind, Validation};

/// Index of a type in a schema's arena.
type TypeId = usize;

/// The scalar types the API distinguishes when it decodes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarType {
    String,
    Integer,
    /// Any JSON number.
    Number,
    Boolean,
    /// `IntOrString` (`format: int-or-string`, `x-kubernetes-int-or-string`).
    IntOrString,
    /// `resource.Quantity`: a string or a number.
    StringOrNumber,
}

/// How the items of a list are told apart, hence how they merge and are owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value: replaced whole, owned whole.
    Atomic,
    /// Items are scalars identified by their value (`v:<json>` in FieldsV1).
    Set,
    /// Items are objects identified by these key fields (`k:{…}` in FieldsV1).
    Map { keys: Vec<String> },
}

/// What a value at a node is, for merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind<'a> {
    Scalar(ScalarType),
    /// An object with declared fields; `atomic` objects are replaced and owned whole.
    Struct {
        atomic: bool,
    },
    /// An object of arbitrary keys with values of one type.
    Map {
        atomic: bool,
    },
    List(&'a ListType),
    /// No schema: objects merge key by key, lists are atomic, the rest are scalars.
    Untyped,
}

/// `x-kubernetes-patch-strategy` of a field, for strategic merge patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchStrategy {
    /// Lists merge (by `merge_key`, or as a set of scalars without one).
    pub merge: bool,
    /// The object or list is replaced whole (`replace`).
    pub replace: bool,
    /// `retainKeys`: a patch may carry `$retainKeys`.
    pub(crate) retain_keys: bool,
    /// `x-kubernetes-patch-merge-key`.
    pub merge_key: Option<String>,
}

#[derive(Debug, Clone)]
struct FieldDef {
    ty: TypeId,
    /// The OpenAPI `default` of the field.
    default: Option<Value>,
    /// Listed in the parent's `required`: present (maybe `null`) in a zero object.
    required: bool,
    /// The server leaves the field out when it is empty (Go's `omitempty`): an optional
    /// field of a built-in kind. Custom resources are stored as sent (unstructured), so
    /// none of theirs is.
    omit_empty: bool,
}

/// A struct's fields by name. Looked up for every list and differing scalar the drift
/// engine walks, so with foldhash: SipHash was a tenth of a diff.
type Fields = HashMap<String, FieldDef, foldhash::fast::RandomState>;

#[derive(Debug, Clone)]
enum TypeDef {
    Scalar(ScalarType),
    Struct {
        fields: Fields,
        /// Declaration order, for listing fields.
        order: Vec<String>,
        atomic: bool,
        /// Type of undeclared keys (`additionalProperties`, or untyped when the
        /// object preserves unknown fields); `None` makes them unknown.
        extra: Option<TypeId>,
    },
    Map {
        values: TypeId,
        atomic: bool,
    },
    List {
        items: TypeId,
        list_type: ListType,
        patch: PatchStrategy,
    },
    Untyped,
    /// A `$ref` not yet resolved during conversion; never left in a finished arena.
    Pending,
}

/// The types of one OpenAPI document (or one CRD version), by index.
#[derive(Debug)]
struct Arena {
    types: Vec<TypeDef>,
    /// Per-field patch strategies are stored on list types; those of objects on the
    /// field that holds them, indexed by (struct type, field name).
    object_patch: HashMap<(TypeId, String), PatchStrategy>,
}

impl Arena {
    const UNTYPED: TypeId = 0;

    fn new() -> Arena {
        Arena {
            types: vec![TypeDef::Untyped],
            object_patch: HashMap::new(),
        }
    }

    fn push(&mut self, def: TypeDef) -> TypeId {
        self.types.push(def);
        self.types.len() - 1
    }

    /// Copies type `id` of `from` (and everything it reaches) into `self`.
    fn import(&mut self, from: &Arena, id: TypeId, memo: &mut HashMap<TypeId, TypeId>) -> TypeId {
        if id == Arena::UNTYPED {
            return Arena::UNTYPED;
        }
        if let Some(&done) = memo.get(&id) {
            return done;
        }
        let new_id = self.push(TypeDef::Pending);
        memo.insert(id, new_id);
        let def = match &from.types[id] {
            TypeDef::Struct {
                fields,
                order,
                atomic,
                extra,
            } => {
                let mut copied = Fields::with_capacity_and_hasher(fields.len(), Default::default());
                for (name, field) in fields {
                    let ty = self.import(from, field.ty, memo);
                    copied.insert(
                        name.clone(),
                        FieldDef {
                            ty,
                            default: field.default.clone(),
                            required: field.required,
                            omit_empty: field.omit_empty,
                        },
                    );
                    if let Some(p) = from.object_patch.get(&(id, name.clone())) {
                        self.object_patch.insert((new_id, name.clone()), p.clone());
                    }
                }
                TypeDef::Struct {
                    fields: copied,
                    order: order.clone(),
                    atomic: *atomic,
                    extra: extra.map(|e| self.import(from, e, memo)),
                }
            }
            TypeDef::Map { values, atomic } => TypeDef::Map {
                values: self.import(from, *values, memo),
                atomic: *atomic,
            },
            TypeDef::List {
                items,
                list_type,
                patch,
            } => TypeDef::List {
                items: self.import(from, *items, memo),
                list_type: list_type.clone(),
                patch: patch.clone(),
            },
            other => other.clone(),
        };
        self.types[new_id] = def;
        new_id
    }
}

/// The structural schema of one kind: cheap to clone.
#[derive(Debug, Clone)]
pub struct Schema {
    arena: Arc<Arena>,
    root: TypeId,
    /// Built-in kinds start from Go zero values; custom resources (and unknown
    /// kinds) from an empty object, as the API server handles them unstructured.
    typed_zero: bool,
}

impl Schema {
    /// The schema of a CRD version from its `openAPIV3Schema` (inline, with the
    /// `x-kubernetes-*` extensions). `apiVersion`, `kind` and `metadata` (ObjectMeta)
    /// are added as the API server does for custom resources.
    pub fn from_openapi_v3(schema: &Value) -> Schema {
        let mut arena = Arena::new();
        let root = openapi::convert_inline(&mut arena, schema);
        let root = with_object_meta(&mut arena, root);
        Schema {
            arena: Arc::new(arena),
            root,
            typed_zero: false,
        }
    }

    /// The schema of a kind nothing is known about: objects merge key by key and
    /// lists are atomic, except `metadata`, which is always ObjectMeta.
    pub fn untyped() -> Schema {
        static UNTYPED: OnceLock<Schema> = OnceLock::new();
        UNTYPED
            .get_or_init(|| {
                let mut arena = Arena::new();
                let root = arena.push(TypeDef::Struct {
                    fields: Fields::default(),
                    order: Vec::new(),
                    atomic: false,
                    extra: Some(Arena::UNTYPED),
                });
                let root = with_object_meta(&mut arena, root);
                Schema {
                    arena: Arc::new(arena),
                    root,
                    typed_zero: false,
                }
            })
            .clone()
    }

    /// The root type (the object itself).
    pub fn root(&self) -> Node<'_> {
        Node {
            arena: &self.arena,
            id: self.root,
        }
    }

    /// Type-checks `obj`: scalars of the wrong type, objects where lists are expected
    /// and the like, and, separately, fields the schema does not declare.
    pub fn validate(&self, obj: &Value) -> Validation {
        validate::validate(self.root(), obj)
    }

    /// Drops the fields the schema does not declare ([`Validation::unknown_fields`]),
    /// as decoding into a built-in kind's Go type does.
    pub fn prune_undeclared(&self, obj: &mut Value) {
        validate::prune(self.root(), obj);
    }

    /// The object a create starts from: what the API server's zero value of the kind
    /// looks like once serialized (non-pointer structs as `{}`, required lists and
    /// maps as `null`). Server-side apply compares against it when an object is
    /// created, which decides where FieldsV1 says `"."`. Custom resources start from
    /// `{}`.
    pub fn zero_object(&self) -> Value {
        if !self.typed_zero {
            return Value::Object(serde_json::Map::new());
        }
        zero_value(self.root(), 0).unwrap_or(Value::Object(serde_json::Map::new()))
    }
}

/// Deep enough for any built-in kind; guards recursive types.
const ZERO_OBJECT_MAX_DEPTH: usize = 32;

fn zero_value(node: Node<'_>, depth: usize) -> Option<Value> {
    if depth > ZERO_OBJECT_MAX_DEPTH {
        return None;
    }
    let TypeDef::Struct { fields, order, .. } = node.def() else {
        return None;
    };
    let mut out = serde_json::Map::new();
    for name in order {
        let Some(field) = fields.get(name) else {
            continue;
        };
        let child = Node {
            arena: node.arena,
            id: field.ty,
        };
        let is_empty_object_default =
            matches!(&field.default, Some(Value::Object(m)) if m.is_empty());
        match child.def() {
            TypeDef::Struct { .. } if is_empty_object_default => {
                out.insert(
                    name.clone(),
                    zero_value(child, depth + 1).unwrap_or(Value::Object(serde_json::Map::new())),
                );
            }
            TypeDef::List { .. } | TypeDef::Map { .. } | TypeDef::Struct { .. }
                if field.required =>
            {
                out.insert(name.clone(), Value::Null);
            }
            _ => {}
        }
    }
    Some(Value::Object(out))
}

/// Gives a custom resource's root the standard `apiVersion`, `kind` and ObjectMeta
/// `metadata` fields (a CRD schema may declare `metadata` only as `type: object`).
fn with_object_meta(arena: &mut Arena, root: TypeId) -> TypeId {
    let meta = object_meta_arena().map(|(from, id)| {
        let mut memo = HashMap::new();
        arena.import(from, id, &mut memo)
    });
    let string = arena.push(TypeDef::Scalar(ScalarType::String));
    let root = if matches!(arena.types[root], TypeDef::Struct { .. }) {
        root
    } else {
        arena.push(TypeDef::Struct {
            fields: Fields::default(),
            order: Vec::new(),
            atomic: false,
            extra: Some(Arena::UNTYPED),
        })
    };
    if let TypeDef::Struct { fields, order, .. } = &mut arena.types[root] {
        for (name, ty) in [
            ("apiVersion", Some(string)),
            ("kind", Some(string)),
            ("metadata", meta),
        ] {
            let Some(ty) = ty else { continue };
            if !fields.contains_key(name) {
                order.push(name.to_string());
            }
            fields.insert(
                name.to_string(),
                FieldDef {
                    ty,
                    default: None,
                    required: false,
                    omit_empty: false,
                },
            );
        }
    }
    root
}

/// ObjectMeta alone, converted once: what a custom resource's schema imports.
fn object_meta_arena() -> Option<(&'static Arena, TypeId)> {
    static OBJECT_META_ARENA: OnceLock<Option<(Arena, TypeId)>> = OnceLock::new();
    let (arena, id) = OBJECT_META_ARENA
        .get_or_init(|| {
            let doc = Schemas::builtin().document("", "v1")?;
            Some(openapi::convert_component(&doc.components, OBJECT_META))
        })
        .as_ref()?;
    Some((arena, *id))
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A place in a schema: navigate with [`Node::field`] and [`Node::items`].
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    arena: &'a Arena,
    id: TypeId,
}

impl<'a> Node<'a> {
    /// A node without schema (objects merge key by key, lists are atomic), for values
    /// below an undeclared field.
    pub fn untyped() -> Node<'a> {
        static EMPTY: OnceLock<Arena> = OnceLock::new();
        Node {
            arena: EMPTY.get_or_init(Arena::new),
            id: Arena::UNTYPED,
        }
    }
}

impl<'a> Node<'a> {
    fn def(&self) -> &'a TypeDef {
        &self.arena.types[self.id]
    }

    fn at(&self, id: TypeId) -> Node<'a> {
        Node {
            arena: self.arena,
            id,
        }
    }

    /// How values here merge.
    pub fn kind(&self) -> NodeKind<'a> {
        match self.def() {
            TypeDef::Scalar(s) => NodeKind::Scalar(*s),
            TypeDef::Struct { atomic, .. } => NodeKind::Struct { atomic: *atomic },
            TypeDef::Map { atomic, .. } => NodeKind::Map { atomic: *atomic },
            TypeDef::List { list_type, .. } => NodeKind::List(list_type),
            TypeDef::Untyped | TypeDef::Pending => NodeKind::Untyped,
        }
    }

    /// The type of key `name` of an object here: a declared field, a map value, or
    /// untyped below an untyped node. `None` for an undeclared field of a struct that
    /// keeps no unknown fields, and for lists and scalars.
    pub fn field(&self, name: &str) -> Option<Node<'a>> {
        match self.def() {
            TypeDef::Struct { fields, extra, .. } => fields
                .get(name)
                .map(|f| self.at(f.ty))
                .or_else(|| extra.map(|e| self.at(e))),
            TypeDef::Map { values, .. } => Some(self.at(*values)),
            TypeDef::Untyped | TypeDef::Pending => Some(self.at(Arena::UNTYPED)),
            _ => None,
        }
    }

    /// Whether `name` is a declared field of the struct here (not a map key).
    pub fn declares(&self, name: &str) -> bool {
        matches!(self.def(), TypeDef::Struct { fields, .. } if fields.contains_key(name))
    }

    /// Whether the server leaves field `name` of an object here out when it is empty
    /// (`[]`, `{}`, `""`), so that empty and absent are the same value: a declared,
    /// optional field of a built-in kind (kube-openapi lists every field without
    /// `omitempty` and `+optional` as `required`). A map's entries, a custom resource's
    /// fields and anything untyped are kept as written.
    pub fn omits_empty(&self, name: &str) -> bool {
        match self.def() {
            TypeDef::Struct { fields, .. } => fields.get(name).is_some_and(|f| f.omit_empty),
            _ => false,
        }
    }

    /// The OpenAPI `default` of declared field `name`.
    pub(crate) fn field_default(&self, name: &str) -> Option<&'a Value> {
        match self.def() {
            TypeDef::Struct { fields, .. } => fields.get(name)?.default.as_ref(),
            _ => None,
        }
    }

    /// The item type of a list; untyped below an untyped node.
    pub fn items(&self) -> Option<Node<'a>> {
        match self.def() {
            TypeDef::List { items, .. } => Some(self.at(*items)),
            TypeDef::Untyped | TypeDef::Pending => Some(self.at(Arena::UNTYPED)),
            _ => None,
        }
    }

    /// The list type of a list node.
    pub fn list_type(&self) -> Option<&'a ListType> {
        match self.def() {
            TypeDef::List { list_type, .. } => Some(list_type),
            _ => None,
        }
    }

    /// On a list-map node: the value a key field takes when an item omits it (the
    /// item type's `default`, e.g. `protocol: "TCP"` of container ports).
    pub(crate) fn key_default(&self, key: &str) -> Option<&'a Value> {
        self.items()?.field_default(key)
    }

    /// The identity of item `index` of this list: its key fields sorted by name, with
    /// a key the item omits taken from its schema default (`protocol: "TCP"`), for a
    /// list-map; its value for a set; its position otherwise. `Err` says why an item
    /// of a list-map has no identity, in the API server's words.
    pub fn item_element(&self, index: usize, item: &Value) -> Result<PathElement, String> {
        match self.list_type() {
            Some(ListType::Set) => Ok(PathElement::Value(item.clone())),
            Some(ListType::Map { keys }) if !keys.is_empty() => {
                let Value::Object(fields) = item else {
                    return Err("associative list with keys may not have non-map elements".into());
                };
                let mut key = Vec::with_capacity(keys.len());
                for name in keys {
                    match fields.get(name).or_else(|| self.key_default(name)) {
                        Some(v) => key.push((name.clone(), v.clone())),
                        None => {
                            return Err(format!(
                                "associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"
                            ));
                        }
                    }
                }
                Ok(PathElement::key(key))
            }
            _ => Ok(PathElement::Index(index)),
        }
    }

    /// Strategic-merge-patch strategy of this list (`x-kubernetes-patch-strategy`,
    /// `x-kubernetes-patch-merge-key`).
    pub(crate) fn list_patch_strategy(&self) -> Option<&'a PatchStrategy> {
        match self.def() {
            TypeDef::List { patch, .. } => Some(patch),
            _ => None,
        }
    }

    /// Strategic-merge-patch strategy of declared field `name` of this struct, for
    /// fields holding objects or lists.
    pub fn field_patch_strategy(&self, name: &str) -> Option<&'a PatchStrategy> {
        if let Some(child) = self.field(name)
            && let Some(p) = child.list_patch_strategy()
        {
            return Some(p);
        }
        self.arena.object_patch.get(&(self.id, name.to_string()))
    }

    /// Whether the node is an object kind (struct, map or untyped).
    pub fn is_object(&self) -> bool {
        matches!(
            self.kind(),
            NodeKind::Struct { .. } | NodeKind::Map { .. } | NodeKind::Untyped
        )
    }
}

/// One OpenAPI document, indexed but not converted: its components as slices of the
/// embedded text, and which component each of its kinds is. A kind's schema is
/// converted the first time it is asked for, with only the components it reaches: the
/// core group's document is 1.6 MB of JSON, its whole arena most of a megabyte, and a
/// parsed copy of it several megabytes, while a fleet of ConfigMaps needs a few dozen
/// types.
#[derive(Debug)]
struct Document {
    components: openapi::Components,
    kinds: HashMap<String, Kind>,
}

/// A kind of a document: its component, and its schema once converted.
#[derive(Debug)]
struct Kind {
    component: String,
    converted: OnceLock<Schema>,
}

struct Embedded {
    group: &'static str,
    version: &'static str,
    json: &'static str,
    parsed: OnceLock<Option<Document>>,
}

/// The catalogue of built-in kinds, by group, version and kind.
pub struct Schemas {
    documents: Vec<Embedded>,
}

macro_rules! embedded {
    // The recorded document of a group version is named as its URL path is:
    // `/api/v1` for the core group, `/apis/GROUP/VERSION` for the others.
    ("", $version:literal) => {
        embedded!(@file "", $version, concat!("api_", $version, ".json"))
    };
    ($group:literal, $version:literal) => {
        embedded!(@file $group, $version, concat!("apis_", $group, "_", $version, ".json"))
    };
    (@file $group:expr, $version:expr, $file:expr) => {
        Embedded {
            group: $group,
            version: $version,
            json: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../assets/openapi-v3/",
                $file
            )),
            parsed: OnceLock::new(),
        }
    };
}

impl Schemas {
    /// All built-in group versions recorded from the real API server. Each document
    /// is indexed the first time one of its kinds is asked for, and each kind converted
    /// then, so holding this costs nothing at start.
    pub fn builtin() -> &'static Schemas {
        static BUILTIN: OnceLock<Schemas> = OnceLock::new();
        BUILTIN.get_or_init(|| Schemas {
            documents: vec![
                embedded!("", "v1"),
                embedded!("apiextensions.k8s.io", "v1"),
                embedded!("apps", "v1"),
                embedded!("autoscaling", "v1"),
                embedded!("autoscaling", "v2"),
                embedded!("batch", "v1"),
                embedded!("coordination.k8s.io", "v1"),
                embedded!("events.k8s.io", "v1"),
                embedded!("networking.k8s.io", "v1"),
                embedded!("policy", "v1"),
                embedded!("rbac.authorization.k8s.io", "v1"),
            ],
        })
    }

    fn document(&self, group: &str, version: &str) -> Option<&Document> {
        let embedded = self
            .documents
            .iter()
            .find(|d| d.group == group && d.version == version)?;
        embedded
            .parsed
            .get_or_init(|| openapi::index_document(embedded.json, group, version))
            .as_ref()
    }

    /// The schema of a built-in kind; `None` for kinds this catalogue does not hold.
    pub fn get(&self, group: &str, version: &str, kind: &str) -> Option<Schema> {
        let doc = self.document(group, version)?;
        let found = doc.kinds.get(kind)?;
        let schema = found.converted.get_or_init(|| {
            let (arena, root) = openapi::convert_component(&doc.components, &found.component);
            Schema {
                arena: Arc::new(arena),
                root,
                typed_zero: true,
            }
        });
        Some(schema.clone())
    }
}

#[cfg(test)]
mod tests;
