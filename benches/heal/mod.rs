//! The serve bench's self-heal trials: watches on one object, the edits a trial makes,
//! and the floor under a heal (the apply it makes, timed alone, and as tether timed it
//! during the heal).

use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use tether_schema::ownership::FIELD_MANAGER;

use super::{APPLY_TRIALS, CONFIGMAPS, TAMPERED, TRIAL_TIMEOUT};
use tether_testkit::figures::{ms, percentile};

pub async fn uid<K>(api: &Api<K>, name: &str) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get(name)
        .await
        .expect("the object exists")
        .meta()
        .uid
        .clone()
        .expect("an object has a uid")
}

pub type Events<K> = futures::stream::BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// A watch on the object `name`, from the version stored now: no event after it is
/// missed, and each arrives as the sandbox commits the change.
pub async fn watch_object<K>(api: &Api<K>, name: &str) -> Events<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let version = api
        .get(name)
        .await
        .expect("the object exists")
        .meta()
        .resource_version
        .clone()
        .expect("a stored object has a resourceVersion");
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    api.watch(&params, &version)
        .await
        .expect("the watch opens")
        .boxed()
}

/// When the correction arrived on the watch (since `began`), and since the first event
/// the watch delivered after `began` (the bench's own change, as every watcher sees it).
pub async fn until_event<K>(
    events: &mut Events<K>,
    began: Instant,
    what: &str,
    corrected: impl Fn(&K) -> bool,
) -> (Duration, Duration) {
    let mut first_seen = None;
    loop {
        let event = tokio::time::timeout(TRIAL_TIMEOUT, events.try_next())
            .await
            .unwrap_or_else(|_| panic!("timed out: {what}"))
            .expect("the watch delivers")
            .unwrap_or_else(|| panic!("the watch ended before: {what}"));
        let seen = *first_seen.get_or_insert_with(Instant::now);
        if let WatchEvent::Added(object) | WatchEvent::Modified(object) = &event
            && corrected(object)
        {
            return (began.elapsed(), seen.elapsed());
        }
    }
}

/// A live edit of a managed ConfigMap, as a person's `kubectl edit` makes it.
pub async fn tamper(configmaps: &Api<ConfigMap>, name: &str) -> ConfigMap {
    configmaps
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": TAMPERED}})),
        )
        .await
        .expect("edit")
}

/// The floor under a heal: the round trip of the apply a heal makes, alone, on the
/// objects the heals corrected (the same sandbox, tether stopped). Each trial edits an
/// object as a heal trial does (untimed), then times the server-side apply of Git's
/// object with the labels tether gives it, as field manager `tether` with force.
pub async fn apply_floor(configmaps: &Api<ConfigMap>, namespace: &str) -> Vec<f64> {
    let mut round_trips = Vec::with_capacity(APPLY_TRIALS);
    for trial in 0..APPLY_TRIALS {
        let name = format!("cm-{}", 1 + trial % (CONFIGMAPS - 1));
        let expected = format!("v{}", 1 + trial % (CONFIGMAPS - 1));
        let edited = tamper(configmaps, &name).await;
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": edited.metadata.labels},
            "data": {"key": expected, "mode": "production"},
        });
        let began = Instant::now();
        configmaps
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
            .expect("apply");
        round_trips.push(ms(began.elapsed()));
    }
    round_trips
}

/// A row of the bench's table: figure, value, target, pass.
pub type Row = (String, String, String, bool);

/// Each heal's write round trip as tether timed it, in ms: `write_us` of the `heal
/// finished` lines of its JSON log (lines of heals that wrote nothing are left out).
pub fn writes_timed_by_tether(log: &Path) -> Vec<f64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "heal finished")
        .filter_map(|line| line["fields"]["write_us"].as_u64())
        .filter(|&us| us > 0)
        .map(|us| us as f64 / 1000.0)
        .collect()
}

/// Where a heal stands on its floor (issue #31): from the edit's watch event to the
/// fix's (`seen`), the same apply timed alone once tether is gone (`alone`), and the
/// heal's own write as tether timed it (`inside`: the round trip of the very request
/// the heal made, its client's work on it included). What the heal takes beyond the
/// apply alone is tether's: the watch delivery to it and its work before the write.
pub fn floor_rows(seen: &[f64], alone: &[f64], inside: &[f64], gap_target: f64) -> Vec<Row> {
    let seen_p50 = percentile(seen, 50.0);
    let alone_p50 = percentile(alone, 50.0);
    let mut rows = vec![
        (
            "heal of an edit, its event to the fix's, p50 / p90".into(),
            format!("{seen_p50:.1} / {:.1} ms", percentile(seen, 90.0)),
            String::new(),
            true,
        ),
        (
            "that heal's apply alone, same objects, p50 / p90".into(),
            format!("{alone_p50:.1} / {:.1} ms", percentile(alone, 90.0)),
            String::new(),
            true,
        ),
        (
            "heal p50 beyond its apply (tether's gap)".into(),
            format!("{:.1} ms", seen_p50 - alone_p50),
            format!("< {gap_target:.0} ms"),
            seen_p50 - alone_p50 < gap_target,
        ),
    ];
    if inside.is_empty() {
        rows.push((
            "heals' writes as tether timed them".into(),
            "no heal lines in its log".into(),
            String::new(),
            false,
        ));
        return rows;
    }
    let inside_p50 = percentile(inside, 50.0);
    rows.extend([
        (
            format!(
                "heals' writes as tether timed them ({}), p50 / p90",
                inside.len()
            ),
            format!("{inside_p50:.1} / {:.1} ms", percentile(inside, 90.0)),
            String::new(),
            true,
        ),
        // No target: tether's timing of its write includes its own client's work on
        // the request and the answer, and the answer's way back, which come after the
        // fix's event; on a loaded machine with a dev build that can exceed the heal.
        (
            "heal p50 less its own write as tether timed it".into(),
            format!("{:.1} ms", seen_p50 - inside_p50),
            String::new(),
            true,
        ),
    ]);
    rows
}
