//! `tether serve` started as a user starts it, the way every bench that measures the
//! service does: the binary with a configuration file and a kubeconfig, its own Git
//! cache, its log in a file, stopped with the bench.

use std::path::Path;
use std::process::Stdio;

/// `program` (tether's binary, or a wrapper such as `perf` in front of it) set to run
/// `tether serve` with the configuration at `config` against the cluster of
/// `kubeconfig`: its Git cache in `cache`, warnings only (`RUST_LOG`, which a caller
/// may set again), its stderr (the log) into the file `log`, killed when dropped.
pub fn command(
    mut program: tokio::process::Command,
    config: &Path,
    kubeconfig: &Path,
    cache: &Path,
    log: &Path,
) -> tokio::process::Command {
    program
        .arg("serve")
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("TETHER_CACHE_DIR", cache)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .kill_on_drop(true);
    program
}

/// Whether an App object, as the API server returns it, says `Ready=True`.
pub fn ready(app: &serde_json::Value) -> bool {
    app["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Whether an app's status, as tether's status API answers it (`/api/v1/apps/{app}`),
/// says Synced.
pub fn synced(status: &serde_json::Value) -> bool {
    status["sync"] == "Synced"
}

/// Whether an app's status says Synced and Healthy: what a user waits for after a
/// change.
pub fn synced_and_healthy(status: &serde_json::Value) -> bool {
    synced(status) && status["health"] == "Healthy"
}

/// Whether an app's status says Synced at a revision `revision` accepts (a commit, or
/// a chart's `name@version@digest`).
pub fn synced_at(status: &serde_json::Value, revision: impl Fn(&str) -> bool) -> bool {
    synced(status) && status["revision"]["sha"].as_str().is_some_and(revision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_app_is_ready_only_with_ready_true() {
        let app = |status: &str| {
            json!({"status": {"conditions": [
                {"type": "Synced", "status": "True"},
                {"type": "Ready", "status": status},
            ]}})
        };
        assert!(ready(&app("True")));
        assert!(!ready(&app("False")));
        assert!(!ready(&json!({"status": {}})));
    }

    #[test]
    fn an_app_is_synced_at_a_revision_only_with_both() {
        let status = |sync: &str, health: &str, sha: &str| json!({"sync": sync, "health": health, "revision": {"sha": sha}});
        let good = status("Synced", "Healthy", "abc");
        assert!(synced(&good) && synced_and_healthy(&good));
        assert!(synced_at(&good, |r| r == "abc"));
        assert!(!synced_at(&good, |r| r == "def"));
        assert!(!synced_at(&status("OutOfSync", "Healthy", "abc"), |r| r == "abc"));
        assert!(!synced_and_healthy(&status("Synced", "Progressing", "abc")));
        assert!(!synced(&json!({})) && !synced_at(&json!({"sync": "Synced"}), |_| true));
    }
}
