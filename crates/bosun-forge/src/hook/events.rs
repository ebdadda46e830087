//! An accepted delivery's body as the plain data bosun acts on: pushes (from
//! GitHub, Gitea and GitLab), GitHub's `repository` changes that end or move
//! a repository bosun follows, GitHub's `ping`; every other event is
//! [`Event::Ignored`].
//!
//! A body without a field the event needs, or with it of another type, is an
//! [`EventError`] naming the field (`repository.full_name`); fields bosun
//! does not read are not looked at.

use std::fmt;

use serde_json::Value;

use super::forge::Forge;

/// An event as bosun reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A push: a branch or tag created, moved or deleted.
    Push(Push),
    /// A repository archived, unarchived, deleted, renamed or transferred
    /// (GitHub's `repository` event).
    Repository(Repository),
    /// GitHub's `ping`, sent when a hook is made or on request.
    Ping,
    /// An event bosun reads nothing from, by the name its forge gives it
    /// (`issues`, `Note Hook`); GitHub's `repository` event with another
    /// action (`created`, `edited`, ...) is `Ignored("repository")`.
    Ignored(String),
}

/// A push to one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    /// The repository's full name, `org/repo` (GitLab: the project's
    /// `path_with_namespace`, which may have several `/`).
    pub repo: String,
    /// The full ref pushed: `refs/heads/main`, `refs/tags/v1`.
    pub git_ref: String,
    /// The ref's value before the push (all zeros when it was created).
    pub before: String,
    /// The ref's value after the push, as the forge sends it in `after` (all
    /// zeros when it was deleted). GitLab's `checkout_sha`, the commit the
    /// ref leads to (null on a deletion), is not read: for a branch it is
    /// `after`.
    pub after: String,
    /// Whether the push created the ref. GitHub says so; for Gitea and
    /// GitLab, `before` is all zeros.
    pub created: bool,
    /// Whether the push deleted the ref. GitHub says so; for Gitea and
    /// GitLab, `after` is all zeros.
    pub deleted: bool,
    /// Whether the push was forced (GitHub only: Gitea and GitLab do not
    /// say, and it is false).
    pub forced: bool,
    /// The repository's HTTP(S) clone URL (GitHub and Gitea `clone_url`,
    /// GitLab `project.git_http_url`).
    pub clone_url: String,
    /// The repository's default branch, without `refs/heads/`.
    pub default_branch: String,
    /// Who pushed: GitHub's `pusher.name`, Gitea's `pusher.login`, GitLab's
    /// `user_username`.
    pub pusher: String,
}

/// A change to a repository itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The repository's full name now (after a rename or transfer, the new one).
    pub repo: String,
    /// What happened to it.
    pub action: RepositoryAction,
}

/// What happened to a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepositoryAction {
    /// Archived: read-only, nothing more is pushed to it.
    Archived,
    /// Unarchived: pushed to again.
    Unarchived,
    /// Deleted.
    Deleted,
    /// Renamed within its owner.
    Renamed {
        /// The full name before.
        from: String,
        /// The full name after.
        to: String,
    },
    /// Moved to another owner.
    Transferred {
        /// The full name before (the previous owner's).
        from: String,
        /// The full name after.
        to: String,
    },
}

/// Why a body could not be read as its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// The body is not JSON (serde_json's message).
    NotJson(String),
    /// A field the event needs is absent or null (or under a value that is
    /// not an object). `field` is its dotted path: `repository.full_name`.
    Missing {
        /// The field's dotted path.
        field: String,
    },
    /// A field the event needs has another type.
    WrongType {
        /// The field's dotted path.
        field: String,
        /// The type it needs: `a string`, `a boolean`.
        expected: &'static str,
    },
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::NotJson(message) => write!(f, "the body is not JSON: {message}"),
            EventError::Missing { field } => write!(f, "the field `{field}` is missing"),
            EventError::WrongType { field, expected } => {
                write!(f, "the field `{field}` is not {expected}")
            }
        }
    }
}

impl std::error::Error for EventError {}

/// Whether bosun reads anything from `event` of `forge`: every other event
/// is accepted and then [`Event::Ignored`].
pub fn reads(forge: Forge, event: &str) -> bool {
    match forge {
        Forge::GitHub => matches!(event, "push" | "ping" | "repository"),
        Forge::Gitea => event == "push",
        Forge::GitLab => matches!(event, "Push Hook" | "Tag Push Hook"),
    }
}

/// Reads the body of an accepted delivery of `event` from `forge`.
pub fn parse(forge: Forge, event: &str, body: &[u8]) -> Result<Event, EventError> {
    if !reads(forge, event) {
        return Ok(Event::Ignored(event.to_owned()));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| EventError::NotJson(e.to_string()))?;
    let body = Fields(&value);
    match (forge, event) {
        (Forge::GitHub, "ping") => Ok(Event::Ping),
        (Forge::GitHub, "repository") => github_repository(body),
        (Forge::GitHub, _) => Ok(Event::Push(Push {
            repo: body.string("repository.full_name")?,
            git_ref: body.string("ref")?,
            before: body.string("before")?,
            after: body.string("after")?,
            created: body.boolean("created")?,
            deleted: body.boolean("deleted")?,
            forced: body.boolean("forced")?,
            clone_url: body.string("repository.clone_url")?,
            default_branch: body.string("repository.default_branch")?,
            pusher: body.string("pusher.name")?,
        })),
        // Neither says whether a push was forced; a created or deleted
        // ref is told by an all-zero side.
        (Forge::Gitea, _) => zero_sided_push(
            &body,
            [
                "repository.full_name",
                "repository.clone_url",
                "repository.default_branch",
                "pusher.login",
            ],
        ),
        (Forge::GitLab, _) => zero_sided_push(
            &body,
            [
                "project.path_with_namespace",
                "project.git_http_url",
                "project.default_branch",
                "user_username",
            ],
        ),
    }
}

