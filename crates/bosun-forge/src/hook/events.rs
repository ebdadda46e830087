//! An accepted delivery's body as the plain data bosun acts on: pushes (from
//! GitHub, Gitea and GitLab), GitHub's `repository` changes that end or move
//! a repository bosun follows, GitHub's pull requests and the comments on
//! them (`issue_comment`, `pull_request_review`,
//! `pull_request_review_comment`), GitHub's `ping`; every other event is
//! [`Event::Ignored`]. Gitea's and GitLab's pull request and comment events
//! (`pull_request`, `issue_comment`, `Merge Request Hook`, `Note Hook`) are
//! not read yet: they are `Ignored`.
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
    /// A pull request opened, changed, labelled, closed... (GitHub's
    /// `pull_request`, every action).
    PullRequest(PullRequest),
    /// A comment on an issue or a pull request, a review or a review comment
    /// (GitHub's `issue_comment`, `pull_request_review`,
    /// `pull_request_review_comment`).
    Comment(Comment),
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
    /// The repository's web page (GitHub and Gitea `repository.html_url`,
    /// GitLab `project.web_url`); empty when Gitea or GitLab leave it out.
    pub repo_link: String,
    /// The page comparing `before` and `after` (GitHub `compare`, Gitea
    /// `compare_url`); empty when the forge sends none (GitLab).
    pub compare: String,
    /// The files the pushed commits added, removed or modified, each once, in
    /// the order first named (`commits[].added`, `removed`, `modified`).
    /// Forges cap these lists (GitHub and GitLab list at most 20 commits), so
    /// they may miss files of large pushes.
    pub changed_files: Vec<String>,
}

/// A pull request, as a `pull_request` event tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullRequest {
    /// The base repository's full name, `org/repo`.
    pub repo: String,
    /// The event's action as sent: `opened`, `synchronize`, `labeled`,
    /// `closed`, ... (empty for a pull request not read from an event).
    pub action: String,
    /// The pull request's number.
    pub number: i64,
    /// Its author's login.
    pub author: String,
    /// Who caused the event (`sender.login`).
    pub sender: String,
    /// The head commit.
    pub head_sha: String,
    /// The head branch (in the head repository, which may be a fork).
    pub head_ref: String,
    /// The base branch, without `refs/heads/`.
    pub base_ref: String,
    /// The base branch's commit when the event was sent (it may have moved
    /// since).
    pub base_sha: String,
    /// Whether it is a draft (false when the payload does not say).
    pub draft: bool,
    /// Whether it has been merged (false when the payload does not say).
    pub merged: bool,
    /// Whether it is open.
    pub open: bool,
    /// Whether GitHub can merge it; `None` while GitHub has not computed it.
    pub mergeable: Option<bool>,
    /// The label added or removed, for `labeled` and `unlabeled`.
    pub label: Option<String>,
    /// Its labels' names.
    pub labels: Vec<String>,
    /// For `edited`: whether its base branch or base commit changed
    /// (`changes.base.ref.from` or `changes.base.sha.from`).
    pub base_changed: bool,
    /// Its title.
    pub title: String,
    /// Its description (empty when it has none).
    pub body: String,
    /// Its web page.
    pub html_url: String,
    /// The base repository's HTTPS clone URL.
    pub clone_url: String,
}

/// A comment-like text on an issue or a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// The repository's full name, `org/repo`.
    pub repo: String,
    /// The issue's or pull request's number.
    pub number: i64,
    /// Whether it is on a pull request.
    pub is_pull: bool,
    /// Where the text comes from.
    pub kind: CommentKind,
    /// What happened to it.
    pub action: CommentAction,
    /// The text (empty when a review has none).
    pub body: String,
    /// Who wrote it.
    pub author: String,
    /// Who opened the issue or pull request.
    pub issue_author: String,
    /// Whether the issue or pull request is open.
    pub issue_open: bool,
    /// The text's web page.
    pub html_url: String,
    /// The pull request's head commit, for reviews and review comments
    /// (their payloads carry the pull request; an issue comment's does not).
    pub head_sha: Option<String>,
    /// The repository's HTTP(S) clone URL (`repository.clone_url`).
    pub clone_url: String,
}

/// Where a comment's text comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentKind {
    /// A comment on an issue or a pull request's conversation.
    IssueComment,
    /// A pull request review's text.
    Review,
    /// A comment on a pull request's diff.
    ReviewComment,
    /// A pull request's description, read as a comment when the pull request
    /// is opened (as Prow's hook reads it).
    PullRequestBody,
}

