//! Who may read and who may act, for the dashboard and the API alike.
//!
//! - **Reads** are public unless a read token is configured
//!   (`--read-token-file`); then every page, every `GET` of the API and every
//!   live stream needs the read token or the API token, as a bearer header
//!   (`Authorization: Bearer TOKEN`) or as the session cookie the login form
//!   sets. `/healthz`, `/readyz`, `/metrics`, the login page, the dashboard's
//!   assets and the dispatcher's routes (`/api/v1/dispatch...`: its lookups
//!   never need a token, its re-plans and overrides check the API token
//!   themselves) never need one ([`read_guard`]).
//! - **Actions** (trigger, abort, rerun, pause, resume, re-plan, overrides,
//!   reload) need the API token when one is configured: the API's routes
//!   take it as a bearer header; the dashboard's forms take it as a bearer
//!   header too, or as the session of a login with the API token.
//! - **Sessions**: `POST /login` with a token makes a session (random 256-bit
//!   id, 12 hours) in an `HttpOnly; SameSite=Strict` cookie; `POST /logout`
//!   ends it. Sessions are kept in the store, by the SHA-256 of their id
//!   (never the id itself), at most [`MAX_SESSIONS`] of them (the oldest go
//!   first): they survive a restart, and every replica of `bosun serve` on
//!   one store knows them. A session the store cannot read is no session
//!   (the request is anonymous, and a warning logged).
//! - **CSRF**: every form carries a token bound to the browser's cookie (the
//!   session's, or before a login a random `bosun_csrf` cookie the pages
//!   set): an HMAC-SHA256 of the cookie under a key made once and kept in
//!   the store ([`CSRF_KEY`]), so a form shown by one replica, or before a
//!   restart, is accepted by another, or after it (a store that cannot keep
//!   it leaves a key of this process's own, and a warning). A form
//!   `POST` is refused unless that token matches, its `Origin` (when sent)
//!   is the dashboard's own and its `Sec-Fetch-Site` (when sent) is
//!   `same-origin` ([`Auth::check_form`]). A request with a valid bearer
//!   header is not a browser's form and needs none of this.
//!
//! Every token comparison is constant-time over SHA-256 digests (the
//! lengths of the tokens do not show either).
//!
//! The router (`http`) puts [`read_guard`] over every route and checks the
//! API's mutating routes with [`bearer`] and [`same`]; the dashboard
//! (`http::web`) asks [`Auth`] for roles, sessions and its forms' checks.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use bosun_store::{session_id_hash, Session, SharedStore, StoreError};

/// The session cookie.
pub const SESSION_COOKIE: &str = "bosun_session";
/// The cookie a form's CSRF token is bound to before a login.
pub const CSRF_COOKIE: &str = "bosun_csrf";
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// At most this many sessions are kept (the oldest go first).
pub const MAX_SESSIONS: usize = 10_000;
/// The name of the CSRF key among the store's shared secrets.
pub const CSRF_KEY: &str = "dashboard-csrf-key";

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// No token.
    Anonymous,
    /// The read token.
    Reader,
    /// The API token.
    Operator,
}

impl Role {
    /// How the dashboard names it (and the store keeps a session's).
    pub fn word(self) -> &'static str {
        match self {
            Role::Anonymous => "anonymous",
            Role::Reader => "reader",
            Role::Operator => "operator",
        }
    }

    /// The role [`Role::word`] names (none for any other word).
    pub fn from_word(word: &str) -> Option<Role> {
        [Role::Anonymous, Role::Reader, Role::Operator]
            .into_iter()
            .find(|r| r.word() == word)
    }
}

/// The tokens, the CSRF key and the store that keeps the sessions.
pub struct Auth {
    api_token: Option<String>,
    read_token: Option<String>,
    /// Keys the CSRF tokens.
    key: [u8; 32],
    /// Keeps the sessions.
    store: SharedStore,
}

/// Why a form `POST` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Cross-site: a foreign `Origin` or `Sec-Fetch-Site`, or no valid CSRF
    /// token (403).
    CrossSite(&'static str),
    /// The API token is needed (401).
    NeedsToken,
}

