//! The codec against what kube-apiserver answered: every recorded answer survives
//! protobuf, the reasoned fixtures are exactly the bytes their decoded forms encode to,
//! and kinds kubectl sends or the sandbox converts round-trip and agree with `k8s-pb`.

use super::*;

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
                let has_message = Schema::get().is_ok_and(|s| s.kind(api_version, kind).is_some());
                if has_message && map.contains_key("metadata") {
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
