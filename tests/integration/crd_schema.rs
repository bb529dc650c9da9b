//! Custom resources against their CRD's structural schema in the sandbox, over HTTP and
//! with the real kubectl: what kube-apiserver refuses (`required`, `enum`, `pattern`,
//! bounds, lengths, sizes, `format`, types, `nullable`), with its status codes, messages
//! and causes; and undeclared fields as kube-apiserver treats them: refused by
//! server-side apply, and for other writes as `fieldValidation` says (Strict refuses,
//! Warn drops with a `Warning` header, Ignore drops). Issue #31's two cases come first.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Answer, TestSandbox};

const NAMESPACE: &str = "crd-schema";
const BACKUPS: &str = "/apis/fidelity.example.com/v1/namespaces/crd-schema/backups";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: backups.fidelity.example.com
spec:
  group: fidelity.example.com
  scope: Namespaced
  names: {plural: backups, singular: backup, kind: Backup}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [source]
            properties:
              source: {type: string, minLength: 3, maxLength: 20, pattern: '^[a-z][a-z0-9-]*$'}
              schedule: {type: string, enum: [hourly, daily]}
              retain: {type: integer, minimum: 1, maximum: 30}
              ratio: {type: number, minimum: 0, exclusiveMinimum: true, maximum: 1, exclusiveMaximum: true}
              startDate: {type: string, format: date}
              port: {x-kubernetes-int-or-string: true}
              targets: {type: array, minItems: 1, maxItems: 2, items: {type: string}}
              labels: {type: object, maxProperties: 2, additionalProperties: {type: string}}
              note: {type: string, nullable: true}
              paused: {type: boolean}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// A sandbox with the CRD established and the namespace created.
async fn sandbox() -> TestSandbox {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace(NAMESPACE).await;
    let crd = sandbox.write_file("crd.yaml", CRD);
    sandbox
        .kubectl(&["apply", "--server-side", "-f", &crd])
        .await
        .ok();
    sandbox
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/backups.fidelity.example.com",
            "--timeout=10s",
        ])
        .await
        .ok();
    sandbox
}

fn backup(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "fidelity.example.com/v1", "kind": "Backup",
           "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})
}

fn yaml(value: &Value) -> String {
    serde_json::to_string(value).expect("JSON is YAML")
}

async fn apply(sandbox: &TestSandbox, object: &Value, query: &str) -> Answer {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    sandbox
        .patch(
            &format!("{BACKUPS}/{name}?fieldManager=tether{query}"),
            "application/apply-patch+yaml",
            &yaml(object),
        )
        .await
}

#[track_caller]
fn assert_not_stored(answer: &Answer) {
    assert_eq!(answer.status, 404, "nothing was stored: {}", answer.text());
}

/// Issue #31: an object missing a `required` field was accepted; kube-apiserver
/// answers 422 `spec.source: Required value`.
#[tokio::test]
async fn issue31_a_missing_required_field_is_refused() {
    let sandbox = sandbox().await;
    let answer = sandbox
        .post(BACKUPS, &backup("b1", json!({"schedule": "daily"})))
        .await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(
        answer.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Backup.fidelity.example.com \"b1\" is invalid: spec.source: Required value",
            "reason": "Invalid",
            "details": {"name": "b1", "group": "fidelity.example.com", "kind": "Backup",
                "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                            "field": "spec.source"}]},
            "code": 422})
    );
    assert_not_stored(&sandbox.get(&format!("{BACKUPS}/b1")).await);
    let file = sandbox.write_file(
        "b1.yaml",
        &yaml(&backup("b1", json!({"schedule": "daily"}))),
    );
    let out = sandbox
        .kubectl(&["apply", "--server-side", "-f", &file])
        .await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains("The Backup \"b1\" is invalid: spec.source: Required value"),
        "{}",
        out.stderr
    );
    // A required field given null is dropped (not nullable) and so missing.
    let answer = apply(&sandbox, &backup("b1", json!({"source": null})), "").await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(
        answer.json()["details"]["causes"][0]["field"],
        "spec.source"
    );
}

