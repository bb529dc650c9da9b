//! Objects tether reads as its own input rather than as an app's: a kind followed
//! with one watch (App objects, issue #16), a status written through the status
//! subresource, and a metadata merge patch (finalizers).

use futures::{Stream, StreamExt};
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{Map, Value};

use super::{Cluster, ClusterError, Resolved, Retry, to_value};

/// What a watch of a kind saw, as values.
#[derive(Debug, Clone)]
pub enum Watched {
    /// The kind was (re)listed: these are all its objects now; any other is gone.
    Listed(Vec<Value>),
    /// An object was created or changed.
    Applied(Value),
    /// An object is gone.
    Deleted(Value),
}

impl Cluster {
    /// Follows every object of a kind (in one namespace, or all; those a field selector
    /// such as `metadata.name=x` picks, when given), listing again after
    /// a broken watch; errors are retried by the watcher with its own backoff and
    /// logged here, so the stream ends only when it is dropped.
    pub fn watch_objects(
        &self,
        kind: &Resolved,
        namespace: Option<&str>,
        field_selector: Option<&str>,
    ) -> impl Stream<Item = Watched> + Send + 'static {
        let api = self.api(kind, namespace);
        let mut config = watcher::Config::default();
        if let Some(fields) = field_selector {
            config = config.fields(fields);
        }
        let mut listing: Vec<Value> = Vec::new();
        let kind_name = kind.resource.kind.clone();
        // kube-rs's default backoff (800 ms to 30 s) between failed watch attempts.
        let stream = kube::runtime::WatchStreamExt::default_backoff(watcher::watcher(api, config));
        stream.filter_map(move |event| {
            let out = match event {
                Ok(Event::Init) => {
                    listing.clear();
                    None
                }
                Ok(Event::InitApply(object)) => {
                    if let Ok(value) = to_value(object) {
                        listing.push(value);
                    }
                    None
                }
                Ok(Event::InitDone) => Some(Watched::Listed(std::mem::take(&mut listing))),
                Ok(Event::Apply(object)) => to_value(object).ok().map(Watched::Applied),
                Ok(Event::Delete(object)) => to_value(object).ok().map(Watched::Deleted),
                Err(err) => {
                    tracing::warn!(kind = %kind_name, error = %err, "watch failed; listing again");
                    None
                }
            };
            std::future::ready(out)
        })
    }

    /// Writes `object`'s `status` with server-side apply to the status subresource, as
    /// `manager` (which then owns exactly the fields it wrote).
    pub async fn apply_status(
        &self,
        kind: &Resolved,
        object: &Value,
        manager: &str,
    ) -> Result<Value, ClusterError> {
        let (namespace, name) = super::identity(object, "given a status")?;
        let request = self.request(kind, namespace);
        let params = PatchParams::apply(manager).force();
        let patch = Patch::Apply(object);
        let applied: Map<String, Value> = self
            .answer(Retry::WhenBusy, || {
                request.patch_subresource("status", name, &params, &patch)
            })
            .await?;
        Ok(Value::Object(applied))
    }

    /// A JSON merge patch of one object (RFC 7386), as tether's field manager.
    pub async fn merge_patch(
        &self,
        kind: &Resolved,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ClusterError> {
        let request = self.request(kind, namespace);
        let params = PatchParams {
            field_manager: Some(tether_schema::ownership::FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(patch);
        let patched: Map<String, Value> = self
            .answer(Retry::WhenBusy, || request.patch(name, &params, &patch))
            .await?;
        Ok(Value::Object(patched))
    }
}
