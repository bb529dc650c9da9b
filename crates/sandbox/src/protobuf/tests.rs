//! Unit tests of the protobuf codec: every built-in kind the sandbox serves round-trips
//! and agrees with `k8s-pb`'s own messages; each special type is written byte for byte
//! as kube-apiserver writes it (bytes reasoned from the `.proto` definitions and Go's
//! generated marshallers).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64_STANDARD;
use prost::Message as _;
use serde_json::{Map, Value, json};

use super::codec::{self, format_duration, parse_duration};
use super::negotiate::{Accept, Format};
use super::schema::Schema;
use super::wire;
use super::*;

mod recorded;

/// Fields the served OpenAPI documents (kube-apiserver 1.36) have and `k8s-pb` 0.9
/// does not yet: objects that carry one are answered in JSON.
const NEWER_THAN_K8S_PB: &[(&str, &str)] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", "shardInfo"),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGroup"),
    (
        "io.k8s.api.core.v1.PodStatus",
        "nodeAllocatableResourceClaimStatuses",
    ),
    ("io.k8s.api.core.v1.ResourceHealth", "message"),
    ("io.k8s.api.core.v1.VolumeMountStatus", "volumeStatus"),
];

macro_rules! k8s_pb_kinds {
    ($($name:literal => $ty:ty,)*) => {
        /// Decodes a message body with `k8s-pb`'s type and encodes it again.
        fn prost_reencode(message: &str, raw: &[u8]) -> Option<Result<Vec<u8>, prost::DecodeError>> {
            match message {
                $($name => Some(<$ty>::decode(raw).map(|m| m.encode_to_vec())),)*
                _ => None,
            }
        }
    };
}
include!("k8s_pb_kinds.rs");

fn schemas() -> Map<String, Value> {
    let mut all = Map::new();
    for (_, text) in crate::openapi::builtin_documents() {
        let document: Value = serde_json::from_str(text).expect("recorded OpenAPI document");
        if let Some(Value::Object(schemas)) = document.pointer("/components/schemas") {
            all.extend(schemas.clone());
        }
    }
    all
}

/// Builds an object with every field of a schema set to a non-zero value, so that
/// each field's number and wire type is exercised.
struct Sampler<'a> {
    schemas: &'a Map<String, Value>,
    stack: Vec<String>,
    turn: u32,
}

impl Sampler<'_> {
    fn definition(&mut self, name: &str) -> Option<Value> {
        self.turn += 1;
        let odd = self.turn % 2 == 1;
        let short = name.rsplit('.').next().unwrap_or(name);
        let special = match short {
            "Time" => json!("2026-11-24T01:02:03Z"),
            "MicroTime" => json!("2026-11-24T01:02:03.123456Z"),
            "Quantity" => json!("250m"),
            "IntOrString" if odd => json!(8080),
            "IntOrString" => json!("http"),
            "RawExtension" => json!({"apiVersion": "v1", "kind": "Example", "n": 1}),
            "FieldsV1" => json!({"f:metadata": {"f:labels": {".": {}}}}),
            "JSON" => json!({"nested": [1, "two", true]}),
            "JSONSchemaPropsOrArray" if odd => json!({"type": "string"}),
            "JSONSchemaPropsOrArray" => json!([{"type": "string"}, {"type": "integer"}]),
            "JSONSchemaPropsOrBool" if odd => json!(true),
            "JSONSchemaPropsOrBool" => json!({"type": "object"}),
            "JSONSchemaPropsOrStringArray" if odd => json!(["a", "b"]),
            "JSONSchemaPropsOrStringArray" => json!({"type": "number"}),
            _ => Value::Null,
        };
        if !special.is_null() {
            return Some(special);
        }
        if self.stack.iter().any(|s| s == name) {
            return None;
        }
        let schema = self.schemas.get(name)?.clone();
        self.stack.push(name.to_string());
        let value = self.object(name, &schema);
        self.stack.pop();
        value
    }

    fn object(&mut self, name: &str, schema: &Value) -> Option<Value> {
        let mut object = Map::new();
        for (key, property) in schema["properties"].as_object()? {
            let newer = NEWER_THAN_K8S_PB.contains(&(name, key.as_str()));
            if newer || key == "apiVersion" || key == "kind" {
                continue;
            }
            if let Some(value) = self.value(property) {
                object.insert(key.clone(), value);
            }
        }
        Some(Value::Object(object))
    }

    fn value(&mut self, schema: &Value) -> Option<Value> {
        let reference = schema["$ref"]
            .as_str()
            .or_else(|| schema.pointer("/allOf/0/$ref").and_then(Value::as_str));
        if let Some(reference) = reference {
            return self.definition(reference.trim_start_matches("#/components/schemas/"));
        }
        self.turn += 1;
        match schema["type"].as_str() {
            Some("string") if schema["format"] == "byte" => Some(json!("aGVsbG8=")),
            Some("string") => Some(json!(format!("s{}", self.turn))),
            Some("integer") => Some(json!(self.turn % 1000 + 1)),
            Some("number") => Some(json!(1.5)),
            Some("boolean") => Some(json!(true)),
            Some("array") => Some(Value::Array(vec![self.value(&schema["items"])?])),
            Some("object") if schema["additionalProperties"].is_object() => {
                let value = self.value(&schema["additionalProperties"])?;
                Some(json!({"some-key": value}))
            }
            _ => Some(json!({})),
        }
    }
}

