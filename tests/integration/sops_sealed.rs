//! `tether diff` without SOPS keys (issue #27, "encrypted: not compared"): an
//! encrypted document is reported under the identity its clear metadata gives (or
//! its file and document when the rules encrypted that too), counted in the
//! summary, and never drift, a failure or a deletion; the rest of the app is diffed.
//! A key given that opens nothing, `--fail-on-encrypted` and `tether sync` still
//! fail naming the file. No output holds ciphertext or plaintext.

use std::path::{Path, PathBuf};
use tether_testkit::assert_contains;

use age::secrecy::ExposeSecret;
use tether_sops::Recipients;

use crate::sops::encrypted_secret;
use crate::support::{GitRepo, Run, TestSandbox, json, resource, sync_app, tether};

const PLAIN: &str = "sealed-plaintext-Vb3nQ8";
const NOT_COMPARED: &str = "encrypted: not compared";
/// A file the real `sops` encrypted with its default rules: every value, so its
/// identity too (upstream's example, for its functional-tests PGP key).
const FIXTURE: &str = "head/example.yaml";

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  colour: blue\n";

struct Sealed {
    dir: PathBuf,
    key: PathBuf,
    recipient: String,
}

/// An app: the Secret `default/db` encrypted for a fresh age identity (metadata in
/// clear, as `--encrypted-regex '^(data|stringData)$'` leaves it), a plain ConfigMap,
/// and (`with_fixture`) the real `sops` file whose identity is encrypted.
fn sealed_app(root: &Path, with_fixture: bool) -> Sealed {
    let identity = age::x25519::Identity::generate();
    let recipient = identity.to_public().to_string();
    let mut recipients = Recipients::new();
    recipients.add_age(&recipient).expect("a recipient");
    let dir = root.join("sealed-app");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let secret = encrypted_secret("db", "default", PLAIN, &recipients);
    std::fs::write(dir.join("db.enc.yaml"), secret).expect("write");
    std::fs::write(dir.join("settings.yaml"), CONFIG_MAP).expect("write");
    if with_fixture {
        let fixtures = tether_testkit::sops_fixtures(Path::new(env!("CARGO_MANIFEST_DIR")));
        std::fs::copy(fixtures.join(FIXTURE), dir.join("example.enc.yaml")).expect("copy");
    }
    let key = root.join("age.agekey");
    std::fs::write(&key, identity.to_string().expose_secret()).expect("write");
    Sealed {
        dir,
        key,
        recipient,
    }
}

/// `tether diff ARGS` offline, with no SOPS key in the environment.
fn offline(args: &[&str]) -> Run {
    offline_in(Path::new("."), args)
}

/// [`offline`], run in `dir` (a Git checkout, for `--base`).
fn offline_in(dir: &Path, args: &[&str]) -> Run {
    std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("diff")
        .args(args)
        .current_dir(dir)
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .output()
        .expect("tether runs")
        .into()
}

#[track_caller]
fn assert_no_values(what: &str, run: &Run) {
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains("ENC["), "{what} printed ciphertext:\n{text}");
        assert!(
            !text.contains(PLAIN),
            "{what} printed the plaintext:\n{text}"
        );
    }
}

/// The live objects: the ConfigMap changed, the Secret as the app synced it.
fn snapshot(root: &Path) -> PathBuf {
    let live = root.join("live.yaml");
    let labels =
        "  labels:\n    app.kubernetes.io/managed-by: tether\n    tether.dev/app: sealed\n";
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n{labels}data:\n  colour: red\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: default\n{labels}type: Opaque\ndata:\n  password: c2VjcmV0\n"
    );
    std::fs::write(&live, text).expect("write");
    live
}

