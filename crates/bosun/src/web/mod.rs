//! The dashboard: server-rendered HTML pages over the daemon, served by
//! `bosun serve` beside the API (`api` mounts [`router`]).
//!
//! - `/` (runs, filtered, paginated on the server), `/runs/{id}` (a run:
//!   details, log, artifacts, abort and rerun), `/periodics` (schedules in
//!   words, next fires, last runs, skipped ticks, pause/resume/trigger, the
//!   next 24 h of fires), `/clusters` (health, capacity, load), `/dispatcher`
//!   (the plan, its moves, overrides, "why is job X on cluster Y") and
//!   `/config` (the snapshot in force, the last load's errors).
//! - Pages are HTML from templates compiled into the binary (askama,
//!   `crates/bosun/templates/`); the stylesheet and the one small script are
//!   embedded too (`assets`), nothing comes from elsewhere. Every page reads
//!   without JavaScript; the script only makes lists and runs live
//!   (server-sent events from `/live/...`, each a server-rendered fragment)
//!   and follows a running run's log.
//! - Actions are HTML forms posting to the dashboard's own routes, which
//!   call the daemon as the API does (`runs::RunFactory`, the controller,
//!   `periodics`, the dispatcher's engine), behind `auth`'s checks.
//! - A run's artifacts are linked to the API's artifacts endpoint (served as
//!   attachments or plain text, under a sandboxing CSP: a job's files never
//!   act on the dashboard's origin); decorated Kubernetes runs link to their
//!   bucket through Prow's `job_url_prefix` / `job_url_template` (`joburl`).
//!
//! Handlers hold no rules of their own: what they show comes from the
//! daemon's state, the store and the dispatcher's engine; `api` is not
//! imported (it mounts this module; the artifacts listing is handed in as
//! an [`ArtifactLister`]).

pub mod auth;

mod assets;
mod clusters;
mod config;
mod dispatcher;
pub mod fmt;
pub mod joburl;
mod periodics;
mod runs;
mod svg;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use askama::Template;
use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use futures_util::future::BoxFuture;
use futures_util::Stream;
use jiff::Timestamp;
use serde::Deserialize;

use crate::daemon::Daemon;
use auth::{Auth, Refusal, Role};

/// Lists a run's artifacts directory: `(run id, path below it)` to the
/// API's answer (status and JSON body). `api` hands it in, answering
/// through its own hardened artifacts route.
pub type ArtifactLister =
    Arc<dyn Fn(String, String) -> BoxFuture<'static, (StatusCode, Bytes)> + Send + Sync>;

