//! `tether diff --base … --comment`: where the preview's pull-request comment goes.
//! Flags name the provider, API, repository, pull request and token file; what they
//! leave out is read from the CI the job runs in (GitHub Actions, Gitea/Forgejo
//! Actions, GitLab CI, Bitbucket Pipelines), as each documents its variables.

use std::path::PathBuf;

use tether_core::report::comment::{CommentError, CommentTarget};
use tether_core::source::{Provider, SecretRef};

use super::Error;

/// The variable any provider's token may be in, read first.
const TOKEN_ENV: &str = "TETHER_COMMENT_TOKEN";

#[derive(Debug, Clone, clap::Args)]
pub struct CommentArgs {
    /// With --base: also create or update one comment on the pull/merge request
    /// with the Markdown report (found by its hidden marker, so a rerun edits it).
    /// A comment that cannot be posted is an error (exit 2) after the report is
    /// printed.
    #[arg(long, requires = "base")]
    pub comment: bool,

    /// The Git provider: github, gitlab, gitea (Forgejo too), bitbucket or
    /// bitbucketserver. Default: the CI this runs in.
    #[arg(long, requires = "comment", value_parser = parse_provider)]
    pub comment_provider: Option<Provider>,

    /// The provider's API URL (GitHub Enterprise, self-managed GitLab, Gitea's
    /// `https://host/api/v1`, Bitbucket Server's base URL). Default: the CI's
    /// (GITHUB_API_URL, CI_API_V4_URL), else the public API.
    #[arg(long, requires = "comment")]
    pub comment_api_url: Option<String>,

    /// The repository: `owner/name`, GitLab's project path or ID, Bitbucket
    /// Server's `PROJECT/slug`. Default: the CI's (GITHUB_REPOSITORY, CI_PROJECT_ID,
    /// BITBUCKET_REPO_FULL_NAME).
    #[arg(long, requires = "comment")]
    pub comment_repository: Option<String>,

    /// The pull request's number (GitLab: the merge request's IID). Default: the
    /// CI's (GITHUB_REF `refs/pull/N/…` or the event file, CI_MERGE_REQUEST_IID,
    /// BITBUCKET_PR_ID).
    #[arg(long, requires = "comment")]
    pub comment_pr: Option<u64>,

    /// A file holding the API token. Default: the first set of TETHER_COMMENT_TOKEN
    /// and the provider's variable (GITHUB_TOKEN; GITEA_TOKEN; GITLAB_TOKEN;
    /// BITBUCKET_TOKEN).
    #[arg(long, requires = "comment")]
    pub comment_token_file: Option<PathBuf>,

    /// With --base: names what this job previews in the comment's hidden marker
    /// (letters, digits, `.`, `_`, `-`), so jobs previewing different
    /// configurations on one pull request keep one comment each. Default: a short
    /// hash of --config's path (or --path) and --app.
    #[arg(long, requires = "base", value_parser = parse_comment_id)]
    pub comment_id: Option<String>,
}

/// The longest `--comment-id`: a name, not a document.
const MAX_COMMENT_ID: usize = 64;

/// A `--comment-id`: it goes inside an HTML comment, so only characters that cannot
/// end one (`--` cannot) or break the line.
fn parse_comment_id(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if text.is_empty() || text.len() > MAX_COMMENT_ID || !text.chars().all(allowed) {
        return Err(format!(
            "{text:?}: a comment id is 1 to {MAX_COMMENT_ID} letters, digits, '.', '_' or '-'"
        ));
    }
    if text.contains("--") {
        return Err(format!(
            "{text:?}: a comment id cannot hold \"--\" (it would end the HTML comment)"
        ));
    }
    Ok(text.to_string())
}

fn parse_provider(text: &str) -> Result<Provider, String> {
    serde_json::from_value(serde_json::Value::String(text.to_ascii_lowercase())).map_err(|_| {
        format!("{text:?} is not one of github, gitlab, gitea, bitbucket, bitbucketserver")
    })
}

