//! The API server's answers, read as values: requests are built by kube's request
//! builder and sent through the connection's client, and each answer is parsed from
//! its JSON straight into a `serde_json` object. Going through kube's `DynamicObject`
//! (typed metadata, its other fields buffered by serde's `flatten`) and then
//! serialising that back into a value was most of the client's own CPU per object in
//! a cold sync (issue #31); it also dropped metadata fields `ObjectMeta` does not know.

use kube::Resource as _;
use kube::api::DynamicObject;
use serde_json::{Map, Value};

use super::{Cluster, ClusterError, ObjectError, Resolved, Retry};

impl Cluster {
    /// The requests addressing a kind's objects (in `namespace`, for a namespaced kind),
    /// as [`Cluster::api`] addresses them.
    pub(super) fn request(&self, kind: &Resolved, namespace: Option<&str>) -> kube::core::Request {
        let namespace = namespace.filter(|_| kind.namespaced);
        kube::core::Request::new(DynamicObject::url_path(&kind.resource, namespace))
    }

    /// Sends the request `build` makes (again, as [`Cluster::bounded`] retries) through
    /// this connection's client and parses the answer straight into `T`: a JSON object
    /// as a `Map`, not through kube's `DynamicObject` and back into a value, which was
    /// most of the client's own work per object in a cold sync (its typed metadata, its
    /// flattened fields buffered, then all of it serialised again).
    pub(super) async fn answer<T: serde::de::DeserializeOwned>(
        &self,
        retry: Retry,
        build: impl Fn() -> Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<T, ClusterError> {
        self.bounded(retry, || async {
            let request = build().map_err(kube::Error::BuildRequest)?;
            self.client.request::<T>(request).await
        })
        .await
    }
}

/// One page of a list, as the server answers it: the items as JSON objects.
#[derive(serde::Deserialize)]
pub(super) struct Page {
    #[serde(default)]
    pub metadata: PageMeta,
    /// `null` for none, from some servers.
    #[serde(default)]
    pub items: Option<Vec<Map<String, Value>>>,
}

#[derive(Default, serde::Deserialize)]
pub(super) struct PageMeta {
    #[serde(rename = "continue", default)]
    pub continue_: Option<String>,
}

/// A list item as an object of the kind listed: items may come without their type
/// (kube-apiserver leaves it out); the request knows it, and it goes first, where the
/// server puts it.
pub(super) fn typed_item(mut item: Map<String, Value>, kind: &Resolved) -> Value {
    if let (Some(Value::String(api_version)), Some(Value::String(name))) =
        (item.get("apiVersion"), item.get("kind"))
        && *api_version == kind.resource.api_version
        && *name == kind.resource.kind
    {
        return Value::Object(item);
    }
    let mut typed = Map::with_capacity(item.len() + 2);
    typed.insert(
        "apiVersion".into(),
        Value::String(kind.resource.api_version.clone()),
    );
    typed.insert("kind".into(), Value::String(kind.resource.kind.clone()));
    item.remove("apiVersion");
    item.remove("kind");
    typed.extend(item);
    Value::Object(typed)
}

/// The body of a create or replace: the object, checked to be a Kubernetes object
/// (its metadata readable as such) as kube's own create and replace check it.
pub(super) fn typed_body(object: &Value) -> Result<Vec<u8>, ClusterError> {
    let typed: DynamicObject =
        serde_json::from_value(object.clone()).map_err(ObjectError::NotAnObject)?;
    Ok(serde_json::to_vec(&typed).map_err(ObjectError::NotAnObject)?)
}
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::discovery::ApiResource;
    use serde_json::json;

    use super::*;

    /// A connection to an API server that answers every request with `status` and
    /// `body`, recording the paths asked for.
    fn answering(status: u16, body: &str) -> (Cluster, Arc<parking_lot::Mutex<Vec<String>>>) {
        let asked = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = asked.clone();
        let body = body.to_string();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            seen.lock().push(request.uri().to_string());
            let answer = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body.clone().into_bytes()))
                .expect("a response");
            async move { Ok::<_, std::convert::Infallible>(answer) }
        });
        (
            Cluster::from_client(kube::Client::new(service, "default")),
            asked,
        )
    }

    fn configmaps() -> Resolved {
        Resolved {
            resource: ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            namespaced: true,
        }
    }

    #[tokio::test]
    async fn an_object_is_read_with_every_field_the_server_sent_in_its_order() {
        let sent = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7", "aFieldFromANewerServer": {"x": 1}},
            "data": {"b": "2", "a": "1"},
        });
        let (cluster, asked) = answering(200, &sent.to_string());
        let read = cluster.get(&configmaps(), Some("shop"), "web").await;
        let read = read.expect("an answer").expect("the object");
        assert_eq!(read, sent);
        assert_eq!(
            serde_json::to_string(&read).expect("json"),
            sent.to_string(),
            "the server's order"
        );
        assert_eq!(*asked.lock(), ["/api/v1/namespaces/shop/configmaps/web"]);
    }

    #[tokio::test]
    async fn a_missing_object_is_none_and_a_page_that_is_not_json_is_an_unreadable_answer() {
        let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "configmaps \"web\" not found"});
        let (cluster, _) = answering(404, &not_found.to_string());
        let read = cluster.get(&configmaps(), Some("shop"), "web").await;
        assert!(matches!(read, Ok(None)), "{read:?}");
        // A proxy's page with a 200: not a transport failure, and worth a retry.
        for page in ["<html>gateway</html>", "[1, 2]", "\"text\""] {
            let (cluster, _) = answering(200, page);
            let read = cluster.get(&configmaps(), Some("shop"), "web").await;
            let err = read.expect_err(page);
            assert!(matches!(err, ClusterError::Answer(_)), "{page}: {err:?}");
            assert!(err.is_retryable());
            assert!(
                err.to_string()
                    .starts_with("cannot read the API server's answer"),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn listed_items_get_the_listed_kind_first_and_an_applied_answer_is_kept_whole() {
        let page = json!({
            "apiVersion": "v1",
            "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9"},
            "items": [
                {"metadata": {"name": "a", "namespace": "shop"}, "data": {"k": "v"}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "shop"}},
            ],
        });
        let (cluster, asked) = answering(200, &page.to_string());
        let listed = cluster
            .list(&configmaps(), Some("shop"), "tether.dev/app=web")
            .await
            .expect("a list");
        assert_eq!(
            listed,
            [
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "shop"}, "data": {"k": "v"}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "shop"}}),
            ]
        );
        assert_eq!(
            serde_json::to_string(&listed[0]).expect("json"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"shop"},"data":{"k":"v"}}"#
        );
        assert_eq!(
            *asked.lock(),
            ["/api/v1/namespaces/shop/configmaps?&labelSelector=tether.dev%2Fapp%3Dweb"]
        );
        let (cluster, _) = answering(200, r#"{"items": null, "metadata": {}}"#);
        let none = cluster.list(&configmaps(), None, "").await;
        assert!(none.expect("an empty list").is_empty());

        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}});
        let mut answer = object.clone();
        answer["metadata"]["managedFields"] =
            json!([{"manager": "tether", "operation": "Apply", "fieldsV1": {"f:data": {}}}]);
        let (cluster, asked) = answering(200, &answer.to_string());
        let applied = cluster.dry_run_apply(&configmaps(), &object, false).await;
        assert_eq!(applied.expect("an answer"), answer);
        assert_eq!(
            *asked.lock(),
            ["/api/v1/namespaces/shop/configmaps/web?&dryRun=All&fieldManager=tether"]
        );
    }
}
