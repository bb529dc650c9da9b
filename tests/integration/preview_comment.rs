//! `tether diff --base --comment` (issue #29): one comment per previewed configuration
//! on a pull request, found by its hidden marker and edited on a rerun, on a loopback forge that answers as
//! GitHub, Gitea, GitLab, Bitbucket Cloud and Bitbucket Data Center document their
//! comment APIs (see `forge`). Each request is recorded and asserted: method, path,
//! query, the authentication header's form and the body.

mod forge;

use std::path::Path;
use std::time::Duration;
use tether_testkit::assert_contains;

use serde_json::json;
use tether_core::report::comment::{CommentError, CommentTarget, Posted, upsert};
use tether_core::report::delivery::{DeliveryError, DeliveryOptions};
use tether_core::report::preview::{BARE_COMMENT_MARKER, comment_marker};
use tether_core::source::{Provider, SecretRef};

use crate::preview::{SECRET_BASE, SECRET_HEAD, pull_request, run_action_step, web};
use crate::support::git;
use forge::{Forge, Kind, Request, TOKEN};

/// Comments by reviewers before ours: more than one listing page of 100.
const OTHERS: u64 = 150;

fn options() -> DeliveryOptions {
    DeliveryOptions {
        attempts: 2,
        attempt_timeout: Duration::from_secs(5),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(50),
        ..DeliveryOptions::default()
    }
}

/// The marker of the comments the library tests post.
fn marker() -> String {
    comment_marker("job")
}

fn body(text: &str) -> String {
    format!("### tether diff --base\n{text}\n\n{}\n", marker())
}

/// The token in a file, as `--comment-token-file` names it.
fn token_file(dir: &Path, token: &str) -> SecretRef {
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).expect("token file");
    SecretRef::File(path)
}

fn target(forge: &Forge, provider: Provider, repository: &str, token: SecretRef) -> CommentTarget {
    CommentTarget::new(provider, Some(&forge.api_url()), repository, 7, token).expect("target")
}

/// Posts `first`, then `second` (an edit), then `second` again (nothing to write),
/// then `third`; returns the requests of each run. Asserts that the pull request holds
/// exactly one comment with the marker, reading the last text, among the others.
async fn four_runs(forge: &Forge, target: &CommentTarget) -> [Vec<Request>; 4] {
    let texts = [body("first"), body("second"), body("second"), body("third")];
    let mut runs: [Vec<Request>; 4] = Default::default();
    let mut id = None;
    for (i, text) in texts.iter().enumerate() {
        let posted = upsert(target, text, &marker(), &[], &options())
            .await
            .unwrap_or_else(|e| panic!("run {i}: {e}"));
        match (i, posted) {
            (0, Posted::Created) => {}
            (1 | 3, Posted::Updated { id: edited }) => {
                assert_eq!(
                    id.get_or_insert(edited.clone()),
                    &edited,
                    "the same comment"
                );
            }
            (2, Posted::Unchanged { id: kept }) => assert_eq!(id.as_ref(), Some(&kept)),
            (i, other) => panic!("run {i}: {other:?}"),
        }
        runs[i] = forge.requests();
    }
    let comments = forge.comments();
    let ours: Vec<_> = comments
        .iter()
        .filter(|c| !c.hidden && c.body.contains(&marker()))
        .collect();
    assert_eq!(ours.len(), 1, "one comment, never a duplicate: {ours:?}");
    assert_eq!(ours[0].body, texts[3]);
    assert_eq!(comments.len() as u64, OTHERS + 1);
    assert!(
        runs[2].iter().all(|r| r.method == "GET"),
        "an unchanged report writes nothing"
    );
    runs
}

fn shape(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .map(|r| match r.query.as_str() {
            "" => format!("{} {}", r.method, r.path),
            q => format!("{} {}?{q}", r.method, r.path),
        })
        .collect()
}

