//! kube-rs against the sandbox: the client tether itself uses must list, watch and
//! server-side apply with no special casing.

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

use crate::support::TestSandbox;

async fn client(sandbox: &TestSandbox) -> kube::Client {
    sandbox.sandbox.client().await.expect("a kube client")
}

fn configmap(name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "client"}}, "data": {"value": value}})
}

#[tokio::test]
async fn kube_rs_lists_and_applies_typed_and_dynamic_objects() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("kr-apply").await;
    let client = client(&sandbox).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kr-apply");
    assert!(
        configmaps
            .list(&ListParams::default())
            .await
            .expect("a list")
            .items
            .is_empty()
    );

    let apply = PatchParams::apply("tether").force();
    let typed: ConfigMap = serde_json::from_value(configmap("typed", "1")).expect("a ConfigMap");
    let created = configmaps
        .patch("typed", &apply, &Patch::Apply(&typed))
        .await
        .expect("the typed apply succeeds");
    assert_eq!(
        created
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .map(String::as_str),
        Some("1")
    );
    assert!(created.metadata.uid.is_some());

    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "kr-apply", &ApiResource::from_gvk(&gvk));
    let object: DynamicObject =
        serde_json::from_value(configmap("dynamic", "2")).expect("a dynamic object");
    let applied = dynamic
        .patch("dynamic", &apply, &Patch::Apply(&object))
        .await
        .expect("the dynamic apply succeeds");
    assert_eq!(applied.data["data"]["value"], "2");

    let listed = configmaps
        .list(&ListParams::default().labels("app=client"))
        .await
        .expect("a list");
    let names: Vec<_> = listed
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["dynamic", "typed"]);

    // Re-applying the same configuration leaves the object as it is.
    let again = configmaps
        .patch("typed", &apply, &Patch::Apply(&typed))
        .await
        .expect("the re-apply succeeds");
    assert_eq!(
        again.metadata.resource_version,
        created.metadata.resource_version
    );

    let missing = configmaps.get("nope").await.expect_err("no such ConfigMap");
    match missing {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 404);
            assert_eq!(status.reason, "NotFound");
        }
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn kube_rs_watcher_sees_an_apply() {
    let sandbox = TestSandbox::start().await;
    sandbox.namespace("kr-watch").await;
    let client = client(&sandbox).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client, "kr-watch");
    let stream = watcher(configmaps.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let seen = async {
        let mut stream = stream;
        while let Some(object) = stream.try_next().await.expect("the watch streams") {
            let value = object
                .data
                .as_ref()
                .and_then(|d| d.get("value"))
                .cloned()
                .unwrap_or_default();
            if object.metadata.name.as_deref() == Some("watched") && value == "2" {
                return value;
            }
        }
        panic!("the watch ended before the apply was seen");
    };
    let writes = async {
        let apply = PatchParams::apply("tether").force();
        for value in ["1", "2"] {
            let object: ConfigMap =
                serde_json::from_value(configmap("watched", value)).expect("a ConfigMap");
            configmaps
                .patch("watched", &apply, &Patch::Apply(&object))
                .await
                .expect("the apply succeeds");
        }
    };
    let (value, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(seen, writes)
    })
    .await
    .expect("the watcher sees the apply in time");
    assert_eq!(value, "2");
}