/// Issue #31: a server-side apply with an undeclared field was accepted (and the field
/// pruned); kube-apiserver refuses it whatever `fieldValidation` says, with
/// structured-merge-diff's error as a 500 without a reason.
#[tokio::test]
async fn issue31_an_undeclared_field_in_server_side_apply_is_refused() {
    let sandbox = sandbox().await;
    let object = backup("b2", json!({"source": "db-main", "bogusField": 1}));
    for query in ["", "&fieldValidation=Ignore", "&fieldValidation=Strict"] {
        let answer = apply(&sandbox, &object, query).await;
        assert_eq!(answer.status, 500, "{query}: {}", answer.text());
        assert_eq!(
            answer.json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "failed to create typed patch object (crd-schema/b2; fidelity.example.com/v1, Kind=Backup): .spec.bogusField: field not declared in schema",
                "code": 500})
        );
    }
    assert_not_stored(&sandbox.get(&format!("{BACKUPS}/b2")).await);
    let file = sandbox.write_file("b2.yaml", &yaml(&object));
    let out = sandbox
        .kubectl(&["apply", "--server-side", "-f", &file])
        .await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains(".spec.bogusField: field not declared in schema"),
        "{}",
        out.stderr
    );
    // Several: structured-merge-diff lists them.
    let object = backup(
        "b2",
        json!({"source": "db-main", "a": 1, "labels": {"x": "y"}, "targets": ["t"], "extra": {"free": 1}}),
    );
    let mut object = object;
    object["status"] = json!({"phase": "x"});
    let answer = apply(&sandbox, &object, "").await;
    assert_eq!(answer.status, 500);
    assert_eq!(
        answer.json()["message"],
        "failed to create typed patch object (crd-schema/b2; fidelity.example.com/v1, Kind=Backup): errors:\n  .spec.a: field not declared in schema\n  .status: field not declared in schema"
    );
    // What the schema declares, preserves or maps is applied.
    let fine = backup(
        "b2",
        json!({"source": "db-main", "labels": {"x": "y"}, "extra": {"free": [1, {"deep": true}]}}),
    );
    let answer = apply(&sandbox, &fine, "").await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(answer.json()["spec"]["extra"]["free"][1]["deep"], true);
}