#[test]
fn without_keys_an_encrypted_secret_is_not_compared_in_every_format_and_the_rest_is_diffed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = sealed_app(tmp.path(), true);
    let live = snapshot(tmp.path());
    let (dir, live) = (
        app.dir.to_str().expect("utf-8"),
        live.to_str().expect("utf-8"),
    );
    let base = ["--path", dir, "--live", live, "--app", "sealed"];
    let fixture_title = "file example.enc.yaml document 1";

    let run = |format: &str| {
        let mut args = base.to_vec();
        args.extend(["-o", format]);
        let run = offline(&args);
        assert_no_values(&format!("diff -o {format}"), &run);
        // The ConfigMap drifted: exit 1, as for any drift; the sealed ones add none.
        assert_eq!(run.code, Some(1), "-o {format}: {run:?}");
        run
    };
    let text = run("text").stdout;
    assert_contains(&text, "Modified: ConfigMap default/settings");
    assert_contains(&text, &format!("{NOT_COMPARED}: Secret default/db"));
    assert_contains(&text, &format!("{NOT_COMPARED}: {fixture_title}"));
    assert!(
        text.contains(
            "3 objects: 0 in sync, 1 modified, 0 missing, 0 extra, 2 encrypted: not compared"
        ),
        "{text}"
    );
    assert!(
        !text.contains("Extra"),
        "the Secret is still in Git: {text}"
    );

    let report = json(&run("json"));
    assert_eq!(report["summary"]["NotCompared"], 2, "{report}");
    assert_eq!(report["summary"]["Extra"], 0, "{report}");
    let db = resource(&report, "Secret/db");
    assert_eq!(db["status"], "NotCompared", "{report}");
    assert_eq!(db["reason"], NOT_COMPARED);
    assert_eq!(db["file"], "db.enc.yaml");
    assert_eq!(
        resource(&report, "ConfigMap/settings")["status"],
        "Modified"
    );
    let unnamed = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["file"] == "example.enc.yaml")
        .unwrap_or_else(|| panic!("the fixture is reported: {report}"));
    assert_eq!(unnamed["status"], "NotCompared");
    assert_eq!(
        unnamed["name"],
        serde_json::Value::Null,
        "its name is encrypted"
    );

    let markdown = run("markdown").stdout;
    assert_contains(&markdown, &format!("| {NOT_COMPARED} | 2 |"));
    assert!(markdown.contains("- `Secret default/db`"), "{markdown}");
    let junit = run("junit").stdout;
    assert!(junit.contains("failures=\"1\""), "{junit}");
    assert!(junit.contains("skipped=\"2\""), "{junit}");
    assert!(
        junit.contains(&format!(
            "name=\"Secret default/db\">\n      <skipped message=\"{NOT_COMPARED}\"/>"
        )),
        "{junit}"
    );

    // Nothing else differs: the sealed documents alone are no drift (exit 0).
    std::fs::write(
        app.dir.join("settings.yaml"),
        CONFIG_MAP.replace("blue", "red"),
    )
    .expect("write");
    let clean = offline(&base);
    assert_eq!(clean.code, Some(0), "{clean:?}");
    assert!(clean.stdout.contains("1 in sync"), "{}", clean.stdout);

    // Opting out, the file is an error as in a sync (exit 2), naming it.
    let mut strict = base.to_vec();
    strict.push("--fail-on-encrypted");
    let refused = offline(&strict);
    assert_no_values("--fail-on-encrypted", &refused);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("db.enc.yaml"), "{}", refused.stderr);
}