#[tokio::test]
async fn github_lists_every_page_then_patches_its_comment() {
    let forge = Forge::start(Kind::Github).await;
    forge.seed(OTHERS, 0, "");
    let dir = tempfile::tempdir().expect("tempdir");
    let t = target(
        &forge,
        Provider::Github,
        "acme/shop",
        token_file(dir.path(), TOKEN),
    );
    let [created, edited, _, _] = four_runs(&forge, &t).await;
    let list = "/repos/acme/shop/issues/7/comments";
    assert_eq!(
        shape(&created),
        [
            format!("GET {list}?per_page=100"),
            format!("GET {list}?per_page=100&page=2"),
            format!("POST {list}"),
        ]
    );
    for r in &created {
        assert_eq!(r.header("authorization"), format!("Bearer {TOKEN}"));
        assert_eq!(r.header("accept"), "application/vnd.github+json");
        assert_eq!(r.header("x-github-api-version"), "2022-11-28");
    }
    assert_eq!(created[2].header("content-type"), "application/json");
    assert_eq!(created[2].body, json!({"body": body("first")}));
    let id = OTHERS + 1000;
    assert_eq!(
        shape(&edited)[2],
        format!("PATCH /repos/acme/shop/issues/comments/{id}")
    );
    assert_eq!(edited[2].body, json!({"body": body("second")}));
}

#[tokio::test]
async fn gitea_reads_one_listing_and_authenticates_with_token() {
    let forge = Forge::start(Kind::Gitea).await;
    forge.seed(OTHERS, 0, "");
    let dir = tempfile::tempdir().expect("tempdir");
    let t = target(
        &forge,
        Provider::Gitea,
        "acme/shop",
        token_file(dir.path(), TOKEN),
    );
    let [created, edited, _, _] = four_runs(&forge, &t).await;
    let list = "/api/v1/repos/acme/shop/issues/7/comments";
    assert_eq!(
        shape(&created),
        [format!("GET {list}"), format!("POST {list}")]
    );
    assert!(
        created
            .iter()
            .all(|r| r.header("authorization") == format!("token {TOKEN}"))
    );
    assert_eq!(created[1].body, json!({"body": body("first")}));
    assert_eq!(
        shape(&edited)[1],
        format!(
            "PATCH /api/v1/repos/acme/shop/issues/comments/{}",
            OTHERS + 1000
        )
    );
}

#[tokio::test]
async fn gitlab_pages_by_next_page_skips_system_notes_and_puts_its_note() {
    let forge = Forge::start(Kind::Gitlab).await;
    // System notes quoting the marker (a note's history) are not ours to edit.
    forge.seed(OTHERS, 3, &marker());
    let dir = tempfile::tempdir().expect("tempdir");
    let t = target(
        &forge,
        Provider::Gitlab,
        "acme/shop",
        token_file(dir.path(), TOKEN),
    );
    let [created, edited, _, _] = four_runs(&forge, &t).await;
    let list = "/api/v4/projects/acme%2Fshop/merge_requests/7/notes";
    let query = "per_page=100&sort=asc&order_by=created_at";
    assert_eq!(
        shape(&created),
        [
            format!("GET {list}?{query}&page=1"),
            format!("GET {list}?{query}&page=2"),
            format!("POST {list}"),
        ]
    );
    assert!(created.iter().all(|r| r.header("private-token") == TOKEN));
    assert!(created.iter().all(|r| r.header("authorization").is_empty()));
    assert_eq!(created[2].body, json!({"body": body("first")}));
    assert_eq!(shape(&edited)[2], format!("PUT {list}/{}", OTHERS + 1000));
    assert_eq!(edited[2].body, json!({"body": body("second")}));
}

#[tokio::test]
async fn bitbucket_cloud_follows_next_skips_deleted_comments_and_puts_content() {
    let forge = Forge::start(Kind::BitbucketCloud).await;
    forge.seed(OTHERS, 3, &marker());
    let dir = tempfile::tempdir().expect("tempdir");
    let t = target(
        &forge,
        Provider::Bitbucket,
        "acme/shop",
        token_file(dir.path(), TOKEN),
    );
    let [created, edited, _, _] = four_runs(&forge, &t).await;
    let list = "/2.0/repositories/acme/shop/pullrequests/7/comments";
    assert_eq!(
        shape(&created),
        [
            format!("GET {list}?pagelen=100"),
            format!("GET {list}?pagelen=100&page=2"),
            format!("POST {list}"),
        ]
    );
    assert!(
        created
            .iter()
            .all(|r| r.header("authorization") == format!("Bearer {TOKEN}"))
    );
    assert_eq!(created[2].body, json!({"content": {"raw": body("first")}}));
    assert_eq!(shape(&edited)[2], format!("PUT {list}/{}", OTHERS + 1000));
    assert_eq!(edited[2].body, json!({"content": {"raw": body("second")}}));
}

