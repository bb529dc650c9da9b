//! SOPS's encryption rules, mac_only_encrypted and several recipients, which no file
//! in the upstream fixtures exercises: files written by this crate's writer (which
//! follows `sops encrypt`) are read back by its reader, and each rule leaves exactly
//! the leaves it names in the clear.

use age::secrecy::ExposeSecret;
use serde_json::{Value, json};
use tether_sops::{Format, Keys, Recipients, Rule, SopsError, decrypt, encrypt};

fn secret() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "labels": {"tier": "data"}},
        "type": "Opaque",
        "stringData": {"password": "s3cr3t", "port": 5432, "ratio": 0.25, "on": true, "empty": ""},
        "list": ["a", "b"],
    })
}

fn age_pair() -> (Keys, Recipients) {
    let identity = age::x25519::Identity::generate();
    let mut keys = Keys::new();
    keys.add_age("test", identity.to_string().expose_secret())
        .expect("identity");
    let mut recipients = Recipients::new();
    recipients
        .add_age(&identity.to_public().to_string())
        .expect("recipient");
    (keys, recipients)
}

/// The leaves of the encrypted file that are still clear, by their path.
fn clear_paths(file: &[u8]) -> Vec<String> {
    let doc: Value = serde_saphyr::from_slice(file).expect("YAML");
    let mut out = Vec::new();
    fn walk(v: &Value, path: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, c)| walk(c, format!("{path}/{k}"), out)),
            Value::Array(items) => items.iter().for_each(|c| walk(c, path.clone(), out)),
            Value::String(s) if s.starts_with("ENC[AES256_GCM,") => {}
            _ => out.push(path),
        }
    }
    let mut doc = doc;
    doc.as_object_mut().expect("a map").remove("sops");
    walk(&doc, String::new(), &mut out);
    out.dedup();
    out
}

#[test]
fn each_rule_encrypts_what_it_names_and_reads_back_the_same_tree() {
    let (keys, recipients) = age_pair();
    // What stays clear when only the data is encrypted: `/stringData/empty` as an
    // empty value, and `/list` unless the rule names what stays clear.
    let outside_data = vec![
        "/apiVersion",
        "/kind",
        "/metadata/name",
        "/metadata/labels/tier",
        "/type",
        "/stringData/empty",
    ];
    let with_list = [&outside_data[..], &["/list"]].concat();
    let cases = [
        (
            Rule::EncryptedRegex("^(data|stringData)$".into()),
            with_list.clone(),
        ),
        (
            Rule::UnencryptedRegex("^(apiVersion|kind|metadata|type)$".into()),
            outside_data,
        ),
        (Rule::EncryptedSuffix("Data".into()), with_list),
        (
            Rule::UnencryptedSuffix("_unencrypted".into()),
            vec!["/stringData/empty"],
        ),
    ];
    for (rule, clear) in cases {
        let file =
            encrypt(Format::Yaml, vec![secret()], &rule, false, &recipients).expect("encrypts");
        assert_eq!(clear_paths(&file), clear);
        let plain = decrypt("db.yaml", Format::Yaml, &file, &keys).expect("decrypts");
        assert_eq!(plain.documents(), &[secret()]);
    }
}

#[test]
fn a_changed_clear_value_breaks_the_mac_unless_only_encrypted_values_feed_it() {
    let (keys, recipients) = age_pair();
    let rule = Rule::EncryptedRegex("^stringData$".into());
    for mac_only_encrypted in [false, true] {
        let file = encrypt(
            Format::Yaml,
            vec![secret()],
            &rule,
            mac_only_encrypted,
            &recipients,
        )
        .expect("encrypts");
        let text = String::from_utf8(file).expect("text");
        let edited = text.replacen("tier: data", "tier: web", 1);
        assert_ne!(edited, text);
        let result = decrypt("db.yaml", Format::Yaml, edited.as_bytes(), &keys);
        match mac_only_encrypted {
            false => assert!(
                matches!(result, Err(SopsError::MacMismatch { .. })),
                "{result:?}"
            ),
            true => assert_eq!(
                result
                    .expect("clear values are outside the MAC")
                    .documents()[0]["metadata"]["labels"]["tier"],
                json!("web")
            ),
        }
    }
}

#[test]
fn a_file_for_three_recipients_opens_with_any_one_and_json_and_multi_document_yaml_round_trip() {
    let pairs: Vec<(Keys, Recipients)> = (0..3).map(|_| age_pair()).collect();
    let mut all = Recipients::new();
    let mut names = Vec::new();
    for (_, r) in &pairs {
        let file = encrypt(
            Format::Yaml,
            vec![json!({"a": "b"})],
            &Rule::UnencryptedSuffix("_unencrypted".into()),
            false,
            r,
        )
        .expect("encrypts");
        let doc: Value = serde_saphyr::from_slice(&file).expect("YAML");
        let name = doc["sops"]["age"][0]["recipient"]
            .as_str()
            .expect("recipient")
            .to_string();
        all.add_age(&name).expect("recipient");
        names.push(name);
    }
    let rule = Rule::EncryptedRegex("^stringData$".into());
    let docs = vec![
        secret(),
        json!({"kind": "ConfigMap", "stringData": {"x": "y"}}),
    ];
    let yaml = encrypt(Format::Yaml, docs.clone(), &rule, false, &all).expect("encrypts");
    for (keys, _) in &pairs {
        let plain = decrypt("two.yaml", Format::Yaml, &yaml, keys).expect("any one key opens it");
        assert_eq!(plain.documents(), docs.as_slice());
    }
    let json_file = encrypt(Format::Json, vec![secret()], &rule, false, &all).expect("encrypts");
    let plain = decrypt("db.json", Format::Json, &json_file, &pairs[1].0).expect("decrypts");
    assert_eq!(plain.documents(), &[secret()]);
    let error =
        decrypt("db.json", Format::Json, &json_file, &age_pair().0).expect_err("a stranger's key");
    for name in &names {
        assert!(error.to_string().contains(name.as_str()), "{error}");
    }
}
