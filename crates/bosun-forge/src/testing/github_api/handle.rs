//! One request through the fake: the checks in the order the module doc
//! gives, then the operation itself on the fake's state, its answer
//! checked against the description and recorded.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value};

use super::app_auth;
use super::describe::{description, In, Operation};
use super::server::{Incoming, Outgoing};
use super::shapes::{self, API_VERSION};
use super::state::{latest, Comment, Failure, RecordedRequest, Shared, State, Status, Token};

/// GitHub's answer to a request without `User-Agent`.
const NO_USER_AGENT: &str = "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.\n";

/// GitHub's text when a SHA and context have 1,000 statuses.
const STATUS_LIMIT: &str = "This SHA and context has reached the maximum number of statuses.";

const DOCS: &str = "https://docs.github.com/rest";

/// Limits GitHub enforces that its description does not carry.
const MAX_STATUS_DESCRIPTION: usize = 140;
const MAX_STATUSES: usize = 1000;
const MAX_COMMENT: usize = 65536;
const MAX_LABEL_NAME: usize = 50;
const MAX_PER_PAGE: usize = 100;
const DEFAULT_PER_PAGE: usize = 30;

/// The operations authenticated as the App (a JWT), as GitHub has them.
const APP_OPERATIONS: [&str; 4] = [
    "apps/get-authenticated",
    "apps/create-installation-access-token",
    "apps/get-org-installation",
    "apps/get-repo-installation",
];

/// An answer on its way out.
struct Answer {
    status: u16,
    body: Option<Value>,
    /// A body that is not JSON (GitHub's User-Agent refusal).
    text: Option<&'static str>,
    headers: Vec<(String, String)>,
}

impl Answer {
    fn json(status: u16, body: Value) -> Answer {
        Answer {
            status,
            body: Some(body),
            text: None,
            headers: Vec::new(),
        }
    }

    fn empty(status: u16) -> Answer {
        Answer {
            status,
            body: None,
            text: None,
            headers: Vec::new(),
        }
    }

    fn error(status: u16, message: &str, docs: &str) -> Answer {
        Answer::json(
            status,
            json!({"message": message, "documentation_url": docs, "status": status.to_string()}),
        )
    }

    fn not_found(docs: &str) -> Answer {
        Answer::error(404, "Not Found", docs)
    }

    /// GitHub's 422 `Validation Failed` with one error.
    fn invalid(resource: &str, code: &str, field: &str, message: &str, docs: &str) -> Answer {
        Answer::json(
            422,
            json!({
                "message": "Validation Failed",
                "errors": [{"resource": resource, "code": code, "field": field, "message": message}],
                "documentation_url": docs,
                "status": "422",
            }),
        )
    }

    fn header(mut self, name: &str, value: impl ToString) -> Answer {
        self.headers.push((name.into(), value.to_string()));
        self
    }
}

/// Who a request is authenticated as.
enum Principal {
    User(String),
    Installation { org: String, login: String },
    App,
}

impl Principal {
    fn login(&self) -> String {
        match self {
            Principal::User(login) | Principal::Installation { login, .. } => login.clone(),
            Principal::App => "bosun".into(),
        }
    }
}

/// A request as the operations read it.
struct Call<'a> {
    op: &'a Operation,
    path: HashMap<String, String>,
    query: Vec<(String, String)>,
    body: Value,
    principal: Principal,
    now: Timestamp,
    api: &'a str,
    raw_path: &'a str,
}