/// What happened to a comment, as Prow's hook generalizes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    /// Written: a comment `created`, a review `submitted`, a pull request
    /// `opened`.
    Created,
    /// Changed.
    Edited,
    /// Removed: a comment `deleted`, a review `dismissed`.
    Deleted,
}

impl CommentAction {
    /// Prow's `GeneralizeCommentAction`: `created`, `opened`, `submitted` are
    /// `Created`; `edited` is `Edited`; `deleted`, `dismissed` are `Deleted`;
    /// anything else is not about the text.
    pub fn of(action: &str) -> Option<CommentAction> {
        match action {
            "created" | "opened" | "submitted" => Some(CommentAction::Created),
            "edited" => Some(CommentAction::Edited),
            "deleted" | "dismissed" => Some(CommentAction::Deleted),
            _ => None,
        }
    }
}

impl Comment {
    /// A pull request's description read as a comment, as Prow's hook reads
    /// it for `opened` (and `edited`): written by its author, on an open pull
    /// request. `None` for other actions.
    pub fn of_pull_request_body(pr: &PullRequest) -> Option<Comment> {
        let action = match pr.action.as_str() {
            "opened" => CommentAction::Created,
            "edited" => CommentAction::Edited,
            _ => return None,
        };
        Some(Comment {
            repo: pr.repo.clone(),
            number: pr.number,
            is_pull: true,
            kind: CommentKind::PullRequestBody,
            action,
            body: pr.body.clone(),
            author: pr.author.clone(),
            issue_author: pr.author.clone(),
            issue_open: pr.open,
            html_url: pr.html_url.clone(),
            head_sha: Some(pr.head_sha.clone()),
            clone_url: pr.clone_url.clone(),
        })
    }
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

impl EventError {
    /// The same error for a field below `parent` (`commits.0` + `added`).
    fn under(self, parent: &str) -> EventError {
        match self {
            EventError::Missing { field } => EventError::Missing {
                field: format!("{parent}.{field}"),
            },
            EventError::WrongType { field, expected } => EventError::WrongType {
                field: format!("{parent}.{field}"),
                expected,
            },
            other => other,
        }
    }
}

/// Whether bosun reads anything from `event` of `forge`: every other event
/// is accepted and then [`Event::Ignored`].
pub fn reads(forge: Forge, event: &str) -> bool {
    match forge {
        Forge::GitHub => matches!(
            event,
            "push"
                | "ping"
                | "repository"
                | "pull_request"
                | "issue_comment"
                | "pull_request_review"
                | "pull_request_review_comment"
        ),
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
        (Forge::GitHub, "pull_request") => github_pull_request(body).map(Event::PullRequest),
        (
            Forge::GitHub,
            "issue_comment" | "pull_request_review" | "pull_request_review_comment",
        ) => github_comment(event, body),
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
            repo_link: body.string("repository.html_url")?,
            compare: body.string("compare")?,
            changed_files: changed_files(&body)?,
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
                "repository.html_url",
                "compare_url",
            ],
        ),
        (Forge::GitLab, _) => zero_sided_push(
            &body,
            [
                "project.path_with_namespace",
                "project.git_http_url",
                "project.default_branch",
                "user_username",
                "project.web_url",
                "compare",
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

    /// The value at `field`, `None` when it is absent or null.
    fn opt_value(&self, field: &str) -> Option<&Value> {
        self.get(field).ok()
    }

    fn opt_string(&self, field: &str) -> Result<Option<String>, EventError> {
        match self.opt_value(field) {
            None => Ok(None),
            Some(_) => self.string(field).map(Some),
        }
    }

    fn opt_boolean(&self, field: &str) -> Result<Option<bool>, EventError> {
        match self.opt_value(field) {
            None => Ok(None),
            Some(_) => self.boolean(field).map(Some),
        }
    }

    fn opt_array(&self, field: &str) -> Result<Option<Vec<Value>>, EventError> {
        match self.opt_value(field) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items.clone())),
            Some(_) => Err(EventError::WrongType {
                field: field.to_owned(),
                expected: "an array",
            }),
        }
    }

    fn integer(&self, field: &str) -> Result<i64, EventError> {
        match self.get(field)? {
            Value::Number(n) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
            _ => Err(EventError::WrongType {
                field: field.to_owned(),
                expected: "an integer",
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
/// top, and the fields `[repository, clone URL, default branch, pusher,
/// repository page, compare page]` at these paths (the last two may be
/// absent).
fn zero_sided_push(body: &Fields<'_>, paths: [&str; 6]) -> Result<Event, EventError> {
    let [repo, clone_url, default_branch, pusher, repo_link, compare] = paths;
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
        repo_link: body.opt_string(repo_link)?.unwrap_or_default(),
        compare: body.opt_string(compare)?.unwrap_or_default(),
        changed_files: changed_files(body)?,
    }))
}

/// The union of the commits' `added`, `removed` and `modified` lists, as
/// Prow's trigger makes it (each file once; here in the order first named).
fn changed_files(body: &Fields<'_>) -> Result<Vec<String>, EventError> {
    let mut files: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let commits = body.opt_array("commits")?.unwrap_or_default();
    for (i, commit) in commits.iter().enumerate() {
        let commit = Fields(commit);
        for list in ["added", "removed", "modified"] {
            let names = commit
                .opt_array(list)
                .map_err(|e| e.under(&format!("commits.{i}")))?;
            for (j, name) in names.unwrap_or_default().iter().enumerate() {
                let Value::String(name) = name else {
                    return Err(EventError::WrongType {
                        field: format!("commits.{i}.{list}.{j}"),
                        expected: "a string",
                    });
                };
                if seen.insert(name.clone()) {
                    files.push(name.clone());
                }
            }
        }
    }
    Ok(files)
}

fn github_pull_request(body: Fields<'_>) -> Result<PullRequest, EventError> {
    let action = body.string("action")?;
    let label = match action.as_str() {
        "labeled" | "unlabeled" => body.opt_string("label.name")?,
        _ => None,
    };
    let base_changed = action == "edited"
        && [
            body.opt_string("changes.base.ref.from")?,
            body.opt_string("changes.base.sha.from")?,
        ]
        .iter()
        .any(|from| from.as_deref().is_some_and(|f| !f.is_empty()));
    let labels = body
        .opt_array("pull_request.labels")?
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            Fields(l)
                .string("name")
                .map_err(|e| e.under(&format!("pull_request.labels.{i}")))
        })
        .collect::<Result<_, _>>()?;
    Ok(PullRequest {
        repo: body.string("repository.full_name")?,
        action,
        number: body.integer("pull_request.number")?,
        author: body.string("pull_request.user.login")?,
        sender: body.string("sender.login")?,
        head_sha: body.string("pull_request.head.sha")?,
        head_ref: body.string("pull_request.head.ref")?,
        base_ref: body.string("pull_request.base.ref")?,
        base_sha: body.string("pull_request.base.sha")?,
        draft: body.opt_boolean("pull_request.draft")?.unwrap_or(false),
        merged: body.opt_boolean("pull_request.merged")?.unwrap_or(false),
        open: body.string("pull_request.state")? == "open",
        mergeable: body.opt_boolean("pull_request.mergeable")?,
        label,
        labels,
        base_changed,
        title: body.string("pull_request.title")?,
        body: body.opt_string("pull_request.body")?.unwrap_or_default(),
        html_url: body.string("pull_request.html_url")?,
        clone_url: body.string("repository.clone_url")?,
    })
}

