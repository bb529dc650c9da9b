//! `tether source`: the loop's source stage alone, to check a repository, reference,
//! path and credentials before an app uses them.

use std::fmt::Write as _;

use super::{Error, Format, GitArgs, Outcome, write_stdout};

#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    /// Repository URL: file://, a local path, git://, http(s)://, ssh:// or user@host:path.
    #[arg(long)]
    pub repo: String,

    /// Directory inside the repository.
    #[arg(long, default_value = ".")]
    pub path: String,

    #[command(flatten)]
    pub git: GitArgs,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

pub(super) async fn run(args: SourceArgs) -> Result<Outcome, Error> {
    let source = args.git.source(&args.repo, &args.path);
    let cache = args.git.cache().map_err(Error::Cache)?;
    let revision = match cache.sync(&source).await {
        Ok(revision) => revision,
        Err(error) => {
            return Err(Error::Source {
                at: source.to_string(),
                error,
            });
        }
    };
    let files = {
        let (cache, source, revision) = (cache.clone(), source.clone(), revision.clone());
        tokio::task::spawn_blocking(move || cache.read_files(&source, &revision)).await?
    };
    let files = match files {
        Ok(files) => files,
        Err(error) => {
            return Err(Error::Source {
                at: source.to_string(),
                error,
            });
        }
    };
    let out = match args.output {
        Format::Text => {
            let mut out = format!(
                "source    {source}\nrevision  {} {}\nfiles     {}\n",
                revision.sha,
                revision.subject,
                files.len()
            );
            for file in &files {
                // Writing to a String cannot fail.
                let _ = writeln!(out, "  {:>9}  {}", file.bytes.len(), file.path);
            }
            out
        }
        Format::Json => {
            let files: Vec<_> = files
                .iter()
                .map(|f| serde_json::json!({"path": f.path, "bytes": f.bytes.len()}))
                .collect();
            let out = serde_json::json!({
                "source": source.to_string(),
                "revision": {"sha": revision.sha, "subject": revision.subject},
                "files": files,
            });
            format!("{}\n", serde_json::to_string_pretty(&out)?)
        }
    };
    write_stdout(&out)?;
    Ok(Outcome::Success)
}