impl Call<'_> {
    fn repo(&self) -> String {
        format!("{}/{}", self.path["owner"], self.path["repo"]).to_ascii_lowercase()
    }

    fn number(&self, name: &str) -> u64 {
        self.path[name].parse().expect("checked by its schema")
    }

    fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub(super) fn handle(shared: &Shared, request: Incoming) -> Outgoing {
    let mut state = shared.state();
    let now = state.now();
    if state.rate.reset <= now.as_second() {
        state.rate.remaining = state.rate.limit;
        state.rate.reset = now.as_second() + 3600;
    }
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((&request.target, ""));
    let (path, query) = (path.to_owned(), query.to_owned());
    let mut violations = Vec::new();
    let (answer, op) = answer(
        &mut state,
        &shared.url,
        &request,
        &path,
        &query,
        now,
        &mut violations,
    );
    if let Some(body) = &answer.body {
        for e in description().response_errors(op, answer.status, body) {
            violations.push(format!(
                "the fake's answer {} does not fit GitHub's description: {e}",
                answer.status
            ));
        }
    }
    let rate = &state.rate;
    let mut headers = vec![
        (
            "Date".to_owned(),
            now.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string(),
        ),
        (
            "X-GitHub-Api-Version-Selected".to_owned(),
            API_VERSION.to_owned(),
        ),
        (
            "X-GitHub-Media-Type".to_owned(),
            "github.v3; format=json".to_owned(),
        ),
        (
            "X-GitHub-Request-Id".to_owned(),
            format!("FAKE:{:06}", state.requests.len()),
        ),
        ("X-RateLimit-Limit".to_owned(), rate.limit.to_string()),
        (
            "X-RateLimit-Remaining".to_owned(),
            rate.remaining.to_string(),
        ),
        (
            "X-RateLimit-Used".to_owned(),
            (rate.limit - rate.remaining).to_string(),
        ),
        ("X-RateLimit-Reset".to_owned(), rate.reset.to_string()),
        ("X-RateLimit-Resource".to_owned(), "core".to_owned()),
    ];
    // An answer's own rate headers (an injected limit) replace these.
    headers.retain(|(n, _)| {
        !answer
            .headers
            .iter()
            .any(|(m, _)| m.eq_ignore_ascii_case(n))
    });
    headers.extend(answer.headers.iter().cloned());
    let body = match (&answer.body, answer.text) {
        (Some(body), _) => {
            headers.push((
                "Content-Type".into(),
                "application/json; charset=utf-8".into(),
            ));
            serde_json::to_vec(body).unwrap()
        }
        (None, Some(text)) => {
            headers.push(("Content-Type".into(), "text/plain; charset=utf-8".into()));
            text.as_bytes().to_vec()
        }
        (None, None) => Vec::new(),
    };
    let method = request.method.clone();
    state.violations.extend(
        violations
            .into_iter()
            .map(|v| format!("{method} {}: {v}", request.target)),
    );
    state.requests.push(RecordedRequest {
        method,
        path,
        query,
        body: String::from_utf8_lossy(&request.body).into_owned(),
        status: answer.status,
    });
    Outgoing {
        status: answer.status,
        headers,
        body,
    }
}

