//! The fake's answers shaped as GitHub's description says (every field its
//! response schemas require, with GitHub's URL forms): users, statuses,
//! comments, labels, pull requests, repositories, the App, installations
//! and installation tokens. `tests/it/github_api.rs` checks each against
//! the description, and the fake checks every answer it sends.

use jiff::Timestamp;
use serde_json::{json, Value};

use super::state::{Comment, PullSpec, Status};

/// The API version whose shapes the fake answers.
pub const API_VERSION: &str = "2022-11-28";

/// GitHub's web address, for `html_url`s.
const WEB: &str = "https://github.com";

/// A timestamp as GitHub writes one: whole seconds, UTC.
pub(super) fn time(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second()).unwrap().to_string()
}

/// An account (`simple-user`): a user, a bot (`name[bot]`) or an
/// organization.
pub(super) fn user(api: &str, login: &str, id: u64) -> Value {
    let kind = if login.ends_with("[bot]") {
        "Bot"
    } else {
        "User"
    };
    account(api, login, id, kind)
}

pub(super) fn account(api: &str, login: &str, id: u64, kind: &str) -> Value {
    // As GitHub writes a bot's: `/users/name%5Bbot%5D`, `/apps/name`.
    let escaped = login.replace('[', "%5B").replace(']', "%5D");
    let u = format!("{api}/users/{escaped}");
    let html = match login.strip_suffix("[bot]") {
        Some(app) => format!("{WEB}/apps/{app}"),
        None => format!("{WEB}/{login}"),
    };
    json!({
        "login": login,
        "id": id,
        "node_id": format!("U_kgDO{id:08}"),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "",
        "url": u,
        "html_url": html,
        "followers_url": format!("{u}/followers"),
        "following_url": format!("{u}/following{{/other_user}}"),
        "gists_url": format!("{u}/gists{{/gist_id}}"),
        "starred_url": format!("{u}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{u}/subscriptions"),
        "organizations_url": format!("{u}/orgs"),
        "repos_url": format!("{u}/repos"),
        "events_url": format!("{u}/events{{/privacy}}"),
        "received_events_url": format!("{u}/received_events"),
        "type": kind,
        "user_view_type": "public",
        "site_admin": false,
    })
}

/// The authenticated user (`private-user`), as `GET /user` answers a
/// user's token.
pub(super) fn private_user(api: &str, login: &str, id: u64, created: Timestamp) -> Value {
    let mut u = user(api, login, id);
    let at = time(created);
    let fields = json!({
        "user_view_type": "private",
        "name": null, "company": null, "blog": "", "location": null, "email": null,
        "hireable": null, "bio": null, "twitter_username": null,
        "public_repos": 0, "public_gists": 0, "followers": 0, "following": 0,
        "created_at": at, "updated_at": at,
        "private_gists": 0, "total_private_repos": 0, "owned_private_repos": 0,
        "disk_usage": 0, "collaborators": 0, "two_factor_authentication": true,
        "plan": {"name": "free", "space": 976_562_499, "collaborators": 0, "private_repos": 10000},
    });
    u.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    u
}

/// A commit status as `POST .../statuses/{sha}` and the list answer it
/// (`status`).
pub(super) fn status(api: &str, repo: &str, sha: &str, s: &Status, creator: Value) -> Value {
    json!({
        "url": format!("{api}/repos/{repo}/statuses/{sha}"),
        "avatar_url": creator["avatar_url"],
        "id": s.id,
        "node_id": format!("SC_kwDO{:08}", s.id),
        "state": s.state,
        "description": s.description,
        "target_url": s.target_url,
        "context": s.context,
        "created_at": time(s.created_at),
        "updated_at": time(s.created_at),
        "creator": creator,
    })
}

/// A status in a combined status (`simple-commit-status`).
pub(super) fn simple_status(api: &str, repo: &str, sha: &str, s: &Status, avatar: &Value) -> Value {
    json!({
        "url": format!("{api}/repos/{repo}/statuses/{sha}"),
        "avatar_url": avatar,
        "id": s.id,
        "node_id": format!("SC_kwDO{:08}", s.id),
        "state": s.state,
        "description": s.description,
        "target_url": s.target_url,
        "context": s.context,
        "required": false,
        "created_at": time(s.created_at),
        "updated_at": time(s.created_at),
    })
}