impl Auth {
    /// `api_token` guards actions, `read_token` (when set) reads; `store`
    /// keeps the sessions and the CSRF key (made now if it has none).
    pub fn new(
        api_token: Option<String>,
        read_token: Option<String>,
        store: SharedStore,
    ) -> Arc<Auth> {
        let key = match store.shared_secret(CSRF_KEY, random()) {
            Ok(key) => key,
            Err(e) => {
                tracing::warn!(error = %e, "the store cannot keep the CSRF key: forms shown before a restart, or by another replica, will be refused");
                random()
            }
        };
        Arc::new(Auth {
            api_token,
            read_token,
            key,
            store,
        })
    }

    /// Whether reads need a token.
    pub fn reads_need_token(&self) -> bool {
        self.read_token.is_some()
    }

    /// Whether actions need a token.
    pub fn actions_need_token(&self) -> bool {
        self.api_token.is_some()
    }

    /// The role a token gives.
    pub fn role_of_token(&self, given: &str) -> Role {
        if self.api_token.as_deref().is_some_and(|t| same(given, t)) {
            Role::Operator
        } else if self.read_token.as_deref().is_some_and(|t| same(given, t)) {
            Role::Reader
        } else {
            Role::Anonymous
        }
    }

    /// The role of a request: its bearer token's, else its session's.
    pub fn role(&self, headers: &HeaderMap) -> Role {
        self.bearer_role(headers)
            .max(self.session_role(headers).unwrap_or(Role::Anonymous))
    }

    /// The role of the request's bearer token (anonymous without one).
    pub fn bearer_role(&self, headers: &HeaderMap) -> Role {
        bearer(headers).map_or(Role::Anonymous, |t| self.role_of_token(t))
    }

    /// The role of the request's session, if it has a live one.
    pub fn session_role(&self, headers: &HeaderMap) -> Option<Role> {
        let id = cookie(headers, SESSION_COOKIE)?;
        match self
            .store
            .session(&session_id_hash(id), jiff::Timestamp::now())
        {
            Ok(s) => Role::from_word(&s?.role),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a session; the request is anonymous");
                None
            }
        }
    }

    /// Whether `role` may read.
    pub fn may_read(&self, role: Role) -> bool {
        self.read_token.is_none() || role >= Role::Reader
    }

    /// Whether `role` may act.
    pub fn may_act(&self, role: Role) -> bool {
        self.api_token.is_none() || role == Role::Operator
    }

    /// Makes a session for `role`, kept in the store (the expired ones and,
    /// beyond [`MAX_SESSIONS`], the oldest go first); its id, for the cookie.
    pub fn login(&self, role: Role) -> Result<String, StoreError> {
        let id = hex(&random());
        let now = jiff::Timestamp::now();
        let expires_at = now
            .checked_add(SESSION_TTL)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.store.prune_sessions(now, MAX_SESSIONS - 1)?;
        self.store.put_session(&Session {
            id_hash: session_id_hash(&id),
            role: role.word().to_string(),
            expires_at,
        })?;
        Ok(id)
    }

    /// Ends the request's session, if it has one.
    pub fn logout(&self, headers: &HeaderMap) -> Result<(), StoreError> {
        if let Some(id) = cookie(headers, SESSION_COOKIE) {
            self.store.delete_session(&session_id_hash(id))?;
        }
        Ok(())
    }

    /// The CSRF token of forms shown to the holder of cookie value `binding`.
    pub fn csrf_token(&self, binding: &str) -> String {
        hex(&hmac_sha256(
            &self.key,
            format!("csrf:{binding}").as_bytes(),
        ))
    }

    /// Checks a form `POST` before it acts: not cross-site (`Origin`,
    /// `Sec-Fetch-Site`, the CSRF token `csrf` bound to the request's
    /// cookie), then allowed (the API token, when one is configured). A
    /// valid bearer API token needs no CSRF token: browsers never send one
    /// by themselves.
    pub fn check_form(&self, headers: &HeaderMap, csrf: &str) -> Result<Role, Refusal> {
        if self.api_token.is_some() && self.bearer_role(headers) == Role::Operator {
            return Ok(Role::Operator);
        }
        same_origin(headers)?;
        let binding = binding(headers).ok_or(Refusal::CrossSite("no CSRF cookie"))?;
        let expected = self.csrf_token(binding);
        if !same(csrf, &expected) {
            return Err(Refusal::CrossSite("a missing or wrong CSRF token"));
        }
        let role = self.role(headers);
        if self.may_act(role) {
            Ok(role)
        } else {
            Err(Refusal::NeedsToken)
        }
    }

    /// Checks the login form's `POST` (no role needed): not cross-site.
    pub fn check_login_form(&self, headers: &HeaderMap, csrf: &str) -> Result<(), Refusal> {
        same_origin(headers)?;
        let binding = binding(headers).ok_or(Refusal::CrossSite("no CSRF cookie"))?;
        if same(csrf, &self.csrf_token(binding)) {
            Ok(())
        } else {
            Err(Refusal::CrossSite("a missing or wrong CSRF token"))
        }
    }
}

