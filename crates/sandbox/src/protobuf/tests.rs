//! Unit tests of the protobuf codec: every built-in kind the sandbox serves round-trips
//! and agrees with `k8s-pb`'s own messages; each special type is written byte for byte
//! as kube-apiserver writes it (bytes reasoned from the `.proto` definitions and Go's
//! generated marshallers).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64_STANDARD;
use prost::Message as _;
use serde_json::{Map, Value, json};

use super::codec;
use super::negotiate::{Accept, Format};
use super::schema::Schema;
use super::wire;
use super::*;

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

/// What protobuf can carry of a JSON object: no `null` members (Go reads `null` and a
/// missing key alike; protobuf has no null), and no `apiVersion` and `kind` in embedded
/// objects (a StatefulSet's volumeClaimTemplates: protobuf messages have no type meta,
/// so kube-apiserver's protobuf answers lack them too).
fn without_nulls(value: &Value) -> Value {
    fn strip(value: &Value, top: bool) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, v)| {
                        !v.is_null()
                            && (top
                                || (k.as_str() != "apiVersion" && k.as_str() != "kind")
                                || !map.contains_key("metadata"))
                    })
                    .map(|(k, v)| (k.clone(), strip(v, false)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| strip(v, false)).collect()),
            other => other.clone(),
        }
    }
    strip(value, true)
}

/// Every object kube-apiserver 1.36 answered in the recording (objects, lists,
/// Status errors, watch events) survives protobuf unchanged: real objects carry the
/// zeros (`restartCount: 0`, `ready: false`) that decoding must not drop.
#[test]
fn recorded_answers_round_trip() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kube-apiserver-v1.36");
    let mut objects = Vec::new();
    let mut folders = vec![root];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("the recording is there") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).expect("readable");
                let Ok(exchange) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                collect_objects(&exchange, &path.display().to_string(), &mut objects);
            }
        }
    }
    assert!(
        objects.len() > 50,
        "only {} recorded objects",
        objects.len()
    );
    let mut differences = Vec::new();
    for (file, object) in &objects {
        let bytes = match encode_object(object) {
            Ok(bytes) => bytes,
            // Answered in JSON by the sandbox, as the README's differences say.
            Err(ProtobufError::UnknownField { field, .. })
                if NEWER_THAN_K8S_PB.iter().any(|(_, f)| *f == field) =>
            {
                continue;
            }
            Err(err) => panic!("{file}: {} {}: {err}", object["apiVersion"], object["kind"]),
        };
        let decoded = decode_object(&bytes).expect("decodes");
        let mut found = Vec::new();
        differ("", &decoded, &without_nulls(object), &mut found);
        differences.extend(
            found
                .into_iter()
                .map(|d| format!("{file}: {object_kind} {d}", object_kind = object["kind"])),
        );
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// The paths where two values differ.
fn differ(path: &str, left: &Value, right: &Value, out: &mut Vec<String>) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for key in l.keys().chain(r.keys().filter(|k| !l.contains_key(*k))) {
                let null = Value::Null;
                let (a, b) = (l.get(key).unwrap_or(&null), r.get(key).unwrap_or(&null));
                differ(&format!("{path}.{key}"), a, b, out);
            }
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            for (i, (a, b)) in l.iter().zip(r).enumerate() {
                differ(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ if left != right => out.push(format!("{path}: {left} != {right}")),
        _ => {}
    }
}

/// Objects with a protobuf form anywhere in a recorded exchange.
fn collect_objects(value: &Value, file: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            let api_version = map.get("apiVersion").and_then(Value::as_str);
            let kind = map.get("kind").and_then(Value::as_str);
            if let (Some(api_version), Some(kind)) = (api_version, kind) {
                if has_message(api_version, kind) && map.contains_key("metadata") {
                    out.push((file.to_string(), value.clone()));
                    return;
                }
            }
            for child in map.values() {
                collect_objects(child, file, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_objects(item, file, out);
            }
        }
        _ => {}
    }
}

