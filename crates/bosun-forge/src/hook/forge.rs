//! The forges bosun takes webhooks from, and what tells them apart in
//! texts and headers.

/// The forge a delivery comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forge {
    /// GitHub (and GitHub Enterprise Server).
    GitHub,
    /// Gitea, and Forgejo, which sends Gitea's headers.
    Gitea,
    /// GitLab.
    GitLab,
}

impl Forge {
    /// Its name in lowercase (`github`, `gitea`, `gitlab`), for logs and labels.
    pub fn name(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::Gitea => "gitea",
            Forge::GitLab => "gitlab",
        }
    }

    /// Its name as its texts say it.
    pub(crate) fn display(self) -> &'static str {
        match self {
            Forge::GitHub => "GitHub",
            Forge::Gitea => "Gitea",
            Forge::GitLab => "GitLab",
        }
    }

    /// The header that carries the signature or token.
    pub(crate) fn credential_header(self) -> &'static str {
        match self {
            Forge::GitHub => "X-Hub-Signature-256",
            Forge::Gitea => "X-Gitea-Signature",
            Forge::GitLab => "X-Gitlab-Token",
        }
    }
}