#[tokio::test]
async fn bitbucket_server_reads_activities_and_edits_the_version_it_read() {
    let forge = Forge::start(Kind::BitbucketServer).await;
    forge.seed(OTHERS, 0, "");
    let dir = tempfile::tempdir().expect("tempdir");
    // The project key as the user typed it: the API's is upper case.
    let t = target(
        &forge,
        Provider::BitbucketServer,
        "acme/shop",
        token_file(dir.path(), TOKEN),
    );
    let [created, edited, _, again] = four_runs(&forge, &t).await;
    let pr = "/bitbucket/rest/api/latest/projects/ACME/repos/shop/pull-requests/7";
    assert_eq!(
        shape(&created),
        [
            format!("GET {pr}/activities?limit=100&start=0"),
            format!("GET {pr}/activities?limit=100&start=100"),
            format!("POST {pr}/comments"),
        ]
    );
    assert_eq!(created[2].body, json!({"text": body("first")}));
    assert!(
        created
            .iter()
            .all(|r| r.header("authorization") == format!("Bearer {TOKEN}"))
    );
    // Activities are newest first: ours is on the first page from now on.
    let id = OTHERS + 1000;
    assert_eq!(
        shape(&edited),
        [
            format!("GET {pr}/activities?limit=100&start=0"),
            format!("PUT {pr}/comments/{id}"),
        ]
    );
    assert_eq!(
        edited[1].body,
        json!({"text": body("second"), "version": 0})
    );
    assert_eq!(again[1].body, json!({"text": body("third"), "version": 1}));
}