fn github_comment(event: &str, body: Fields<'_>) -> Result<Event, EventError> {
    let action = body.string("action")?;
    let Some(generalized) = CommentAction::of(&action) else {
        return Ok(Event::Ignored(event.to_owned()));
    };
    let repo = body.string("repository.full_name")?;
    let comment = match event {
        "issue_comment" => Comment {
            repo,
            number: body.integer("issue.number")?,
            is_pull: body.opt_value("issue.pull_request").is_some(),
            kind: CommentKind::IssueComment,
            action: generalized,
            body: body.opt_string("comment.body")?.unwrap_or_default(),
            author: body.string("comment.user.login")?,
            issue_author: body.string("issue.user.login")?,
            issue_open: body.string("issue.state")? == "open",
            html_url: body.string("comment.html_url")?,
            head_sha: None,
            clone_url: body.string("repository.clone_url")?,
        },
        _ => {
            let (kind, text) = if event == "pull_request_review" {
                (CommentKind::Review, "review")
            } else {
                (CommentKind::ReviewComment, "comment")
            };
            Comment {
                repo,
                number: body.integer("pull_request.number")?,
                is_pull: true,
                kind,
                action: generalized,
                body: body
                    .opt_string(&format!("{text}.body"))?
                    .unwrap_or_default(),
                author: body.string(&format!("{text}.user.login"))?,
                issue_author: body.string("pull_request.user.login")?,
                issue_open: body.string("pull_request.state")? == "open",
                html_url: body.string(&format!("{text}.html_url"))?,
                head_sha: Some(body.string("pull_request.head.sha")?),
                clone_url: body.string("repository.clone_url")?,
            }
        }
    };
    Ok(Event::Comment(comment))
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
