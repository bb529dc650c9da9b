//! A live object read by CEL in place (issue #28's CEL health cost): a JSON object or
//! array is a CEL map or list that looks its fields up in the `serde_json::Value` when
//! an expression reads them, and a string borrows its bytes. Converting the object
//! into CEL's own values up front instead copied every field at each evaluation,
//! whether a rule read it or not, and a comprehension's loop variable (`c` of
//! `status.conditions.exists(c, …)`) copied each element again; that conversion was
//! most of a rule's cost (22.4 µs per object, release, against a 20 µs target).
//!
//! Scalars are CEL's built-in values, so comparing, `in`, functions and overloads
//! behave exactly as on converted values. A map or list of the object is a view:
//! `size()`, `in`, `[i]`, `.f`, `has()`, `.?f`, comprehensions, `==` and list `+` read
//! it in place. One difference from CEL's own containers: `==` with a map or list
//! literal on the *left* (`[] == status.conditions`) is false, since a literal only
//! compares with its own kind of container; written the other way round
//! (`status.conditions == []`), it compares by content.
//!
//! Numbers read as Kubernetes' CEL reads JSON: a whole number is an `int` (so
//! `status.replicas == 3` holds), a larger one a `uint`, anything else a `double`.

use std::sync::OnceLock;

use ::cel::ExecutionError;
use ::cel::common::traits::{self, Adder, Container, Indexer, Iterable, Sizer, Zeroer};
use ::cel::common::types::{
    self, CelBool, CelDouble, CelInt, CelList, CelNull, CelString, CelUInt, Kind, Type,
};
use ::cel::common::value::{CowVal, Val};
use serde_json::{Map, Value};

/// `value` as a CEL value that reads it in place.
pub(super) fn view(value: &Value) -> Box<dyn Val + '_> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            (None, None) => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => Box::new(JsonList::new(items)),
        Value::Object(fields) => Box::new(JsonMap::new(fields)),
    }
}

/// Elements lent out by a comprehension: built on the first iteration only, since
/// most expressions read a field or an index and never iterate.
type Lent<'a> = OnceLock<Vec<Box<dyn Val + 'a>>>;

/// The capabilities a map view and a list view both offer (`in`, `[ ]`, iteration,
/// `size()`, zero test), each answered by the view itself. A macro, since they are
/// methods of the `Val` trait's impl, which no function can supply.
macro_rules! container_capabilities {
    () => {
        fn as_container(&self) -> Option<&dyn Container> {
            Some(self)
        }

        fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
        where
            Self: 'v,
        {
            Some(self)
        }

        fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
        where
            Self: 'v,
        {
            Some(self)
        }

        fn as_sizer(&self) -> Option<&dyn Sizer> {
            Some(self)
        }

        fn as_zeroer(&self) -> Option<&dyn Zeroer> {
            Some(self)
        }
    };
}

/// A JSON object as a CEL map of string keys.
#[derive(Debug)]
struct JsonMap<'a> {
    fields: &'a Map<String, Value>,
    keys: Lent<'a>,
}

impl<'a> JsonMap<'a> {
    fn new(fields: &'a Map<String, Value>) -> Self {
        JsonMap {
            fields,
            keys: OnceLock::new(),
        }
    }
}

impl<'a> Val for JsonMap<'a> {
    fn get_type(&self) -> &Type {
        &types::MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &types::MAP_TYPE
    }

    container_capabilities!();

    /// Equal to any map (a literal, another view) with the same keys and equal values.
    fn equals(&self, other: &dyn Val) -> bool {
        if other.get_type().kind() != Kind::Map {
            return false;
        }
        let (Some(size), Some(indexer)) = (other.as_sizer(), other.as_indexer()) else {
            return false;
        };
        i64::try_from(self.fields.len()).is_ok_and(|len| *size.size().inner() == len)
            && self.fields.iter().all(|(key, value)| {
                indexer
                    .get(&CelString::from(key.as_str()))
                    .is_ok_and(|theirs| view(value).equals(&*theirs))
            })
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(JsonMap::new(self.fields))
    }
}

impl Container for JsonMap<'_> {
    /// `key in map`: only a string can be a JSON object's key.
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(value
            .downcast_ref::<CelString>()
            .is_some_and(|key| self.fields.contains_key(key.inner())))
    }
}

impl<'a> Indexer for JsonMap<'a> {
    /// A missing field is `NoSuchKey`: what makes `has(status.x)` false and
    /// `status.?x` none.
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let Some(key) = idx.downcast_ref::<CelString>() else {
            return Err(ExecutionError::no_such_overload(
                "_[_]",
                vec!["map".into(), idx.get_type().name().to_string()],
            ));
        };
        let fields: &'a Map<String, Value> = self.fields;
        match fields.get(key.inner()) {
            Some(value) => Ok(CowVal::Owned(view(value))),
            None => Err(ExecutionError::no_such_key(key.inner())),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl<'a> Iterable for JsonMap<'a> {
    /// The keys, in the object's order.
    fn iter<'b, 'v>(&'b self) -> Box<dyn traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        let keys = self.keys.get_or_init(|| {
            self.fields
                .keys()
                .map(|k| Box::new(CelString::from(k.as_str())) as Box<dyn Val + 'a>)
                .collect()
        });
        Box::new(Lending(keys.iter()))
    }
}

impl Sizer for JsonMap<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(i64::try_from(self.fields.len()).unwrap_or(i64::MAX))
    }
}

