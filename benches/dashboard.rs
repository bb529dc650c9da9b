//! Dashboard figures (issue #17), in headless Chromium driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`) against the real HTTP router serving 100, 1,000
//! and 5,000 apps' statuses:
//!
//! 1. page load: first paint, first contentful paint, the app list on screen, and the
//!    bytes transferred (Performance API), over several loads; beside them the same
//!    bytes decoded, which is what went over the wire before the server gzipped;
//! 2. live: a status change until the page shows it (through `/api/v1/events`).
//!
//! Targets: first paint < 300 ms and < 200 KB with 1,000 apps; an event on the page
//! < 1 s after the status changes. `cargo bench --bench dashboard` prints a table with
//! PASS or FAIL for each target (and exits 1 on a FAIL) and writes
//! `target/bench-results/dashboard.json`.

#[path = "../tests/integration/dashboard_load.rs"]
mod dashboard_load;
// The tests' client: this bench clicks and types nothing.
#[allow(dead_code)]
#[path = "../tests/integration/webdriver.rs"]
mod webdriver;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether_core::report::status::SyncStatus;

use dashboard_load::{FIGURES, NoWorkers, many_app_statuses};
use tether_testkit::figures::median;
use webdriver::Browser;

const SIZES: [usize; 3] = [100, 1000, 5000];
const LOADS: usize = 5;
const LIVE_TRIALS: usize = 20;

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::MIN, f64::max)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let browser = Browser::start().await;
    let mut results = Vec::new();
    println!(
        "{:>6} | {:>16} | {:>16} | {:>16} | {:>12} | {:>14} | {:>16}",
        "apps",
        "first paint ms",
        "FCP ms",
        "list shown ms",
        "KB (gzip)",
        "KB unzipped",
        "event→page ms"
    );
    for apps in SIZES {
        let statuses = many_app_statuses(apps);
        let router = tether_controller::server::router(
            statuses.clone(),
            Arc::new(NoWorkers),
            axum::Router::new(),
            tether_controller::server::guard::Access::default(),
            None,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let server = tokio::spawn(async move { axum::serve(listener, router).await });
        let url = format!("http://{address}/");

        let (mut paint, mut fcp, mut shown, mut kb) = (vec![], vec![], vec![], vec![]);
        let mut plain_kb = vec![];
        for _ in 0..LOADS {
            // A fresh document each time (about:blank first: the same URL would not
            // reload).
            browser.goto("about:blank").await;
            browser.goto(&url).await;
            browser
                .wait_for(
                    "the app list",
                    "return performance.getEntriesByName('apps-rendered').length > 0",
                    json!([]),
                )
                .await;
            let f = browser.eval(FIGURES, json!([])).await;
            assert_eq!(f["rows"], apps, "{f}");
            paint.push(f["firstPaint"].as_f64().unwrap_or(f64::NAN));
            fcp.push(f["firstContentfulPaint"].as_f64().unwrap_or(f64::NAN));
            shown.push(f["appsRendered"].as_f64().unwrap_or(f64::NAN));
            kb.push(f["transferred"].as_f64().unwrap_or(f64::NAN) / 1024.0);
            plain_kb.push(f["decoded"].as_f64().unwrap_or(f64::NAN) / 1024.0);
        }
        browser
            .wait_for(
                "the live stream",
                "return document.getElementById('live').textContent === 'live'",
                json!([]),
            )
            .await;

        // Live: flip one app's sync status and wait for its row to say so.
        let name = statuses.map_all(|s| s.name.clone())[apps / 2].clone();
        let mut live = Vec::new();
        for trial in 0..LIVE_TRIALS {
            let (to, text) = if trial % 2 == 0 {
                (SyncStatus::Unknown, "Unknown")
            } else {
                (SyncStatus::Synced, "Synced")
            };
            let started = Instant::now();
            statuses.update(&name, |s| s.sync = to);
            let script = "const r = document.querySelector(`tr[data-app=\"${arguments[0]}\"]`); \
                 return r && r.children[1].innerText.trim() === arguments[1]";
            loop {
                if browser.eval(script, json!([name, text])).await == json!(true) {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "the page never showed the change"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            live.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        server.abort();

        let row = json!({
            "apps": apps,
            "loads": LOADS,
            "firstPaintMs": {"median": median(&paint), "max": max(&paint)},
            "firstContentfulPaintMs": {"median": median(&fcp), "max": max(&fcp)},
            "listShownMs": {"median": median(&shown), "max": max(&shown)},
            "transferredKB": {"median": median(&kb), "max": max(&kb)},
            "decodedKB": {"median": median(&plain_kb), "max": max(&plain_kb)},
            "eventToPageMs": {"median": median(&live), "max": max(&live), "trials": LIVE_TRIALS},
        });
        let cell = |k: &str| {
            format!(
                "{:.0} (max {:.0})",
                row[k]["median"].as_f64().unwrap_or(f64::NAN),
                row[k]["max"].as_f64().unwrap_or(f64::NAN)
            )
        };
        let kb = |k: &str| format!("{:.1}", row[k]["median"].as_f64().unwrap_or(0.0));
        println!(
            "{:>6} | {:>16} | {:>16} | {:>16} | {:>12} | {:>14} | {:>16}",
            apps,
            cell("firstPaintMs"),
            cell("firstContentfulPaintMs"),
            cell("listShownMs"),
            kb("transferredKB"),
            kb("decodedKB"),
            cell("eventToPageMs"),
        );
        results.push(row);
    }
    drop(browser);
    // The targets, at 1,000 apps.
    let mut failed = false;
    if let Some(row) = results.iter().find(|r| r["apps"] == 1000) {
        let median = |k: &str| row[k]["median"].as_f64().unwrap_or(f64::NAN);
        for (what, value, limit, unit) in [
            ("first paint", median("firstPaintMs"), 300.0, "ms"),
            ("transferred", median("transferredKB"), 200.0, "KB"),
            ("event to page", median("eventToPageMs"), 1000.0, "ms"),
        ] {
            let pass = value < limit;
            failed |= !pass;
            println!(
                "{} 1,000 apps: {what} {value:.1} {unit} (target < {limit} {unit})",
                if pass { "PASS" } else { "FAIL" }
            );
        }
    }
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    let out = std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| std::path::PathBuf::from(d).join("bench-results"))
        .unwrap_or(out);
    std::fs::create_dir_all(&out).expect("the results directory");
    let file = out.join("dashboard.json");
    let body: Value = json!({ "bench": "dashboard", "results": results });
    std::fs::write(&file, serde_json::to_string_pretty(&body).expect("JSON"))
        .expect("write the results");
    println!("wrote {}", file.display());
    if failed {
        std::process::exit(1);
    }
}
