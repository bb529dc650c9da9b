use super::*;

/// Masks `text` and checks no secret is left, and that `want` is the result.
fn masks(text: &str, want: &str) {
    let got = mask_secrets(text);
    assert_eq!(got, want, "from {text:?}");
    assert!(!got.contains("hunter2"), "{got}");
}

#[test]
fn a_secret_value_is_masked_however_it_is_quoted() {
    masks(
        "stringData:\n  token: \"hunter2 double\"\n",
        "stringData:\n  token: \"***\"\n",
    );
    masks(
        "stringData:\n  token: 'hunter2 ''single'''\n",
        "stringData:\n  token: '***'\n",
    );
    masks(
        "stringData:\n  password: hunter2 plain\nkind: Secret",
        "stringData:\n  password: ***\nkind: Secret",
    );
    masks(
        "stringData:\n  cert: |-\n    hunter2 block\n\n    BEGIN\nkind: Secret\n",
        "stringData:\n  cert: |-\n    ***\n\n    ***\nkind: Secret\n",
    );
    masks(
        "- name: s\n  data:\n    tls.key: aHVudGVyMg==\n    nested:\n      deeper: aHVudGVyMg==\n  type: Opaque\n",
        "- name: s\n  data:\n    tls.key: ***\n    nested:\n      deeper: ***\n  type: Opaque\n",
    );
}

#[test]
fn flow_maps_json_and_go_maps_mask_their_secret_values_only() {
    masks(
        "stringData: {token: hunter2, user: 'hunter2'} kind: Secret",
        "stringData: {token: ***, user: '***'} kind: Secret",
    );
    masks(
        r#"{"apiVersion":"v1","data":{"password":"aHVudGVyMg==","list":["hunter2"]},"kind":"Secret","metadata":{"name":"db"}}"#,
        r#"{"apiVersion":"v1","data":{"password":"***","list":["***"]},"kind":"Secret","metadata":{"name":"db"}}"#,
    );
    masks(
        "object map[data:map[password:aHVudGVyMg== user:hunter2] kind:Secret metadata:map[name:db]]",
        "object map[data:map[password:*** user:***] kind:Secret metadata:map[name:db]]",
    );
}

#[test]
fn credentials_are_masked_anywhere_and_references_to_them_kept() {
    masks(
        "values: clientSecret: \"hunter2\", --set auth.password=hunter2",
        "values: clientSecret: \"***\", --set auth.password=***",
    );
    masks(
        "  api_token: hunter2\n  secretName: tls-cert\n  tokenFile: /var/run/token\n",
        "  api_token: ***\n  secretName: tls-cert\n  tokenFile: /var/run/token\n",
    );
}

#[test]
fn everything_but_secret_values_stays_readable() {
    // Issue #31: the template, the value path and the field were all "…".
    for text in [
        r#"Error: kube-prometheus-stack/templates/prometheus/clusterrole.yaml:43:55: executing "kube-prometheus-stack/templates/prometheus/clusterrole.yaml" at <.Values.prometheus.enabled>: nil pointer evaluating interface {}.enabled"#,
        r#"accumulating resources: accumulation err='accumulating resources from 's2.yaml': may not add resource with an already registered id: Secret.v1.[noGrp]/s.[noNs]': must build at directory: '/tmp/a/s2.yaml': file is not directory"#,
        r#"add operation does not apply: doc is missing path: "/stringData/x/y": missing value"#,
        "configmap g illegally repeats the key `password`",
        "E1127 08:35:50.113577   18205 run.go:72] at 12:30:00, see https://example.com/x?a=b",
    ] {
        assert_eq!(mask_secrets(text), text);
    }
}

#[test]
fn kubectls_log_line_is_unwrapped_and_helms_continuation_lines_folded() {
    let quoted = "E1127 08:35:50.113577   18205 run.go:72] \"command failed\" err=\"testing value \\\"/stringData/token\\\" failed: password: hunter2\"\n";
    assert_eq!(
        renderer_message(quoted.as_bytes()),
        "testing value \"/stringData/token\" failed: password: ***"
    );
    let block = "E1127 08:38:39.476722   29491 run.go:72] \"command failed\" err=<\n\tunable to find field \"data.x.y\" in replacement target: node contents:\n\tplainvalue\n >\n";
    assert_eq!(
        renderer_message(block.as_bytes()),
        "unable to find field \"data.x.y\" in replacement target: node contents: plainvalue"
    );
    let helm = "Error: web/templates/a.yaml:1:43\n  executing at <.Values.x>:\n    nil pointer\nError: second\n";
    assert_eq!(
        renderer_message(helm.as_bytes()),
        "Error: web/templates/a.yaml:1:43 executing at <.Values.x>: nil pointer"
    );
}