/// An issue comment (`issue-comment`).
pub(super) fn comment(
    api: &str,
    repo: &str,
    number: u64,
    c: &Comment,
    user: Value,
    association: &str,
) -> Value {
    json!({
        "id": c.id,
        "node_id": format!("IC_kwDO{:08}", c.id),
        "url": format!("{api}/repos/{repo}/issues/comments/{}", c.id),
        "html_url": format!("{WEB}/{repo}/pull/{number}#issuecomment-{}", c.id),
        "body": c.body,
        "user": user,
        "created_at": time(c.created_at),
        "updated_at": time(c.updated_at),
        "issue_url": format!("{api}/repos/{repo}/issues/{number}"),
        "author_association": association,
        "performed_via_github_app": null,
        "reactions": {
            "url": format!("{api}/repos/{repo}/issues/comments/{}/reactions", c.id),
            "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "confused": 0,
            "heart": 0, "hooray": 0, "eyes": 0, "rocket": 0,
        },
    })
}

/// A label (`label`); its id from its name.
pub(super) fn label(api: &str, repo: &str, name: &str, id: u64) -> Value {
    let escaped = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
    json!({
        "id": id,
        "node_id": format!("LA_kwDO{id:08}"),
        "url": format!("{api}/repos/{repo}/labels/{escaped}"),
        "name": name,
        "description": null,
        "color": "ededed",
        "default": false,
    })
}

