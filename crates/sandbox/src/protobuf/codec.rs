//! JSON ↔ protobuf for one message, walking the schema table: the generic part, and
//! the special types whose JSON form kube-apiserver marshals by hand (Quantity,
//! IntOrString, Time, MicroTime, Duration, RawExtension, FieldsV1 and the CRD schema
//! unions).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::schema::{Field, Label, Message, Schema, Special, Type};
use super::wire::{self, Reader};

/// Keys every object carries in JSON that protobuf keeps in the envelope instead.
const TYPE_META: [&str; 2] = ["apiVersion", "kind"];

/// Encodes `value` as the body of message `index`.
pub(crate) fn encode(
    schema: &Schema,
    index: usize,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let message = &schema.messages[index];
    if let Some(special) = message.special {
        return encode_special(schema, message, special, value, out);
    }
    let object = value
        .as_object()
        .ok_or_else(|| type_error(message, "", "an object"))?;
    encode_fields(schema, index, object, false, out)
}

/// Encodes the fields of message `index` found in `object`. `embedded`: the object is
/// the parent of a Go embedded struct, whose keys it shares with the parent's own.
fn encode_fields(
    schema: &Schema,
    index: usize,
    object: &Map<String, Value>,
    embedded: bool,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let message = &schema.messages[index];
    // Walk the object's keys rather than the message's fields: most fields of a large
    // message (PodSpec, Container) are unset. Go writes fields in number order.
    let mut present = Present::default();
    for (key, value) in object {
        match message.field_by_json(key) {
            Some(field) if field.label != Label::Inline => {
                if !value.is_null() {
                    present.push((field, Some(value)));
                }
            }
            _ if embedded || message.knows(key) || TYPE_META.contains(&key.as_str()) => {}
            _ => {
                return Err(ProtobufError::UnknownField {
                    message: message.name.clone(),
                    field: key.clone(),
                });
            }
        }
    }
    for inline in message.fields.iter().filter(|f| f.label == Label::Inline) {
        present.push((inline, None));
    }
    for (field, value) in present.sorted() {
        let Some(value) = value else {
            let Type::Message(inner) = field.ty else {
                continue;
            };
            // Go writes an embedded struct even when it is empty.
            wire::put_nested(out, field.tag, |out| {
                encode_fields(schema, inner, object, true, out)
            })?;
            continue;
        };
        match field.label {
            Label::Optional | Label::Inline => encode_field(schema, message, field, value, out)?,
            Label::Repeated => {
                let items = value
                    .as_array()
                    .ok_or_else(|| type_error(message, field.json, "an array"))?;
                for item in items {
                    encode_field(schema, message, field, item, out)?;
                }
            }
            Label::Map => {
                let entries = value
                    .as_object()
                    .ok_or_else(|| type_error(message, field.json, "an object"))?;
                // Go writes map entries sorted by key; the pairs are sorted together so
                // that no value is looked up again by its key.
                let mut sorted: Vec<(&String, &Value)> = entries.iter().collect();
                sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let value_field = map_value(field);
                for (key, value) in sorted {
                    wire::put_nested(out, field.tag, |entry| {
                        wire::put_bytes(entry, 1, key.as_bytes());
                        encode_field(schema, message, &value_field, value, entry)
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// The fields an object sets, on the stack for all but the largest objects: an
/// encoding visits dozens of objects, and a heap buffer for each cost more than the
/// rest of the walk.
struct Present<'a> {
    small: [Option<(&'a Field, Option<&'a Value>)>; SMALL],
    count: usize,
    large: Vec<(&'a Field, Option<&'a Value>)>,
}

const SMALL: usize = 24;

impl Default for Present<'_> {
    fn default() -> Self {
        Present {
            small: [None; SMALL],
            count: 0,
            large: Vec::new(),
        }
    }
}

impl<'a> Present<'a> {
    fn push(&mut self, entry: (&'a Field, Option<&'a Value>)) {
        if self.count < SMALL {
            self.small[self.count] = Some(entry);
        } else {
            if self.large.is_empty() {
                self.large.extend(self.small.iter().flatten().copied());
            }
            self.large.push(entry);
        }
        self.count += 1;
    }

    /// The entries in field-number order.
    fn sorted(mut self) -> impl Iterator<Item = (&'a Field, Option<&'a Value>)> {
        let count = self.count;
        if count > SMALL {
            self.large.sort_by_key(|(field, _)| field.tag);
        } else {
            self.small[..count].sort_by_key(|entry| entry.map(|(field, _)| field.tag));
        }
        let small = (count <= SMALL).then_some(self.small);
        small
            .into_iter()
            .flat_map(move |small| small.into_iter().take(count).flatten())
            .chain(self.large)
    }
}

fn encode_field(
    schema: &Schema,
    message: &Message,
    field: &Field,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    match field.ty {
        Type::String => {
            let s = value
                .as_str()
                .ok_or_else(|| type_error(message, field.json, "a string"))?;
            wire::put_bytes(out, field.tag, s.as_bytes());
        }
        Type::Int32 | Type::Int64 => {
            let n = value
                .as_i64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|f| f.fract() == 0.0)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| type_error(message, field.json, "an integer"))?;
            if field.ty == Type::Int32 && i32::try_from(n).is_err() {
                return Err(type_error(message, field.json, "a 32-bit integer"));
            }
            wire::put_key(out, field.tag, wire::VARINT);
            wire::put_varint(out, n as u64);
        }
        Type::Bool => {
            let b = value
                .as_bool()
                .ok_or_else(|| type_error(message, field.json, "a boolean"))?;
            wire::put_key(out, field.tag, wire::VARINT);
            wire::put_varint(out, u64::from(b));
        }
        Type::Double => {
            let f = value
                .as_f64()
                .ok_or_else(|| type_error(message, field.json, "a number"))?;
            wire::put_key(out, field.tag, wire::FIXED64);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Type::Bytes => {
            let text = value
                .as_str()
                .ok_or_else(|| type_error(message, field.json, "a base64 string"))?;
            let bytes = BASE64
                .decode(text)
                .map_err(|_| type_error(message, field.json, "a base64 string"))?;
            wire::put_bytes(out, field.tag, &bytes);
        }
        Type::Message(index) => {
            wire::put_nested(out, field.tag, |out| encode(schema, index, value, out))?;
        }
    }
    Ok(())
}

fn encode_special(
    schema: &Schema,
    message: &Message,
    special: Special,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let props = || {
        schema
            .message(PROPS)
            .ok_or(ProtobufError::Schema(PROPS.into()))
    };
    match special {
        Special::Quantity => match value {
            Value::String(s) => wire::put_bytes(out, 1, s.as_bytes()),
            Value::Number(n) => wire::put_bytes(out, 1, n.to_string().as_bytes()),
            _ => return Err(type_error(message, "", "a quantity string")),
        },
        // Go writes all three fields: type, intVal, strVal.
        Special::IntOrString => {
            let (kind, int, text) = match value {
                Value::Number(n) => {
                    let n = n
                        .as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .ok_or_else(|| type_error(message, "", "a 32-bit integer"))?;
                    (0u64, n, "")
                }
                Value::String(s) => (1, 0, s.as_str()),
                _ => return Err(type_error(message, "", "an integer or a string")),
            };
            wire::put_key(out, 1, wire::VARINT);
            wire::put_varint(out, kind);
            wire::put_key(out, 2, wire::VARINT);
            wire::put_varint(out, i64::from(int) as u64);
            wire::put_bytes(out, 3, text.as_bytes());
        }
        Special::Time | Special::MicroTime => {
            let text = value
                .as_str()
                .ok_or_else(|| type_error(message, "", "an RFC 3339 time"))?;
            let time = DateTime::parse_from_rfc3339(text)
                .map_err(|_| type_error(message, "", "an RFC 3339 time"))?;
            // Time keeps seconds only, as its JSON does; MicroTime keeps microseconds.
            let nanos = match special {
                Special::Time => 0,
                _ => time.timestamp_subsec_micros() * 1000,
            };
            wire::put_key(out, 1, wire::VARINT);
            wire::put_varint(out, time.timestamp() as u64);
            wire::put_key(out, 2, wire::VARINT);
            wire::put_varint(out, u64::from(nanos));
        }
        Special::Duration => {
            let text = value
                .as_str()
                .ok_or_else(|| type_error(message, "", "a duration"))?;
            let nanos =
                parse_duration(text).ok_or_else(|| type_error(message, "", "a Go duration"))?;
            wire::put_key(out, 1, wire::VARINT);
            wire::put_varint(out, nanos as u64);
        }
        // Written in place: a managedFields entry's fieldsV1 is most of a small object.
        Special::RawExtension | Special::FieldsV1 | Special::Json => {
            wire::put_nested(out, 1, |out| {
                serde_json::to_writer(out, value).map_err(ProtobufError::Json)
            })?;
        }
        Special::PropsOrArray => match value {
            Value::Array(items) => {
                for item in items {
                    let mut inner = Vec::new();
                    encode(schema, props()?, item, &mut inner)?;
                    wire::put_bytes(out, 2, &inner);
                }
            }
            _ => {
                let mut inner = Vec::new();
                encode(schema, props()?, value, &mut inner)?;
                wire::put_bytes(out, 1, &inner);
            }
        },
        Special::PropsOrBool => match value {
            Value::Bool(allows) => {
                wire::put_key(out, 1, wire::VARINT);
                wire::put_varint(out, u64::from(*allows));
            }
            _ => {
                wire::put_key(out, 1, wire::VARINT);
                wire::put_varint(out, 1);
                let mut inner = Vec::new();
                encode(schema, props()?, value, &mut inner)?;
                wire::put_bytes(out, 2, &inner);
            }
        },
        Special::Items => {
            let items = value
                .as_array()
                .ok_or_else(|| type_error(message, "", "an array of strings"))?;
            for item in items {
                let s = item
                    .as_str()
                    .ok_or_else(|| type_error(message, "items", "a string"))?;
                wire::put_bytes(out, 1, s.as_bytes());
            }
        }
        Special::PropsOrStringArray => match value {
            Value::Array(items) => {
                for item in items {
                    let s = item
                        .as_str()
                        .ok_or_else(|| type_error(message, "property", "a string"))?;
                    wire::put_bytes(out, 2, s.as_bytes());
                }
            }
            _ => {
                let mut inner = Vec::new();
                encode(schema, props()?, value, &mut inner)?;
                wire::put_bytes(out, 1, &inner);
            }
        },
    }
    Ok(())
}

const PROPS: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps";

/// Decodes the body of message `index` to JSON; `None` when Go would read it as unset
/// (a zero Time).
pub(crate) fn decode(
    schema: &Schema,
    index: usize,
    bytes: &[u8],
) -> Result<Option<Value>, ProtobufError> {
    let message = &schema.messages[index];
    if let Some(special) = message.special {
        return decode_special(schema, message, special, bytes);
    }
    let mut object = Map::with_capacity(field_count(bytes)?);
    decode_into(schema, index, bytes, &mut object)?;
    Ok(Some(Value::Object(object)))
}

/// How many JSON keys a message's bytes make at most: a repeated field's run of items
/// is one key. Counted first so that each object is allocated once at its size: a
/// request body is dozens of small objects, and growing each, as a JSON parser must,
/// cost more than this extra pass over the field keys.
pub(crate) fn field_count(bytes: &[u8]) -> Result<usize, ProtobufError> {
    let mut reader = Reader::new(bytes);
    let (mut count, mut last) = (0, 0);
    while let Some(tag) = reader.skip_field()? {
        if tag != last {
            count += 1;
            last = tag;
        }
    }
    Ok(count)
}

/// Decodes the fields of message `index` into `object`: its own, or its parent's for a
/// Go embedded struct, whose keys are spread into the parent's object.
pub(crate) fn decode_into(
    schema: &Schema,
    index: usize,
    bytes: &[u8],
    object: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let message = &schema.messages[index];
    let mut reader = Reader::new(bytes);
    while let Some((tag, raw)) = reader.next_field()? {
        // Fields this table does not know (newer than k8s-pb) are skipped, as Go skips them.
        let Some(field) = message.field_by_tag(tag) else {
            continue;
        };
        match field.label {
            Label::Optional => {
                if let Some(value) = decode_field(schema, message, field, raw)? {
                    object.insert(field.json.to_string(), value);
                }
            }
            Label::Inline => match (field.ty, raw) {
                (Type::Message(inner), wire::Field::Bytes(bytes))
                    if schema.messages[inner].special.is_none() =>
                {
                    decode_into(schema, inner, bytes, object)?;
                }
                _ => {
                    if let Some(Value::Object(inner)) = decode_field(schema, message, field, raw)? {
                        object.extend(inner);
                    }
                }
            },
            Label::Repeated => {
                // Go writes a repeated field's items one after another: the run is read
                // here, into an array of its size, and its key is hashed once.
                let mut items = Vec::with_capacity(1 + reader.clone().run_of(tag)?);
                items.push(decode_field(schema, message, field, raw)?.unwrap_or(Value::Null));
                while let Some(raw) = next_of(&mut reader, tag)? {
                    items.push(decode_field(schema, message, field, raw)?.unwrap_or(Value::Null));
                }
                extend_field(object, field.json, Value::Array(items));
            }
            Label::Map => {
                let mut map = Map::with_capacity(1 + reader.clone().run_of(tag)?);
                let mut raw = raw;
                loop {
                    let wire::Field::Bytes(entry) = raw else {
                        return Err(type_error(message, field.json, "a map entry"));
                    };
                    let (key, value) = decode_entry(schema, message, field, entry)?;
                    map.insert(key, value);
                    match next_of(&mut reader, tag)? {
                        Some(next) => raw = next,
                        None => break,
                    }
                }
                extend_field(object, field.json, Value::Object(map));
            }
        }
    }
    Ok(())
}

/// The value of a map field's entry: field 2 of the entry message, written even when
/// zero.
fn map_value(field: &Field) -> Field {
    Field {
        tag: 2,
        json: field.json,
        ty: field.ty,
        label: Label::Optional,
        keep_zero: true,
    }
}

/// A repeated or map field's run, appended to what its earlier runs gave.
fn extend_field(object: &mut Map<String, Value>, key: &str, run: Value) {
    match object.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(run);
        }
        Entry::Occupied(mut slot) => match (slot.get_mut(), run) {
            (Value::Array(before), Value::Array(items)) => before.extend(items),
            (Value::Object(before), Value::Object(map)) => before.extend(map),
            _ => {}
        },
    }
}

/// The next field if it is numbered `tag` (the reader moves past it), else `None` (the
/// reader stays).
fn next_of<'a>(
    reader: &mut Reader<'a>,
    tag: u32,
) -> Result<Option<wire::Field<'a>>, ProtobufError> {
    let mut ahead = reader.clone();
    match ahead.next_field()? {
        Some((next, raw)) if next == tag => {
            *reader = ahead;
            Ok(Some(raw))
        }
        _ => Ok(None),
    }
}

