use super::*;

fn parse(files: &[(&str, &str)]) -> Result<ManifestSet, ManifestErrors> {
    parse_files(files, &ParseOptions::default())
}

fn errors(files: &[(&str, &str)]) -> Vec<String> {
    match parse(files) {
        Ok(set) => panic!("expected errors, got {} objects", set.len()),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn reads_multi_documents_lists_and_skips_empty_ones() {
    let yaml = "\
# leading comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
---
# only a comment
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: team}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: team}
";
    let set = parse(&[
        ("b.yaml", yaml),
        (
            "a.json",
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#,
        ),
    ])
    .unwrap_or_default();
    let ids: Vec<_> = set.objects.iter().map(|m| m.id.to_string()).collect();
    assert_eq!(
        ids,
        vec![
            "Secret default/s",
            "ConfigMap default/a",
            "Namespace team",
            "Deployment.apps team/web"
        ]
    );
    assert_eq!(set.objects[1].origin.line, 3);
    assert_eq!(set.objects[3].origin.item, Some(1));
    assert_eq!(set.objects[1].object["metadata"]["namespace"], "default");
}

#[test]
fn skips_non_manifest_files() {
    let set = parse(&[
        ("README.md", "# not yaml: ["),
        (
            "x.yml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
        ),
    ])
    .unwrap_or_default();
    assert_eq!(set.len(), 1);
}

#[test]
fn scope_from_builtin_table_crds_and_lookup() {
    let yaml = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: r, namespace: ignored}
";
    let set = parse(&[("a.yaml", yaml)]).unwrap_or_default();
    let ns: Vec<_> = set.objects.iter().map(|m| m.id.namespace.clone()).collect();
    assert_eq!(ns, vec![None, None, Some("default".to_string()), None]);

    let lookup = |gk: &GroupKind| (gk.kind == "Gadget").then_some(Scope::Cluster);
    let opts = ParseOptions {
        default_namespace: "apps",
        scope: Some(&lookup),
        ..ParseOptions::default()
    };
    let set = parse_files(&[("a.yaml", yaml)], &opts).unwrap_or_default();
    assert_eq!(set.objects[2].id.namespace, None);
}

#[test]
fn errors_name_file_document_and_line() {
    let yaml = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: ok}
---
apiVersion: v1
metadata: {name: nokind}
---
kind: ConfigMap
apiVersion: v1
metadata:
  labels: {a: b}
---
a: [unclosed
";
    let errs = errors(&[("dir/bad.yaml", yaml)]);
    assert_eq!(
        errs[..2],
        [
            "dir/bad.yaml, document 2, line 5: missing kind".to_string(),
            "dir/bad.yaml, document 3, line 8: missing metadata.name".to_string(),
        ]
    );
    assert!(
        errs[2].starts_with("dir/bad.yaml, document 4, line 13: invalid YAML"),
        "{errs:?}"
    );
    assert_eq!(errs.len(), 3);
}

#[test]
fn duplicate_objects_name_both_places() {
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";
    let errs = errors(&[("one.yaml", cm), ("two.yaml", &format!("# x\n---\n{cm}"))]);
    assert_eq!(
        errs,
        vec![
            "two.yaml, document 1, line 3: ConfigMap default/a is defined twice: here and at one.yaml, document 1, line 1"
        ]
    );
}

#[test]
fn invalid_json_names_the_line() {
    let errs = errors(&[("x.json", "{\n  \"apiVersion\": \"v1\",\n  oops\n}")]);
    assert!(
        errs[0].starts_with("x.json, document 1, line 3: invalid JSON"),
        "{errs:?}"
    );
}

#[test]
fn parse_errors_do_not_quote_content() {
    let errs = errors(&[(
        "s.yaml",
        "apiVersion: v1\nkind: Secret\ndata:\n  password: \"hunter2\n",
    )]);
    assert!(!errs.iter().any(|e| e.contains("hunter2")), "{errs:?}");
}

#[test]
fn oversized_files_are_refused() {
    let opts = ParseOptions {
        max_file_bytes: 10,
        ..ParseOptions::default()
    };
    let Err(errs) = parse_files(&[("big.yaml", "apiVersion: v1\nkind: ConfigMap\n")], &opts) else {
        panic!("expected an error");
    };
    assert_eq!(
        errs.0[0].to_string(),
        "big.yaml: file is 31 bytes, over the limit of 10 bytes"
    );
}

#[test]
fn billion_laughs_fails_fast() {
    let mut yaml = String::from(
        "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let p = i - 1;
        yaml.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    yaml.push_str("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n");
    let start = std::time::Instant::now();
    let errs = errors(&[("bomb.yaml", &yaml)]);
    assert!(errs[0].starts_with("bomb.yaml, document 1"), "{errs:?}");
    assert!(errs[0].contains("invalid YAML"), "{errs:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn deep_nesting_fails_fast() {
    let depth = 10_000;
    let flow = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\ndata: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let errs = errors(&[("flow.yaml", &flow)]);
    assert!(errs[0].contains("invalid YAML"), "{errs:?}");
}

#[test]
fn deep_block_nesting_fails_fast() {
    let depth = 10_000;
    // Nested block sequences: `- - - … x`, 10,000 deep on one line.
    let block = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\ndata:\n{}x\n",
        "- ".repeat(depth)
    );
    let errs = errors(&[("block.yaml", &block)]);
    assert!(errs[0].starts_with("block.yaml, document 1"), "{errs:?}");
}

#[test]
fn deep_json_nesting_fails_fast() {
    let depth = 10_000;
    let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let errs = errors(&[("deep.json", &json)]);
    assert!(errs[0].contains("invalid JSON"), "{errs:?}");
}

#[test]
fn kustomization_in_a_file_list_needs_a_checkout() {
    let errs = errors(&[("app/kustomization.yaml", "resources: [a.yaml]\n")]);
    assert_eq!(
        errs,
        vec![
            "app/kustomization.yaml: a kustomization is built by the render stage, not parsed as a manifest"
        ]
    );
}