/// What a CI job's environment says, read through `env` (the process's, in a run).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The comment's target from the flags and, for what they leave out, the CI's
/// variables. Each missing piece is an error naming the flag that supplies it.
pub(super) fn target(args: &CommentArgs, env: Env) -> Result<CommentTarget, Error> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let missing = |what: &str| Error::CommentTarget(what.to_string());
    let provider = match args.comment_provider {
        Some(p) => p,
        None => detect(env).ok_or_else(|| {
            missing("which provider? pass --comment-provider (it is found in GitHub Actions, Gitea/Forgejo Actions, GitLab CI and Bitbucket Pipelines)")
        })?,
    };
    let github_like = matches!(provider, Provider::Github | Provider::Gitea);
    let api_url = args.comment_api_url.clone().or_else(|| match provider {
        Provider::Github | Provider::Gitea => set("GITHUB_API_URL"),
        Provider::Gitlab => set("CI_API_V4_URL"),
        _ => None,
    });
    let repository = args
        .comment_repository
        .clone()
        .or_else(|| match provider {
            _ if github_like => set("GITHUB_REPOSITORY"),
            Provider::Gitlab => set("CI_PROJECT_ID"),
            Provider::Bitbucket => set("BITBUCKET_REPO_FULL_NAME"),
            _ => None,
        })
        .ok_or_else(|| missing("which repository? pass --comment-repository"))?;
    let number = match args.comment_pr {
        Some(n) => n,
        None => match provider {
            _ if github_like => github_pull_request(env),
            Provider::Gitlab => set("CI_MERGE_REQUEST_IID").and_then(|n| n.parse().ok()),
            Provider::Bitbucket => set("BITBUCKET_PR_ID").and_then(|n| n.parse().ok()),
            _ => None,
        }
        .ok_or_else(|| {
            missing("which pull request? pass --comment-pr N, or run in a pull/merge request's pipeline")
        })?,
    };
    let token = match &args.comment_token_file {
        Some(file) => SecretRef::File(file.clone()),
        None => {
            let names = token_envs(provider);
            let name = names.iter().find(|n| set(n).is_some()).ok_or_else(|| {
                Error::CommentTarget(format!(
                    "no API token: set {} or pass --comment-token-file",
                    names.join(" or ")
                ))
            })?;
            SecretRef::Env((*name).to_string())
        }
    };
    CommentTarget::new(provider, api_url.as_deref(), &repository, number, token).map_err(|e| {
        let hint = match e {
            CommentError::MissingApiUrl { .. } | CommentError::InvalidApiUrl { .. } => {
                "\nhint: pass --comment-api-url"
            }
            _ => "",
        };
        Error::CommentTarget(format!("{e}{hint}"))
    })
}

/// The provider of the CI this runs in. Gitea's and Forgejo's runners set GitHub's
/// variables too, so they are asked first.
fn detect(env: Env) -> Option<Provider> {
    let is = |name: &str| env(name).is_some_and(|v| v == "true");
    if is("GITEA_ACTIONS") || is("FORGEJO_ACTIONS") {
        Some(Provider::Gitea)
    } else if is("GITHUB_ACTIONS") {
        Some(Provider::Github)
    } else if is("GITLAB_CI") {
        Some(Provider::Gitlab)
    } else if env("BITBUCKET_BUILD_NUMBER").is_some() {
        Some(Provider::Bitbucket)
    } else {
        None
    }
}

/// The token variables read, in order.
fn token_envs(provider: Provider) -> Vec<&'static str> {
    let own: &[&str] = match provider {
        Provider::Github => &["GITHUB_TOKEN"],
        Provider::Gitea => &["GITEA_TOKEN", "GITHUB_TOKEN"],
        Provider::Gitlab => &["GITLAB_TOKEN"],
        _ => &["BITBUCKET_TOKEN"],
    };
    std::iter::once(TOKEN_ENV)
        .chain(own.iter().copied())
        .collect()
}