/// The dashboard's options.
#[derive(Default)]
pub struct Options {
    /// The token reads need (none: reads are public).
    pub read_token: Option<String>,
    /// Told when the daemon stops: live streams end then.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

/// What the dashboard's handlers share.
pub struct Web {
    /// The daemon.
    pub daemon: Arc<Daemon>,
    /// Tokens, sessions, CSRF.
    pub auth: Arc<Auth>,
    artifacts: ArtifactLister,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// The last 24 h timeline of fires, by snapshot version and minute.
    timeline: Mutex<Option<periodics::CachedTimeline>>,
}

impl Web {
    /// The dashboard's state.
    pub fn new(
        daemon: Arc<Daemon>,
        auth: Arc<Auth>,
        artifacts: ArtifactLister,
        stop: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> Arc<Web> {
        Arc::new(Web {
            daemon,
            auth,
            artifacts,
            stop,
            timeline: Mutex::new(None),
        })
    }

    fn now(&self) -> Timestamp {
        self.daemon.shared.clock.now()
    }
}

/// The dashboard's routes.
pub fn router(web: Arc<Web>) -> Router {
    Router::new()
        .route("/", get(runs::list))
        .route("/runs/trigger", post(runs::trigger))
        .route("/runs/{id}", get(runs::page))
        .route("/runs/{id}/abort", post(runs::abort))
        .route("/runs/{id}/rerun", post(runs::rerun))
        .route("/live/runs", get(runs::live_list))
        .route("/live/runs/{id}", get(runs::live_run))
        .route("/periodics", get(periodics::page))
        .route("/periodics/trigger", post(periodics::trigger))
        .route("/periodics/pause", post(periodics::pause))
        .route("/periodics/resume", post(periodics::resume))
        .route("/clusters", get(clusters::page))
        .route("/dispatcher", get(dispatcher::page))
        .route("/dispatcher/replan", post(dispatcher::replan))
        .route("/dispatcher/overrides", post(dispatcher::add_override))
        .route(
            "/dispatcher/overrides/cancel",
            post(dispatcher::cancel_override),
        )
        .route("/config", get(config::page))
        .route("/config/reload", post(config::reload))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/assets/{name}", get(assets::serve))
        .with_state(web)
}

/// One entry of the navigation bar.
#[derive(Clone)]
pub struct Nav {
    href: &'static str,
    label: &'static str,
    active: bool,
}

/// What every page shows around its content.
#[derive(Clone)]
pub struct Chrome {
    title: String,
    nav: Vec<Nav>,
    css: String,
    js: String,
    /// The viewer's role, in words.
    role: &'static str,
    /// A session is open (a logout button).
    logged_in: bool,
    /// The viewer may act: action buttons are shown.
    can_act: bool,
    /// Where to log in, coming back here.
    login_href: String,
    /// The CSRF token of this page's forms.
    csrf: String,
}

/// A request as the dashboard sees it: who asks, and the CSRF token of the
/// forms it will be shown (a new pre-login cookie is set when the browser
/// has none).
pub struct Ctx {
    web: Arc<Web>,
    role: Role,
    logged_in: bool,
    csrf: String,
    set_binding: Option<String>,
    path: String,
    headers: HeaderMap,
}

impl FromRequestParts<Arc<Web>> for Ctx {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, web: &Arc<Web>) -> Result<Ctx, Infallible> {
        let auth = &web.auth;
        let role = auth.role(&parts.headers);
        let (binding, set_binding) = match auth::binding(&parts.headers) {
            Some(b) => (b.to_string(), None),
            None => {
                let b = auth::new_binding();
                (b.clone(), Some(b))
            }
        };
        Ok(Ctx {
            web: web.clone(),
            role,
            logged_in: auth.session_role(&parts.headers).is_some(),
            csrf: auth.csrf_token(&binding),
            set_binding,
            path: parts
                .uri
                .path_and_query()
                .map_or("/".into(), |p| p.as_str().to_string()),
            headers: parts.headers.clone(),
        })
    }
}

impl Ctx {
    /// The page chrome, `active` naming the navigation entry.
    fn chrome(&self, title: impl Into<String>, active: &str) -> Chrome {
        const NAV: [(&str, &str); 5] = [
            ("/", "Runs"),
            ("/periodics", "Periodics"),
            ("/clusters", "Clusters"),
            ("/dispatcher", "Dispatcher"),
            ("/config", "Config"),
        ];
        Chrome {
            title: title.into(),
            nav: NAV
                .iter()
                .map(|(href, label)| Nav {
                    href,
                    label,
                    active: *href == active,
                })
                .collect(),
            css: assets::url("style.css"),
            js: assets::url("live.js"),
            role: self.role.word(),
            logged_in: self.logged_in,
            can_act: self.web.auth.may_act(self.role),
            login_href: format!("/login{}", fmt::query(&[("next", &self.path)])),
            csrf: self.csrf.clone(),
        }
    }

    /// A rendered page, with the pre-login cookie when one is new.
    fn page(&self, status: StatusCode, page: &impl Template) -> Response {
        let mut r = html(status, render(page));
        if let Some(b) = &self.set_binding {
            r.headers_mut().append(
                header::SET_COOKIE,
                auth::set_cookie(auth::CSRF_COOKIE, b, None),
            );
        }
        r
    }

    /// A page saying `message` (an error, or what an action did).
    fn message(&self, status: StatusCode, title: &str, message: &str, back: &str) -> Response {
        let page = MessagePage {
            chrome: self.chrome(title, ""),
            message: message.to_string(),
            back: back.to_string(),
            login: status == StatusCode::UNAUTHORIZED,
        };
        self.page(status, &page)
    }

    /// Checks a form `POST` (see [`Auth::check_form`]); the refusal page.
    fn check_form(&self, csrf: &str) -> Result<Role, Box<Response>> {
        self.web
            .auth
            .check_form(&self.headers, csrf)
            .map_err(|r| Box::new(self.refused(r)))
    }

    fn refused(&self, r: Refusal) -> Response {
        match r {
            Refusal::CrossSite(why) => self.message(
                StatusCode::FORBIDDEN,
                "Refused",
                &format!("Refused: {why}. Reload the page and try again."),
                "/",
            ),
            Refusal::NeedsToken => self.message(
                StatusCode::UNAUTHORIZED,
                "Log in",
                "This action needs the API token: log in with it first.",
                "/",
            ),
        }
    }
}

/// Renders a template (a failure is a bug: the page says so).
fn render(page: &impl Template) -> String {
    page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot render a page");
        format!("cannot render this page: {e}")
    })
}

/// The headers of every page: no framing, no sniffing, scripts and styles
/// only from the dashboard's own assets, forms only to itself.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// An HTML answer with the page headers.
fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    harden(h);
    r
}