fn decode_entry(
    schema: &Schema,
    message: &Message,
    field: &Field,
    bytes: &[u8],
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    let value_field = map_value(field);
    let mut reader = Reader::new(bytes);
    while let Some((tag, raw)) = reader.next_field()? {
        match tag {
            1 => key = string(message, field, raw)?,
            2 => value = decode_field(schema, message, &value_field, raw)?,
            _ => {}
        }
    }
    // An entry without a value holds the value type's zero.
    let value = match value {
        Some(value) => value,
        None => match field.ty {
            Type::Message(index) => decode(schema, index, &[])?.unwrap_or(Value::Null),
            Type::String | Type::Bytes => Value::String(String::new()),
            Type::Bool => Value::Bool(false),
            _ => Value::from(0),
        },
    };
    Ok((key, value))
}

fn string(message: &Message, field: &Field, raw: wire::Field<'_>) -> Result<String, ProtobufError> {
    match raw {
        wire::Field::Bytes(bytes) => String::from_utf8(bytes.to_vec())
            .map_err(|_| type_error(message, field.json, "UTF-8 text")),
        _ => Err(type_error(message, field.json, "a string")),
    }
}

/// One field's value; `None` for a zero that Go's `omitempty` would leave out.
fn decode_field(
    schema: &Schema,
    message: &Message,
    field: &Field,
    raw: wire::Field<'_>,
) -> Result<Option<Value>, ProtobufError> {
    let keep = field.keep_zero || field.label != Label::Optional;
    let value = match (field.ty, raw) {
        (Type::String, raw) => {
            let s = string(message, field, raw)?;
            (keep || !s.is_empty()).then(|| Value::String(s))
        }
        (Type::Int32, wire::Field::Varint(n)) => {
            let n = i64::from(n as i32);
            (keep || n != 0).then(|| Value::from(n))
        }
        (Type::Int64, wire::Field::Varint(n)) => {
            let n = n as i64;
            (keep || n != 0).then(|| Value::from(n))
        }
        (Type::Bool, wire::Field::Varint(n)) => (keep || n != 0).then_some(Value::Bool(n != 0)),
        (Type::Double, wire::Field::Fixed64(bits)) => {
            let f = f64::from_bits(bits);
            (keep || f != 0.0).then(|| number(f))
        }
        (Type::Bytes, wire::Field::Bytes(bytes)) => {
            (keep || !bytes.is_empty()).then(|| Value::String(BASE64.encode(bytes)))
        }
        (Type::Message(index), wire::Field::Bytes(bytes)) => decode(schema, index, bytes)?,
        _ => return Err(type_error(message, field.json, "another wire type")),
    };
    Ok(value)
}

