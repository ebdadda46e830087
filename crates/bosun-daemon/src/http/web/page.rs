//! What every page of the dashboard shares: its state ([`Web`]), the
//! request as a page sees it ([`Ctx`]: who asks, the CSRF token of its
//! forms), the page chrome, the pages' headers, redirects, the message page
//! and live fragments (server-sent events).

use std::any::Any;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use askama::Template;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use jiff::Timestamp;
use serde::Deserialize;

use super::{assets, fmt};
use crate::daemon::Daemon;
use crate::http::auth::{self, Auth, Refusal, Role};

/// What the dashboard's handlers share.
pub struct Web {
    /// The daemon.
    pub daemon: Arc<Daemon>,
    /// Tokens, sessions, CSRF.
    pub auth: Arc<Auth>,
    pub(super) stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// What pages keep between requests, by name (the periodics' timeline).
    pub(super) cache: Mutex<HashMap<&'static str, Arc<dyn Any + Send + Sync>>>,
}

impl Web {
    /// The dashboard's state; `stop` ends its live streams.
    pub fn new(
        daemon: Arc<Daemon>,
        auth: Arc<Auth>,
        stop: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> Arc<Web> {
        Arc::new(Web {
            daemon,
            auth,
            stop,
            cache: Mutex::default(),
        })
    }

    pub(super) fn now(&self) -> Timestamp {
        self.daemon.shared.clock.now()
    }
}

/// One entry of the navigation bar.
#[derive(Clone)]
pub struct Nav {
    pub(super) href: &'static str,
    pub(super) label: &'static str,
    pub(super) active: bool,
}

/// What every page shows around its content.
#[derive(Clone)]
pub struct Chrome {
    pub(super) title: String,
    pub(super) nav: Vec<Nav>,
    pub(super) css: String,
    pub(super) js: String,
    /// The viewer's role, in words.
    pub(super) role: &'static str,
    /// A session is open (a logout button).
    pub(super) logged_in: bool,
    /// The viewer may act: action buttons are shown.
    pub(super) can_act: bool,
    /// Where to log in, coming back here.
    pub(super) login_href: String,
    /// The CSRF token of this page's forms.
    pub(super) csrf: String,
}

/// A request as the dashboard sees it: who asks, and the CSRF token of the
/// forms it will be shown (a new pre-login cookie is set when the browser
/// has none).
pub struct Ctx {
    pub(super) web: Arc<Web>,
    pub(super) role: Role,
    pub(super) logged_in: bool,
    pub(super) csrf: String,
    pub(super) set_binding: Option<String>,
    pub(super) path: String,
    pub(super) headers: HeaderMap,
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
    pub(super) fn chrome(&self, title: impl Into<String>, active: &str) -> Chrome {
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
    pub(super) fn page(&self, status: StatusCode, page: &impl Template) -> Response {
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
    pub(super) fn message(
        &self,
        status: StatusCode,
        title: &str,
        message: &str,
        back: &str,
    ) -> Response {
        let page = MessagePage {
            chrome: self.chrome(title, ""),
            message: message.to_string(),
            back: back.to_string(),
            login: status == StatusCode::UNAUTHORIZED,
        };
        self.page(status, &page)
    }

    /// Checks a form `POST` (see [`Auth::check_form`]); the refusal page.
    pub(super) fn check_form(&self, csrf: &str) -> Result<Role, Box<Response>> {
        self.web
            .auth
            .check_form(&self.headers, csrf)
            .map_err(|r| Box::new(self.refused(r)))
    }

    pub(super) fn refused(&self, r: Refusal) -> Response {
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
pub(super) fn render(page: &impl Template) -> String {
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
pub(super) fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    harden(h);
    r
}

pub(super) fn harden(h: &mut HeaderMap) {
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
pub(super) fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// A live fragment as [`live`] sends it.
pub(super) struct Fragment {
    /// The HTML.
    pub html: String,
    /// The thing shown has ended: this is the last fragment.
    pub ended: bool,
    /// The fragment changes with time alone (a running run's duration, a
    /// log being written): rendered again every second.
    pub ticking: bool,
}

impl Fragment {
    /// Nothing could be read: nothing is sent, and it is tried again next
    /// second.
    pub fn retry() -> Fragment {
        Fragment {
            html: String::new(),
            ended: false,
            ticking: true,
        }
    }

    /// The thing shown is gone: the stream ends.
    pub fn gone() -> Fragment {
        Fragment {
            html: String::new(),
            ended: true,
            ticking: false,
        }
    }
}

/// How long a fragment that neither ticks nor sees a commit goes without
/// being rendered again (what no commit reports: time-relative text, a
/// cluster's health).
const QUIET_RENDER: Duration = Duration::from_secs(30);

/// A page's live fragment as server-sent events: `render` is called (off
/// the runtime's workers) at first, then at most once a second: every
/// second while its last fragment ticks, else when the store has committed
/// a change to runs since (the active runs' count of commits), or after
/// [`QUIET_RENDER`]. Each new fragment is sent as an `html` event; when
/// `render` says the thing has ended, an `end` event closes the stream. It
/// also ends when the daemon stops. An idle dashboard so reads nothing.
pub(super) fn live(
    web: &Web,
    render: impl Fn() -> Fragment + Send + Sync + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    struct St<F> {
        render: Arc<F>,
        active: Arc<bosun_store::active::ActiveRuns>,
        last: Option<String>,
        stop: Option<tokio::sync::watch::Receiver<bool>>,
        ended: bool,
        first: bool,
        ticking: bool,
        /// The commits seen before the last render, and when it was.
        seen: u64,
        rendered: std::time::Instant,
    }
    let state = St {
        render: Arc::new(render),
        active: web.daemon.shared.active.clone(),
        last: None,
        stop: web.stop.clone(),
        ended: false,
        first: true,
        ticking: false,
        seen: 0,
        rendered: std::time::Instant::now(),
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
                let changes = st.active.changes();
                let due = st.ticking || changes != st.seen || st.rendered.elapsed() >= QUIET_RENDER;
                if !due {
                    continue;
                }
            }
            st.first = false;
            // Read before rendering: a commit after this is seen next time.
            st.seen = st.active.changes();
            st.rendered = std::time::Instant::now();
            let render = st.render.clone();
            let fragment = crate::runs::blocking(move || render()).await;
            st.ticking = fragment.ticking;
            // An event's data may not hold a carriage return.
            let body = fragment.html.replace('\r', "");
            if fragment.ended {
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
pub struct CsrfForm {
    #[serde(default)]
    pub(super) csrf: String,
}

#[derive(Template)]
#[template(path = "message.html")]
pub(super) struct MessagePage {
    chrome: Chrome,
    message: String,
    back: String,
    login: bool,
}

/// Where a form goes back to: a path of this site only.
pub fn local_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_string(),
        _ => "/".into(),
    }
}