/// The answer to `request` and the operation it was routed to; each
/// refusal of a malformed request is pushed to `violations`.
fn answer<'d>(
    state: &mut State,
    api: &str,
    request: &Incoming,
    path: &str,
    query: &str,
    now: Timestamp,
    violations: &mut Vec<String>,
) -> (Answer, Option<&'d Operation>) {
    // 1. User-Agent.
    if request
        .header("user-agent")
        .is_none_or(|ua| ua.trim().is_empty())
    {
        violations.push("no User-Agent".into());
        let mut answer = Answer::empty(403);
        answer.text = Some(NO_USER_AGENT);
        return (answer, None);
    }
    // 2. The operation.
    let routes = description().routes(path);
    let Some((op, params)) = routes
        .into_iter()
        .find(|(op, _)| op.method == request.method)
    else {
        violations.push("no such operation in GitHub's REST description".into());
        return (Answer::not_found(DOCS), None);
    };
    let docs = op.docs.as_str();
    // 3. An injected failure.
    if let Some(failure) = injected(state, &request.method, path) {
        return (failed(state, failure, now, docs), Some(op));
    }
    // 4. Credentials.
    let principal = match authenticate(state, request, op, now) {
        Ok(principal) => principal,
        Err((status, message)) => {
            violations.push(format!("{status} {message}"));
            return (Answer::error(status, message, docs), Some(op));
        }
    };
    if let Principal::Installation { org, .. } = &principal {
        if let Some(owner) = params.get("owner").or(params.get("org")) {
            if !owner.eq_ignore_ascii_case(org) {
                violations.push(format!("an installation token of {org} used on {owner}"));
                return (Answer::not_found(docs), Some(op));
            }
        }
    }
    // 5. The rate budget.
    if state.rate.remaining == 0 {
        let message = match &principal {
            Principal::Installation { .. } => "API rate limit exceeded for installation.",
            _ => "API rate limit exceeded for user.",
        };
        return (
            Answer::error(
                403,
                message,
                "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            ),
            Some(op),
        );
    }
    state.rate.remaining -= 1;
    // 6. Media type and API version.
    if let Some(accept) = request.header("accept") {
        let json = accept.split(',').any(|range| {
            let media = range.split(';').next().unwrap_or("").trim();
            media == "*/*"
                || media == "application/*"
                || media == "application/json"
                || (media.starts_with("application/vnd.github") && media.ends_with("json"))
                || media == "application/vnd.github.v3"
        });
        if !json {
            violations.push(format!("Accept: {accept}"));
            let message =
                format!("Unsupported 'Accept' header: '{accept}'. Must accept 'application/json'.");
            return (Answer::error(415, &message, docs), Some(op));
        }
    }
    if let Some(version) = request.header("x-github-api-version") {
        if version != API_VERSION {
            violations.push(format!(
                "X-GitHub-Api-Version {version}: the fake answers {} only",
                API_VERSION
            ));
            let message = format!("API version '{version}' is not supported.");
            return (Answer::error(400, &message, docs), Some(op));
        }
    }
    // 7. Parameters.
    for param in op.params.iter().filter(|p| p.location == In::Path) {
        let errors = op.param_errors(param, &params[&param.name]);
        if !errors.is_empty() {
            violations.push(format!(
                "path parameter {}: {}",
                param.name,
                errors.join("; ")
            ));
            return (Answer::not_found(docs), Some(op));
        }
    }
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    for (name, value) in &pairs {
        let Some(param) = op
            .params
            .iter()
            .find(|p| p.location == In::Query && &p.name == name)
        else {
            violations.push(format!(
                "query parameter {name} is not one of {} {}'s",
                op.method, op.template
            ));
            continue;
        };
        let errors = op.param_errors(param, value);
        if !errors.is_empty() {
            violations.push(format!("query parameter {name}: {}", errors.join("; ")));
            let message = format!("Invalid request.\n\nFor '{name}', {}.", errors.join("; "));
            return (Answer::error(422, &message, docs), Some(op));
        }
        if name == "per_page" || name == "page" {
            let n: i64 = value.parse().unwrap_or(0);
            if n < 1 || (name == "per_page" && n > MAX_PER_PAGE as i64) {
                violations.push(format!(
                    "{name}={value}: GitHub takes 1 to {MAX_PER_PAGE} (and caps it silently)"
                ));
            }
        }
    }
    if let Some(missing) = op
        .params
        .iter()
        .find(|p| p.location == In::Query && p.required && !pairs.iter().any(|(n, _)| n == &p.name))
    {
        violations.push(format!("query parameter {} missing", missing.name));
        return (
            Answer::error(
                422,
                &format!("Invalid request.\n\n\"{}\" wasn't supplied.", missing.name),
                docs,
            ),
            Some(op),
        );
    }
    // 8. The body.
    let body = if request.body.iter().all(u8::is_ascii_whitespace) {
        if op.body_required {
            violations.push("no body".into());
            return (Answer::error(400, "Problems parsing JSON", docs), Some(op));
        }
        json!({})
    } else {
        if op.body.is_none() {
            violations.push(format!(
                "a body, which {} {} takes none of",
                op.method, op.template
            ));
        }
        match serde_json::from_slice::<Value>(&request.body) {
            Ok(body) => body,
            Err(e) => {
                violations.push(format!("body is not JSON: {e}"));
                return (Answer::error(400, "Problems parsing JSON", docs), Some(op));
            }
        }
    };
    let errors = op.body_errors(&body);
    if let Some(first) = errors.first() {
        violations.push(format!("body: {}", errors.join("; ")));
        let (field, message) = first.split_once(": ").unwrap_or(("", first));
        let field = field.trim_start_matches('/');
        let code = if message.contains("required property") {
            "missing_field"
        } else {
            "invalid"
        };
        return (
            Answer::invalid(resource(op), code, field, message, docs),
            Some(op),
        );
    }
    // 9. The operation.
    let call = Call {
        op,
        path: params,
        query: pairs,
        body,
        principal,
        now,
        api,
        raw_path: path,
    };
    (operate(state, &call, violations), Some(op))
}

/// The resource GitHub's 422s name for an operation's body.
fn resource(op: &Operation) -> &'static str {
    match op.id.as_str() {
        "repos/create-commit-status" => "Status",
        "issues/create-comment" | "issues/update-comment" => "IssueComment",
        "issues/add-labels" => "Label",
        _ => "Request",
    }
}