/// Kinds kubectl sends in protobuf from groups whose documents the sandbox does not
/// serve: `kubectl auth can-i` and `kubectl create priorityclass`.
#[test]
fn extra_kinds_round_trip_and_match_k8s_pb() {
    let schema = Schema::get().expect("schema table");
    let objects = [
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": "2026-11-24T01:02:03Z"},
            "spec": {"resourceAttributes": {"namespace": "demo", "verb": "create",
                "group": "apps", "resource": "deployments"}},
            "status": {"allowed": true, "reason": "sandbox"}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "metadata": {}, "spec": {"namespace": "demo"},
            "status": {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
                "incomplete": true}}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 1000, "globalDefault": true,
            "description": "d", "preemptionPolicy": "Never"}),
    ];
    for object in objects {
        let bytes = encode_object(&object).expect("encodes");
        assert_eq!(decode_object(&bytes).expect("decodes"), object);
        let index = schema
            .kind(
                object["apiVersion"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default(),
            )
            .expect("a message");
        let mut raw = Vec::new();
        codec::encode(schema, index, &object, &mut raw).expect("encodes");
        let name = &schema.messages[index].name;
        let again = prost_reencode(name, &raw)
            .expect("listed")
            .expect("k8s-pb decodes");
        assert_eq!(again, raw, "{name}");
    }
}

/// The message inside an envelope: (apiVersion, kind, bare message).
fn unwrap_envelope(bytes: &[u8]) -> (String, String, Vec<u8>) {
    let body = bytes.strip_prefix(MAGIC).expect("the magic number");
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), Vec::new());
    let mut reader = wire::Reader::new(body);
    while let Some((tag, field)) = reader.next_field().expect("an envelope") {
        match (tag, field) {
            (1, wire::Field::Bytes(type_meta)) => {
                let mut meta = wire::Reader::new(type_meta);
                while let Some((tag, wire::Field::Bytes(text))) =
                    meta.next_field().expect("type meta")
                {
                    let text = String::from_utf8_lossy(text).into_owned();
                    match tag {
                        1 => api_version = text,
                        _ => kind = text,
                    }
                }
            }
            (2, wire::Field::Bytes(bytes)) => raw = bytes.to_vec(),
            _ => {}
        }
    }
    (api_version, kind, raw)
}

/// The bytes of one `{"base64", "decoded"}` body of a reasoned fixture, from its decoded
/// form: an object enveloped, or a watch's events as frames.
fn reasoned_bytes(decoded: &Value, content_type: &str) -> Vec<u8> {
    if content_type == WATCH_MEDIA_TYPE {
        let events = decoded.as_array().expect("a watch's events");
        return events
            .iter()
            .flat_map(|e| {
                watch_frame(e["type"].as_str().expect("a type"), &e["object"]).expect("a frame")
            })
            .collect();
    }
    encode_object(decoded).expect("the decoded form encodes")
}

/// Checks that bytes read back as their decoded form, and that `k8s-pb` reads and
/// writes the message in them unchanged (an encoder independent of the sandbox's).
fn check_reasoned(file: &str, bytes: &[u8], decoded: &Value, content_type: &str) {
    let schema = Schema::get().expect("schema table");
    let mut objects = Vec::new();
    if content_type == WATCH_MEDIA_TYPE {
        let mut rest = bytes;
        let mut events = Vec::new();
        while !rest.is_empty() {
            let (event_type, object, after) = read_watch_frame(rest).expect("a frame");
            events.push(json!({"type": event_type, "object": object}));
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let mut event = wire::Reader::new(&rest[4..4 + len]);
            while let Some((tag, field)) = event.next_field().expect("a WatchEvent") {
                if let (2, wire::Field::Bytes(extension)) = (tag, field) {
                    let mut extension = wire::Reader::new(extension);
                    if let Some((1, wire::Field::Bytes(raw))) =
                        extension.next_field().expect("a RawExtension")
                    {
                        objects.push(raw.to_vec());
                    }
                }
            }
            rest = after;
        }
        let expected: Vec<Value> = decoded
            .as_array()
            .expect("events")
            .iter()
            .map(|e| json!({"type": e["type"], "object": without_nulls(&e["object"])}))
            .collect();
        let mut found = Vec::new();
        differ(
            "",
            &Value::Array(events),
            &Value::Array(expected),
            &mut found,
        );
        assert!(found.is_empty(), "{file}: {}", found.join("\n"));
    } else {
        let mut found = Vec::new();
        let read = decode_object(bytes).expect("the bytes decode");
        differ("", &read, &without_nulls(decoded), &mut found);
        assert!(found.is_empty(), "{file}: {}", found.join("\n"));
        objects.push(bytes.to_vec());
    }
    for enveloped in objects {
        let (api_version, kind, raw) = unwrap_envelope(&enveloped);
        let index = schema.kind(&api_version, &kind).expect("a message");
        let name = &schema.messages[index].name;
        let again = prost_reencode(name, &raw)
            .unwrap_or_else(|| panic!("{file}: {name} is not in k8s_pb_kinds.rs"))
            .unwrap_or_else(|e| panic!("{file}: k8s-pb cannot read {name}: {e}"));
        assert_eq!(again, raw, "{file}: k8s-pb writes {name} otherwise");
    }
}

