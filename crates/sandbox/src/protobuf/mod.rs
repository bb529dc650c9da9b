//! Protobuf on the sandbox's wire, as kube-apiserver speaks it for built-in kinds:
//! `kubectl create` sends `application/vnd.kubernetes.protobuf` bodies and many reads
//! ask for protobuf first. Requests are decoded to the same JSON the sandbox stores;
//! answers, `Status` errors and watch frames are encoded on the way out. Custom
//! resources have no protobuf form: their bodies get 415 and their answers stay JSON.
//!
//! Every object travels in the `k8s\0` envelope, a `runtime.Unknown` holding the type
//! meta and the message's bytes; watch frames are 4-byte big-endian lengths followed
//! by a bare `WatchEvent` whose object is such an envelope.

mod codec;
pub(crate) mod negotiate;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

use serde_json::{Map, Value};

pub(crate) use negotiate::{Accept, Format};
pub(crate) use schema::Schema;

/// The media type of protobuf bodies and answers.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The four bytes every protobuf object starts with.
pub const MAGIC: &[u8] = b"k8s\0";

const WATCH_EVENT: &str = "apimachinery.pkg.apis.meta.v1.WatchEvent";

/// Why a body could not be read or an answer not written in protobuf. None is
/// retryable: the bytes or the object must change.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("the protobuf message ends in the middle of a field")]
    Truncated,
    #[error("malformed protobuf: {0}")]
    Malformed(String),
    #[error("the body does not start with the protobuf magic number k8s\\0")]
    NoMagic,
    #[error("no protobuf message for {api_version}, Kind={kind}")]
    UnknownKind { api_version: String, kind: String },
    #[error("{message} has no field {field:?}")]
    UnknownField { message: String, field: String },
    #[error("{message}.{field}: expected {expected}")]
    Type {
        message: String,
        field: String,
        expected: String,
    },
    #[error("unsupported content encoding {0:?}")]
    ContentEncoding(String),
    #[error("embedded JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("the protobuf schema table is broken: {0}")]
    Schema(String),
}

/// Encodes an object (or list, or `Status`) in the `k8s\0` + `runtime.Unknown` envelope.
pub fn encode_object(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    encode_enveloped(object, 256).map(|(bytes, _)| bytes)
}

/// [`encode_object`] into one buffer of `capacity` bytes, the message written in place
/// inside the envelope rather than copied into it; with where the bare message lies (a
/// list's item). What the store keeps of an object written or read in protobuf.
pub(crate) fn encode_enveloped(
    object: &Value,
    capacity: usize,
) -> Result<(Vec<u8>, std::ops::Range<usize>), ProtobufError> {
    let schema = Schema::get()?;
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let index = schema.known_kind(api_version, kind)?;
    let mut out = Vec::with_capacity(capacity + api_version.len() + kind.len() + 24);
    out.extend_from_slice(MAGIC);
    put_type_meta(&mut out, api_version, kind);
    let mut len = 0;
    wire::put_nested(&mut out, 2, |out| {
        let start = out.len();
        codec::encode(schema, index, object, out)?;
        len = out.len() - start;
        Ok::<_, ProtobufError>(())
    })?;
    let end = out.len();
    wire::put_bytes(&mut out, 3, b"");
    wire::put_bytes(&mut out, 4, b"");
    Ok((out, end - len..end))
}

/// `runtime.Unknown`'s field 1, `TypeMeta{apiVersion, kind}`, its length known ahead.
fn put_type_meta(out: &mut Vec<u8>, api_version: &str, kind: &str) {
    let len: usize = [api_version, kind]
        .iter()
        .map(|s| 1 + wire::varint_len(s.len() as u64) + s.len())
        .sum();
    wire::put_key(out, 1, wire::LENGTH_DELIMITED);
    wire::put_varint(out, len as u64);
    wire::put_bytes(out, 1, api_version.as_bytes());
    wire::put_bytes(out, 2, kind.as_bytes());
}

/// A list of built-in objects from their bare messages ([`encode_enveloped`]): the
/// list's `ListMeta` and its items, enveloped as `kind` (e.g. `ConfigMapList`).
pub(crate) fn encode_list<'a>(
    api_version: &str,
    kind: &str,
    metadata: &Value,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, ProtobufError> {
    let schema = Schema::get()?;
    let list = schema.known_kind(api_version, kind)?;
    let message = &schema.messages[list];
    let field = |name: &str| {
        message
            .field_by_json(name)
            .ok_or_else(|| ProtobufError::Schema(format!("{} has no {name}", message.name)))
    };
    let (meta_field, items_field) = (field("metadata")?, field("items")?);
    let schema::Type::Message(list_meta) = meta_field.ty else {
        return Err(ProtobufError::Schema(format!("{}.metadata", message.name)));
    };
    let mut meta = Vec::with_capacity(64);
    codec::encode(schema, list_meta, metadata, &mut meta)?;
    let mut raw = Vec::with_capacity(1024);
    wire::put_bytes(&mut raw, meta_field.tag, &meta);
    for item in items {
        wire::put_bytes(&mut raw, items_field.tag, item);
    }
    Ok(envelope(api_version, kind, &raw))
}