fn injected(state: &mut State, method: &str, path: &str) -> Option<Failure> {
    let injection = state.injections.iter_mut().find(|i| {
        i.remaining > 0 && (i.method == "*" || i.method == method) && i.glob.is_match(path)
    })?;
    injection.remaining -= 1;
    Some(injection.failure.clone())
}

fn failed(state: &State, failure: Failure, now: Timestamp, docs: &str) -> Answer {
    match failure {
        Failure::Status(status) => Answer::json(status, json!({"message": "Server Error"})),
        Failure::NotFound => Answer::not_found(docs),
        Failure::Unprocessable(message) => Answer::error(422, &message, docs),
        Failure::RateLimit { reset_in, secondary: false } => Answer::error(
            403,
            "API rate limit exceeded for user.",
            "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        )
        .header("X-RateLimit-Remaining", 0)
        .header("X-RateLimit-Used", state.rate.limit)
        .header("X-RateLimit-Reset", (now + reset_in).as_second()),
        Failure::RateLimit { reset_in, secondary: true } => Answer::error(
            403,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID FAKE.",
            "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
        )
        .header("Retry-After", reset_in.as_secs().max(1)),
    }
}

/// Who the request's `Authorization` is, or the status and text refusing
/// it.
fn authenticate(
    state: &State,
    request: &Incoming,
    op: &Operation,
    now: Timestamp,
) -> Result<Principal, (u16, &'static str)> {
    let Some(authorization) = request.header("authorization") else {
        return Err((401, "Requires authentication"));
    };
    let (scheme, token) = authorization.trim().split_once(' ').unwrap_or(("", ""));
    if !scheme.eq_ignore_ascii_case("bearer") && !scheme.eq_ignore_ascii_case("token") {
        return Err((401, "Bad credentials"));
    }
    let token = token.trim();
    let as_app = APP_OPERATIONS.contains(&op.id.as_str());
    match app_auth::read_jwt(token) {
        Some(jwt) if as_app => {
            let jwt = jwt.map_err(|e| (401, e))?;
            let app = state
                .app
                .as_ref()
                .filter(|app| app.id.to_string() == jwt.iss)
                .ok_or((401, app_auth::JWT_UNDECODABLE))?;
            app_auth::verify(&jwt, &app.key, now.as_second()).map_err(|e| (401, e))?;
            Ok(Principal::App)
        }
        Some(_) => Err((403, "Resource not accessible by integration")),
        None if as_app => Err((401, app_auth::JWT_UNDECODABLE)),
        None => match state.tokens.get(token) {
            None => Err((401, "Bad credentials")),
            Some(Token::User { login }) => Ok(Principal::User(login.clone())),
            Some(Token::Installation { expires_at, .. }) if *expires_at <= now => {
                Err((401, "Bad credentials"))
            }
            Some(Token::Installation { id, .. }) => {
                let app = state.app.as_ref().expect("installations need the App");
                if op.id == "users/get-authenticated" {
                    return Err((403, "Resource not accessible by integration"));
                }
                Ok(Principal::Installation {
                    org: state.installations[id].clone(),
                    login: format!("{}[bot]", app.slug),
                })
            }
        },
    }
}

/// The pagination of `items` by the call's `per_page` and `page`, with
/// its `Link` header.
fn paginate(call: &Call, items: Vec<Value>) -> (Vec<Value>, Option<String>) {
    let number = |name: &str, default: usize| {
        call.query(name)
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(default)
    };
    let per_page = number("per_page", DEFAULT_PER_PAGE).min(MAX_PER_PAGE);
    let page = number("page", 1);
    let last = items.len().div_ceil(per_page).max(1);
    let link = |n: usize, rel: &str| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in call.query.iter().filter(|(n, _)| n != "page") {
            query.append_pair(name, value);
        }
        query.append_pair("page", &n.to_string());
        format!(
            "<{}{}?{}>; rel=\"{rel}\"",
            call.api,
            call.raw_path,
            query.finish()
        )
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(link(page.min(last + 1) - 1, "prev"));
    }
    if page < last {
        links.push(link(page + 1, "next"));
        links.push(link(last, "last"));
    }
    if page > 1 {
        links.push(link(1, "first"));
    }
    let items = items
        .into_iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    (items, (!links.is_empty()).then(|| links.join(", ")))
}

