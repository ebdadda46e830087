//! The API's errors: each becomes a status and a JSON body `{"error": ...}`
//! (the JSON API's handlers answer them, and the router's token check its
//! 401).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bosun_store::StoreError;

use crate::runs::{Candidate, CreateError};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 401: a valid bearer token is required.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// 403: not allowed (a trusted cluster's rules).
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such thing.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request conflicts with the state of things.
    #[error("{0}")]
    Conflict(String),
    /// 409: several jobs have that name.
    #[error("{message}")]
    Ambiguous {
        /// What to say.
        message: String,
        /// The jobs it could mean.
        candidates: Vec<Candidate>,
    },
    /// 422: understood, but it cannot be done.
    #[error("{0}")]
    Unprocessable(String),
    /// 503 with `Retry-After`, 500 or 409, as the store says.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<CreateError> for ApiError {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::NotFound(m) => ApiError::NotFound(m),
            CreateError::Ambiguous {
                message,
                candidates,
            } => ApiError::Ambiguous {
                message,
                candidates,
            },
            CreateError::Unrunnable(m) => ApiError::Unprocessable(m),
            CreateError::Forbidden(m) => ApiError::Forbidden(m),
            CreateError::Exists(m) => ApiError::Conflict(m),
            CreateError::Store(e) => ApiError::Store(e),
        }
    }
}

/// An error answer: `status` with `{"error": message}`.
fn answer(status: StatusCode, message: String) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(m) => answer(StatusCode::BAD_REQUEST, m),
            ApiError::Unauthorized => answer(StatusCode::UNAUTHORIZED, self.to_string()),
            ApiError::Forbidden(m) => answer(StatusCode::FORBIDDEN, m),
            ApiError::NotFound(m) => answer(StatusCode::NOT_FOUND, m),
            ApiError::Conflict(m) => answer(StatusCode::CONFLICT, m),
            ApiError::Ambiguous {
                message,
                candidates,
            } => (
                StatusCode::CONFLICT,
                Json(serde_json::json!({ "error": message, "candidates": candidates })),
            )
                .into_response(),
            ApiError::Unprocessable(m) => answer(StatusCode::UNPROCESSABLE_ENTITY, m),
            ApiError::Store(e) => match e {
                StoreError::NotFound(m) => {
                    answer(StatusCode::NOT_FOUND, format!("run {m} not found"))
                }
                StoreError::InvalidTransition { .. } => answer(StatusCode::CONFLICT, e.to_string()),
                StoreError::Unavailable(m) => {
                    let mut r = answer(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("the store cannot commit: {m}"),
                    );
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
                    r
                }
                StoreError::Fenced(m) => {
                    let mut r = answer(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("this replica's leadership ended while it wrote: {m}"),
                    );
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
                    r
                }
                StoreError::Invalid(m) => answer(StatusCode::INTERNAL_SERVER_ERROR, m),
                // Only prepared fires are refused as stale; no request makes one.
                StoreError::Stale(_) => answer(StatusCode::CONFLICT, e.to_string()),
                // Only a document's compare-and-set conflicts; no request writes one.
                StoreError::Conflict(_) => answer(StatusCode::CONFLICT, e.to_string()),
            },
        }
    }
}

/// What a handler answers.
pub type ApiResult<T = Response> = Result<T, ApiError>;
