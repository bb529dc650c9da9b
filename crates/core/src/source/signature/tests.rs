//! Signed objects made by the real `gpg` and `ssh-keygen -Y sign` (through `git commit
//! -S` and `git tag -s`, see testdata/README), checked here as git checks them.

use super::*;

const ALICE: &[u8] = include_bytes!("testdata/alice.asc");
const MALLORY: &[u8] = include_bytes!("testdata/mallory.asc");
const ALLOWED: &[u8] = include_bytes!("testdata/allowed_signers");

fn keys(entries: &[(&str, &[u8])]) -> TrustedKeys {
    TrustedKeys::from_entries(entries.iter().copied()).expect("keys")
}

fn all() -> TrustedKeys {
    keys(&[("alice.asc", ALICE), ("allowed_signers", ALLOWED)])
}

#[test]
fn commits_signed_by_gpg_and_by_ssh_keys_of_each_type_verify() {
    let pgp = verify_object(
        ObjectKind::Commit,
        include_bytes!("testdata/commit-pgp"),
        &all(),
    )
    .expect("pgp");
    assert_eq!(pgp.format, SignatureFormat::OpenPgp);
    assert!(
        pgp.identity
            .contains("FB7C63721B8395A97ACA18DF2D439A725E7B07B4"),
        "{pgp}"
    );
    for (raw, who) in [
        (
            &include_bytes!("testdata/commit-ssh-ed25519")[..],
            "ed25519@",
        ),
        (&include_bytes!("testdata/commit-ssh-rsa")[..], "rsa@"),
        (&include_bytes!("testdata/commit-ssh-ecdsa")[..], "ecdsa@"),
    ] {
        let signer = verify_object(ObjectKind::Commit, raw, &all()).expect(who);
        assert_eq!(signer.format, SignatureFormat::Ssh);
        assert!(signer.identity.starts_with(who), "{signer}");
        assert!(signer.identity.contains("SHA256:"), "{signer}");
    }
}

#[test]
fn a_signed_tag_verifies_over_its_own_object() {
    let signer =
        verify_object(ObjectKind::Tag, include_bytes!("testdata/tag-pgp"), &all()).expect("tag");
    assert!(signer.identity.contains("alice@example.com"), "{signer}");
}

#[test]
fn an_unsigned_commit_is_refused() {
    assert_eq!(
        verify_object(
            ObjectKind::Commit,
            include_bytes!("testdata/commit-unsigned"),
            &all()
        ),
        Err(VerifyFailure::Unsigned)
    );
}

/// The signature stays, the content changes: what a rewritten commit looks like.
#[test]
fn a_tampered_commit_does_not_verify_in_either_format() {
    for raw in [
        &include_bytes!("testdata/commit-pgp")[..],
        &include_bytes!("testdata/commit-ssh-ed25519")[..],
        &include_bytes!("testdata/commit-ssh-rsa")[..],
        &include_bytes!("testdata/commit-ssh-ecdsa")[..],
    ] {
        let tampered = String::from_utf8_lossy(raw)
            .replace("1700000000 +0000\ncommitter", "1700000001 +0000\ncommitter");
        assert_ne!(tampered.as_bytes(), raw);
        let err =
            verify_object(ObjectKind::Commit, tampered.as_bytes(), &all()).expect_err("tampered");
        assert!(matches!(err, VerifyFailure::Invalid { .. }), "{err}");
    }
}

#[test]
fn a_signature_by_a_key_not_trusted_names_the_signer_and_no_key_material() {
    let only_mallory = keys(&[("mallory.asc", MALLORY)]);
    let err = verify_object(
        ObjectKind::Commit,
        include_bytes!("testdata/commit-pgp"),
        &only_mallory,
    )
    .expect_err("untrusted");
    assert_eq!(
        err,
        VerifyFailure::Untrusted {
            signer: "FB7C63721B8395A97ACA18DF2D439A725E7B07B4".into()
        }
    );
    let err = verify_object(
        ObjectKind::Commit,
        include_bytes!("testdata/commit-ssh-ed25519"),
        &only_mallory,
    )
    .expect_err("untrusted");
    let VerifyFailure::Untrusted { signer } = &err else {
        panic!("{err}");
    };
    assert!(signer.starts_with("SHA256:"), "{signer}");
    assert!(!err.to_string().contains("AAAA"), "{err}");
}

#[test]
fn an_allowed_signer_limited_to_other_namespaces_is_not_trusted_for_git() {
    let text =
        String::from_utf8_lossy(ALLOWED).replace("namespaces=\"git\"", "namespaces=\"file,email\"");
    let keys = keys(&[("allowed_signers", text.as_bytes())]);
    let err = verify_object(
        ObjectKind::Commit,
        include_bytes!("testdata/commit-ssh-ed25519"),
        &keys,
    )
    .expect_err("other namespace");
    assert!(matches!(err, VerifyFailure::Untrusted { .. }), "{err}");
}

#[test]
fn key_entries_that_hold_no_usable_key_are_errors_naming_the_entry() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("empty", b"# nothing\n", "holds neither"),
        (
            "garbled.asc",
            b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nxx\n",
            "OpenPGP",
        ),
        (
            "ca",
            b"a@example.com cert-authority ssh-ed25519 AAAA\n",
            "cert-authority",
        ),
        ("bad64", b"a@example.com ssh-ed25519 !!!\n", "base64"),
        ("binary", b"\xff\xfe", "not text"),
    ];
    for (entry, bytes, says) in cases {
        let err = TrustedKeys::from_entries([(*entry, *bytes)]).expect_err(entry);
        assert_eq!(&err.entry, entry);
        assert!(err.reason.contains(says), "{entry}: {err}");
    }
    assert!(TrustedKeys::from_entries([]).is_err());
}

#[test]
fn the_same_keys_have_the_same_digest_and_other_keys_another() {
    assert!(all() == all());
    assert!(all() != keys(&[("alice.asc", ALICE)]));
}
