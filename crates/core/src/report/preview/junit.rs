//! A pull-request preview as JUnit XML (`tether diff --base … -o junit`), for CI
//! systems that chart test results: one test suite per app with a test case per
//! object (a failure for each object the change adds, removes or changes, Secrets
//! by key name only), a render failure as an error, an app whose inputs did not
//! change as skipped; and, where the head was compared with the cluster, one more
//! suite per app for what merging changes live, as `tether diff -o junit` says it.

use std::fmt::Write;

use tether_diff::diff::{ObjectDiff, is_secret};

use super::{SIDES, short, verb};
use crate::report::drift::{drift_cases, failure_message, open_case, unified_diff_between, xml};
use crate::sync::preview::{AppOutcome, AppPreview, Preview, secret_keys};

/// The name of an app's head-vs-live suite, after the app's own.
const LIVE_SUITE: &str = "head vs live";

/// One test suite: its counts and its test cases, written.
#[derive(Default)]
struct Suite {
    name: String,
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    cases: String,
}

pub fn render_junit(preview: &Preview) -> String {
    let mut suites = Vec::new();
    for app in &preview.apps {
        suites.push(app_suite(app));
        if let Some(live) = &app.live {
            suites.push(live_suite(app, live));
        }
    }
    let sum = |count: fn(&Suite) -> usize| suites.iter().map(count).sum::<usize>();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"tether diff {}..{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        xml(short(&preview.base.sha)),
        xml(short(&preview.head.sha)),
        sum(|s| s.tests),
        sum(|s| s.failures),
        sum(|s| s.errors),
        sum(|s| s.skipped),
    );
    for s in &suites {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            xml(&s.name),
            s.tests,
            s.failures,
            s.errors,
            s.skipped
        );
        out.push_str(&s.cases);
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// What the change does to one app: an object per case, or the render's error, or
/// one skipped case when its inputs did not change.
fn app_suite(app: &AppPreview) -> Suite {
    let mut s = Suite {
        name: app.name.clone(),
        ..Suite::default()
    };
    let class = xml(&app.name);
    match &app.outcome {
        AppOutcome::Unchanged => {
            s.tests = 1;
            s.skipped = 1;
            let _ = writeln!(
                s.cases,
                "    <testcase classname=\"{class}\" name=\"inputs unchanged\">\n      <skipped message=\"the app's inputs are the same at base and head: not rendered\"/>\n    </testcase>"
            );
        }
        AppOutcome::Failed { side, error } => {
            s.tests = 1;
            s.errors = 1;
            let _ = writeln!(
                s.cases,
                "    <testcase classname=\"{class}\" name=\"render\">\n      <error type=\"RenderFailed\" message=\"render failed at {}\">{}</error>\n    </testcase>",
                side.as_str(),
                xml(error)
            );
        }
        AppOutcome::Compared(c) => {
            for o in &c.objects {
                s.tests += 1;
                if o.drift.is_drift() {
                    s.failures += 1;
                }
                object_case(&mut s.cases, o);
            }
        }
    }
    s
}

/// One object base → head: passing when unchanged, else a failure naming what
/// happened and the fields (a Secret: its key names, never a line of its diff).
fn object_case(out: &mut String, o: &ObjectDiff) {
    open_case(out, &o.id);
    if !o.drift.is_drift() {
        out.push_str("/>\n");
        return;
    }
    let what = verb(&o.drift);
    let (message, body) = if is_secret(&o.id) {
        let keys = secret_keys(o);
        let message = match keys.is_empty() {
            true => what.to_string(),
            false => format!("{what}: keys {}", keys.join(", ")),
        };
        (message, String::new())
    } else {
        (
            failure_message(what, o),
            unified_diff_between(o, false, SIDES),
        )
    };
    let _ = writeln!(
        out,
        ">\n      <failure type=\"{what}\" message=\"{}\">{}</failure>\n    </testcase>",
        xml(&message),
        xml(&body)
    );
}

/// What merging the app changes in the cluster: its head against the live objects.
fn live_suite(app: &AppPreview, live: &[ObjectDiff]) -> Suite {
    let mut s = Suite {
        name: format!("{}: {LIVE_SUITE}", app.name),
        tests: live.len(),
        failures: live.iter().filter(|o| o.drift.is_drift()).count(),
        ..Suite::default()
    };
    drift_cases(&mut s.cases, live);
    s
}
