//! SOPS figures (issue #27): an app of 200 Secrets, each encrypted for three age
//! recipients (tether holds one identity; its stanza is the last, so each file tries
//! two it cannot open first), rendered by the render stage (`render_tree`) with the
//! app's keys, against the same 200 Secrets in the clear. The difference per Secret is
//! the added render time. A warm pass (the same commit through `RenderCache`, as
//! `tether serve` runs it) must decrypt nothing: its render closure, the only code
//! that decrypts, must not run.
//!
//! `cargo bench --bench sops [-- --quick]` prints a table, writes
//! `target/bench-results/sops.json`, and exits non-zero when it printed a FAIL.

use std::time::Instant;

use age::secrecy::ExposeSecret;
use serde_json::json;
use tether_core::sync::desired::RenderCache;
use tether_diff::manifest::{
    ManifestErrors, ManifestSet, ParseOptions, Renderers, SopsKeys, render_tree,
};
use tether_sops::{Format, Keys, Recipients, Rule, encrypt};
use tether_testkit::figures::{median, ms, write_results};

/// Secrets in the app.
const SECRETS: usize = 200;
/// Recipients each Secret is encrypted for.
const RECIPIENTS: usize = 3;

fn secret(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("secret-{i}"), "namespace": "apps", "labels": {"app": "bench"}},
        "type": "Opaque",
        "stringData": {"username": format!("user-{i}"), "password": format!("password-{i}-{}", "x".repeat(24)), "url": format!("postgres://db-{i}:5432/app")},
    })
}

type Files = Vec<(String, Vec<u8>)>;

/// The app twice: encrypted (with the keys that open it) and in the clear.
fn app() -> (Files, Files, Keys) {
    let identities: Vec<age::x25519::Identity> = (0..RECIPIENTS)
        .map(|_| age::x25519::Identity::generate())
        .collect();
    let mut recipients = Recipients::new();
    for identity in &identities {
        recipients
            .add_age(&identity.to_public().to_string())
            .expect("recipient");
    }
    let mut keys = Keys::new();
    let ours = identities.last().expect("one");
    keys.add_age("bench", ours.to_string().expose_secret())
        .expect("identity");
    let rule = Rule::EncryptedRegex("^(data|stringData)$".to_string());
    let mut encrypted = Vec::new();
    let mut clear = Vec::new();
    for i in 0..SECRETS {
        let path = format!("app/secret-{i}.yaml");
        let bytes =
            encrypt(Format::Yaml, vec![secret(i)], &rule, false, &recipients).expect("encrypts");
        encrypted.push((path.clone(), bytes));
        clear.push((path, serde_json::to_vec(&secret(i)).expect("json")));
    }
    (encrypted, clear, keys)
}

fn render(files: &Files, renderers: &Renderers) -> ManifestSet {
    let set = render_tree(files, "app", renderers, &ParseOptions::default()).expect("renders");
    assert_eq!(set.objects.len(), SECRETS);
    set
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let (runs, warm_runs) = if quick { (3, 10) } else { (15, 100) };
    let (encrypted, clear, keys) = app();
    let with_keys = Renderers {
        sops: SopsKeys::new(keys),
        ..Renderers::default()
    };
    let plain = Renderers::default();
    let (mut cold_encrypted, mut cold_clear) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        let set = render(&encrypted, &with_keys);
        cold_encrypted.push(started.elapsed());
        assert!(
            set.objects[0].object["stringData"]["password"]
                .as_str()
                .is_some_and(|p| p.starts_with("password-0-"))
        );
        let started = Instant::now();
        render(&clear, &plain);
        cold_clear.push(started.elapsed());
    }
    let (enc, clr) = (median(&cold_encrypted), median(&cold_clear));
    let added_per_secret = enc.saturating_sub(clr) / SECRETS as u32;

    // Warm passes: the same commit again. Only the render closure decrypts.
    let mut cache = RenderCache::default();
    let mut renders = 0usize;
    cache
        .manifests("commit", || {
            renders += 1;
            let set = render(&encrypted, &with_keys);
            async move { Ok::<_, ManifestErrors>(set) }
        })
        .await
        .expect("cold");
    let mut warm_decrypts = 0usize;
    let mut warms = Vec::new();
    for _ in 0..warm_runs {
        let started = Instant::now();
        let set = cache
            .manifests("commit", || {
                warm_decrypts += SECRETS;
                let set = render(&encrypted, &with_keys);
                async move { Ok::<_, ManifestErrors>(set) }
            })
            .await
            .expect("warm");
        warms.push(started.elapsed());
        assert_eq!(set.objects.len(), SECRETS);
    }
    let warm = median(&warms);
    let ok = warm_decrypts == 0 && renders == 1;

    println!(
        "SOPS render stage: {SECRETS} Secrets, age, {RECIPIENTS} recipients (medians; runs: {runs}, warm runs: {warm_runs}{})",
        if quick { ", --quick" } else { "" }
    );
    println!(
        "{:<34} {:>12}",
        "cold, encrypted (with keys)",
        format!("{:.1} ms", ms(enc))
    );
    println!(
        "{:<34} {:>12}",
        "cold, same Secrets in the clear",
        format!("{:.1} ms", ms(clr))
    );
    println!(
        "{:<34} {:>12}",
        "added render time per Secret",
        format!("{:.3} ms", ms(added_per_secret))
    );
    println!("{:<34} {:>12}", "warm pass", format!("{:.3} ms", ms(warm)));
    println!(
        "{:<34} {:>12} {}",
        "decryptions in all warm passes",
        warm_decrypts,
        if ok { "ok" } else { "FAIL" }
    );
    let figures = json!({
        "quick": quick,
        "secrets": SECRETS,
        "recipients": RECIPIENTS,
        "cold_encrypted_ms": ms(enc),
        "cold_clear_ms": ms(clr),
        "added_per_secret_ms": ms(added_per_secret),
        "warm_ms": ms(warm),
        "warm_decryptions": warm_decrypts,
        "ok": ok,
    });
    write_results(env!("CARGO_MANIFEST_DIR"), "sops.json", &figures);
    if !ok {
        std::process::exit(1);
    }
}