/// The request's `Authorization: Bearer` token.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// The value of cookie `name` in the request.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// The cookie a form's CSRF token is bound to: the session's, else the
/// pre-login one.
pub fn binding(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, SESSION_COOKIE).or_else(|| cookie(headers, CSRF_COOKIE))
}

/// A new pre-login CSRF cookie's value.
pub fn new_binding() -> String {
    hex(&random())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, for the whole site.
pub fn set_cookie(name: &str, value: &str, max_age: Option<Duration>) -> HeaderValue {
    let age = max_age.map_or(String::new(), |d| format!("; Max-Age={}", d.as_secs()));
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict{age}"
    ))
    .expect("a cookie of hex digits")
}

/// `Sec-Fetch-Site`, when sent, is `same-origin` (or `none`: typed by the
/// user); `Origin`, when sent, is this server's (its host and port are the
/// request's `Host`).
fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or_default();
        if site != "same-origin" && site != "none" {
            return Err(Refusal::CrossSite("a cross-site request (Sec-Fetch-Site)"));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .ok_or(Refusal::CrossSite("a foreign Origin"))?;
        let hosts = [header::HOST.as_str(), "x-forwarded-host"];
        let ours = hosts.iter().any(|h| {
            headers
                .get(*h)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|host| host.eq_ignore_ascii_case(authority))
        });
        if !ours {
            return Err(Refusal::CrossSite("a foreign Origin"));
        }
    }
    Ok(())
}

/// Constant-time equality of two tokens (their digests: the time does not
/// depend on where they differ, nor on their lengths).
pub fn same(a: &str, b: &str) -> bool {
    let (da, db) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    bool::from(da.as_slice().ct_eq(db.as_slice()))
}

/// HMAC-SHA256 (RFC 2104) with a 32-byte key.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// 32 random bytes from the kernel.
fn random() -> [u8; 32] {
    let mut out = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .expect("/dev/urandom");
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Paths every client may read with no token.
fn always_public(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/metrics" | "/login" | "/hook"
    ) || path.starts_with("/assets/")
        || path == "/api/v1/dispatch"
        || path.starts_with("/api/v1/dispatch/")
}