/// `k8s\0` + `runtime.Unknown{typeMeta, raw, contentEncoding: "", contentType: ""}`,
/// every field written as Go writes it (the two empty strings included).
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + api_version.len() + kind.len() + 24);
    out.extend_from_slice(MAGIC);
    put_type_meta(&mut out, api_version, kind);
    wire::put_bytes(&mut out, 2, raw);
    wire::put_bytes(&mut out, 3, b"");
    wire::put_bytes(&mut out, 4, b"");
    out
}

/// Decodes an enveloped object to the JSON kube-apiserver would answer for it, with
/// `apiVersion` and `kind` from the envelope.
pub fn decode_object(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let schema = Schema::get()?;
    let body = bytes.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut reader = wire::Reader::new(body);
    while let Some((tag, field)) = reader.next_field()? {
        match (tag, field) {
            (1, wire::Field::Bytes(type_meta)) => {
                let mut meta = wire::Reader::new(type_meta);
                while let Some((tag, field)) = meta.next_field()? {
                    if let wire::Field::Bytes(text) = field {
                        let text = String::from_utf8_lossy(text).into_owned();
                        match tag {
                            1 => api_version = text,
                            2 => kind = text,
                            _ => {}
                        }
                    }
                }
            }
            (2, wire::Field::Bytes(bytes)) => raw = bytes,
            (3, wire::Field::Bytes(encoding)) if !encoding.is_empty() => {
                return Err(ProtobufError::ContentEncoding(
                    String::from_utf8_lossy(encoding).into_owned(),
                ));
            }
            _ => {}
        }
    }
    let index = schema
        .kind(&api_version, &kind)
        .ok_or_else(|| ProtobufError::UnknownKind {
            api_version: api_version.clone(),
            kind: kind.clone(),
        })?;
    // The fields go straight into the object that starts with the type meta, rather
    // than into one of their own that is then copied over.
    let mut object = Map::with_capacity(2 + codec::field_count(raw)?);
    object.insert("kind".into(), Value::String(kind));
    object.insert("apiVersion".into(), Value::String(api_version));
    match schema.messages[index].special {
        None => codec::decode_into(schema, index, raw, &mut object)?,
        Some(_) => {
            if let Some(Value::Object(fields)) = codec::decode(schema, index, raw)? {
                object.extend(fields);
            }
        }
    }
    Ok(Value::Object(object))
}

/// One protobuf watch frame: the length, then `WatchEvent{type, object: RawExtension{raw:
/// <enveloped object>}}`.
pub(crate) fn watch_frame(event_type: &str, object: &Value) -> Result<Vec<u8>, ProtobufError> {
    watch_frame_of(event_type, &encode_object(object)?)
}

/// One protobuf watch frame around an object already enveloped.
pub(crate) fn watch_frame_of(event_type: &str, raw: &[u8]) -> Result<Vec<u8>, ProtobufError> {
    let mut extension = Vec::with_capacity(raw.len() + 8);
    wire::put_bytes(&mut extension, 1, raw);
    let mut event = Vec::with_capacity(extension.len() + event_type.len() + 8);
    wire::put_bytes(&mut event, 1, event_type.as_bytes());
    wire::put_bytes(&mut event, 2, &extension);
    let mut frame = Vec::with_capacity(event.len() + 4);
    let len = u32::try_from(event.len())
        .map_err(|_| ProtobufError::Malformed("watch event larger than 4 GiB".into()))?;
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&event);
    Ok(frame)
}

/// Reads one watch frame back: the event type and the object, and the bytes after it.
pub fn read_watch_frame(bytes: &[u8]) -> Result<(String, Value, &[u8]), ProtobufError> {
    let schema = Schema::get()?;
    if bytes.len() < 4 {
        return Err(ProtobufError::Truncated);
    }
    let (len, rest) = bytes.split_at(4);
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if rest.len() < len {
        return Err(ProtobufError::Truncated);
    }
    let (event, rest) = rest.split_at(len);
    let index = schema
        .message(WATCH_EVENT)
        .ok_or_else(|| ProtobufError::Schema(WATCH_EVENT.into()))?;
    let value = codec::decode(schema, index, event)?.unwrap_or(Value::Null);
    let event_type = value["type"].as_str().unwrap_or_default().to_string();
    Ok((event_type, value["object"].clone(), rest))
}
