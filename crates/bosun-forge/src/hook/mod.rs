//! Webhook intake: what a forge's webhook request is answered, and the
//! delivery it carries, decided over the request's method, headers and raw
//! body as plain functions (the daemon serves them at `POST /hook`).
//!
//! - [`secrets`]: Prow's HMAC secret file (levels `*`, `org`, `org/repo`,
//!   or one legacy token) and the signatures made with its tokens;
//! - [`intake`]: Prow hook's checks in its order, with its status codes and
//!   texts, for GitHub, Gitea and GitLab, and a cap on the body;
//! - [`events`]: an accepted body as the plain data bosun acts on.
//!
//! Answering follows recording: a [`Delivery`] is what is kept (forge,
//! event, delivery id, repository, raw body) before [`Reply::accepted`] is
//! sent, so that an event answered is an event not lost.
//!
//! Prow's metrics for this intake keep Prow's names: [`WEBHOOK_COUNTER`]
//! and [`WEBHOOK_RESPONSE_CODES`].

pub mod events;
pub mod forge;
pub mod intake;
pub mod secrets;

pub use events::{
    Comment, CommentAction, CommentKind, Event, EventError, PullRequest, Push, Repository,
    RepositoryAction,
};
pub use intake::{Delivery, Forge, Head, Intake, Reply};
pub use secrets::{Secrets, Token};

/// Prow's counter of accepted deliveries, by event: label `event_type`, the
/// event as its forge names it.
pub const WEBHOOK_COUNTER: &str = "prow_webhook_counter";

/// Prow's counter of webhook answers, by status: label `response_code`, the
/// status code's number (`200`, `403`).
pub const WEBHOOK_RESPONSE_CODES: &str = "prow_webhook_response_codes";
