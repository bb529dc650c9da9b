//! `--var NAME=VALUE` and `--vars-file FILE`: post-build variables for `tether diff`
//! and `tether sync`, so CI can render what a cluster's `postBuild` would. They go on
//! top of an app's own (`--config`): files in order, then flags, a later one winning.

use std::path::PathBuf;

use super::Error;
use tether_diff::manifest::substitute::Substitution;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct VarArgs {
    /// A post-build variable for `${NAME}` placeholders (repeatable; wins over
    /// --vars-file). With any variable given, an undefined one is an error.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,

    /// A file of `NAME=VALUE` lines (`#` comments; repeatable, a later one wins).
    #[arg(long = "vars-file", value_name = "FILE")]
    pub vars_files: Vec<PathBuf>,
}

impl VarArgs {
    /// `base` (an app's `postBuild` variables) with the files' and the flags' on top;
    /// None when there are none at all (objects are then read as written).
    pub fn substitution(&self, base: Option<Substitution>) -> Result<Option<Substitution>, Error> {
        if base.is_none() && self.vars.is_empty() && self.vars_files.is_empty() {
            return Ok(None);
        }
        let mut substitution =
            base.unwrap_or_else(|| Substitution::new(tether_controller::config::DEFAULT_STRICT));
        for file in &self.vars_files {
            let from = file.display().to_string();
            for (name, value) in read_vars_file(file)? {
                substitution
                    .define(&name, &value, &from)
                    .map_err(|e| Error::Vars(e.to_string()))?;
            }
        }
        for var in &self.vars {
            let Some((name, value)) = var.split_once('=') else {
                // Not quoted: it may be a value given without its name.
                return Err(Error::Vars("a --var is not NAME=VALUE".into()));
            };
            substitution
                .define(name, value, "--var")
                .map_err(|e| Error::Vars(e.to_string()))?;
        }
        Ok(Some(substitution))
    }
}

/// A vars file: `NAME=VALUE` lines (the form `--var` takes), blank lines and `#`
/// comments skipped, the value taken verbatim to the end of the line. Its errors
/// name the file and line, never a value.
fn read_vars_file(path: &PathBuf) -> Result<Vec<(String, String)>, Error> {
    let at = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::Vars(format!("--vars-file {at}: {e}")))?;
    let mut vars = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((name, value)) = trimmed.split_once('=') else {
            return Err(Error::Vars(format!(
                "--vars-file {at}, line {}: expected NAME=VALUE",
                index + 1
            )));
        };
        vars.push((name.trim_end().to_string(), value.to_string()));
    }
    Ok(vars)
}
