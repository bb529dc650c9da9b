//! Objects the benches measure with: one shape each, so that figures of different
//! benches speak of the same object.

use serde_json::{Value, json};

/// Deployment `web-<i>` as a typical app ships one: a container with a port, an
/// environment variable, requests and limits and a readiness probe, labelled
/// `app: web` and selecting its pods by `i`.
pub fn deployment(i: usize) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("web-{i}"), "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web", "i": i.to_string()}},
            "template": {
                "metadata": {"labels": {"app": "web", "i": i.to_string()}},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1.25",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "env": [{"name": "MODE", "value": "production"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}}
                }]}
            }
        }
    })
}

/// How many of `apps` (App objects as a client lists them) report Ready.
pub fn ready_count<T: serde::Serialize>(apps: &[T]) -> usize {
    apps.iter()
        .filter(|app| crate::serve::ready(&serde_json::to_value(app).unwrap_or_default()))
        .count()
}