/// A double as Go's JSON writes it: whole numbers without a fraction.
fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// The fields of a small special message: varints 1 to 3 and the last length-delimited
/// field of each of numbers 1 to 3, borrowed; and, for the special types that repeat
/// one (`collect`), all of them in wire order.
struct Small<'a> {
    ints: [u64; 3],
    last: [Option<&'a [u8]>; 3],
    all: Vec<(u32, &'a [u8])>,
}

impl<'a> Small<'a> {
    fn read(bytes: &'a [u8], collect: bool) -> Result<Small<'a>, ProtobufError> {
        let mut small = Small {
            ints: [0; 3],
            last: [None; 3],
            all: Vec::new(),
        };
        let mut reader = Reader::new(bytes);
        while let Some((tag, raw)) = reader.next_field()? {
            let slot = (1..=3).contains(&tag).then(|| tag as usize - 1);
            match (raw, slot) {
                (wire::Field::Varint(n), Some(slot)) => small.ints[slot] = n,
                (wire::Field::Bytes(b), slot) => {
                    if let Some(slot) = slot {
                        small.last[slot] = Some(b);
                    }
                    if collect {
                        small.all.push((tag, b));
                    }
                }
                _ => {}
            }
        }
        Ok(small)
    }

    /// The last length-delimited field `tag` (1 to 3).
    fn bytes(&self, tag: u32) -> Option<&'a [u8]> {
        self.last[tag as usize - 1]
    }

    /// Every length-delimited field `tag`, in wire order.
    fn every(&self, tag: u32) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.all
            .iter()
            .filter(move |(t, _)| *t == tag)
            .map(|(_, b)| *b)
    }
}

