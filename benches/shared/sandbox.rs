//! What benches that drive tether against the sandbox share (included with `#[path]`,
//! as the sandbox is tether's own and `tether-testkit` knows nothing of tether): a
//! sandbox started with the namespaces a bench's apps deploy to.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use tether_sandbox::{Sandbox, SandboxOptions};

/// A sandbox started with `options`, its kubeconfig written in `dir`, a client, and
/// each of `namespaces` created.
pub async fn sandbox_with_namespaces(
    options: SandboxOptions,
    dir: &Path,
    namespaces: impl IntoIterator<Item = String>,
) -> (Sandbox, PathBuf, kube::Client) {
    let sandbox = Sandbox::start(options).await.expect("sandbox starts");
    let kubeconfig = dir.join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = sandbox.client().await.expect("client");
    let api: Api<Namespace> = Api::all(client.clone());
    for name in namespaces {
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
    }
    (sandbox, kubeconfig, client)
}
