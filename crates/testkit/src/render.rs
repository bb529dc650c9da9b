//! The render stage's processes, counted: a wrapper around a renderer (Helm,
//! Kustomize) that logs each run, and the Helm that `.ci/install-helm` installs.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A wrapper around `real` that logs the nanoseconds each run takes, one line per
/// process, to `log`: every renderer process the render stage starts is counted.
pub fn counting_wrapper(dir: &Path, name: &str, real: &str, log: &Path) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nstart=$(date +%s%N)\n\"{real}\" \"$@\"\nrc=$?\necho $(( $(date +%s%N) - start )) >> \"{}\"\nexit $rc\n",
            log.display()
        ),
    )
    .expect("write wrapper");
    let mut perms = std::fs::metadata(&path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    path
}

/// The processes logged so far and their total time.
pub fn processes(log: &Path) -> (usize, Duration) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let ns: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    (ns.len(), Duration::from_nanos(ns.iter().sum()))
}

/// Helm: `TETHER_HELM`, else the one `.ci/install-helm` installs, else `helm` from PATH.
pub fn helm_program() -> String {
    if let Ok(helm) = std::env::var("TETHER_HELM") {
        return helm;
    }
    let installed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tools/bin/helm");
    if Path::new(installed).is_file() {
        installed.to_string()
    } else {
        "helm".to_string()
    }
}