/// Each rule of the schema, refused over HTTP with kube-apiserver's cause.
#[tokio::test]
async fn every_schema_rule_is_refused_with_kube_apiservers_cause() {
    let sandbox = sandbox().await;
    let cases = [
        (
            json!({"source": "db"}),
            "spec.source",
            "FieldValueInvalid",
            "Invalid value: \"db\": spec.source in body should be at least 3 chars long",
        ),
        (
            json!({"source": "a-very-long-source-name"}),
            "spec.source",
            "FieldValueTooLong",
            "Too long: may not be more than 20 bytes",
        ),
        (
            json!({"source": "Main"}),
            "spec.source",
            "FieldValueInvalid",
            "Invalid value: \"Main\": spec.source in body should match '^[a-z][a-z0-9-]*$'",
        ),
        (
            json!({"source": "db-main", "schedule": "weekly"}),
            "spec.schedule",
            "FieldValueNotSupported",
            "Unsupported value: \"weekly\": supported values: \"hourly\", \"daily\"",
        ),
        (
            json!({"source": "db-main", "retain": 0}),
            "spec.retain",
            "FieldValueInvalid",
            "Invalid value: 0: spec.retain in body should be greater than or equal to 1",
        ),
        (
            json!({"source": "db-main", "retain": 31}),
            "spec.retain",
            "FieldValueInvalid",
            "Invalid value: 31: spec.retain in body should be less than or equal to 30",
        ),
        (
            json!({"source": "db-main", "ratio": 1}),
            "spec.ratio",
            "FieldValueInvalid",
            "Invalid value: 1: spec.ratio in body should be less than 1",
        ),
        (
            json!({"source": "db-main", "ratio": 0}),
            "spec.ratio",
            "FieldValueInvalid",
            "Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            json!({"source": "db-main", "startDate": "soon"}),
            "spec.startDate",
            "FieldValueTypeInvalid",
            "Invalid value: \"soon\": spec.startDate in body must be of type date: \"soon\"",
        ),
        (
            json!({"source": "db-main", "port": true}),
            "spec.port",
            "FieldValueTypeInvalid",
            "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
        ),
        (
            json!({"source": "db-main", "retain": "5"}),
            "spec.retain",
            "FieldValueTypeInvalid",
            "Invalid value: \"string\": spec.retain in body must be of type integer: \"string\"",
        ),
        (
            json!({"source": "db-main", "targets": []}),
            "spec.targets",
            "FieldValueInvalid",
            "Invalid value: 0: spec.targets in body should have at least 1 items",
        ),
        (
            json!({"source": "db-main", "targets": ["a", "b", "c"]}),
            "spec.targets",
            "FieldValueTooMany",
            "Too many: 3: must have at most 2 items",
        ),
        (
            json!({"source": "db-main", "labels": {"a": "1", "b": "2", "c": "3"}}),
            "spec.labels",
            "FieldValueTooMany",
            "Too many: 3: must have at most 2 items",
        ),
    ];
    for (i, (spec, field, reason, message)) in cases.into_iter().enumerate() {
        let name = format!("r{i}");
        let answer = sandbox.post(BACKUPS, &backup(&name, spec.clone())).await;
        assert_eq!(answer.status, 422, "{spec}: {}", answer.text());
        let status = answer.json();
        assert_eq!(
            status["details"]["causes"],
            json!([{"reason": reason, "message": message, "field": field}]),
            "{spec}"
        );
        assert_eq!(
            status["message"],
            format!("Backup.fidelity.example.com {name:?} is invalid: {field}: {message}")
        );
        // The same through server-side apply.
        let answer = apply(&sandbox, &backup(&name, spec.clone()), "").await;
        assert_eq!(answer.status, 422, "apply {spec}: {}", answer.text());
        assert_not_stored(&sandbox.get(&format!("{BACKUPS}/{name}")).await);
    }
    // An update is held to the same rules.
    let answer = sandbox
        .post(
            BACKUPS,
            &backup(
                "ok",
                json!({"source": "db-main", "note": null, "paused": null}),
            ),
        )
        .await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    let stored = answer.json();
    assert_eq!(
        stored["spec"]["note"],
        Value::Null,
        "nullable: null is kept"
    );
    assert!(
        stored["spec"].get("paused").is_none(),
        "not nullable: null is dropped: {stored}"
    );
    let mut changed = stored.clone();
    changed["spec"]["retain"] = json!(99);
    let answer = sandbox.put(&format!("{BACKUPS}/ok"), &changed).await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    let answer = sandbox
        .patch(
            &format!("{BACKUPS}/ok"),
            "application/merge-patch+json",
            r#"{"spec": {"schedule": "monthly"}}"#,
        )
        .await;
    assert_eq!(answer.status, 422, "{}", answer.text());
}