fn listed(call: &Call, items: Vec<Value>) -> Answer {
    let (items, link) = paginate(call, items);
    let answer = Answer::json(200, Value::Array(items));
    match link {
        Some(link) => answer.header("Link", link),
        None => answer,
    }
}

fn user_shape(state: &mut State, api: &str, login: &str) -> Value {
    let id = state.id(&format!("user:{}", login.to_ascii_lowercase()));
    shapes::user(api, login, id)
}

fn repository_shape(state: &mut State, api: &str, repo: &str) -> Value {
    let name = state
        .repos
        .get(repo)
        .cloned()
        .unwrap_or_else(|| repo.to_owned());
    let owner = name.split('/').next().unwrap_or_default().to_owned();
    let owner_id = state.id(&format!("user:{}", owner.to_ascii_lowercase()));
    let id = state.id(&format!("repo:{repo}"));
    let started = state.started;
    shapes::repository(
        api,
        &name,
        id,
        shapes::account(api, &owner, owner_id, "Organization"),
        started,
    )
}

fn association(state: &State, repo: &str, login: &str) -> &'static str {
    let owner = repo.split('/').next().unwrap_or_default();
    let login = login.to_ascii_lowercase();
    if owner == login {
        "OWNER"
    } else if state.members.contains(&(owner.to_owned(), login.clone())) {
        "MEMBER"
    } else if state.collaborators.contains(&(repo.to_owned(), login)) {
        "COLLABORATOR"
    } else {
        "NONE"
    }
}

