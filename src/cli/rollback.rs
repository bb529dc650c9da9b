//! `tether rollback APP REVISION` and `tether unpin APP`: rollback that holds (issue
//! #30), asked of a running `tether serve` over its API. The server checks that the
//! revision is one the app was applied at, and who may (RBAC's `patch` on
//! apps.tether.dev); this only says what it answered.

use reqwest::Method;
use serde_json::json;

use super::remote::ServerArgs;
use super::{Error, Outcome, write_stdout};

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The app, as `tether status` names it (`NAMESPACE.NAME` for an App object).
    pub app: String,

    /// A revision the app was applied at: a commit SHA, or a prefix of at least 7
    /// hex digits (`tether status --app APP -o json` lists them as appliedRevisions).
    pub revision: String,

    /// Why: shown with the pin (status, dashboard, `Pinned` condition).
    #[arg(long, default_value = "")]
    pub reason: String,

    /// Hold the app only until Git's head moves past the commit it is at now (a fix
    /// pushed then takes over); without it, until `tether unpin`.
    #[arg(long)]
    pub until_git_moves: bool,

    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, clap::Args)]
pub struct UnpinArgs {
    /// The app, as `tether status` names it.
    pub app: String,

    #[command(flatten)]
    pub server: ServerArgs,
}

pub(super) async fn rollback(args: RollbackArgs) -> Result<Outcome, Error> {
    let body = json!({
        "revision": args.revision,
        "reason": args.reason,
        "untilGitMoves": args.until_git_moves,
    });
    let path = format!("/api/v1/apps/{}/rollback", args.app);
    let answer = args.server.call(Method::POST, &path, Some(&body)).await?;
    let pin = &answer["pin"];
    let sha = pin["revision"].as_str().unwrap_or_default();
    let until = match pin.get("untilGitMovesFrom") {
        Some(_) => "until Git's head moves",
        None => "until `tether unpin`",
    };
    write_stdout(&format!(
        "{} pinned to {} {} ({until})\n",
        args.app,
        sha.get(..12).unwrap_or(sha),
        pin["subject"].as_str().unwrap_or_default(),
    ))?;
    Ok(Outcome::Success)
}

pub(super) async fn unpin(args: UnpinArgs) -> Result<Outcome, Error> {
    let path = format!("/api/v1/apps/{}/unpin", args.app);
    args.server.call(Method::POST, &path, None).await?;
    write_stdout(&format!("{} follows Git's head again\n", args.app))?;
    Ok(Outcome::Success)
}