/// kubectl shows kube-apiserver's words for a refused object, every error of it.
#[tokio::test]
async fn kubectl_reports_every_refused_rule() {
    let sandbox = sandbox().await;
    let file = sandbox.write_file(
        "bad.yaml",
        &yaml(&backup(
            "bad",
            json!({"source": "Db", "schedule": "weekly", "retain": 0}),
        )),
    );
    for verb in [&["create", "-f"][..], &["apply", "--server-side", "-f"]] {
        let mut args = verb.to_vec();
        args.push(&file);
        let out = sandbox.kubectl(&args).await;
        assert_ne!(out.code, 0, "{verb:?}");
        for text in [
            "The Backup \"bad\" is invalid: ",
            "spec.source: Invalid value: \"Db\": spec.source in body should be at least 3 chars long",
            "spec.source: Invalid value: \"Db\": spec.source in body should match '^[a-z][a-z0-9-]*$'",
            "spec.schedule: Unsupported value: \"weekly\": supported values: \"hourly\", \"daily\"",
            "spec.retain: Invalid value: 0: spec.retain in body should be greater than or equal to 1",
        ] {
            assert!(
                out.stderr.contains(text),
                "{verb:?}: {text} in {}",
                out.stderr
            );
        }
    }
    assert_ne!(
        sandbox
            .kubectl(&["get", "backup", "bad", "-n", NAMESPACE])
            .await
            .code,
        0,
        "nothing was created"
    );
}

/// Undeclared fields of a create, update or patch: `fieldValidation=Strict` refuses
/// them (kubectl's default), Warn (the server's default) drops each with a warning,
/// Ignore drops them silently.
#[tokio::test]
async fn field_validation_strict_warn_and_ignore_as_kube_apiserver() {
    let sandbox = sandbox().await;
    let object = backup("fv", json!({"source": "db-main", "bogusField": 1}));
    let answer = sandbox
        .send(
            Method::POST,
            &format!("{BACKUPS}?fieldValidation=Strict"),
            Some("application/json"),
            Some(object.to_string().into_bytes()),
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(
        answer.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Backup in version \"v1\" cannot be handled as a Backup: strict decoding error: unknown field \"spec.bogusField\"",
            "reason": "BadRequest", "code": 400})
    );
    assert_not_stored(&sandbox.get(&format!("{BACKUPS}/fv")).await);

    let warn = sandbox.post(BACKUPS, &object).await;
    assert_eq!(warn.status, 201, "{}", warn.text());
    let warnings: Vec<&str> = warn
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.bogusField\"""#]);
    assert!(warn.json()["spec"].get("bogusField").is_none(), "dropped");

    let mut again = object.clone();
    again["metadata"]["name"] = json!("fv2");
    let ignore = sandbox
        .send(
            Method::POST,
            &format!("{BACKUPS}?fieldValidation=Ignore"),
            Some("application/json"),
            Some(again.to_string().into_bytes()),
        )
        .await;
    assert_eq!(ignore.status, 201, "{}", ignore.text());
    assert!(ignore.headers.get("warning").is_none());
    assert!(ignore.json()["spec"].get("bogusField").is_none(), "dropped");

    // A patch under Strict: the strict decoding error without the decoder's preamble.
    let answer = sandbox
        .patch(
            &format!("{BACKUPS}/fv?fieldValidation=Strict"),
            "application/merge-patch+json",
            r#"{"spec": {"other": 2}}"#,
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(
        answer.json()["message"],
        "strict decoding error: unknown field \"spec.other\""
    );

    // kubectl: Strict by default, `--validate=warn` prints the warning, `false` ignores.
    let file = sandbox.write_file(
        "fv3.yaml",
        &yaml(&{
            let mut o = object.clone();
            o["metadata"]["name"] = json!("fv3");
            o
        }),
    );
    let out = sandbox.kubectl(&["create", "-f", &file]).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains(
            "Backup in version \"v1\" cannot be handled as a Backup: strict decoding error: unknown field \"spec.bogusField\""
        ),
        "{}",
        out.stderr
    );
    let out = sandbox
        .kubectl(&["create", "--validate=warn", "-f", &file])
        .await
        .ok();
    assert!(
        out.stderr
            .contains("Warning: unknown field \"spec.bogusField\""),
        "{}",
        out.stderr
    );
    sandbox.kubectl(&["delete", "-f", &file]).await.ok();
    let out = sandbox
        .kubectl(&["create", "--validate=false", "-f", &file])
        .await
        .ok();
    assert!(!out.stderr.contains("Warning"), "{}", out.stderr);
}