fn decode_special(
    schema: &Schema,
    message: &Message,
    special: Special,
    bytes: &[u8],
) -> Result<Option<Value>, ProtobufError> {
    let collect = matches!(
        special,
        Special::PropsOrArray | Special::Items | Special::PropsOrStringArray
    );
    let small = Small::read(bytes, collect)?;
    let ints = small.ints;
    let utf8 = |b: &[u8], field: &str| {
        String::from_utf8(b.to_vec()).map_err(|_| type_error(message, field, "UTF-8 text"))
    };
    let text = |tag: u32| -> Result<Option<String>, ProtobufError> {
        small.bytes(tag).map(|b| utf8(b, "")).transpose()
    };
    let raw_json = |tag: u32| -> Result<Option<Value>, ProtobufError> {
        match small.bytes(tag) {
            None => Ok(None),
            Some(raw) if raw.starts_with(super::MAGIC) => super::decode_object(raw).map(Some),
            Some(raw) => serde_json::from_slice(raw)
                .map(Some)
                .map_err(ProtobufError::Json),
        }
    };
    let props = |raw: &[u8]| -> Result<Value, ProtobufError> {
        let index = schema
            .message(PROPS)
            .ok_or(ProtobufError::Schema(PROPS.into()))?;
        Ok(decode(schema, index, raw)?.unwrap_or(Value::Null))
    };
    let value = match special {
        Special::Quantity => text(1)?.map(Value::String),
        Special::IntOrString => Some(match ints[0] {
            0 => Value::from(i64::from(ints[1] as i32)),
            _ => Value::String(text(3)?.unwrap_or_default()),
        }),
        // Go reads an empty Time as the zero time, written as null and left out.
        Special::Time if bytes.is_empty() => None,
        Special::Time => {
            let time = DateTime::<Utc>::from_timestamp(ints[0] as i64, 0)
                .ok_or_else(|| type_error(message, "seconds", "a time"))?;
            Some(Value::String(
                time.to_rfc3339_opts(SecondsFormat::Secs, true),
            ))
        }
        Special::MicroTime if bytes.is_empty() => None,
        Special::MicroTime => {
            let nanos = (ints[1] as u32) / 1000 * 1000;
            let time = DateTime::<Utc>::from_timestamp(ints[0] as i64, nanos)
                .ok_or_else(|| type_error(message, "seconds", "a time"))?;
            Some(Value::String(
                time.to_rfc3339_opts(SecondsFormat::Micros, true),
            ))
        }
        Special::Duration => Some(Value::String(format_duration(ints[0] as i64))),
        Special::RawExtension | Special::FieldsV1 | Special::Json => raw_json(1)?,
        Special::PropsOrArray => {
            let items: Vec<&[u8]> = small.every(2).collect();
            if items.is_empty() {
                small.bytes(1).map(props).transpose()?
            } else {
                Some(Value::Array(
                    items.into_iter().map(props).collect::<Result<_, _>>()?,
                ))
            }
        }
        Special::PropsOrBool => match small.bytes(2) {
            Some(raw) => Some(props(raw)?),
            None => Some(Value::Bool(ints[0] != 0)),
        },
        Special::Items => Some(Value::Array(
            small
                .every(1)
                .map(|b| utf8(b, "items").map(Value::String))
                .collect::<Result<_, _>>()?,
        )),
        Special::PropsOrStringArray => {
            let items: Vec<Value> = small
                .every(2)
                .map(|b| utf8(b, "property").map(Value::String))
                .collect::<Result<_, _>>()?;
            match small.bytes(1) {
                Some(raw) if items.is_empty() => Some(props(raw)?),
                _ => Some(Value::Array(items)),
            }
        }
    };
    Ok(value)
}

