//! `/login` and `/logout`: a token to a session, and back.

use std::time::Duration;

use askama::Template;
use axum::extract::Query;
use axum::http::{header, StatusCode};
use axum::response::Response;
use axum::Form;
use serde::Deserialize;

use super::page::{local_next, see_other, Chrome, CsrfForm, Ctx};
use crate::http::auth::{self, Role};

#[derive(Template)]
#[template(path = "login.html")]
pub(super) struct LoginPage {
    chrome: Chrome,
    next: String,
    error: String,
    reads_need_token: bool,
    actions_need_token: bool,
}

#[derive(Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

/// `GET /login`.
pub async fn page(ctx: Ctx, Query(q): Query<LoginQuery>) -> Response {
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
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
    next: Option<String>,
}

/// `POST /login`: a token to a session (a new id: nothing set before the
/// login carries over).
pub async fn login(ctx: Ctx, Form(form): Form<LoginForm>) -> Response {
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
    // The store's write (and its fsync) off the runtime's threads.
    let a = auth.clone();
    let id = match crate::runs::blocking(move || a.login(role)).await {
        Ok(id) => id,
        Err(e) => {
            tracing::error!(error = %e, "cannot keep a session");
            return ctx.message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Log in",
                "The session cannot be kept now: try again in a moment.",
                "/login",
            );
        }
    };
    let mut r = see_other(&next);
    r.headers_mut().append(
        header::SET_COOKIE,
        auth::set_cookie(auth::SESSION_COOKIE, &id, Some(auth::SESSION_TTL)),
    );
    r
}

/// `POST /logout`.
pub async fn logout(ctx: Ctx, Form(form): Form<CsrfForm>) -> Response {
    let auth = ctx.web.auth.clone();
    if let Err(r) = auth.check_login_form(&ctx.headers, &form.csrf) {
        return ctx.refused(r);
    }
    let (a, headers) = (auth.clone(), ctx.headers.clone());
    if let Err(e) = crate::runs::blocking(move || a.logout(&headers)).await {
        tracing::error!(error = %e, "cannot end a session");
        return ctx.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "Log out",
            "The session cannot be ended now: try again in a moment.",
            "/",
        );
    }
    let mut r = see_other("/");
    r.headers_mut().append(
        header::SET_COOKIE,
        auth::set_cookie(auth::SESSION_COOKIE, "", Some(Duration::ZERO)),
    );
    r
}