impl Zeroer for JsonMap<'_> {
    fn is_zero_value(&self) -> bool {
        self.fields.is_empty()
    }
}

/// A JSON array as a CEL list.
#[derive(Debug)]
struct JsonList<'a> {
    items: &'a [Value],
    elements: Lent<'a>,
}

impl<'a> JsonList<'a> {
    fn new(items: &'a [Value]) -> Self {
        JsonList {
            items,
            elements: OnceLock::new(),
        }
    }

    fn elements(&self) -> &[Box<dyn Val + 'a>] {
        self.elements
            .get_or_init(|| self.items.iter().map(view).collect())
    }

    /// The position `idx` names, as CEL's own lists read it: an `int`, a `uint` or a
    /// whole `double`.
    fn position(&self, idx: &dyn Val) -> Result<usize, ExecutionError> {
        let out_of_bounds = || {
            ExecutionError::IndexOutOfBounds(
                ::cel::Value::try_from(idx).unwrap_or(::cel::Value::Null),
            )
        };
        let position = if let Some(i) = idx.downcast_ref::<CelInt>() {
            usize::try_from(*i.inner()).ok()
        } else if let Some(u) = idx.downcast_ref::<CelUInt>() {
            usize::try_from(*u.inner()).ok()
        } else if let Some(d) = idx.downcast_ref::<CelDouble>() {
            let d = *d.inner();
            if d.fract() != 0.0 || !d.is_finite() {
                return Err(ExecutionError::no_such_overload(
                    "_[_]",
                    vec!["list".into(), "double".into()],
                ));
            }
            // A whole double in range converts exactly; a negative one is out of bounds.
            (d >= 0.0 && d < usize::MAX as f64).then_some(d as usize)
        } else {
            return Err(ExecutionError::no_such_overload(
                "_[_]",
                vec!["list".into(), idx.get_type().name().to_string()],
            ));
        };
        position
            .filter(|&p| p < self.items.len())
            .ok_or_else(out_of_bounds)
    }
}

impl<'a> Val for JsonList<'a> {
    fn get_type(&self) -> &Type {
        &types::LIST_TYPE
    }

    fn cel_type() -> &'static Type {
        &types::LIST_TYPE
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    container_capabilities!();

    /// Equal to any list (a literal, another view) with pairwise equal elements.
    fn equals(&self, other: &dyn Val) -> bool {
        if other.get_type().kind() != Kind::List {
            return false;
        }
        let (Some(size), Some(iterable)) = (other.as_sizer(), other.as_iterable()) else {
            return false;
        };
        if !i64::try_from(self.items.len()).is_ok_and(|len| *size.size().inner() == len) {
            return false;
        }
        let mut theirs = iterable.iter();
        self.items
            .iter()
            .all(|mine| theirs.next().is_some_and(|other| view(mine).equals(other)))
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(JsonList::new(self.items))
    }
}

impl<'a> Adder for JsonList<'a> {
    /// `list + list`: a new list of CEL's own, as CEL's lists add.
    fn add<'b, 'v>(&'b self, rhs: &(dyn Val + 'v)) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let Some(rhs_items) = rhs
            .as_iterable()
            .filter(|_| rhs.get_type().kind() == Kind::List)
        else {
            return Err(ExecutionError::no_such_overload(
                "_+_",
                vec!["list".into(), rhs.get_type().name().to_string()],
            ));
        };
        let items: &'a [Value] = self.items;
        let mut sum: Vec<Box<dyn Val + 'v>> = items
            .iter()
            .map(|item| view(item) as Box<dyn Val + 'v>)
            .collect();
        let mut rest = rhs_items.iter();
        while let Some(item) = rest.next() {
            sum.push(item.clone_as_boxed());
        }
        Ok(CowVal::owned(CelList::from(sum)))
    }
}

impl Container for JsonList<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(self.items.iter().any(|item| view(item).equals(value)))
    }
}

impl<'a> Indexer for JsonList<'a> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let items: &'a [Value] = self.items;
        Ok(CowVal::Owned(view(&items[self.position(idx)?])))
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Iterable for JsonList<'_> {
    fn iter<'b, 'v>(&'b self) -> Box<dyn traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        Box::new(Lending(self.elements().iter()))
    }
}

impl Sizer for JsonList<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(i64::try_from(self.items.len()).unwrap_or(i64::MAX))
    }
}