/// Every group-version-kind the served documents list, with its definition.
fn served_kinds() -> Vec<(String, String, String)> {
    let mut kinds = Vec::new();
    for (_, text) in crate::openapi::builtin_documents() {
        let document: Value = serde_json::from_str(text).expect("recorded OpenAPI document");
        let Some(Value::Object(schemas)) = document.pointer("/components/schemas") else {
            continue;
        };
        kinds.extend(kinds_of(schemas));
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

fn kinds_of(schemas: &Map<String, Value>) -> Vec<(String, String, String)> {
    let mut kinds = Vec::new();
    for (name, schema) in schemas {
        for gvk in schema["x-kubernetes-group-version-kind"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let group = gvk["group"].as_str().unwrap_or_default();
            let version = gvk["version"].as_str().unwrap_or_default();
            let api_version = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            let kind = gvk["kind"].as_str().unwrap_or_default().to_string();
            kinds.push((api_version, kind, name.clone()));
        }
    }
    kinds
}

#[test]
fn every_served_kind_round_trips_and_matches_k8s_pb() {
    let schemas = schemas();
    let schema = Schema::get().expect("schema table");
    let kinds = served_kinds();
    assert!(kinds.len() > 90, "only {} kinds found", kinds.len());
    // The kinds served in a version they are not stored in are served in protobuf too.
    for (api_version, kind) in [
        ("autoscaling/v1", "HorizontalPodAutoscaler"),
        ("autoscaling/v1", "HorizontalPodAutoscalerList"),
        ("events.k8s.io/v1", "Event"),
        ("events.k8s.io/v1", "EventList"),
    ] {
        assert!(
            kinds.iter().any(|(v, k, _)| v == api_version && k == kind),
            "{api_version} {kind} is not among the served kinds"
        );
    }
    for (api_version, kind, definition) in &kinds {
        let index = schema
            .kind(api_version, kind)
            .unwrap_or_else(|| panic!("no protobuf message for {api_version} {kind}"));
        let mut sampler = Sampler {
            schemas: &schemas,
            stack: Vec::new(),
            turn: 0,
        };
        let mut object = sampler.definition(definition).expect("a sample object");
        object["apiVersion"] = json!(api_version);
        object["kind"] = json!(kind);

        let bytes = encode_object(&object)
            .unwrap_or_else(|e| panic!("{api_version} {kind}: cannot encode: {e}"));
        let decoded = decode_object(&bytes)
            .unwrap_or_else(|e| panic!("{api_version} {kind}: cannot decode: {e}"));
        assert_eq!(decoded, object, "{api_version} {kind} changed on the way");

        // k8s-pb's message reads the same fields and writes the same bytes back.
        let mut raw = Vec::new();
        codec::encode(schema, index, &object, &mut raw).expect("encodes");
        let name = &schema.messages[index].name;
        let again = prost_reencode(name, &raw)
            .unwrap_or_else(|| panic!("no k8s-pb message listed for {name}"))
            .unwrap_or_else(|e| panic!("k8s-pb cannot decode {name}: {e}"));
        assert_eq!(
            again, raw,
            "{name}: k8s-pb reads other fields than the table"
        );
    }
}

#[test]
fn fields_newer_than_k8s_pb_answer_json_instead() {
    let schemas = schemas();
    for (definition, field) in NEWER_THAN_K8S_PB {
        assert!(
            schemas[*definition]["properties"].get(*field).is_some(),
            "{definition}.{field} is no longer served: drop it from the list"
        );
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], "schedulingGroup": {}}});
    assert!(matches!(
        encode_object(&pod),
        Err(ProtobufError::UnknownField { field, .. }) if field == "schedulingGroup"
    ));
}

