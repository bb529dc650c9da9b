//! What the comparison needs to know about a kind's structure: which lists merge by
//! key, and which scalars are quantities or int-or-string. [`SchemaLookup`] is the seam;
//! [`OpenApiSchemas`] answers it from the real OpenAPI schemas (`tether_schema`): the
//! recorded documents of the built-in kinds, and the schemas CRDs declare.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use crate::manifest::ObjectId;
use tether_schema::{self as schema, NodeKind, ScalarType, Schema, Schemas};

/// How a list is merged (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType<'s> {
    /// Replaced as a whole; items compared by position.
    Atomic,
    /// Scalars, each present or not; order does not matter.
    Set,
    /// Objects addressed by these key fields (`x-kubernetes-list-map-keys`).
    Map(Cow<'s, [&'s str]>),
}

/// How a scalar field's value is normalised by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarFormat {
    Plain,
    /// `resource.Quantity`: compared by value.
    Quantity,
    /// `intstr.IntOrString`: `8080` and `"8080"` are the same.
    IntOrString,
}

/// Structural knowledge about kinds. `path` holds the field names from the object's
/// root, list positions left out (`["spec", "template", "spec", "containers"]`).
pub trait SchemaLookup: Sync {
    /// `None` when the list is unknown: it is then compared as atomic.
    fn list_type(&self, ty: &ObjectId, path: &[&str]) -> Option<ListType<'_>>;
    fn scalar_format(&self, ty: &ObjectId, path: &[&str]) -> ScalarFormat;

    /// The root of `ty`'s schema, for a lookup backed by [`schema::Node`]s: the
    /// comparison then steps down the schema along with the values instead of asking
    /// by path at every field (a walk from the root each time). `None` (the default)
    /// means "ask by path"; a node must answer as the path lookups would.
    fn root(&self, _ty: &ObjectId) -> Option<schema::Node<'_>> {
        None
    }
}

/// The schemas of a known set of kinds, resolved once before comparing: built-in
/// kinds from the recorded OpenAPI documents, custom resources from the CRDs given
/// (in the desired state or read from the cluster), anything else untyped (maps
/// merge key by key, lists compare as atomic).
#[derive(Clone, Default)]
pub struct OpenApiSchemas {
    /// (group, version, kind, schema): a handful of kinds, searched without allocating
    /// on the comparison's hot path.
    by_kind: Vec<(String, String, String, Schema)>,
}

impl OpenApiSchemas {
    /// Resolves the schemas of `kinds`, using `crds` (CustomResourceDefinition
    /// objects) for kinds that are not built in.
    pub fn new<'a>(
        kinds: impl IntoIterator<Item = &'a ObjectId>,
        crds: impl IntoIterator<Item = &'a Value>,
    ) -> Self {
        let mut custom: HashMap<(String, String, String), Schema> = HashMap::new();
        for crd in crds {
            let group = crd
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = crd
                .pointer("/spec/names/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            for version in crd
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(name), Some(schema)) = (
                    version["name"].as_str(),
                    version.pointer("/schema/openAPIV3Schema"),
                ) else {
                    continue;
                };
                custom.insert(
                    (group.into(), name.into(), kind.into()),
                    Schema::from_openapi_v3(schema),
                );
            }
        }
        let mut schemas = OpenApiSchemas::default();
        for id in kinds {
            if schemas.get(id).is_some() {
                continue;
            }
            let key = (id.group.clone(), id.version.clone(), id.kind.clone());
            let schema = Schemas::builtin()
                .get(&id.group, &id.version, &id.kind)
                .or_else(|| custom.get(&key).cloned())
                .unwrap_or_else(Schema::untyped);
            schemas.by_kind.push((key.0, key.1, key.2, schema));
        }
        schemas
    }

    fn get(&self, ty: &ObjectId) -> Option<&Schema> {
        self.by_kind
            .iter()
            .find(|(group, version, kind, _)| {
                *kind == ty.kind && *group == ty.group && *version == ty.version
            })
            .map(|(_, _, _, schema)| schema)
    }

    /// The node at `path` (field names, list positions left out) of a kind's schema.
    fn node(&self, ty: &ObjectId, path: &[&str]) -> Option<schema::Node<'_>> {
        let mut node = self.get(ty)?.root();
        for name in path {
            node = child(node, name)?;
        }
        Some(node)
    }
}

/// The node of field `name` below `node`; below a list, the field of its items (list
/// positions are not part of a path).
pub(crate) fn child<'s>(node: schema::Node<'s>, name: &str) -> Option<schema::Node<'s>> {
    let node = match node.kind() {
        NodeKind::List(_) => node.items()?,
        _ => node,
    };
    node.field(name)
}

/// What [`SchemaLookup::scalar_format`] answers for a node.
pub(crate) fn node_scalar_format(node: Option<schema::Node<'_>>) -> ScalarFormat {
    match node.map(|node| node.kind()) {
        Some(NodeKind::Scalar(ScalarType::IntOrString)) => ScalarFormat::IntOrString,
        Some(NodeKind::Scalar(ScalarType::StringOrNumber)) => ScalarFormat::Quantity,
        _ => ScalarFormat::Plain,
    }
}

impl SchemaLookup for OpenApiSchemas {
    fn list_type(&self, ty: &ObjectId, path: &[&str]) -> Option<ListType<'_>> {
        Some(match self.node(ty, path)?.list_type()? {
            schema::ListType::Atomic => ListType::Atomic,
            schema::ListType::Set => ListType::Set,
            schema::ListType::Map { keys } => {
                ListType::Map(Cow::Owned(keys.iter().map(String::as_str).collect()))
            }
        })
    }

    fn scalar_format(&self, ty: &ObjectId, path: &[&str]) -> ScalarFormat {
        node_scalar_format(self.node(ty, path))
    }

    fn root(&self, ty: &ObjectId) -> Option<schema::Node<'_>> {
        self.get(ty).map(Schema::root)
    }
}
