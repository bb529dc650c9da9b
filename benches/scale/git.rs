//! The fleet in Git: one repository on disk with every app's directory, served by a
//! `git daemon`, and the configuration that serves it.

use super::*;

pub(super) fn namespace(app: usize) -> String {
    format!("fleet-{app}")
}

pub(super) fn configmap_name(i: usize) -> String {
    format!("cm-{i}")
}

/// The value Git gives ConfigMap `i`'s `key`: what a heal restores.
pub(super) fn configmap_value(i: usize) -> String {
    format!("v{i}")
}

/// The repository `fleet.git` under `srv`: `apps/<app>/` holds one file per object.
pub(super) fn write_fleet(srv: &Path, apps: usize, objects_per_app: usize) {
    let repo = srv.join("fleet.git");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    let deployments = DEPLOYMENTS.min(objects_per_app / 10);
    for app in 0..apps {
        let dir = repo.join(format!("apps/{app}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let ns = namespace(app);
        for i in 0..objects_per_app - deployments {
            let name = configmap_name(i);
            let value = configmap_value(i);
            std::fs::write(
                dir.join(format!("{name}.yaml")),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  key: \"{value}\"\n  mode: production\n"
                ),
            )
            .expect("write manifest");
        }
        for i in 0..deployments {
            std::fs::write(
                dir.join(format!("web-{i}.yaml")),
                format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-{i}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web-{i}}}}}\n  template:\n    metadata: {{labels: {{app: web-{i}}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
                ),
            )
            .expect("write manifest");
        }
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "fleet"]);
}

/// The configuration every replica reads: the same apps, one listen port each.
pub(super) fn config(port: u16, url: &str, apps: usize, replicas: usize) -> String {
    let mut config = format!(
        "server:\n  listen: 127.0.0.1:{port}\n  peerToken: {{secretEnv: {PEER_TOKEN_ENV}}}\n"
    );
    config.push_str(&sharding(replicas));
    config.push_str(if apps == 0 { "apps: []\n" } else { "apps:\n" });
    for app in 0..apps {
        config.push_str(&format!(
            "- name: fleet-{app}\n  source: {{repo: \"{url}\", ref: main, path: apps/{app}, interval: {POLL}}}\n  destination: {{namespace: {}}}\n  sync: {{automated: true, prune: true, selfHeal: true}}\n",
            namespace(app)
        ));
    }
    config
}

/// How replicas split the apps. One replica needs nothing. Several share them through
/// `shards` (issue #18's sharding: a Lease per shard in the leader election's
/// namespace): this is the one place the bench depends on it; until the configuration
/// knows `shards`, a run with `--replicas 2` or more stops at the first replica's
/// configuration error, with its log.
pub(super) fn sharding(replicas: usize) -> String {
    if replicas <= 1 {
        return String::new();
    }
    format!("leaderElection:\n  enabled: true\n  namespace: default\nshards: {replicas}\n")
}

/// The variable the replicas read their shared peer token from (`server.peerToken`,
/// required with shards).
pub(super) const PEER_TOKEN_ENV: &str = "TETHER_BENCH_PEER_TOKEN";