fn special(name: &str, value: Value) -> Vec<u8> {
    let schema = Schema::get().expect("schema table");
    let index = schema.message(name).expect("message");
    let mut out = Vec::new();
    codec::encode(schema, index, &value, &mut out).expect("encodes");
    let back = codec::decode(schema, index, &out).expect("decodes");
    assert_eq!(back, Some(value), "{name} round trip");
    out
}

#[test]
fn quantity_is_its_string() {
    assert_eq!(
        special("apimachinery.pkg.api.resource.Quantity", json!("250m")),
        b"\x0a\x04250m"
    );
}

#[test]
fn int_or_string_writes_type_int_and_string_always() {
    let name = "apimachinery.pkg.util.intstr.IntOrString";
    // type=0 (Int), intVal=8080 (varint 0x90 0x3f), strVal="".
    assert_eq!(special(name, json!(8080)), b"\x08\x00\x10\x90\x3f\x1a\x00");
    assert_eq!(
        special(name, json!("http")),
        b"\x08\x01\x10\x00\x1a\x04http"
    );
    // A negative int32 is a ten-byte varint, as Go writes it.
    let negative = special(name, json!(-1));
    assert_eq!(negative.len(), 2 + 1 + 10 + 2);
}

#[test]
fn time_is_seconds_and_zero_nanos_and_reads_seconds_only() {
    let name = "apimachinery.pkg.apis.meta.v1.Time";
    // 2026-11-24T01:02:03Z = 1795482123 s.
    let bytes = special(name, json!("2026-11-24T01:02:03Z"));
    let mut expected = vec![0x08];
    wire::put_varint(&mut expected, 1_795_482_123);
    expected.extend_from_slice(&[0x10, 0x00]);
    assert_eq!(bytes, expected);

    // Go's Time.Unmarshal drops the nanoseconds, and an empty Time is unset.
    let schema = Schema::get().expect("schema table");
    let index = schema.message(name).expect("message");
    let mut with_nanos = vec![0x08];
    wire::put_varint(&mut with_nanos, 1_795_482_123);
    with_nanos.extend_from_slice(&[0x10, 0x05]);
    assert_eq!(
        codec::decode(schema, index, &with_nanos).expect("decodes"),
        Some(json!("2026-11-24T01:02:03Z"))
    );
    assert_eq!(codec::decode(schema, index, &[]).expect("decodes"), None);
}

#[test]
fn micro_time_keeps_microseconds() {
    let bytes = special(
        "apimachinery.pkg.apis.meta.v1.MicroTime",
        json!("2026-11-24T01:02:03.123456Z"),
    );
    let mut expected = vec![0x08];
    wire::put_varint(&mut expected, 1_795_482_123);
    expected.push(0x10);
    wire::put_varint(&mut expected, 123_456_000);
    assert_eq!(bytes, expected);
}

#[test]
fn duration_is_nanoseconds_and_a_go_duration_string() {
    let bytes = special("apimachinery.pkg.apis.meta.v1.Duration", json!("1h30m0s"));
    let mut expected = vec![0x08];
    wire::put_varint(&mut expected, 5_400_000_000_000);
    assert_eq!(bytes, expected);
    for (text, nanos) in [
        ("0s", 0),
        ("1.5s", 1_500_000_000),
        ("250ms", 250_000_000),
        ("1m0s", 60_000_000_000),
        ("-2µs", -2_000),
        ("3ns", 3),
    ] {
        assert_eq!(parse_duration(text), Some(nanos), "{text}");
        assert_eq!(format_duration(nanos), text);
    }
    assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
    assert_eq!(parse_duration("ten seconds"), None);
    assert_eq!(parse_duration(""), None);
}

