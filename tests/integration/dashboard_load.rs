//! Many apps for the dashboard's weight and speed figures, shared by
//! `dashboard::a_thousand_apps_fit_the_page_budget` and `benches/dashboard.rs` (which
//! includes this file): statuses as the service would hold them, served by the real
//! router with no workers behind it.

use chrono::Utc;
use serde_json::json;
use tether_core::report::status::{
    Automation, DriftedObject, PassInfo, PassResult, RevisionInfo, Statuses, SyncStatus,
};
use tether_core::sync::health::Health;

/// What the running service would hold for `n` apps across 10 repositories: a tenth
/// out of sync with one drifted field each, realistic names, SHAs and subjects.
pub fn many_app_statuses(n: usize) -> Statuses {
    let statuses = Statuses::default();
    let now = Utc::now();
    for i in 0..n {
        let name = format!("team-{:02}-service-{i:04}", i % 40);
        statuses.update(&name, |s| {
            let drifted = i % 10 == 3;
            s.sync = if drifted {
                SyncStatus::OutOfSync
            } else {
                SyncStatus::Synced
            };
            s.health = if i % 25 == 7 {
                Health::Progressing
            } else {
                Health::Healthy
            };
            s.revision = Some(RevisionInfo {
                sha: {
                    // Spread like real SHAs (no shared prefix), deterministic per app.
                    let x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let y = x.rotate_left(29) ^ 0xd6e8_feb8_6659_fd93;
                    format!("{x:016x}{y:016x}{:08x}", (x >> 16) as u32)
                },
                subject: format!("Bump service-{i:04} to 1.{}.{}", i % 17, i % 7),
            });
            s.commit_url_prefix = Some(format!(
                "https://github.com/acme/platform-{}/commit/",
                i % 10
            ));
            s.objects = 12;
            s.automation = if i % 50 == 9 {
                Automation {
                    acting: false,
                    reason: Some(
                        "self-heal is off: live changes are reported, not corrected".into(),
                    ),
                }
            } else {
                Automation {
                    acting: true,
                    reason: None,
                }
            };
            if drifted {
                s.drifted = vec![DriftedObject {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: Some("prod".into()),
                    name: format!("service-{i:04}"),
                    status: "Modified",
                    message: String::new(),
                    changes: vec![json!({"path": "spec.replicas", "desired": 2, "live": 5})],
                    diff: String::new(),
                }];
            }
            s.last_pass = Some(PassInfo {
                finished_at: now - chrono::Duration::seconds(i as i64 % 600),
                duration_ms: 80 + (i as u64 * 37) % 900,
                result: PassResult::Succeeded,
                error: None,
                changed: 0,
            });
        });
    }
    statuses
}

/// The service's app table, for a router serving statuses no worker writes.
pub struct NoWorkers;

impl tether_controller::server::Control for NoWorkers {
    fn request_sync(&self, _: &str) -> bool {
        false
    }
    fn set_suspended(
        &self,
        _: &str,
        _: bool,
    ) -> futures::future::BoxFuture<
        '_,
        Result<bool, tether_controller::server::service::SuspendError>,
    > {
        Box::pin(async { Ok(false) })
    }
    fn readiness(&self) -> Vec<(&'static str, bool)> {
        Vec::new()
    }
}

/// The Performance API's figures for the page just loaded, once its app list is on
/// screen.
pub const FIGURES: &str = "\
    const paint = (n) => performance.getEntriesByName(n)[0]?.startTime ?? null; \
    const nav = performance.getEntriesByType('navigation')[0]; \
    const done = performance.getEntriesByType('resource').filter(r => r.responseEnd > 0); \
    const sum = (k) => nav[k] + done.reduce((s, r) => s + r[k], 0); \
    return { firstPaint: paint('first-paint'), firstContentfulPaint: paint('first-contentful-paint'), \
      appsRendered: paint('apps-rendered'), transferred: sum('transferSize'), \
      decoded: sum('decodedBodySize'), rows: document.querySelectorAll('#app-rows tr').length };";