/// The pull request of a GitHub (or Gitea) Actions run: `GITHUB_REF` is
/// `refs/pull/N/merge` on `pull_request`; on `pull_request_target` it is the base
/// branch, and the event file says the number.
fn github_pull_request(env: Env) -> Option<u64> {
    let from_ref = env("GITHUB_REF").and_then(|r| {
        r.strip_prefix("refs/pull/")?
            .split('/')
            .next()?
            .parse()
            .ok()
    });
    from_ref.or_else(|| {
        let event = std::fs::read_to_string(env("GITHUB_EVENT_PATH")?).ok()?;
        let event: serde_json::Value = serde_json::from_str(&event).ok()?;
        event["pull_request"]["number"]
            .as_u64()
            .or(event["number"].as_u64())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> CommentArgs {
        CommentArgs {
            comment: true,
            comment_provider: None,
            comment_api_url: None,
            comment_repository: None,
            comment_pr: None,
            comment_token_file: None,
            comment_id: None,
        }
    }

    #[test]
    fn a_comment_id_cannot_break_out_of_its_html_comment() {
        assert_eq!(
            parse_comment_id("prod-eu.1_a"),
            Ok("prod-eu.1_a".to_string())
        );
        for bad in [
            "",
            "a--b",
            "a -->",
            "a\nb",
            "ü",
            &"x".repeat(MAX_COMMENT_ID + 1),
        ] {
            assert!(parse_comment_id(bad).is_err(), "{bad:?}");
        }
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn each_ci_names_its_provider_repository_and_pull_request() {
        let github = env_of(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_API_URL", "https://ghe.example.com/api/v3"),
            ("GITHUB_REPOSITORY", "acme/shop"),
            ("GITHUB_REF", "refs/pull/42/merge"),
            ("GITHUB_TOKEN", "x"),
        ]);
        let t = target(&args(), &github).expect("github");
        assert_eq!(
            (
                t.provider,
                t.api_url.as_str(),
                t.repository.as_str(),
                t.number
            ),
            (
                Provider::Github,
                "https://ghe.example.com/api/v3",
                "acme/shop",
                42
            )
        );
        assert_eq!(t.token, SecretRef::Env("GITHUB_TOKEN".into()));
        let forgejo = env_of(&[
            ("GITHUB_ACTIONS", "true"),
            ("FORGEJO_ACTIONS", "true"),
            ("GITHUB_API_URL", "https://code.example.com/api/v1"),
            ("GITHUB_REPOSITORY", "acme/shop"),
            ("GITHUB_REF", "refs/pull/3/head"),
            ("GITEA_TOKEN", "x"),
        ]);
        let t = target(&args(), &forgejo).expect("forgejo");
        assert_eq!((t.provider, t.number), (Provider::Gitea, 3));
        assert_eq!(t.token, SecretRef::Env("GITEA_TOKEN".into()));
        let gitlab = env_of(&[
            ("GITLAB_CI", "true"),
            ("CI_API_V4_URL", "https://gitlab.example.com/api/v4"),
            ("CI_PROJECT_ID", "4242"),
            ("CI_MERGE_REQUEST_IID", "9"),
            ("TETHER_COMMENT_TOKEN", "x"),
        ]);
        let t = target(&args(), &gitlab).expect("gitlab");
        assert_eq!(
            (t.provider, t.repository.as_str(), t.number),
            (Provider::Gitlab, "4242", 9)
        );
        assert_eq!(t.token, SecretRef::Env("TETHER_COMMENT_TOKEN".into()));
        let bitbucket = env_of(&[
            ("BITBUCKET_BUILD_NUMBER", "17"),
            ("BITBUCKET_REPO_FULL_NAME", "acme/shop"),
            ("BITBUCKET_PR_ID", "5"),
            ("BITBUCKET_TOKEN", "x"),
        ]);
        let t = target(&args(), &bitbucket).expect("bitbucket");
        assert_eq!(
            (t.provider, t.api_url.as_str(), t.number),
            (Provider::Bitbucket, "https://api.bitbucket.org/2.0", 5)
        );
    }

    #[test]
    fn what_is_missing_is_named_with_the_flag_that_supplies_it() {
        let message = |env: &dyn Fn(&str) -> Option<String>| {
            target(&args(), env).expect_err("incomplete").to_string()
        };
        assert!(message(&env_of(&[])).contains("--comment-provider"));
        let push = env_of(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_REPOSITORY", "acme/shop"),
            ("GITHUB_REF", "refs/heads/main"),
            ("GITHUB_TOKEN", "x"),
        ]);
        assert!(message(&push).contains("--comment-pr"));
        let no_token = env_of(&[
            ("GITLAB_CI", "true"),
            ("CI_PROJECT_ID", "1"),
            ("CI_MERGE_REQUEST_IID", "2"),
        ]);
        assert_eq!(
            message(&no_token),
            "--comment: no API token: set TETHER_COMMENT_TOKEN or GITLAB_TOKEN or pass --comment-token-file"
        );
        let server = CommentArgs {
            comment_provider: Some(Provider::BitbucketServer),
            comment_repository: Some("ACME/shop".into()),
            comment_pr: Some(1),
            ..args()
        };
        let err = target(&server, &env_of(&[("BITBUCKET_TOKEN", "x")]))
            .expect_err("no API URL")
            .to_string();
        assert!(err.contains("bitbucketserver has no public API"), "{err}");
    }
}
