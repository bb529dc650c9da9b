//! Plain manifests from OCI artifacts (issue #26, Flux's `OCIRepository`), served by
//! the CNCF distribution registry (Debian's `docker-registry`) on loopback and pushed
//! there with the registry's own HTTP API as `flux push artifact` does (a config
//! blob, one tar.gz layer made by `tar`, an OCI manifest), synced by `tether serve`
//! against the sandbox: a folder of the artifact picked by `path`, its tag range
//! followed at the next poll with the revision naming the manifest's digest, a steady
//! state that fetches no blob; an App object pinned by digest; a tampered layer, a layer of another media type and
//! an unknown tag each fail the source by name and apply nothing.

use std::path::Path;
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::app_crd::{apply_app, wait_app_synced};
use crate::charts_oci::{OciRegistry, greeting, oci_sandbox};
use crate::charts_source::serve_with_helm;
use crate::serve::server_section;
use crate::support::eventually;

/// Flux's media types for `flux push artifact` (fluxcd/pkg oci).
const FLUX_CONFIG: &str = "application/vnd.cncf.flux.config.v1+json";
const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// `files` tar'ed and gzipped by `tar`, from a folder of `build`.
fn tar_gz(build: &Path, label: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let dir = build.join(label);
    for (path, text) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
    let out = build.join(format!("{label}.tgz"));
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg("-C")
        .arg(&dir)
        .arg(".")
        .status()
        .expect("tar runs");
    assert!(status.success(), "tar");
    std::fs::read(out).expect("read the archive")
}

/// Uploads `bytes` as a blob of repository `name` (monolithic upload: POST, then PUT
/// with the digest), as the distribution API asks.
async fn push_blob(registry: &OciRegistry, name: &str, bytes: &[u8]) -> String {
    let client = reqwest::Client::new();
    let base = format!("http://{}", registry.host());
    let started = client
        .post(format!("{base}/v2/{name}/blobs/uploads/"))
        .send()
        .await
        .expect("upload starts");
    assert_eq!(started.status(), 202, "upload of {name}");
    let location = started.headers()["location"].to_str().expect("a location");
    let location = url::Url::parse(&base)
        .expect("base")
        .join(location)
        .expect("location");
    let digest = digest(bytes);
    let mut put = location.clone();
    put.query_pairs_mut().append_pair("digest", &digest);
    let done = client
        .put(put)
        .header("content-type", "application/octet-stream")
        .body(bytes.to_vec())
        .send()
        .await
        .expect("upload ends");
    assert_eq!(done.status(), 201, "blob of {name}");
    digest
}

/// Pushes an artifact of `layer` (its media type `media_type`) as `name:tag`: the
/// manifest's digest.
async fn push_artifact(
    registry: &OciRegistry,
    name: &str,
    tag: &str,
    layer: &[u8],
    media_type: &str,
) -> String {
    let config = b"{}";
    let config_digest = push_blob(registry, name, config).await;
    let layer_digest = push_blob(registry, name, layer).await;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": FLUX_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": media_type, "digest": layer_digest, "size": layer.len()}],
    });
    let body = serde_json::to_vec(&manifest).expect("JSON");
    let answer = reqwest::Client::new()
        .put(format!(
            "http://{}/v2/{name}/manifests/{tag}",
            registry.host()
        ))
        .header("content-type", OCI_MANIFEST)
        .body(body.clone())
        .send()
        .await
        .expect("the manifest is pushed");
    assert_eq!(answer.status(), 201, "manifest of {name}:{tag}");
    digest(&body)
}

/// A ConfigMap `name` with `greeting`, as a file of an artifact.
fn config_map(name: &str, greeting: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  greeting: {greeting}\n"
    )
}

