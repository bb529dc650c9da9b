//! The serve bench's Git side: a real repository on disk (served by a real `git
//! daemon`) holding every app's objects, its commits, and a push webhook signed as a
//! Git host signs it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::*;

pub(super) fn init_repo(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]);
}

pub(super) fn commit(dir: &Path, subject: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", subject]);
    git(dir, &["rev-parse", "HEAD"])
}

// ---------------------------------------------------------------------------------
// The apps.

pub(super) fn namespace(app: usize) -> String {
    format!("fleet-{app}")
}

pub(super) fn configmap(name: &str, namespace: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: \"{value}\"\n  mode: production\n"
    )
}

/// One app's manifests, one file per object; `first` is the value of `cm-0`.
pub(super) fn write_app(dir: &Path, app: usize, first: &str) {
    let ns = namespace(app);
    let write = |name: String, text: String| {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(dir.join(format!("{name}.yaml")), text).expect("write manifest");
    };
    for i in 0..CONFIGMAPS {
        let value = if i == 0 {
            first.to_string()
        } else {
            format!("v{i}")
        };
        write(
            format!("cm-{i}"),
            configmap(&format!("cm-{i}"), &ns, &value),
        );
    }
    for i in 0..SERVICES {
        write(
            format!("svc-{i}"),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: {ns}\nspec:\n  selector: {{app: web-{i}}}\n  ports:\n  - {{name: http, port: 80, targetPort: 8080}}\n"
            ),
        );
    }
    for i in 0..DEPLOYMENTS {
        write(
            format!("web-{i}"),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-{i}\n  namespace: {ns}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web-{i}}}}}\n  template:\n    metadata: {{labels: {{app: web-{i}}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
            ),
        );
    }
}

pub(super) fn signed_push(url: &str) -> (String, String) {
    let body = json!({"repository": url, "ref": "refs/heads/main"}).to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(WEBHOOK_SECRET.as_bytes()).expect("HMAC key");
    mac.update(body.as_bytes());
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    (body, signature)
}

// ---------------------------------------------------------------------------------
// The tether process: CPU time and memory from /proc.