impl Zeroer for JsonList<'_> {
    fn is_zero_value(&self) -> bool {
        self.items.is_empty()
    }
}

/// Lends a view's elements to a comprehension.
struct Lending<'b, 'a>(std::slice::Iter<'b, Box<dyn Val + 'a>>);

impl<'b, 'a: 'v, 'v> traits::Iterator<'b, 'v> for Lending<'b, 'a> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'v)> {
        self.0.next().map(|item| item.as_ref() as &(dyn Val + 'v))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Predicate;

    /// What `expr` says of `o`, bound as a view of `object`.
    fn eval(expr: &str, object: &serde_json::Value) -> Result<bool, String> {
        Predicate::compile("expr", expr)
            .map_err(|e| e.to_string())?
            .holds(&[("o", object)])
    }

    fn object() -> serde_json::Value {
        json!({
            "n": 3, "big": u64::MAX, "f": 0.5, "s": "text", "t": true, "none": null,
            "list": ["a", "b", "c"], "empty": [], "nothing": {},
            "m": {"k": 1, "j": [true, null]},
            "same": {"k": 1, "j": [true, null]},
            "status": {"phase": "Ready", "conditions": [
                {"type": "Ready", "status": "True", "observedGeneration": 2},
                {"type": "Stalled", "status": "False"}]}
        })
    }

    #[track_caller]
    fn holds(expr: &str) {
        assert_eq!(eval(expr, &object()), Ok(true), "{expr}");
    }

    #[test]
    fn fields_are_read_in_place_and_a_missing_one_reads_as_absent() {
        holds("o.status.phase == 'Ready' && o.s.startsWith('te') && o.t && o.none == null");
        holds("has(o.status.phase) && !has(o.status.nope) && !has(o.nothing.x)");
        holds("o.status.?nope.orValue('x') == 'x' && o.status.?phase.orValue('') == 'Ready'");
        holds("o['status']['phase'] == 'Ready' && 'phase' in o.status && !('x' in o.status)");
        let err = eval("o.status.nope == 'x'", &object()).unwrap_err();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn numbers_read_as_kubernetes_cel_reads_json() {
        holds("o.n == 3 && type(o.n) == int && o.n > 2 && o.n + 1 == 4");
        holds("o.big > 0u && type(o.big) == uint && o.f == 0.5 && type(o.f) == double");
    }

    #[test]
    fn lists_index_iterate_contain_add_and_compare_as_cel_lists() {
        holds("size(o.list) == 3 && o.list.size() == 3 && type(o.list) == list");
        holds("o.list[0] == 'a' && o.list[1u] == 'b' && o.list[2.0] == 'c'");
        holds("'b' in o.list && !('z' in o.list) && o.list.exists(x, x == 'c')");
        holds(
            "o.list.map(x, x + '!') == ['a!', 'b!', 'c!'] && o.list.filter(x, x != 'b') == ['a', 'c']",
        );
        holds("o.list + ['d'] == ['a', 'b', 'c', 'd'] && ['z'] + o.list == ['z', 'a', 'b', 'c']");
        holds(
            "o.list == ['a', 'b', 'c'] && o.list != ['a', 'b'] && o.empty == [] && size(o.empty) == 0",
        );
        holds("o.status.conditions.exists_one(c, c.type == 'Ready' && c.status == 'True')");
        holds("o.status.conditions.filter(c, c.status == 'True').size() == 1");
        holds(
            "o.status.conditions[1].type == 'Stalled' && o.status.conditions.all(c, has(c.type))",
        );
        let err = eval("o.list[3] == 'd'", &object()).unwrap_err();
        assert!(err.contains("out of bounds"), "{err}");
        assert!(eval("o.list[-1] == 'd'", &object()).is_err());
        assert!(eval("o.list[0.5] == 'a'", &object()).is_err());
    }

    #[test]
    fn maps_iterate_their_keys_and_compare_by_content() {
        holds("size(o.m) == 2 && type(o.m) == map && o.m.all(k, k in ['k', 'j'])");
        holds("o.m == {'k': 1, 'j': [true, null]} && o.m != {'k': 1} && o.m == o.same");
        holds("o.m != o.status && o.nothing == {} && o.m.j[0]");
    }

    /// The module's one documented difference from CEL's own containers: a literal
    /// on the left of `==` compares only with its own kind of container.
    #[test]
    fn a_container_literal_on_the_left_of_equals_is_not_equal_to_a_view() {
        holds("o.empty == [] && !([] == o.empty)");
        holds("o.nothing == {} && !({} == o.nothing)");
    }

    #[test]
    fn a_result_that_is_not_a_bool_names_its_cel_type() {
        let err = eval("o.status", &object()).unwrap_err();
        assert!(err.ends_with("evaluated to map, not a bool"), "{err}");
        let err = eval("o.list", &object()).unwrap_err();
        assert!(err.ends_with("evaluated to list, not a bool"), "{err}");
    }
}