#[test]
fn a_key_that_opens_nothing_is_an_error_and_the_right_one_compares_the_secret_masked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = sealed_app(tmp.path(), false);
    let live = snapshot(tmp.path());
    let (dir, live) = (
        app.dir.to_str().expect("utf-8"),
        live.to_str().expect("utf-8"),
    );
    let other = tmp.path().join("other.agekey");
    let stranger = age::x25519::Identity::generate();
    std::fs::write(&other, stranger.to_string().expose_secret()).expect("write");
    let with_key = |key: &Path| {
        let key = key.to_str().expect("utf-8").to_string();
        offline(&[
            "--path",
            dir,
            "--live",
            live,
            "--app",
            "sealed",
            "-o",
            "json",
            "--sops-key-file",
            &key,
        ])
    };

    // A key is configured: a file it does not open is an error naming file and recipient.
    let wrong = with_key(&other);
    assert_no_values("a wrong key", &wrong);
    assert_eq!(wrong.code, Some(2), "{wrong:?}");
    assert!(wrong.stderr.contains("db.enc.yaml"), "{}", wrong.stderr);
    assert!(wrong.stderr.contains(&app.recipient), "{}", wrong.stderr);

    // The right key: the Secret is compared as before (its values masked).
    let right = with_key(&app.key);
    assert_no_values("the right key", &right);
    let report = json(&right);
    assert_eq!(
        resource(&report, "Secret/db")["status"],
        "Modified",
        "{report}"
    );
    assert_eq!(report["summary"].get("NotCompared"), None, "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn online_without_keys_the_live_secret_is_neither_drift_nor_deleted_and_sync_refuses() {
    let sandbox = TestSandbox::start().await;
    let app = sealed_app(sandbox.dir.path(), false);
    let key = app.key.to_str().expect("utf-8");
    let synced = sync_app(&sandbox, &app.dir, "sealed", &["--sops-key-file", key]).await;
    assert_eq!(synced.code, Some(0), "{synced:?}");

    let dir = app.dir.to_str().expect("utf-8");
    for format in ["text", "json"] {
        let args = ["--path", dir, "--app", "sealed", "-o", format];
        let diff = tether(&sandbox, "diff", &args).await;
        assert_no_values(&format!("online diff -o {format}"), &diff);
        assert_eq!(diff.code, Some(0), "in sync but for the Secret: {diff:?}");
        assert!(diff.stdout.contains("Secret"), "{}", diff.stdout);
        assert!(
            !diff.stdout.contains("Extra:"),
            "not deleted: {}",
            diff.stdout
        );
        if format == "json" {
            let report = json(&diff);
            assert_eq!(report["summary"]["Extra"], 0, "{report}");
            assert_eq!(report["summary"]["InSync"], 1, "{report}");
            assert_eq!(resource(&report, "Secret/db")["status"], "NotCompared");
        } else {
            assert!(
                diff.stdout
                    .contains(&format!("{NOT_COMPARED}: Secret default/db")),
                "{}",
                diff.stdout
            );
        }
    }

    // A sync without keys still refuses the revision, naming the file.
    let refused = sync_app(&sandbox, &app.dir, "sealed", &[]).await;
    assert_no_values("a sync without keys", &refused);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(refused.stderr.contains("db.enc.yaml"), "{}", refused.stderr);
}

/// `--base`: an encrypted Secret the change edits is changed but not compared; one
/// it leaves alone is not listed; with the key it is compared (masked) as before.
#[test]
fn a_preview_without_keys_reports_an_edited_encrypted_file_as_changed_not_compared() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = sealed_app(tmp.path(), false);
    let mut recipients = Recipients::new();
    recipients.add_age(&app.recipient).expect("a recipient");
    let repo = GitRepo::init(tmp.path().join("repo"));
    let file = |name: &str| std::fs::read_to_string(app.dir.join(name)).expect("read");
    repo.write("apps/sealed/db.enc.yaml", &file("db.enc.yaml"));
    repo.write("apps/sealed/settings.yaml", &file("settings.yaml"));
    let api = encrypted_secret("api", "default", PLAIN, &recipients);
    repo.write("apps/sealed/api.enc.yaml", &api);
    let base = repo.commit("base");
    let edited = encrypted_secret("db", "default", "rotated-Wm5kD2", &recipients);
    repo.write("apps/sealed/db.enc.yaml", &edited);
    repo.commit("rotate the db password");

    let args = ["--base", &base, "--path", "apps/sealed"];
    let text = offline_in(&repo.dir, &args);
    assert_no_values("a preview", &text);
    assert_eq!(text.code, Some(1), "a change: {text:?}");
    assert!(
        text.stdout
            .contains(&format!("Changed ({NOT_COMPARED}): Secret default/db")),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("api"), "unchanged: {}", text.stdout);

    let mut as_json = args.to_vec();
    as_json.extend(["-o", "json"]);
    let run = offline_in(&repo.dir, &as_json);
    assert_no_values("a JSON preview", &run);
    let report = json(&run);
    let sealed = &report["apps"][0];
    assert_eq!(sealed["status"], "Changed", "{report}");
    let db = resource(sealed, "Secret/db");
    assert_eq!(db["reason"], NOT_COMPARED, "{report}");
    assert_eq!(sealed["resources"].as_array().map(Vec::len), Some(1));

    let key = app.key.to_str().expect("utf-8");
    as_json.extend(["--sops-key-file", key]);
    let keyed = offline_in(&repo.dir, &as_json);
    assert_no_values("a preview with the key", &keyed);
    let report = json(&keyed);
    let db = resource(&report["apps"][0], "Secret/db");
    assert_eq!(db["status"], "Changed", "{report}");
    assert_eq!(db.get("reason"), None, "compared: {report}");
    assert!(
        !db["changes"].as_array().expect("changes").is_empty(),
        "{report}"
    );
}
