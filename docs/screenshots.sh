#!/usr/bin/env bash
# Rewrites the dashboard's pictures in docs/ (shown in the README) from the page as
# it is now: the browser tests in tests/integration/dashboard.rs drive headless
# Chromium (Debian's chromium and chromium-driver, as .ci/run installs them) and,
# with TETHER_SCREENSHOTS=docs, save their screenshots here instead of in the
# target directory:
#
#   docs/dashboard-apps.png   the apps view with a thousand apps
#   docs/dashboard-app.png    an app with a field changed by kubectl scale
#   docs/dashboard-app-dark.png  the same, dark
#   docs/dashboard-tree.png   the app's objects, with its ReplicaSet and Pods
#
#   docs/screenshots.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
TETHER_SCREENSHOTS=docs cargo test --test integration -- \
  dashboard::the_dashboard_shows_drift_live_with_its_author_and_syncs_with_a_token \
  dashboard::the_app_view_shows_its_tree_and_a_suspend_outlives_a_restart \
  dashboard::a_thousand_apps_fit_the_page_budget
git status --short docs/