#[test]
fn raw_extension_and_fields_v1_carry_json_bytes() {
    let raw = special("apimachinery.pkg.runtime.RawExtension", json!({"a": 1}));
    assert_eq!(raw, b"\x0a\x07{\"a\":1}");
    let fields = special(
        "apimachinery.pkg.apis.meta.v1.FieldsV1",
        json!({"f:data": {}}),
    );
    assert_eq!(fields, b"\x0a\x0d{\"f:data\":{}}");
}

#[test]
fn bytes_are_base64_in_json_and_raw_on_the_wire() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"k": "aGk="}});
    let bytes = encode_object(&secret).expect("encodes");
    // data is field 2: an entry with key "k" (field 1) and the raw bytes "hi" (field 2).
    let entry = b"\x12\x07\x0a\x01k\x12\x02hi";
    assert!(bytes.windows(entry.len()).any(|w| w == entry));
    assert_eq!(decode_object(&bytes).expect("decodes"), secret);

    let bad = json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "not base64!"}});
    assert!(matches!(
        encode_object(&bad),
        Err(ProtobufError::Type { .. })
    ));
}

#[test]
fn envelope_is_magic_and_runtime_unknown() {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a"}, "data": {"k": "v"}});
    let bytes = encode_object(&config_map).expect("encodes");
    // metadata (1) {name (1) "a"}, data (2) {key "k", value "v"}
    let raw = b"\x0a\x03\x0a\x01a\x12\x06\x0a\x01k\x12\x01v";
    let mut expected = b"k8s\x00".to_vec();
    expected.extend_from_slice(b"\x0a\x0f\x0a\x02v1\x12\x09ConfigMap");
    expected.push(0x12);
    expected.push(raw.len() as u8);
    expected.extend_from_slice(raw);
    expected.extend_from_slice(b"\x1a\x00\x22\x00");
    assert_eq!(bytes, expected);
    assert_eq!(decode_object(&bytes).expect("decodes"), config_map);
}

#[test]
fn go_zero_values_read_as_unset() {
    // What kubectl (Go) writes for a new Namespace's metadata: every non-pointer field,
    // empty or zero, and an empty creationTimestamp.
    let mut meta = Vec::new();
    wire::put_bytes(&mut meta, 1, b"demo");
    for tag in 2..=6 {
        wire::put_bytes(&mut meta, tag, b"");
    }
    wire::put_key(&mut meta, 7, wire::VARINT);
    wire::put_varint(&mut meta, 0);
    wire::put_bytes(&mut meta, 8, b"");
    let mut namespace = Vec::new();
    wire::put_bytes(&mut namespace, 1, &meta);
    wire::put_bytes(&mut namespace, 2, b"");
    wire::put_bytes(&mut namespace, 3, b"");
    let bytes = super::envelope("v1", "Namespace", &namespace);
    assert_eq!(
        decode_object(&bytes).expect("decodes"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"},
            "spec": {}, "status": {}})
    );
}

#[test]
fn pointer_zeros_are_values() {
    // kubectl create deployment --replicas=0: replicas is a Go pointer, minReadySeconds
    // and paused are not (Go writes them as 0 and false, and reads them as unset).
    let mut spec = Vec::new();
    for (tag, value) in [(1, 0), (5, 0), (7, 0)] {
        wire::put_key(&mut spec, tag, wire::VARINT);
        wire::put_varint(&mut spec, value);
    }
    let mut deployment = Vec::new();
    wire::put_bytes(&mut deployment, 2, &spec);
    let bytes = super::envelope("apps/v1", "Deployment", &deployment);
    assert_eq!(
        decode_object(&bytes).expect("decodes"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 0}})
    );
    let schema = Schema::get().expect("schema table");
    for (message, field) in super::schema::POINTERS {
        let index = schema.message(message).expect("a listed message exists");
        assert!(
            schema.messages[index].field_by_json(field).is_some(),
            "{message}.{field} is not a field"
        );
    }
}