/// The read check, a layer over every route: with a read token configured,
/// a request for anything but the paths every client may read (module doc)
/// needs the read token or the API token (bearer or session); without, a
/// page request goes to the login page and anything else answers 401.
pub async fn read_guard(State(auth): State<Arc<Auth>>, request: Request, next: Next) -> Response {
    if !auth.reads_need_token() || always_public(request.uri().path()) {
        return next.run(request).await;
    }
    if auth.may_read(auth.role(request.headers())) {
        return next.run(request).await;
    }
    let path = request.uri().path();
    let page = request.method() == axum::http::Method::GET
        && !path.starts_with("/api/")
        && !path.starts_with("/live/");
    if page {
        let next_page = request
            .uri()
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let to = format!("/login?next={}", super::url::query_escape(&next_page));
        return (
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, to),
                (header::CACHE_CONTROL, "no-store".into()),
            ],
        )
            .into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(serde_json::json!({"error": "a valid read token is required"})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    /// The construction against Python's `hmac.new(b"\x0b" * 32, b"Hi
    /// There", hashlib.sha256)`.
    #[test]
    fn hmac_is_rfc_2104() {
        let key = [0x0bu8; 32];
        assert_eq!(
            hex(&hmac_sha256(&key, b"Hi There")),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }

    /// Two daemons on one store (replicas, or one before and after a
    /// restart) share the CSRF key and the sessions.
    #[test]
    fn auths_on_one_store_share_sessions_and_the_csrf_key() {
        let store: SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
        let first = Auth::new(Some("act".into()), None, store.clone());
        let second = Auth::new(Some("act".into()), None, store.clone());
        assert_eq!(first.csrf_token("cookie"), second.csrf_token("cookie"));
        let other = Auth::new(
            Some("act".into()),
            None,
            Arc::new(bosun_store::memory::MemoryStore::new()),
        );
        assert_ne!(first.csrf_token("cookie"), other.csrf_token("cookie"));
        let id = first.login(Role::Operator).unwrap();
        let h = headers(&[
            ("cookie", &format!("{SESSION_COOKIE}={id}")),
            ("host", "127.0.0.1:8080"),
        ]);
        assert_eq!(second.session_role(&h), Some(Role::Operator));
        assert_eq!(
            second.check_form(&h, &first.csrf_token(&id)),
            Ok(Role::Operator)
        );
        assert_eq!(other.session_role(&h), None);
        second.logout(&h).unwrap();
        assert_eq!(first.session_role(&h), None);
    }

    /// A login keeps at most [`MAX_SESSIONS`]: the oldest goes first.
    #[test]
    fn a_login_beyond_the_bound_ends_the_oldest_session() {
        let store: SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
        let auth = Auth::new(None, None, store.clone());
        let now = jiff::Timestamp::now();
        for i in 0..MAX_SESSIONS {
            store
                .put_session(&Session {
                    id_hash: session_id_hash(&format!("s{i}")),
                    role: "reader".into(),
                    expires_at: now + jiff::SignedDuration::from_secs(3600 + i as i64),
                })
                .unwrap();
        }
        let live = |id: &str| store.session(&session_id_hash(id), now).unwrap().is_some();
        let id = auth.login(Role::Reader).unwrap();
        assert!(live(&id));
        assert!(!live("s0"), "the oldest went");
        assert!(live("s1"));
        assert!(live(&format!("s{}", MAX_SESSIONS - 1)));
    }

    /// A session whose role the store holds in another word is none.
    #[test]
    fn a_stored_role_of_another_word_is_no_session() {
        let store: SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
        let auth = Auth::new(None, Some("look".into()), store.clone());
        store
            .put_session(&Session {
                id_hash: session_id_hash("x"),
                role: "admin".into(),
                expires_at: jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60),
            })
            .unwrap();
        let h = headers(&[("cookie", &format!("{SESSION_COOKIE}=x"))]);
        assert_eq!(auth.session_role(&h), None);
        assert_eq!(Role::from_word("operator"), Some(Role::Operator));
    }

    #[test]
    fn tokens_roles_and_forms() {
        let store: SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
        let auth = Auth::new(Some("act".into()), Some("look".into()), store.clone());
        assert_eq!(auth.role_of_token("act"), Role::Operator);
        assert_eq!(auth.role_of_token("look"), Role::Reader);
        assert_eq!(auth.role_of_token("actx"), Role::Anonymous);
        assert_eq!(auth.role_of_token(""), Role::Anonymous);
        assert!(!auth.may_read(Role::Anonymous));
        assert!(auth.may_read(Role::Reader));
        assert!(!auth.may_act(Role::Reader));
        // A session made by a login.
        let id = auth.login(Role::Operator).unwrap();
        // Kept by its hash, never its id.
        let kept = store
            .session(&session_id_hash(&id), jiff::Timestamp::now())
            .unwrap()
            .expect("kept");
        assert_eq!(kept.role, "operator");
        assert_ne!(kept.id_hash, id);
        let cookie = format!("{SESSION_COOKIE}={id}");
        let h = headers(&[("cookie", &cookie), ("host", "127.0.0.1:8080")]);
        assert_eq!(auth.role(&h), Role::Operator);
        let csrf = auth.csrf_token(&id);
        assert_eq!(auth.check_form(&h, &csrf), Ok(Role::Operator));
        assert!(matches!(
            auth.check_form(&h, "nope"),
            Err(Refusal::CrossSite(_))
        ));
        let foreign = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ]);
        assert!(matches!(
            auth.check_form(&foreign, &csrf),
            Err(Refusal::CrossSite(_))
        ));
        let ours = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(auth.check_form(&ours, &csrf), Ok(Role::Operator));
        let cross = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(auth.check_form(&cross, &csrf).is_err());
        // Logged out: the cookie means nothing.
        auth.logout(&h).unwrap();
        assert_eq!(auth.role(&h), Role::Anonymous);
        assert_eq!(auth.check_form(&h, &csrf), Err(Refusal::NeedsToken));
        // A bearer API token needs no CSRF token.
        let b = headers(&[("authorization", "Bearer act")]);
        assert_eq!(auth.check_form(&b, ""), Ok(Role::Operator));
        let wrong = headers(&[("authorization", "Bearer acts")]);
        assert!(auth.check_form(&wrong, "").is_err());
    }
}