fn harden(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// `303 See Other` to `to` (after a form's action).
fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// A page's live fragment as server-sent events: `render` is called every
/// second (off the runtime's workers); each change is sent as an `html`
/// event holding the fragment, and when `render` says the thing has ended,
/// an `end` event closes the stream. It also ends when the daemon stops.
fn live(
    web: &Web,
    render: impl Fn() -> (String, bool) + Send + Sync + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    struct St<F> {
        render: Arc<F>,
        last: Option<String>,
        stop: Option<tokio::sync::watch::Receiver<bool>>,
        ended: bool,
        first: bool,
    }
    let state = St {
        render: Arc::new(render),
        last: None,
        stop: web.stop.clone(),
        ended: false,
        first: true,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        if st.ended {
            return None;
        }
        loop {
            if !st.first {
                let tick = tokio::time::sleep(Duration::from_secs(1));
                match st.stop.as_mut() {
                    Some(stop) if *stop.borrow() => return None,
                    Some(stop) => {
                        tokio::select! {
                            _ = tick => {}
                            _ = stop.changed() => return None,
                        }
                    }
                    None => tick.await,
                }
            }
            st.first = false;
            let render = st.render.clone();
            let (body, ended) = crate::runs::blocking(move || render()).await;
            // An event's data may not hold a carriage return.
            let body = body.replace('\r', "");
            if ended {
                st.ended = true;
                let event = Event::default().event("html").data(body);
                let end = Event::default().event("end").data("end");
                // The last fragment, then the end.
                return Some((futures_util::stream::iter(vec![Ok(event), Ok(end)]), st));
            }
            // The first fragment is always sent: the page may have been
            // rendered before a change the stream's first look sees.
            if st.last.as_deref() != Some(body.as_str()) {
                st.last = Some(body.clone());
                let event = Event::default().event("html").data(body);
                return Some((futures_util::stream::iter(vec![Ok(event)]), st));
            }
        }
    });
    use futures_util::StreamExt;
    Sse::new(stream.flatten()).keep_alive(KeepAlive::default())
}

/// A form with only its CSRF token.
#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage {
    chrome: Chrome,
    message: String,
    back: String,
    login: bool,
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    chrome: Chrome,
    next: String,
    error: String,
    reads_need_token: bool,
    actions_need_token: bool,
}

#[derive(Deserialize)]
struct LoginQuery {
    next: Option<String>,
}

/// Where a login goes back to: a path of this site only.
fn local_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_string(),
        _ => "/".into(),
    }
}

/// `GET /login`.
async fn login_page(
    ctx: Ctx,
    axum::extract::Query(q): axum::extract::Query<LoginQuery>,
) -> Response {
    let auth = &ctx.web.auth;
    let page = LoginPage {
        chrome: ctx.chrome("Log in", ""),
        next: local_next(q.next.as_deref()),
        error: String::new(),
        reads_need_token: auth.reads_need_token(),
        actions_need_token: auth.actions_need_token(),
    };
    ctx.page(StatusCode::OK, &page)
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
    next: Option<String>,
}

/// `POST /login`: a token to a session (a new id: nothing set before the
/// login carries over).
async fn login(ctx: Ctx, Form(form): Form<LoginForm>) -> Response {
    let auth = ctx.web.auth.clone();
    if let Err(r) = auth.check_login_form(&ctx.headers, &form.csrf) {
        return ctx.refused(r);
    }
    let role = auth.role_of_token(form.token.trim());
    let next = local_next(form.next.as_deref());
    if role == Role::Anonymous {
        let page = LoginPage {
            chrome: ctx.chrome("Log in", ""),
            next,
            error: "That token is not valid.".into(),
            reads_need_token: auth.reads_need_token(),
            actions_need_token: auth.actions_need_token(),
        };
        return ctx.page(StatusCode::UNAUTHORIZED, &page);
    }
    let id = auth.login(role);
    let mut r = see_other(&next);
    r.headers_mut().append(
        header::SET_COOKIE,
        auth::set_cookie(auth::SESSION_COOKIE, &id, Some(auth::SESSION_TTL)),
    );
    r
}

/// `POST /logout`.
async fn logout(ctx: Ctx, Form(form): Form<CsrfForm>) -> Response {
    let auth = ctx.web.auth.clone();
    if let Err(r) = auth.check_login_form(&ctx.headers, &form.csrf) {
        return ctx.refused(r);
    }
    auth.logout(&ctx.headers);
    let mut r = see_other("/");
    r.headers_mut().append(
        header::SET_COOKIE,
        auth::set_cookie(auth::SESSION_COOKIE, "", Some(Duration::ZERO)),
    );
    r
}