#[test]
fn inline_structs_spread_into_their_parent() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}}}],
            "volumes": [{"name": "v", "emptyDir": {}}]}});
    let bytes = encode_object(&pod).expect("encodes");
    assert_eq!(decode_object(&bytes).expect("decodes"), pod);
}

#[test]
fn watch_frames_are_length_prefixed_watch_events() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    let frame = watch_frame("ADDED", &object).expect("encodes");
    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    assert_eq!(len, frame.len() - 4);
    // type (1) "ADDED", then object (2) = RawExtension{raw (1): the enveloped object}.
    assert_eq!(&frame[4..11], b"\x0a\x05ADDED");
    let enveloped = encode_object(&object).expect("encodes");
    assert!(frame.ends_with(&enveloped));
    let (event_type, decoded, rest) = read_watch_frame(&frame).expect("reads");
    assert_eq!(event_type, "ADDED");
    assert_eq!(decoded, object);
    assert!(rest.is_empty());
    assert!(matches!(
        read_watch_frame(&frame[..frame.len() - 1]),
        Err(ProtobufError::Truncated)
    ));
}

#[test]
fn status_errors_encode() {
    let status = crate::status::ApiError::not_found("configmaps", "x").status();
    let bytes = encode_object(&status).expect("encodes");
    assert_eq!(decode_object(&bytes).expect("decodes"), status);
}

#[test]
fn bad_bodies_are_errors_not_panics() {
    assert!(matches!(
        decode_object(b"{\"kind\":\"ConfigMap\"}"),
        Err(ProtobufError::NoMagic)
    ));
    assert!(matches!(
        decode_object(b"k8s\x00\x0a\x05\x0a"),
        Err(ProtobufError::Truncated)
    ));
    let custom = super::envelope("example.com/v1", "Widget", b"");
    assert!(matches!(
        decode_object(&custom),
        Err(ProtobufError::UnknownKind { .. })
    ));
    let unknown = json!({"apiVersion": "v1", "kind": "ConfigMap", "surprise": 1});
    assert!(matches!(
        encode_object(&unknown),
        Err(ProtobufError::UnknownField { .. })
    ));
    let wrong = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": ["x"]});
    assert!(matches!(
        encode_object(&wrong),
        Err(ProtobufError::Type { .. })
    ));
}

fn accept(value: &str) -> Accept {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_str(value).expect("header"),
    );
    Accept::from_headers(&headers)
}

#[test]
fn protobuf_first_accept_answers_protobuf_only_for_built_in_kinds() {
    let both = accept("application/vnd.kubernetes.protobuf, */*");
    assert_eq!(both.choose(true), Format::Protobuf);
    assert_eq!(both.choose(false), Format::Json);
    let json_first = accept("application/json, application/vnd.kubernetes.protobuf");
    assert_eq!(json_first.choose(true), Format::Json);
    let weighted = accept("application/json;q=0.5, application/vnd.kubernetes.protobuf");
    assert_eq!(weighted.choose(true), Format::Protobuf);
    let table =
        accept("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json");
    assert_eq!(table.choose(true), Format::Json);
    assert_eq!(Accept::default().choose(true), Format::Json);
    assert!(both.mentions_protobuf());
    assert!(!accept("application/json").mentions_protobuf());
}

#[test]
fn split_runs_of_repeated_and_map_fields_gather_into_one_key() {
    // Go writes a repeated field's items and a map's entries one after another; the
    // format allows them apart, and a decoder must then gather them, in wire order, as
    // Go's does. ConfigMap: metadata (1), data (2, map), binaryData (3, map).
    let mut meta = Vec::new();
    wire::put_bytes(&mut meta, 1, b"split");
    // ObjectMeta.finalizers (14), split by generateName (2).
    wire::put_bytes(&mut meta, 14, b"a");
    wire::put_bytes(&mut meta, 14, b"b");
    wire::put_bytes(&mut meta, 2, b"gen-");
    wire::put_bytes(&mut meta, 14, b"c");
    let entry = |key: &str, value: &str| {
        let mut entry = Vec::new();
        wire::put_bytes(&mut entry, 1, key.as_bytes());
        wire::put_bytes(&mut entry, 2, value.as_bytes());
        entry
    };
    let mut config_map = Vec::new();
    wire::put_bytes(&mut config_map, 2, &entry("k1", "v1"));
    wire::put_bytes(&mut config_map, 2, &entry("k2", "v2"));
    wire::put_bytes(&mut config_map, 1, &meta);
    wire::put_bytes(&mut config_map, 2, &entry("k3", "v3"));
    // A later entry of a key already read replaces its value, as Go's map does.
    wire::put_bytes(&mut config_map, 2, &entry("k1", "again"));
    let bytes = super::envelope("v1", "ConfigMap", &config_map);
    let decoded = decode_object(&bytes).expect("decodes");
    assert_eq!(
        decoded,
        json!({"kind": "ConfigMap", "apiVersion": "v1",
            "data": {"k1": "again", "k2": "v2", "k3": "v3"},
            "metadata": {"name": "split", "finalizers": ["a", "b", "c"], "generateName": "gen-"}})
    );
    let keys: Vec<&String> = decoded["data"].as_object().expect("data").keys().collect();
    assert_eq!(keys, ["k1", "k2", "k3"], "wire order, first place kept");
}

