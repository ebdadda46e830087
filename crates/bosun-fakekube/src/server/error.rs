//! Kubernetes `Status` error responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// An error answered as a Kubernetes `Status` object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status (name and kind of the object concerned).
    pub name: Option<String>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
        }
    }

    fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    pub fn pod_not_found(name: &str) -> Self {
        Self::new(404, "NotFound", format!("pods \"{name}\" not found")).named(name)
    }

    pub fn already_exists(name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("pods \"{name}\" already exists"),
        )
        .named(name)
    }

    pub fn conflict(name: &str, message: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on pods \"{name}\": {message}"),
        )
        .named(name)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn invalid(name: &str, message: impl Into<String>) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("Pod \"{name}\" is invalid: {}", message.into()),
        )
        .named(name)
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn unavailable() -> Self {
        Self::new(
            503,
            "ServiceUnavailable",
            "the fake API server is down (POST /control/down)",
        )
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(name) = &self.name {
            status["details"] = json!({"name": name, "kind": "pods"});
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (code, Json(self.status())).into_response()
    }
}
