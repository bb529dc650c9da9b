//! Chart values from several places (issue #26) through `tether serve` against the
//! sandbox: a chart of a Helm repository served on loopback takes its value files,
//! `valuesFrom` ConfigMaps and Secrets of the App's namespace (read as the App's
//! ServiceAccount), then its inline values, in that order; a changed ConfigMap is a
//! new desired state applied without a new chart version; a missing Secret and a
//! Secret whose values do not parse stop their apps, named, with nothing applied and
//! the Secret's text shown nowhere. Post-renderers patch the chart's output; one
//! whose target selects nothing stops its app, naming the patch.

use std::path::{Path, PathBuf};
use tether_testkit::assert_contains;

use crate::app_crd::{app_sandbox, apply_app};
use crate::charts_deps::HelmRepo;
use crate::charts_source::serve_with_helm;
use crate::serve::server_section;
use crate::substitute::data;
use crate::support::eventually;

/// A Secret value that must reach the cluster and nothing else.
const PASSWORD: &str = "pw-Fr0m-a-s3cret-value";
/// The text of a Secret that does not parse: shown nowhere either.
const UNPARSABLE: &str = "a: [unclosed Unp4rsable-s3cret";

/// Chart `web` 1.0.0's Chart.yaml.
pub(crate) const WEB_CHART: &str = "apiVersion: v2\nname: web\nversion: 1.0.0\n";

/// Chart `web`'s ConfigMap, named after the release, of its values greeting, color and
/// size.
pub(crate) const WEB_VALUES_CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n  color: {{ .Values.color | quote }}\n  size: {{ .Values.size | quote }}\n";

/// Chart `web` 1.0.0: a ConfigMap of its values, and a Secret of `db.password`.
fn chart(root: &Path) -> PathBuf {
    crate::charts_source::write_chart(
        root.join("web"),
        &[
            ("Chart.yaml", crate::chart_values::WEB_CHART),
            (
                "values.yaml",
                "greeting: chart\ncolor: chart\nsize: chart\ndb: {password: none}\n",
            ),
            ("templates/cm.yaml", crate::chart_values::WEB_VALUES_CM),
            (
                "templates/secret.yaml",
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-db\nstringData:\n  password: {{ .Values.db.password | quote }}\n",
            ),
        ],
    )
}

fn values_cm(name: &str, namespace: &str, values: &str) -> String {
    let values = values.replace('\n', "\n    ");
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  values.yaml: |\n    {values}\n"
    )
}