#[test]
fn field_numbers_past_the_table_are_skipped_and_bad_runs_are_errors() {
    // A field newer than the table, numbered beyond any it knows, is read past.
    let mut config_map = Vec::new();
    wire::put_bytes(&mut config_map, 4000, b"future");
    wire::put_bytes(&mut config_map, 2, b"\x0a\x01k\x12\x01v");
    wire::put_key(&mut config_map, 123_456, wire::VARINT);
    wire::put_varint(&mut config_map, 7);
    let bytes = super::envelope("v1", "ConfigMap", &config_map);
    assert_eq!(
        decode_object(&bytes).expect("decodes"),
        json!({"kind": "ConfigMap", "apiVersion": "v1", "data": {"k": "v"}})
    );
    // A run of map entries whose second is truncated is an error, not a short map.
    let mut broken = Vec::new();
    wire::put_bytes(&mut broken, 2, b"\x0a\x01k\x12\x01v");
    broken.extend_from_slice(b"\x12\x09\x0a\x01");
    let bytes = super::envelope("v1", "ConfigMap", &broken);
    assert!(matches!(
        decode_object(&bytes),
        Err(ProtobufError::Truncated)
    ));
    // A map entry that is a varint is refused.
    let mut varint = Vec::new();
    wire::put_bytes(&mut varint, 2, b"\x0a\x01k\x12\x01v");
    wire::put_key(&mut varint, 2, wire::VARINT);
    wire::put_varint(&mut varint, 1);
    let bytes = super::envelope("v1", "ConfigMap", &varint);
    assert!(matches!(
        decode_object(&bytes),
        Err(ProtobufError::Type { .. })
    ));
}

#[test]
fn an_object_is_encoded_in_place_inside_its_envelope() {
    // The store keeps the enveloped bytes and takes list items from inside them: the
    // one-buffer encoding must be the envelope around the bare message, byte for byte,
    // with the range naming exactly that message, short or long (a length of two bytes).
    let schema = Schema::get().expect("schema table");
    let long = "x".repeat(300);
    for config_map in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
            "data": {"long": long}}),
    ] {
        let (bytes, range) = encode_enveloped(&config_map, 0).expect("encodes");
        let index = schema.kind("v1", "ConfigMap").expect("a message");
        let mut raw = Vec::new();
        codec::encode(schema, index, &config_map, &mut raw).expect("encodes");
        assert_eq!(&bytes[range.clone()], &raw[..]);
        assert_eq!(bytes, envelope("v1", "ConfigMap", &raw));
        assert_eq!(bytes, encode_object(&config_map).expect("encodes"));
        assert_eq!(decode_object(&bytes).expect("decodes"), config_map);
    }
    let custom = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    assert!(matches!(
        encode_enveloped(&custom, 0),
        Err(ProtobufError::UnknownKind { .. })
    ));
}

#[test]
fn varint_lengths_match_what_is_written() {
    for value in [
        0,
        1,
        127,
        128,
        16_383,
        16_384,
        u64::from(u32::MAX),
        u64::MAX,
    ] {
        let mut out = Vec::new();
        wire::put_varint(&mut out, value);
        assert_eq!(wire::varint_len(value), out.len(), "{value}");
    }
}