/// The artifact `version` of `manifests/app`: `deploy/` (a kustomization of one
/// ConfigMap) and, outside it, a ConfigMap no app asks for.
fn app_layer(build: &Path, version: &str) -> Vec<u8> {
    tar_gz(
        build,
        &format!("app-{version}"),
        &[
            ("deploy/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("deploy/cm.yaml", &config_map("art", version)),
            ("other/cm.yaml", &config_map("outside", version)),
        ],
    )
}

/// A configuration app of the artifact `manifests/{repo}` at `tag`, folder `deploy`.
fn app(name: &str, host: &str, repo: &str, tag: &str) -> String {
    format!(
        "- name: {name}\n  source: {{oci: \"oci://{host}/manifests/{repo}\", tag: \"{tag}\", path: deploy, interval: 200ms}}\n  destination: {{namespace: oci}}\n  sync: {{automated: true, prune: true}}\n"
    )
}

async fn failed(serve: &crate::serve::Serve, app: &str) -> (String, String) {
    let status = serve
        .wait_status(app, &format!("{app} fails"), |s| {
            s["source"]["ready"] == false
        })
        .await;
    let reason = status["source"]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let message = status["source"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (reason, message)
}

#[tokio::test]
async fn an_oci_artifact_of_manifests_syncs_follows_its_range_and_refuses_bad_layers() {
    let sandbox = oci_sandbox().await;
    let root = sandbox.dir.path();
    let build = root.join("build");
    let registry = OciRegistry::start(&root.join("registry")).await;
    let host = registry.host().to_string();
    let first = push_artifact(
        &registry,
        "manifests/app",
        "1.0.0",
        &app_layer(&build, "1.0.0"),
        FLUX_LAYER,
    )
    .await;
    // A layer the registry now serves with other bytes than its digest's.
    let bad_layer = tar_gz(
        &build,
        "bad",
        &[("deploy/cm.yaml", &config_map("bad", "x"))],
    );
    push_artifact(&registry, "manifests/bad", "1.0.0", &bad_layer, FLUX_LAYER).await;
    std::fs::write(
        registry.blob_file(&digest(&bad_layer)),
        b"not what was pushed",
    )
    .expect("tamper");
    // A Helm chart's layer where plain manifests are expected.
    let helm_layer = tar_gz(
        &build,
        "helm",
        &[("deploy/cm.yaml", &config_map("helm", "x"))],
    );
    let helm_type = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
    push_artifact(&registry, "manifests/helm", "1.0.0", &helm_layer, helm_type).await;
    let other = tar_gz(
        &build,
        "other",
        &[("deploy/cm.yaml", &config_map("other", "x"))],
    );
    push_artifact(&registry, "manifests/other", "2.0.0", &other, FLUX_LAYER).await;

    let config = format!(
        "sources: {{minInterval: 100ms}}\n{}  outbound: {{allowedNetworks: [127.0.0.1/32]}}\napps:\n{}{}{}{}",
        server_section(root),
        app("app", &host, "app", "~1.0"),
        app("bad", &host, "bad", "1.0.0"),
        app("helm", &host, "helm", "1.0.0"),
        app("missing", &host, "other", "9.9.9"),
    );
    let serve = serve_with_helm(&sandbox, "oci-artifact", &config).await;

    let want = format!("1.0.0@{first}");
    serve.wait_synced_at("app", want.as_str()).await;
    eventually("the 1.0.0 ConfigMap is applied", || async {
        (greeting(&sandbox, "art").await.as_deref() == Some("1.0.0")).then_some(())
    })
    .await;
    assert_eq!(
        greeting(&sandbox, "outside").await,
        None,
        "only the source's path is applied"
    );

    // A tag pushed within the range is taken at the next poll.
    let moved = push_artifact(
        &registry,
        "manifests/app",
        "1.0.1",
        &app_layer(&build, "1.0.1"),
        FLUX_LAYER,
    )
    .await;
    let want = format!("1.0.1@{moved}");
    serve.wait_synced_at("app", want.as_str()).await;
    eventually("the 1.0.1 ConfigMap is applied", || async {
        (greeting(&sandbox, "art").await.as_deref() == Some("1.0.1")).then_some(())
    })
    .await;

    // Steady state: each poll lists the tags and reads the manifest; no blob again.
    let blobs = registry.requests("/v2/manifests/app/blobs/");
    let polls = registry.requests("/v2/manifests/app/tags/list");
    eventually("two more polls", || async {
        (registry.requests("/v2/manifests/app/tags/list") >= polls + 2).then_some(())
    })
    .await;
    assert_eq!(
        registry.requests("/v2/manifests/app/blobs/"),
        blobs,
        "a blob fetched again for an unchanged digest"
    );

    // An App object pinned by the first manifest's digest: the digest is the revision.
    let spec = format!(
        "  serviceAccountName: deployer\n  source: {{oci: \"oci://{host}/manifests/app\", digest: \"{first}\", path: deploy}}\n  destination: {{namespace: team}}\n  sync: {{automated: true}}\n"
    );
    apply_app(&sandbox, "pinned", "team", &spec).await;
    wait_app_synced(&sandbox, "pinned", "team", |r| r == first).await;
    let pinned = sandbox
        .kubectl(&[
            "get",
            "cm",
            "art",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.greeting}",
        ])
        .await;
    assert_eq!(pinned.stdout, "1.0.0", "the pinned manifest's files");

    let (reason, message) = failed(&serve, "bad").await;
    assert_eq!(reason, "DigestMismatch", "{message}");
    assert!(
        message.contains(&format!("oci://{host}/manifests/bad"))
            && message.contains(&format!("the manifest says {}", digest(&bad_layer))),
        "{message}"
    );
    let (reason, message) = failed(&serve, "helm").await;
    assert_eq!(reason, "ChartFailed", "{message}");
    assert!(
        message.contains(&format!("oci://{host}/manifests/helm"))
            && message.contains("1.0.0")
            && message.contains(helm_type)
            && message.contains(FLUX_LAYER),
        "{message}"
    );
    let (reason, message) = failed(&serve, "missing").await;
    assert_eq!(reason, "ArtifactNotFound", "{message}");
    assert!(
        message.contains(&format!("oci://{host}/manifests/other"))
            && message.contains("\"9.9.9\"")
            && message.contains("(tags: 2.0.0)"),
        "{message}"
    );
    for name in ["bad", "helm", "other"] {
        assert_eq!(
            greeting(&sandbox, name).await,
            None,
            "nothing of a refused artifact is applied"
        );
    }
    assert_eq!(serve.stop().await, Some(0));
}