/// The protobuf exchanges of `tests/fixtures/…/protobuf/` are reasoned from their JSON
/// twins (`reason.py` writes their decoded forms): their bytes are exactly what the
/// decoded forms encode to, read back the same, and agree with `k8s-pb`. With
/// `TETHER_REASON_FIXTURES=1` the bytes are (re)written instead of checked.
#[test]
fn reasoned_protobuf_fixtures() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kube-apiserver-v1.36/protobuf");
    let rewrite = std::env::var_os("TETHER_REASON_FIXTURES").is_some();
    let mut checked = 0;
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .expect("the protobuf fixtures are there")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for path in files {
        let file = path.display().to_string();
        let mut exchange: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("JSON");
        for side in ["request", "response"] {
            let content_type = exchange[side]["contentType"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let body = &mut exchange[side]["body"];
            let Some(decoded) = body.get("decoded").cloned() else {
                continue;
            };
            let given = BASE64_STANDARD
                .decode(body["base64"].as_str().unwrap_or_default())
                .expect("base64");
            if decoded.is_null() {
                // Bytes with no protobuf form (a custom resource's), given as they are.
                assert!(given.starts_with(MAGIC), "{file}");
                continue;
            }
            let bytes = reasoned_bytes(&decoded, &content_type);
            if rewrite {
                body["base64"] = Value::String(BASE64_STANDARD.encode(&bytes));
            } else {
                assert_eq!(
                    given, bytes,
                    "{file} {side}: the bytes are not the decoded form's"
                );
            }
            check_reasoned(&file, &bytes, &decoded, &content_type);
            checked += 1;
        }
        if rewrite {
            let text = serde_json::to_string_pretty(&exchange).expect("JSON");
            std::fs::write(&path, text + "\n").expect("written");
        }
    }
    assert!(checked >= 10, "only {checked} protobuf bodies checked");
}

#[test]
fn converted_kinds_round_trip_in_protobuf_as_served() {
    use crate::conversion;
    let v1 = conversion::hpa_v2_to_v1(json!({
        "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                             {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]},
        "status": {"currentReplicas": 1, "desiredReplicas": 1}
    }));
    let event = conversion::event_to_events(json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default"},
        "reason": "ScalingReplicaSet", "message": "Scaled up", "source": {"component": "deployment-controller"},
        "firstTimestamp": "2026-11-24T09:00:00Z", "lastTimestamp": "2026-11-24T09:00:00Z", "count": 1,
        "type": "Normal", "eventTime": "2026-11-24T09:00:00.123456Z", "reportingComponent": "deployment-controller", "reportingInstance": "kcm-0"
    }));
    for object in [v1, event] {
        let bytes = encode_object(&object).expect("encodes");
        let decoded = decode_object(&bytes).expect("decodes");
        // Go's zero values (a null time, an empty source) read back as unset.
        assert_eq!(without_nulls(&decoded), without_nulls(&object), "{object}");
    }
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