#[tokio::test]
async fn a_refused_token_is_a_clear_error_that_never_shows_the_token() {
    let forge = Forge::start(Kind::Github).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let wrong = "ghp_wrongTokenValue0123456789";
    let t = target(
        &forge,
        Provider::Github,
        "acme/shop",
        token_file(dir.path(), wrong),
    );
    let err = upsert(&t, &body("x"), &marker(), &[], &options())
        .await
        .expect_err("refused");
    assert!(
        matches!(
            &err,
            CommentError::Request {
                error: DeliveryError::Rejected { status: 401, .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.retryable());
    let message = err.to_string();
    assert_eq!(
        message,
        "listing the comments on github pull request 7: rejected with HTTP 401: {\"message\":\"Bad credentials\",\"status\":\"401\"}"
    );
    assert!(!format!("{err:?}").contains(wrong));
    assert_eq!(forge.requests().len(), 1, "a 401 is not retried");
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `tether diff --base --config tether.yaml` in `dir` as a GitHub Actions job on
/// pull request 7 runs it.
async fn in_github_actions(
    dir: &Path,
    base: &str,
    forge: &Forge,
    token: &str,
    extra: &[&str],
) -> Run {
    previewing(dir, base, forge, token, "tether.yaml", extra).await
}

/// The same job, previewing the configuration `config`.
async fn previewing(
    dir: &Path,
    base: &str,
    forge: &Forge,
    token: &str,
    config: &str,
    extra: &[&str],
) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["diff", "--base", base, "--config", config, "--comment"])
        .args(extra)
        .current_dir(dir)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_API_URL", forge.api_url())
        .env("GITHUB_REPOSITORY", "acme/shop")
        .env("GITHUB_REF", "refs/pull/7/merge")
        .env("GITHUB_TOKEN", token)
        .env_remove("TETHER_COMMENT_TOKEN")
        .env_remove("GITEA_ACTIONS")
        .env_remove("FORGEJO_ACTIONS")
        .output()
        .await
        .expect("tether runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The "done when": the pull request gets one comment with exactly its
/// changes and no Secret value, within the limit; a second push edits it.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_gets_one_comment_edited_on_the_next_push() {
    let forge = Forge::start(Kind::Github).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let first = in_github_actions(&repo.dir, &base, &forge, TOKEN, &[]).await;
    assert_eq!(first.code, Some(1), "changes, posted: {}", first.stderr);
    assert!(
        first.stdout.contains("nginx:1.27"),
        "the log has the text report"
    );
    assert!(
        first
            .stderr
            .contains("tether: comment added on github acme/shop #7"),
        "{}",
        first.stderr
    );
    let comments = forge.comments();
    assert_eq!(comments.len(), 1);
    let comment = &comments[0].body;
    assert!(comment.contains("`nginx:1.25` → `nginx:1.27`"), "{comment}");
    assert!(
        comment.contains("<details><summary><b>broken</b>"),
        "the broken overlay is reported: {comment}"
    );
    assert!(comment.ends_with(" -->\n"), "{comment}");
    assert!(comment.contains("\n<!-- tether-preview id="), "{comment}");
    assert!(comment.len() <= 65_536);

    // The next push bumps the image again: the same comment says so.
    repo.write(
        "apps/web/web.yaml",
        &web("nginx:1.28", "1.1.0", SECRET_HEAD),
    );
    repo.commit("push 2");
    let second = in_github_actions(&repo.dir, &base, &forge, TOKEN, &[]).await;
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    assert_contains(&second.stderr, "tether: comment 1 updated");
    let comments = forge.comments();
    assert_eq!(comments.len(), 1, "edited, not duplicated");
    assert!(comments[0].body.contains("`nginx:1.25` → `nginx:1.28`"));
    let writes: Vec<String> = shape(&forge.requests())
        .into_iter()
        .filter(|r| !r.starts_with("GET"))
        .collect();
    assert_eq!(
        writes,
        [
            "POST /repos/acme/shop/issues/7/comments",
            "PATCH /repos/acme/shop/issues/comments/1"
        ]
    );

    // Cut to the limit as -o markdown is, with the line saying what was left out.
    let cut = in_github_actions(
        &repo.dir,
        &base,
        &forge,
        TOKEN,
        &["--markdown-limit", "1500"],
    )
    .await;
    assert_eq!(cut.code, Some(1), "{}", cut.stderr);
    let comments = forge.comments();
    assert_eq!(comments.len(), 1);
    assert!(comments[0].body.len() <= 1500, "{}", comments[0].body.len());
    assert_contains(&comments[0].body, "left out");
    for c in &comments {
        for value in [SECRET_BASE, SECRET_HEAD] {
            assert!(!c.body.contains(value), "a Secret value in the comment");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_comment_that_cannot_be_posted_fails_the_job_after_the_report() {
    let forge = Forge::start(Kind::Github).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    let wrong = "ghs_notTheRightToken987";
    let run = in_github_actions(&repo.dir, &base, &forge, wrong, &[]).await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stdout.contains("nginx:1.27"),
        "the report is printed first"
    );
    assert_contains(
        &run.stderr,
        "error: the pull-request comment was not posted: listing the comments on github pull request 7: rejected with HTTP 401",
    );
    assert!(!run.stderr.contains(wrong) && !run.stdout.contains(wrong));

    // Outside a pull request's run, the flag that names one is named.
    let push = tokio::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args([
            "diff",
            "--base",
            &base,
            "--config",
            "tether.yaml",
            "--comment",
        ])
        .current_dir(&repo.dir)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_REPOSITORY", "acme/shop")
        .env("GITHUB_REF", "refs/heads/main")
        .env("GITHUB_TOKEN", TOKEN)
        .env_remove("GITHUB_EVENT_PATH")
        .output()
        .await
        .expect("tether runs");
    assert_eq!(push.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&push.stderr);
    assert_contains(
        &stderr,
        "--comment: which pull request? pass --comment-pr N",
    );
    assert!(push.stdout.is_empty(), "settled before any render");
}

/// Issue #29: two jobs previewing different configurations on one pull request keep
/// one comment each (the marker names what is previewed), a rerun edits its own, and
/// the comment of an earlier tether (its marker without an id) is adopted, not left.
#[tokio::test(flavor = "multi_thread")]
async fn each_configuration_keeps_its_own_comment_and_the_old_one_is_adopted() {
    let forge = Forge::start(Kind::Github).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    // An earlier tether's comment, as it posted it: the bare marker.
    let token = token_file(tmp.path(), TOKEN);
    let t = target(&forge, Provider::Github, "acme/shop", token);
    let old = format!("### an earlier report\n\n{BARE_COMMENT_MARKER}\n");
    upsert(&t, &old, BARE_COMMENT_MARKER, &[], &options())
        .await
        .expect("the old comment");
    forge.requests();

    let first = in_github_actions(&repo.dir, &base, &forge, TOKEN, &[]).await;
    assert!(
        first.stderr.contains("tether: comment 1 updated"),
        "adopted: {}",
        first.stderr
    );
    let comments = forge.comments();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(!comments[0].body.contains(BARE_COMMENT_MARKER));

    // A second configuration (the web app alone) in another job: its own comment.
    let staging = std::fs::read_to_string(repo.dir.join("tether.yaml"))
        .expect("config")
        .split("  - name: shop")
        .next()
        .unwrap_or_default()
        .to_string();
    std::fs::write(repo.dir.join("staging.yaml"), staging).expect("staging.yaml");
    let second = previewing(&repo.dir, &base, &forge, TOKEN, "staging.yaml", &[]).await;
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    assert_contains(&second.stderr, "tether: comment added");
    let comments = forge.comments();
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(
        !comments[1].body.contains("<b>shop</b>"),
        "staging previews web only"
    );
    let marker_of = |body: &str| body.lines().last().unwrap_or_default().to_string();
    assert_ne!(marker_of(&comments[0].body), marker_of(&comments[1].body));

    // Reruns find their own comment (edited, or left alone when it says the same);
    // a named id is a third one.
    let again = in_github_actions(&repo.dir, &base, &forge, TOKEN, &[]).await;
    assert_contains(&again.stderr, "tether: comment 1 ");
    let again = previewing(&repo.dir, &base, &forge, TOKEN, "staging.yaml", &[]).await;
    assert_contains(&again.stderr, "tether: comment 2 ");
    let named = ["--comment-id", "prod-eu"];
    let run = previewing(&repo.dir, &base, &forge, TOKEN, "staging.yaml", &named).await;
    assert_contains(&run.stderr, "tether: comment added");
    let comments = forge.comments();
    assert_eq!(comments.len(), 3, "{comments:?}");
    assert_eq!(
        marker_of(&comments[2].body),
        "<!-- tether-preview id=prod-eu -->"
    );
}

/// The GitHub Action posts the comment with `tether diff --comment` (no
/// actions/github-script): its step, run with a pull request's variables, leaves one
/// comment on the forge, and fails only on errors.
#[tokio::test(flavor = "multi_thread")]
async fn the_github_action_posts_the_comment_and_fails_only_on_errors() {
    let forge = Forge::start(Kind::Github).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, base) = pull_request(tmp.path());
    git(
        &repo.dir,
        &["update-ref", "refs/remotes/origin/main", &base],
    );
    let step = |fail_on_error: &'static str| {
        let dir = repo.dir.clone();
        let env = [
            ("GITHUB_ACTIONS", "true".to_string()),
            ("GITHUB_API_URL", forge.api_url()),
            ("GITHUB_REPOSITORY", "acme/shop".to_string()),
            ("GITHUB_REF", "refs/pull/7/merge".to_string()),
            ("GITHUB_TOKEN", TOKEN.to_string()),
        ];
        tokio::task::spawn_blocking(move || run_action_step(&dir, fail_on_error, &env))
    };
    let (code, outputs, markdown) = step("false").await.expect("the step");
    assert_eq!(code, Some(0), "changes are a result, not a failure");
    assert_eq!(outputs, "exit-code=1\n");
    let comments = forge.comments();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert_contains(&comments[0].body, "`nginx:1.25` → `nginx:1.27`");
    assert_eq!(
        comments[0].body, markdown,
        "the comment is the step's Markdown"
    );
    let (code, outputs, _) = step("true").await.expect("the step");
    assert_eq!(
        code,
        Some(2),
        "the broken overlay fails the step when asked"
    );
    assert_eq!(outputs, "exit-code=2\n");
    assert_eq!(forge.comments().len(), 1, "the rerun keeps its comment");
}
