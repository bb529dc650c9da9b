//! Manifest errors: each names the file, the document and the line, and none quotes
//! the content (a Secret's value must never reach a log through a parse error).

use std::fmt;

/// Where in the input an error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    /// 1-based document index.
    pub document: Option<usize>,
    /// 1-based line in the file.
    pub line: Option<usize>,
    /// 0-based index in a `kind: List`'s items.
    pub item: Option<usize>,
}

impl Location {
    pub fn file(file: &str) -> Location {
        Location {
            file: file.to_string(),
            document: None,
            line: None,
            item: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(doc) = self.document {
            write!(f, ", document {doc}")?;
        }
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        Ok(())
    }
}

/// One thing wrong with the manifests. None of these is retryable: the repository
/// needs a change (status reason `ManifestInvalid`), except [`ManifestError::Io`],
/// [`ManifestError::Kustomize`] and [`ManifestError::RenderTimeout`], which may be
/// passing trouble on the machine.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{at}: invalid YAML: {message}")]
    InvalidYaml { at: Location, message: String },
    #[error("{at}: invalid JSON: {message}")]
    InvalidJson { at: Location, message: String },
    #[error("{at}: the document is not an object")]
    NotAnObject { at: Location },
    #[error("{at}: missing {field}")]
    MissingField { at: Location, field: &'static str },
    #[error("{at}: a kind: List needs an items list")]
    BadList { at: Location },
    #[error("{at}: {object} is defined twice: here and at {first}")]
    Duplicate {
        at: Location,
        /// Boxed: keeps every error small enough to return by value.
        first: Box<Location>,
        object: String,
    },
    #[error("{at}: symlink leads outside the repository root")]
    SymlinkOutsideRoot { at: Location },
    #[error("{at}: file is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { at: Location, size: u64, limit: u64 },
    #[error("{at}: a kustomization is built by the render stage, not parsed as a manifest")]
    KustomizationNeedsCheckout { at: Location },
    #[error("{at}: `{program}` is not installed (not found on PATH); it renders this path")]
    RendererMissing { at: Location, program: String },
    #[error(
        "{at}: `{program}` was stopped after {} (the render timeout), with every process it started",
        tether_schema::duration::format_duration(*.timeout)
    )]
    RenderTimeout {
        at: Location,
        program: String,
        timeout: std::time::Duration,
    },
    #[error("{at}: kustomize build failed: {message}")]
    Kustomize { at: Location, message: String },
    #[error("{at}: helm template failed: {message}")]
    Helm { at: Location, message: String },
    /// A chart's post-renderer (`postRenderers[i].kustomize`) failed; `place` names
    /// the post-renderer and, when known, its patch.
    #[error("{at}: {place}: {message}")]
    PostRender {
        at: Location,
        place: String,
        message: String,
    },
    #[error("{at}: the values file {file:?} is not in the chart's revision")]
    MissingValuesFile { at: Location, file: String },
    #[error("{at}: the values file {file:?} names a source the app has no valueSources entry for")]
    UnknownValuesRef { at: Location, file: String },
    #[error(
        "{at}: {field} names the remote base {reference:?}; remote bases are refused unless allowed"
    )]
    RemoteBase {
        at: Location,
        field: &'static str,
        reference: String,
    },
    #[error("{at}: {field} names {reference:?}, which is outside the repository")]
    OutsideRepository {
        at: Location,
        field: &'static str,
        reference: String,
    },
    #[error("{at}: {field} names {reference:?}, which is no file or directory of the repository")]
    NotInRepository {
        at: Location,
        field: &'static str,
        reference: String,
    },
    #[error(
        "{at}: the revision's path {path:?} leads outside the folder it is copied to for rendering"
    )]
    OutsideRenderFolder { at: Location, path: String },
    #[error(
        "{at}: this kustomization is also built by {by}; rendering both would apply its objects twice (point the path at one of them)"
    )]
    DoubleRender { at: Location, by: String },
    /// A `${var}` placeholder of post-build substitution (the `substitute` module):
    /// names the variable or expression, never a value.
    #[error("{at}: {object}: {problem}")]
    Substitution {
        at: Location,
        object: String,
        /// Boxed: keeps every error small enough to return by value.
        problem: Box<Problem>,
    },
    /// A SOPS-encrypted file that did not decrypt (its message names the file).
    #[error("SOPS: {source}")]
    Sops {
        at: Location,
        /// Boxed: keeps every error small enough to return by value.
        #[source]
        source: Box<tether_sops::SopsError>,
    },
    #[error("{at}: cannot read: {source}")]
    Io {
        at: Location,
        #[source]
        source: std::io::Error,
    },
}

impl ManifestError {
    pub fn location(&self) -> &Location {
        match self {
            ManifestError::InvalidYaml { at, .. }
            | ManifestError::InvalidJson { at, .. }
            | ManifestError::NotAnObject { at }
            | ManifestError::MissingField { at, .. }
            | ManifestError::BadList { at }
            | ManifestError::Duplicate { at, .. }
            | ManifestError::SymlinkOutsideRoot { at }
            | ManifestError::TooLarge { at, .. }
            | ManifestError::KustomizationNeedsCheckout { at }
            | ManifestError::RendererMissing { at, .. }
            | ManifestError::RenderTimeout { at, .. }
            | ManifestError::NotInRepository { at, .. }
            | ManifestError::OutsideRenderFolder { at, .. }
            | ManifestError::Kustomize { at, .. }
            | ManifestError::Helm { at, .. }
            | ManifestError::PostRender { at, .. }
            | ManifestError::MissingValuesFile { at, .. }
            | ManifestError::UnknownValuesRef { at, .. }
            | ManifestError::RemoteBase { at, .. }
            | ManifestError::OutsideRepository { at, .. }
            | ManifestError::DoubleRender { at, .. }
            | ManifestError::Substitution { at, .. }
            | ManifestError::Sops { at, .. }
            | ManifestError::Io { at, .. } => at,
        }
    }
}

/// Every error found in one read, in file order.
#[derive(Debug, thiserror::Error)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl ManifestErrors {
    /// Whether a later pass may render the same revision: only when every error is
    /// a renderer stopped by its timeout (a slow machine or network); any other error
    /// stands until the repository changes.
    pub fn is_retryable(&self) -> bool {
        !self.0.is_empty()
            && self
                .0
                .iter()
                .all(|e| matches!(e, ManifestError::RenderTimeout { .. }))
    }
}

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(f, "{n} manifest error{}", if n == 1 { "" } else { "s" })?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

/// What is wrong with a `${var}` placeholder of post-build substitution. Quotes only the manifest's own text (never a
/// variable's value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error(
        "variable {name:?} is not defined and has no default (define it, give `${{{name}:=default}}`, or set postBuild.strict: false)"
    )]
    Undefined { name: String },
    #[error(
        "{expression:?} is not a substitution tether supports (`${{var}}`, `${{var:=default}}`, `${{var:-default}}`; write `$$` for a literal `$`)"
    )]
    BadExpression { expression: String },
    #[error("{expression:?} has no closing `}}` (write `$$` for a literal `$`)")]
    Unterminated { expression: String },
}