fn type_error(message: &Message, field: &str, expected: &str) -> ProtobufError {
    ProtobufError::Type {
        message: message.name.clone(),
        field: field.to_string(),
        expected: expected.to_string(),
    }
}

const UNITS: [(&str, f64); 7] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("μs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("m", 60e9),
];

/// Go's `time.ParseDuration`: `1h30m`, `1.5s`, `-250ms`, `0`.
pub(crate) fn parse_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let amount: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale = match unit {
            "h" => 3600e9,
            _ => UNITS.iter().find(|(u, _)| *u == unit)?.1,
        };
        total += amount * scale;
    }
    let nanos = total.round() as i64;
    Some(if negative { -nanos } else { nanos })
}

/// Go's `time.Duration.String`: `1h0m0s`, `1m30s`, `1.5s`, `250ms`, `0s`.
pub(crate) fn format_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n == 0 {
        return "0s".to_string();
    }
    if n < 1_000_000_000 {
        let (unit, scale) = match n {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(n, scale));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = n / 60_000_000_000 % 60;
    let seconds = fraction(n % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, m) => format!("{sign}{m}m{seconds}s"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}s"),
    }
}

/// `n / scale` with its fraction's trailing zeros dropped, as Go prints it.
fn fraction(n: u64, scale: u64) -> String {
    let whole = n / scale;
    let rest = n % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}
