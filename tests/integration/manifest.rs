//! Reading manifests from disk: deterministic order, symlinks that leave the root,
//! size limits, kustomizations rendered by the real `kubectl kustomize`.

use std::fs;
use std::path::Path;

use tether_diff::manifest::{MAX_FILE_BYTES, ParseOptions, read_dir};

fn write(root: &Path, rel: &str, text: &str) -> anyhow::Result<()> {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(p, text)?;
    Ok(())
}

fn cm(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n")
}

#[test]
fn reads_recursively_in_path_order() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    write(tmp.path(), "b/z.yaml", &cm("bz"))?;
    write(tmp.path(), "a.yml", &cm("a"))?;
    write(
        tmp.path(),
        "b/c/d.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bcd"}}"#,
    )?;
    write(tmp.path(), "notes.txt", "ignored")?;
    write(tmp.path(), ".hidden/x.yaml", "not: [parsed")?;
    let set = read_dir(tmp.path(), &ParseOptions::default())?;
    let names: Vec<_> = set
        .objects
        .iter()
        .map(|m| (m.origin.file.as_str(), m.id.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("a.yml", "a"), ("b/c/d.json", "bcd"), ("b/z.yaml", "bz")]
    );
    Ok(())
}

#[test]
fn collects_every_error_with_its_place() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let outside = tempfile::tempdir()?;
    write(outside.path(), "secret.yaml", &cm("outside"))?;
    write(tmp.path(), "ok.yaml", &cm("ok"))?;
    write(
        tmp.path(),
        "dup.yaml",
        &format!("{}---\n{}", cm("x"), cm("x")),
    )?;
    write(
        tmp.path(),
        "broken.yaml",
        &format!("{}---\nkind: [\n", cm("why")),
    )?;
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        tmp.path().join("link.yaml"),
    )?;
    std::os::unix::fs::symlink(outside.path(), tmp.path().join("linkdir"))?;
    let big = format!(
        "{}data:\n  k: \"{}\"\n",
        cm("big"),
        "x".repeat(usize::try_from(MAX_FILE_BYTES)? + 1)
    );
    write(tmp.path(), "big.yaml", &big)?;
    let Err(errs) = read_dir(tmp.path(), &ParseOptions::default()) else {
        anyhow::bail!("expected errors");
    };
    let text: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 5, "{text:#?}");
    assert!(
        text.contains(&"link.yaml: symlink leads outside the repository root".to_string()),
        "{text:#?}"
    );
    assert!(
        text.contains(&"linkdir: symlink leads outside the repository root".to_string()),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|t| t.starts_with("big.yaml: file is ")
            && t.ends_with("over the limit of 8388608 bytes"))
    );
    assert!(
        text.iter()
            .any(|t| t.starts_with("broken.yaml, document 2, line ") && t.contains("invalid YAML")),
        "{text:#?}"
    );
    assert!(text.contains(
        &"dup.yaml, document 2, line 6: ConfigMap default/x is defined twice: here and at dup.yaml, document 1, line 1"
            .to_string()
    ));
    Ok(())
}

#[test]
fn symlinks_inside_the_root_are_followed() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    write(tmp.path(), "real/a.yaml", &cm("a"))?;
    std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("alias"))?;
    let set = read_dir(tmp.path(), &ParseOptions::default())?;
    // The same directory reached twice is read once.
    assert_eq!(set.len(), 1);
    Ok(())
}

#[test]
fn kustomizations_are_rendered_by_kubectl() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    write(
        tmp.path(),
        "app/kustomization.yaml",
        "namespace: shop\nnamePrefix: prod-\nresources: [cm.yaml]\n",
    )?;
    write(tmp.path(), "app/cm.yaml", &cm("cfg"))?;
    write(tmp.path(), "plain.yaml", &cm("plain"))?;
    let set = read_dir(tmp.path(), &ParseOptions::default())?;
    let ids: Vec<_> = set.objects.iter().map(|m| m.id.to_string()).collect();
    assert_eq!(
        ids,
        vec!["ConfigMap shop/prod-cfg", "ConfigMap default/plain"]
    );
    assert_eq!(set.objects[0].origin.file, "app/kustomization.yaml");

    write(
        tmp.path(),
        "app/kustomization.yaml",
        "resources: [missing.yaml]\n",
    )?;
    let Err(errs) = read_dir(tmp.path(), &ParseOptions::default()) else {
        anyhow::bail!("expected an error");
    };
    assert!(
        errs.0[0]
            .to_string()
            .starts_with("app: kustomize build failed:"),
        "{errs}"
    );
    Ok(())
}