fn secret(name: &str, namespace: &str, key: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {namespace}\nstringData:\n  {key}: {value:?}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_from_configmaps_and_secrets_merge_in_order_follow_changes_and_fail_by_name() {
    let sandbox = app_sandbox(&["vals", "team-vals", "tether-system"]).await;
    sandbox
        .trusted_service_account("team-vals", "deployer")
        .await;
    let root = sandbox.dir.path();
    let repo = HelmRepo::start(root.join("repo")).await;
    repo.publish(&chart(&root.join("build")));

    // File apps read tether's own namespace: one Secret missing, one unparsable.
    sandbox
        .kubectl_apply(&secret(
            "broken-values",
            "tether-system",
            "values.yaml",
            UNPARSABLE,
        ))
        .await;
    let entry = |name: &str, helm: &str| {
        format!(
            "- name: {name}\n  source: {{repo: \"{}\", chart: web, version: \"1.0.0\", interval: 1h, helm: {{{helm}}}}}\n  destination: {{namespace: vals}}\n  sync: {{automated: true}}\n",
            repo.url
        )
    };
    let server = server_section(root);
    let config = format!(
        "resyncInterval: 1s\n{server}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n{}{}{}",
        entry(
            "missing",
            "valuesFrom: [{kind: Secret, name: absent-values}]"
        ),
        entry(
            "unparsable",
            "valuesFrom: [{kind: Secret, name: broken-values}]"
        ),
        entry(
            "badtarget",
            "postRenderers: [{kustomize: {patches: [{target: {kind: ConfigMap, name: nope}, patch: '[{op: add, path: /data/x, value: y}]'}]}}]"
        ),
    );
    let serve = serve_with_helm(&sandbox, "chart-values", &config).await;

    // The App: value files of the chart < ConfigMap < Secret at a path < inline.
    sandbox
        .kubectl_apply(&values_cm(
            "web-values",
            "team-vals",
            "greeting: from-configmap\ncolor: from-configmap",
        ))
        .await;
    sandbox
        .kubectl_apply(&secret("web-db", "team-vals", "password", PASSWORD))
        .await;
    let spec = format!(
        "  serviceAccountName: deployer\n  source:\n    repo: \"{}\"\n    chart: web\n    version: \"1.0.0\"\n    interval: 1h\n    helm:\n      releaseName: web\n      values: {{color: inline}}\n      valuesFrom:\n      - {{kind: ConfigMap, name: web-values}}\n      - {{kind: Secret, name: web-db, valuesKey: password, targetPath: db.password}}\n      - {{kind: ConfigMap, name: not-yet, optional: true}}\n      postRenderers:\n      - kustomize:\n          patches:\n          - target: {{kind: ConfigMap, name: web}}\n            patch: '[{{op: add, path: /data/patched, value: \"yes\"}}]'\n  destination: {{namespace: vals}}\n  sync: {{automated: true}}\n",
        repo.url
    );
    apply_app(&sandbox, "web", "team-vals", &spec).await;
    let first = serve
        .wait_status("team-vals.web", "the App's first pass", |s| {
            s["sync"] == "Synced" || s["lastPass"]["error"].is_string()
        })
        .await;
    assert_eq!(first["sync"], "Synced", "{first}");
    let web = data(&sandbox, "cm", "web", "vals").await;
    assert_eq!(
        web,
        serde_json::json!({"greeting": "from-configmap", "color": "inline", "size": "chart", "patched": "yes"})
    );
    let db = data(&sandbox, "secret", "web-db", "vals").await;
    assert_eq!(
        db["password"],
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, PASSWORD)
    );

    // A changed ConfigMap, and an optional one appearing, are a new desired state:
    // applied without a new chart version.
    sandbox
        .kubectl_apply(&values_cm("web-values", "team-vals", "greeting: changed"))
        .await;
    sandbox
        .kubectl_apply(&values_cm("not-yet", "team-vals", "size: late"))
        .await;
    eventually("the changed values applied", || async {
        let d = data(&sandbox, "cm", "web", "vals").await;
        (d["greeting"] == "changed" && d["size"] == "late").then_some(())
    })
    .await;

    // A Secret that is not there stops the app before anything renders, named.
    let status = serve
        .wait_status_text("missing", "the missing Secret reported", "ValuesFailed")
        .await;
    assert_contains(
        &status,
        "source.helm.valuesFrom[0]: Secret tether-system/absent-values not found",
    );
    // A Secret whose values do not parse: named, its text shown nowhere.
    let status = serve
        .wait_status_text(
            "unparsable",
            "the unparsable Secret reported",
            "ValuesFailed",
        )
        .await;
    assert_contains(
        &status,
        "Secret tether-system/broken-values key values.yaml: is not YAML",
    );
    // A post-renderer's patch whose target selects nothing: named, nothing applied.
    let bad = serve
        .wait_status_text(
            "badtarget",
            "the patch without a target reported",
            "ManifestInvalid",
        )
        .await;
    assert!(
        bad.contains("postRenderers[0].kustomize.patches[0]: target")
            && bad.contains("selects no object the chart rendered"),
        "{bad}"
    );
    for name in ["missing", "unparsable", "badtarget"] {
        assert!(
            data(&sandbox, "cm", name, "vals").await.is_null(),
            "{name} applied"
        );
    }
    let log = serve.log();
    for secret in [PASSWORD, "Unp4rsable-s3cret"] {
        assert!(
            !status.contains(secret) && !log.contains(secret),
            "{secret} shown"
        );
    }
}