/// The operation itself, on the fake's state.
fn operate(state: &mut State, call: &Call, violations: &mut Vec<String>) -> Answer {
    let docs = call.op.docs.as_str();
    let api = call.api;
    let repo = call.path.contains_key("repo").then(|| call.repo());
    if let Some(repo) = &repo {
        if !state.repos.contains_key(repo) {
            return Answer::not_found(docs);
        }
    }
    let issue = |state: &State, repo: &str, number: u64| {
        state.pulls.contains_key(&(repo.to_owned(), number))
            || state.issues.contains_key(&(repo.to_owned(), number))
    };
    match call.op.id.as_str() {
        "repos/create-commit-status" => {
            let repo = repo.unwrap();
            let sha = call.path["sha"].clone();
            if !state.commits.contains(&(repo.clone(), sha.clone())) {
                return Answer::error(422, &format!("No commit found for SHA: {sha}"), docs);
            }
            let description = text(&call.body, "description");
            if description
                .as_ref()
                .is_some_and(|d| d.chars().count() > MAX_STATUS_DESCRIPTION)
            {
                violations.push(format!(
                    "status description longer than {MAX_STATUS_DESCRIPTION} characters"
                ));
                let message = format!(
                    "description is too long (maximum is {MAX_STATUS_DESCRIPTION} characters)"
                );
                return Answer::invalid("Status", "custom", "description", &message, docs);
            }
            let context = text(&call.body, "context").unwrap_or_else(|| "default".into());
            let statuses = state
                .statuses
                .entry((repo.clone(), sha.clone()))
                .or_default();
            let same = statuses
                .iter()
                .filter(|s| s.context.to_lowercase() == context.to_lowercase())
                .count();
            if same >= MAX_STATUSES {
                return Answer::invalid("Status", "custom", "context", STATUS_LIMIT, docs);
            }
            let id = state.fresh_id();
            let status = Status {
                id,
                context,
                state: text(&call.body, "state").unwrap(),
                description,
                target_url: text(&call.body, "target_url"),
                created_at: call.now,
                creator: call.principal.login(),
            };
            state
                .statuses
                .get_mut(&(repo.clone(), sha.clone()))
                .unwrap()
                .push(status.clone());
            let creator = user_shape(state, api, &status.creator);
            let name = state.repos[&repo].clone();
            Answer::json(201, shapes::status(api, &name, &sha, &status, creator))
                .header("Location", format!("{api}/repos/{name}/statuses/{sha}"))
        }
        "repos/get-combined-status-for-ref" | "repos/list-commit-statuses-for-ref" => {
            let repo = repo.unwrap();
            let sha = call.path["ref"].clone();
            if !state.commits.contains(&(repo.clone(), sha.clone())) {
                return Answer::error(404, &format!("No commit found for SHA: {sha}"), docs);
            }
            let name = state.repos[&repo].clone();
            let all = state
                .statuses
                .get(&(repo.clone(), sha.clone()))
                .cloned()
                .unwrap_or_default();
            if call.op.id == "repos/list-commit-statuses-for-ref" {
                let items = all
                    .iter()
                    .rev()
                    .map(|s| {
                        let creator = user_shape(state, api, &s.creator);
                        shapes::status(api, &name, &sha, s, creator)
                    })
                    .collect();
                return listed(call, items);
            }
            let latest = latest(&all);
            let combined = if latest
                .iter()
                .any(|s| s.state == "error" || s.state == "failure")
            {
                "failure"
            } else if latest.is_empty() || latest.iter().any(|s| s.state == "pending") {
                "pending"
            } else {
                "success"
            };
            let items: Vec<Value> = latest
                .iter()
                .map(|s| {
                    let creator = user_shape(state, api, &s.creator);
                    shapes::simple_status(api, &name, &sha, s, &creator["avatar_url"])
                })
                .collect();
            let total = items.len();
            let (items, link) = paginate(call, items);
            let repository = repository_shape(state, api, &repo);
            let body = json!({
                "state": combined,
                "statuses": items,
                "sha": sha,
                "total_count": total,
                "repository": repository,
                "commit_url": format!("{api}/repos/{name}/commits/{sha}"),
                "url": format!("{api}/repos/{name}/commits/{sha}/status"),
            });
            match link {
                Some(link) => Answer::json(200, body).header("Link", link),
                None => Answer::json(200, body),
            }
        }
        "issues/list-comments" | "issues/create-comment" => {
            let repo = repo.unwrap();
            let number = call.number("issue_number");
            if !issue(state, &repo, number) {
                return Answer::not_found(docs);
            }
            let name = state.repos[&repo].clone();
            if call.op.id == "issues/list-comments" {
                let since = match call.query("since").map(str::parse::<Timestamp>) {
                    None => None,
                    Some(Ok(since)) => Some(since),
                    Some(Err(_)) => {
                        violations.push("since is not a timestamp".into());
                        return Answer::error(
                            422,
                            "Invalid request.\n\nFor 'since', it is not a date-time.",
                            docs,
                        );
                    }
                };
                let comments = state
                    .comments
                    .get(&(repo.clone(), number))
                    .cloned()
                    .unwrap_or_default();
                let items = comments
                    .iter()
                    .filter(|c| since.is_none_or(|since| c.updated_at >= since))
                    .map(|c| comment_shape(state, api, &repo, &name, number, c))
                    .collect();
                return listed(call, items);
            }
            let body = text(&call.body, "body").unwrap();
            if let Some(answer) = comment_too_long(&body, docs, violations) {
                return answer;
            }
            let comment = Comment {
                id: state.fresh_id(),
                body,
                author: call.principal.login(),
                created_at: call.now,
                updated_at: call.now,
            };
            state
                .comments
                .entry((repo.clone(), number))
                .or_default()
                .push(comment.clone());
            let shape = comment_shape(state, api, &repo, &name, number, &comment);
            Answer::json(201, shape).header(
                "Location",
                format!("{api}/repos/{name}/issues/comments/{}", comment.id),
            )
        }
        "issues/update-comment" | "issues/delete-comment" => {
            let repo = repo.unwrap();
            let id = call.number("comment_id");
            let Some((number, index)) =
                state.comments.iter().find_map(|((r, number), comments)| {
                    (r == &repo)
                        .then(|| {
                            comments
                                .iter()
                                .position(|c| c.id == id)
                                .map(|i| (*number, i))
                        })
                        .flatten()
                })
            else {
                return Answer::not_found(docs);
            };
            let key = (repo.clone(), number);
            if call.op.id == "issues/delete-comment" {
                state.comments.get_mut(&key).unwrap().remove(index);
                return Answer::empty(204);
            }
            let body = text(&call.body, "body").unwrap();
            if let Some(answer) = comment_too_long(&body, docs, violations) {
                return answer;
            }
            let comment = &mut state.comments.get_mut(&key).unwrap()[index];
            comment.body = body;
            comment.updated_at = call.now;
            let comment = comment.clone();
            let name = state.repos[&repo].clone();
            Answer::json(
                200,
                comment_shape(state, api, &repo, &name, number, &comment),
            )
        }
        "issues/list-labels-on-issue" | "issues/add-labels" | "issues/remove-label" => {
            let repo = repo.unwrap();
            let number = call.number("issue_number");
            if !issue(state, &repo, number) {
                return Answer::not_found(docs);
            }
            let key = (repo.clone(), number);
            match call.op.id.as_str() {
                "issues/add-labels" => {
                    let names: Vec<String> = call.body["labels"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| {
                            l.as_str().map_or_else(
                                || l["name"].as_str().unwrap().to_owned(),
                                str::to_owned,
                            )
                        })
                        .collect();
                    if let Some(long) = names.iter().find(|n| n.chars().count() > MAX_LABEL_NAME) {
                        violations.push(format!(
                            "label name longer than {MAX_LABEL_NAME} characters: {long}"
                        ));
                        let message =
                            format!("name is too long (maximum is {MAX_LABEL_NAME} characters)");
                        return Answer::invalid("Label", "custom", "name", &message, docs);
                    }
                    let labels = state.labels.entry(key.clone()).or_default();
                    for name in names {
                        if !labels.iter().any(|l| l.eq_ignore_ascii_case(&name)) {
                            labels.push(name);
                        }
                    }
                }
                "issues/remove-label" => {
                    let name = &call.path["name"];
                    let labels = state.labels.entry(key.clone()).or_default();
                    let Some(index) = labels.iter().position(|l| l.eq_ignore_ascii_case(name))
                    else {
                        return Answer::error(404, "Label does not exist", docs);
                    };
                    labels.remove(index);
                }
                _ => {}
            }
            let name = state.repos[&repo].clone();
            let labels = state.labels.get(&key).cloned().unwrap_or_default();
            let items: Vec<Value> = labels
                .iter()
                .map(|l| {
                    let id = state.id(&format!("label:{repo}:{}", l.to_lowercase()));
                    shapes::label(api, &name, l, id)
                })
                .collect();
            if call.op.id == "issues/list-labels-on-issue" {
                listed(call, items)
            } else {
                Answer::json(200, Value::Array(items))
            }
        }
        "pulls/get" => {
            let repo = repo.unwrap();
            let number = call.number("pull_number");
            let Some(pull) = state.pulls.get(&(repo.clone(), number)).cloned() else {
                return Answer::not_found(docs);
            };
            let name = state.repos[&repo].clone();
            let id = state.id(&format!("pull:{repo}:{number}"));
            let user = user_shape(state, api, &pull.author);
            let assoc = association(state, &repo, &pull.author);
            let repository = repository_shape(state, api, &repo);
            let labels = state
                .labels
                .get(&(repo.clone(), number))
                .cloned()
                .unwrap_or_default();
            let labels = labels
                .iter()
                .map(|l| {
                    let id = state.id(&format!("label:{repo}:{}", l.to_lowercase()));
                    shapes::label(api, &name, l, id)
                })
                .collect();
            let started = state.started;
            Answer::json(
                200,
                shapes::pull(
                    api,
                    &name,
                    &pull,
                    id,
                    (user, assoc),
                    repository,
                    labels,
                    started,
                ),
            )
        }
        "orgs/check-membership-for-user" => {
            let key = (
                call.path["org"].to_ascii_lowercase(),
                call.path["username"].to_ascii_lowercase(),
            );
            if state.members.contains(&key) {
                Answer::empty(204)
            } else {
                Answer::empty(404)
            }
        }
        "repos/check-collaborator" => {
            let key = (repo.unwrap(), call.path["username"].to_ascii_lowercase());
            if state.collaborators.contains(&key) {
                Answer::empty(204)
            } else {
                Answer::empty(404)
            }
        }
        "users/get-authenticated" => {
            let login = call.principal.login();
            let id = state.id(&format!("user:{}", login.to_ascii_lowercase()));
            Answer::json(200, shapes::private_user(api, &login, id, state.started))
        }
        "apps/get-authenticated" => {
            let app = state.app.as_ref().unwrap();
            let (id, slug) = (app.id, app.slug.clone());
            let owner = user_shape(state, api, "bosun-owner");
            Answer::json(200, shapes::app(id, &slug, owner, state.started))
        }
        "apps/get-org-installation" | "apps/get-repo-installation" => {
            let org = call
                .path
                .get("org")
                .or(call.path.get("owner"))
                .unwrap()
                .to_ascii_lowercase();
            let Some(id) = state
                .installations
                .iter()
                .find(|(_, o)| **o == org)
                .map(|(id, _)| *id)
            else {
                return Answer::not_found(docs);
            };
            installation_answer(state, api, id, 200)
        }
        "apps/create-installation-access-token" => {
            let id = call.number("installation_id");
            if !state.installations.contains_key(&id) {
                return Answer::not_found(docs);
            }
            let n = state.fresh_id();
            let token = format!("ghs_{n:0>36}");
            let expires_at = call.now + Duration::from_secs(3600);
            state
                .tokens
                .insert(token.clone(), Token::Installation { id, expires_at });
            Answer::json(201, shapes::installation_token(&token, expires_at))
        }
        other => unreachable!("operation {other} is described but not served"),
    }
}

