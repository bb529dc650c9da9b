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
}