/// A repository (`repository`, which also satisfies `minimal-repository`).
pub(super) fn repository(
    api: &str,
    repo: &str,
    id: u64,
    owner: Value,
    created: Timestamp,
) -> Value {
    let name = repo.split_once('/').map_or(repo, |(_, n)| n);
    let r = format!("{api}/repos/{repo}");
    let at = time(created);
    let mut urls = json!({
        "id": id,
        "node_id": format!("R_kgDO{id:08}"),
        "name": name,
        "full_name": repo,
        "owner": owner,
        "private": false,
        "html_url": format!("{WEB}/{repo}"),
        "description": null,
        "fork": false,
        "url": r,
        "git_url": format!("git://github.com/{repo}.git"),
        "ssh_url": format!("git@github.com:{repo}.git"),
    });
    // `<field>`: the repository's API URL and this suffix.
    for (field, suffix) in [
        ("archive_url", "/{archive_format}{/ref}"),
        ("assignees_url", "/assignees{/user}"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("branches_url", "/branches{/branch}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("comments_url", "/comments{/number}"),
        ("commits_url", "/commits{/sha}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("contents_url", "/contents/{+path}"),
        ("contributors_url", "/contributors"),
        ("deployments_url", "/deployments"),
        ("downloads_url", "/downloads"),
        ("events_url", "/events"),
        ("forks_url", "/forks"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("issue_events_url", "/issues/events{/number}"),
        ("issues_url", "/issues{/number}"),
        ("keys_url", "/keys{/key_id}"),
        ("labels_url", "/labels{/name}"),
        ("languages_url", "/languages"),
        ("merges_url", "/merges"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("pulls_url", "/pulls{/number}"),
        ("releases_url", "/releases{/id}"),
        ("stargazers_url", "/stargazers"),
        ("statuses_url", "/statuses/{sha}"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("tags_url", "/tags"),
        ("teams_url", "/teams"),
        ("trees_url", "/git/trees{/sha}"),
    ] {
        urls[field] = json!(format!("{r}{suffix}"));
    }
    let counts = json!({
        "clone_url": format!("{WEB}/{repo}.git"),
        "mirror_url": null,
        "hooks_url": format!("{r}/hooks"),
        "svn_url": format!("{WEB}/{repo}"),
        "homepage": null,
        "language": null,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 0,
        "default_branch": "main",
        "open_issues": 0,
        "open_issues_count": 0,
        "is_template": false,
        "topics": [],
        "has_issues": true,
        "has_projects": true,
        "has_wiki": true,
        "has_pages": false,
        "has_downloads": true,
        "has_discussions": false,
        "archived": false,
        "disabled": false,
        "visibility": "public",
        "pushed_at": at,
        "created_at": at,
        "updated_at": at,
        "allow_forking": true,
        "web_commit_signoff_required": false,
        "license": null,
    });
    let mut repository = urls;
    repository
        .as_object_mut()
        .unwrap()
        .extend(counts.as_object().unwrap().clone());
    repository
}

/// A pull request (`pull-request`): `user` its author (`association` to
/// the repository), `repository` the repository (head and base both in
/// it), `labels` its labels' shapes.
#[allow(clippy::too_many_arguments)]
pub(super) fn pull(
    api: &str,
    repo: &str,
    p: &PullSpec,
    id: u64,
    (user, association): (Value, &str),
    repository: Value,
    labels: Vec<Value>,
    created: Timestamp,
) -> Value {
    let r = format!("{api}/repos/{repo}");
    let n = p.number;
    let html = format!("{WEB}/{repo}/pull/{n}");
    let at = time(created);
    let owner = repo.split_once('/').map_or(repo, |(o, _)| o);
    let side = |git_ref: &str, sha: &str| {
        json!({
            "label": format!("{owner}:{git_ref}"),
            "ref": git_ref,
            "sha": sha,
            "user": repository["owner"],
            "repo": repository,
        })
    };
    let link = |href: String| json!({ "href": href });
    let (mergeable, mergeable_state) = match p.mergeable {
        Some(true) => (json!(true), "clean"),
        Some(false) => (json!(false), "dirty"),
        None => (Value::Null, "unknown"),
    };
    let links = json!({
        "self": link(format!("{r}/pulls/{n}")),
        "html": link(html.clone()),
        "issue": link(format!("{r}/issues/{n}")),
        "comments": link(format!("{r}/issues/{n}/comments")),
        "review_comments": link(format!("{r}/pulls/{n}/comments")),
        "review_comment": link(format!("{r}/pulls/comments{{/number}}")),
        "commits": link(format!("{r}/pulls/{n}/commits")),
        "statuses": link(format!("{r}/statuses/{}", p.head_sha)),
    });
    let mut pull = json!({
        "url": format!("{r}/pulls/{n}"),
        "id": id,
        "node_id": format!("PR_kwDO{id:08}"),
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "issue_url": format!("{r}/issues/{n}"),
        "commits_url": format!("{r}/pulls/{n}/commits"),
        "review_comments_url": format!("{r}/pulls/{n}/comments"),
        "review_comment_url": format!("{r}/pulls/comments{{/number}}"),
        "comments_url": format!("{r}/issues/{n}/comments"),
        "statuses_url": format!("{r}/statuses/{}", p.head_sha),
        "number": n,
        "state": if p.closed { "closed" } else { "open" },
        "locked": false,
        "title": p.title,
        "user": user,
        "body": p.body,
        "labels": labels,
        "milestone": null,
        "active_lock_reason": null,
        "created_at": at,
        "updated_at": at,
        "closed_at": if p.closed { json!(at) } else { Value::Null },
        "merged_at": if p.merged { json!(at) } else { Value::Null },
        "merge_commit_sha": null,
        "assignee": null,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": side(&p.head_ref, &p.head_sha),
        "base": side(&p.base_ref, &p.base_sha),
        "_links": links,
    });
    let rest = json!({
        "author_association": association,
        "auto_merge": null,
        "draft": p.draft,
        "merged": p.merged,
        "mergeable": mergeable,
        "rebaseable": mergeable,
        "mergeable_state": mergeable_state,
        "merged_by": null,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": false,
        "commits": 1,
        "additions": 0,
        "deletions": 0,
        "changed_files": 0,
    });
    pull.as_object_mut()
        .unwrap()
        .extend(rest.as_object().unwrap().clone());
    pull
}

/// The permissions the fake's App and its tokens have.
pub(super) fn permissions() -> Value {
    json!({
        "contents": "read",
        "issues": "write",
        "members": "read",
        "metadata": "read",
        "pull_requests": "write",
        "statuses": "write",
    })
}

/// The App (`integration`).
pub(super) fn app(id: u64, slug: &str, owner: Value, created: Timestamp) -> Value {
    let at = time(created);
    json!({
        "id": id,
        "slug": slug,
        "node_id": format!("A_kwDO{id:08}"),
        "client_id": format!("Iv1.{id:016x}"),
        "owner": owner,
        "name": slug,
        "description": null,
        "external_url": format!("{WEB}/apps/{slug}"),
        "html_url": format!("{WEB}/apps/{slug}"),
        "created_at": at,
        "updated_at": at,
        "permissions": permissions(),
        "events": ["issue_comment", "pull_request", "push"],
        "installations_count": 1,
    })
}

/// An installation of the App on an organization (`installation`).
pub(super) fn installation(
    api: &str,
    id: u64,
    app_id: u64,
    slug: &str,
    account: Value,
    created: Timestamp,
) -> Value {
    let at = time(created);
    json!({
        "id": id,
        "account": account,
        "repository_selection": "all",
        "access_tokens_url": format!("{api}/app/installations/{id}/access_tokens"),
        "repositories_url": format!("{api}/installation/repositories"),
        "html_url": format!("{WEB}/organizations/{}/settings/installations/{id}", account["login"].as_str().unwrap_or_default()),
        "app_id": app_id,
        "client_id": format!("Iv1.{app_id:016x}"),
        "target_id": account["id"],
        "target_type": "Organization",
        "permissions": permissions(),
        "events": ["issue_comment", "pull_request", "push"],
        "created_at": at,
        "updated_at": at,
        "single_file_name": null,
        "has_multiple_single_files": false,
        "single_file_paths": [],
        "app_slug": slug,
        "suspended_by": null,
        "suspended_at": null,
        "contact_email": null,
    })
}

/// An installation token (`installation-token`).
pub(super) fn installation_token(token: &str, expires_at: Timestamp) -> Value {
    json!({
        "token": token,
        "expires_at": time(expires_at),
        "permissions": permissions(),
        "repository_selection": "all",
    })
}