fn installation_answer(state: &mut State, api: &str, id: u64, status: u16) -> Answer {
    let org = state.installations[&id].clone();
    let app = state.app.as_ref().unwrap();
    let (app_id, slug) = (app.id, app.slug.clone());
    let org_id = state.id(&format!("user:{org}"));
    let account = shapes::account(api, &org, org_id, "Organization");
    Answer::json(
        status,
        shapes::installation(api, id, app_id, &slug, account, state.started),
    )
}

fn comment_shape(
    state: &mut State,
    api: &str,
    repo: &str,
    name: &str,
    number: u64,
    c: &Comment,
) -> Value {
    let user = user_shape(state, api, &c.author);
    let assoc = association(state, repo, &c.author);
    shapes::comment(api, name, number, c, user, assoc)
}

fn comment_too_long(body: &str, docs: &str, violations: &mut Vec<String>) -> Option<Answer> {
    (body.chars().count() > MAX_COMMENT).then(|| {
        violations.push(format!("comment body longer than {MAX_COMMENT} characters"));
        let message = format!("body is too long (maximum is {MAX_COMMENT} characters)");
        Answer::invalid("IssueComment", "custom", "body", &message, docs)
    })
}

/// A string field of a request body.
fn text(body: &Value, field: &str) -> Option<String> {
    body.get(field).and_then(Value::as_str).map(str::to_owned)
}