fn github_repository(body: Fields<'_>) -> Result<Event, EventError> {
    let action = body.string("action")?;
    let repo = body.string("repository.full_name")?;
    let action = match action.as_str() {
        "archived" => RepositoryAction::Archived,
        "unarchived" => RepositoryAction::Unarchived,
        "deleted" => RepositoryAction::Deleted,
        "renamed" => {
            let owner = body.string("repository.owner.login")?;
            let old = body.string("changes.repository.name.from")?;
            RepositoryAction::Renamed {
                from: format!("{owner}/{old}"),
                to: repo.clone(),
            }
        }
        "transferred" => {
            // The previous owner is an organization or a user.
            let old_owner = match body.string("changes.owner.from.organization.login") {
                Ok(login) => login,
                Err(EventError::Missing { .. }) => body.string("changes.owner.from.user.login")?,
                Err(e) => return Err(e),
            };
            let name = body.string("repository.name")?;
            RepositoryAction::Transferred {
                from: format!("{old_owner}/{name}"),
                to: repo.clone(),
            }
        }
        _ => return Ok(Event::Ignored("repository".to_owned())),
    };
    Ok(Event::Repository(Repository { repo, action }))
}

/// Git's null object name (forty, or sixty-four for SHA-256, zeros).
fn is_zero(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b == b'0')
}

/// A JSON body's fields by dotted path, each absent or mistyped one an
/// [`EventError`] naming it. serde_json finds the value (`Value::pointer`);
/// this only names the field in the error.
#[derive(Clone, Copy)]
struct Fields<'v>(&'v Value);

impl Fields<'_> {
    fn get(&self, field: &str) -> Result<&Value, EventError> {
        let pointer = format!("/{}", field.replace('.', "/"));
        match self.0.pointer(&pointer) {
            None | Some(Value::Null) => Err(EventError::Missing {
                field: field.to_owned(),
            }),
            Some(value) => Ok(value),
        }
    }

    fn string(&self, field: &str) -> Result<String, EventError> {
        match self.get(field)? {
            Value::String(s) => Ok(s.clone()),
            _ => Err(EventError::WrongType {
                field: field.to_owned(),
                expected: "a string",
            }),
        }
    }

    fn boolean(&self, field: &str) -> Result<bool, EventError> {
        match self.get(field)? {
            Value::Bool(b) => Ok(*b),
            _ => Err(EventError::WrongType {
                field: field.to_owned(),
                expected: "a boolean",
            }),
        }
    }
}

/// A push as Gitea and GitLab send it: `before`, `after` and `ref` at the
/// top, and the fields `[repository, clone URL, default branch, pusher]`
/// at these paths.
fn zero_sided_push(body: &Fields<'_>, paths: [&str; 4]) -> Result<Event, EventError> {
    let [repo, clone_url, default_branch, pusher] = paths;
    let before = body.string("before")?;
    let after = body.string("after")?;
    Ok(Event::Push(Push {
        repo: body.string(repo)?,
        git_ref: body.string("ref")?,
        created: is_zero(&before),
        deleted: is_zero(&after),
        forced: false,
        before,
        after,
        clone_url: body.string(clone_url)?,
        default_branch: body.string(default_branch)?,
        pusher: body.string(pusher)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_mistyped_field_is_named() {
        let body = br#"{"repository": {"full_name": "o/r"}, "ref": "refs/heads/main",
            "before": "a", "after": 7}"#;
        assert_eq!(
            parse(Forge::GitHub, "push", body),
            Err(EventError::WrongType {
                field: "after".into(),
                expected: "a string"
            })
        );
        let body = br#"{"ref": "r", "before": "a", "after": "b", "created": false,
            "deleted": false, "forced": false, "repository": {"full_name": "o/r"}}"#;
        let err = parse(Forge::GitHub, "push", body).unwrap_err();
        assert_eq!(
            err,
            EventError::Missing {
                field: "repository.clone_url".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "the field `repository.clone_url` is missing"
        );
        let err = parse(Forge::GitLab, "Push Hook", b"[1, 2]").unwrap_err();
        assert_eq!(
            err,
            EventError::Missing {
                field: "before".into()
            }
        );
        assert!(matches!(
            parse(Forge::Gitea, "push", b"{"),
            Err(EventError::NotJson(_))
        ));
    }

    #[test]
    fn events_bosun_does_not_read_are_ignored_unread() {
        assert_eq!(
            parse(Forge::GitHub, "issues", b"not even JSON"),
            Ok(Event::Ignored("issues".into()))
        );
        assert_eq!(
            parse(Forge::GitLab, "Note Hook", b"{}"),
            Ok(Event::Ignored("Note Hook".into()))
        );
        assert!(!reads(Forge::Gitea, "ping"));
        assert!(reads(Forge::GitHub, "ping"));
    }

    #[test]
    fn null_object_names() {
        assert!(is_zero("0000000000000000000000000000000000000000"));
        assert!(is_zero(&"0".repeat(64)));
        assert!(!is_zero(""));
        assert!(!is_zero("0000000000000000000000000000000000000001"));
    }
}
