//! A git command that failed, shared by the modules that run git on a
//! repository ([`crate::repo`], [`crate::objects`], [`crate::remote`]).

/// A git command that failed: what was run and what git said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git {args} (in {dir}): {error}: {stderr}")]
pub struct GitError {
    /// The arguments, space-separated.
    pub args: String,
    /// The repository.
    pub dir: String,
    /// How it ended (`exit status 128`).
    pub error: String,
    /// What it wrote on standard error, trimmed.
    pub stderr: String,
}
