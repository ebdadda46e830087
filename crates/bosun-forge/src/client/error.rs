//! What a forge call that did not succeed says: the forge's status and
//! message, whether trying again can help, and when (GitHub's rate-limit
//! headers, `Retry-After`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ureq::http::HeaderMap;

/// Whether a failed call may succeed when tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// It will fail again: the thing is not there (404) or the forge
    /// refuses it (422: "No commit found for SHA", the 1,000 statuses a
    /// commit and context may have, a bad request).
    Permanent,
    /// Try again (after [`ForgeError::retry_after`] when set): the forge
    /// was not reached, failed (5xx), limited the rate (403, 429) or
    /// refused the credentials (401, 403: a token may have been rotated).
    Retry,
}

/// A forge call that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ForgeError {
    /// The HTTP status; `None` when there was no answer.
    pub status: Option<u16>,
    /// The forge's answer (its body's `message`, else the body), or why
    /// there was none.
    pub message: String,
    /// How long to wait before trying again, when the forge said
    /// (`Retry-After`, or `X-RateLimit-Reset` with no requests remaining;
    /// a minute for a secondary rate limit that says neither, as GitHub
    /// documents).
    pub retry_after: Option<Duration>,
    /// Whether to try again.
    pub kind: ErrorKind,
}

/// The message GitHub gives when a commit and context have 1,000 statuses.
const MAX_STATUSES: &str = "This SHA and context has reached the maximum number of statuses";

impl ForgeError {
    /// A call that got no answer (connection refused, timeout, TLS).
    pub fn unreachable(message: impl Into<String>) -> ForgeError {
        ForgeError {
            status: None,
            message: message.into(),
            retry_after: None,
            kind: ErrorKind::Retry,
        }
    }

    /// A call whose answer bosun could not use (a body that is not the JSON
    /// expected, a redirect elsewhere): permanent.
    pub fn unexpected(status: Option<u16>, message: impl Into<String>) -> ForgeError {
        ForgeError {
            status,
            message: message.into(),
            retry_after: None,
            kind: ErrorKind::Permanent,
        }
    }

    /// The error an answer with `status` (not a success) stands for.
    pub(crate) fn from_answer(
        status: u16,
        headers: &HeaderMap,
        body: &str,
        now: SystemTime,
    ) -> ForgeError {
        let message = message_of(status, body);
        let limited = rate_limit_reset(headers, now);
        let secondary = message
            .to_ascii_lowercase()
            .contains("secondary rate limit");
        let retry_after = retry_after_header(headers, now)
            .or(limited)
            .or(((status == 403 && secondary) || status == 429).then_some(Duration::from_secs(60)));
        let kind = match status {
            401 | 403 | 429 | 500..=599 => ErrorKind::Retry,
            _ => ErrorKind::Permanent,
        };
        ForgeError {
            status: Some(status),
            message,
            retry_after,
            kind,
        }
    }

    /// Whether trying again may help.
    pub fn is_retry(&self) -> bool {
        self.kind == ErrorKind::Retry
    }

    /// Whether a failed status report is to be dropped rather than retried,
    /// as Prow's crier drops it: the commit and context have reached their
    /// 1,000 statuses, or the commit is gone (a force-push: "Not Found",
    /// "No commit found for SHA").
    pub fn status_is_unreportable(&self) -> bool {
        self.message.contains(MAX_STATUSES)
            || self.status == Some(404)
            || self.message == "Not Found"
            || self.message.starts_with("No commit found for SHA:")
    }

    fn describe(&self) -> String {
        match self.status {
            Some(s) => format!("the forge answered {s}: {}", self.message),
            None => format!("the forge could not be reached: {}", self.message),
        }
    }
}

/// The body's `message` (GitHub's and Gitea's errors), else the body cut to
/// 500 characters, else the status.
fn message_of(status: u16, body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(m) = v.get("message").and_then(|m| m.as_str()) {
            return m.to_string();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return format!("HTTP {status}");
    }
    let mut s: String = body.chars().take(500).collect();
    if s.len() < body.len() {
        s.push('…');
    }
    s
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// `Retry-After`: seconds, or an HTTP date.
fn retry_after_header(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let v = header(headers, "retry-after")?;
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = jiff::fmt::rfc2822::parse(v).ok()?.timestamp();
    Some(until(SystemTime::from(at), now))
}

/// The wait until `X-RateLimit-Reset` (plus a second, as Prow waits) when
/// `X-RateLimit-Remaining` is 0.
pub(crate) fn rate_limit_reset(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if header(headers, "x-ratelimit-remaining")? != "0" {
        return None;
    }
    let reset = header(headers, "x-ratelimit-reset")?.parse::<u64>().ok()?;
    Some(until(UNIX_EPOCH + Duration::from_secs(reset), now) + Duration::from_secs(1))
}

fn until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ureq::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn status_error(message: &str) -> ForgeError {
        ForgeError::from_answer(
            422,
            &HeaderMap::new(),
            &serde_json::json!({ "message": message }).to_string(),
            SystemTime::now(),
        )
    }

    #[test]
    fn maximum_sha_error_gets_swallowed() {
        // Prow: TestReport "Maximum sha error gets swallowed"
        let e = status_error(MAX_STATUSES);
        assert!(e.status_is_unreportable() && !e.is_retry());
    }

    #[test]
    fn error_from_user_side_gets_swallowed() {
        // Prow: TestReport "Error from user side gets swallowed"
        let body = r#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest/reference/repos#create-a-commit-status"}"#;
        let e = ForgeError::from_answer(404, &HeaderMap::new(), body, SystemTime::now());
        assert_eq!(e.message, "Not Found");
        assert!(e.status_is_unreportable() && !e.is_retry());
    }

    #[test]
    fn error_from_user_side_gets_swallowed2() {
        // Prow: TestReport "Error from user side gets swallowed2"
        let e = status_error("No commit found for SHA: 9d04799d1a22e9e604c50f6bbbec067aaccc1b32");
        assert_eq!(e.kind, ErrorKind::Permanent);
        assert!(e.status_is_unreportable());
    }

    #[test]
    fn other_error_get_returned() {
        // Prow: TestReport "Other error get returned"
        let e = ForgeError::from_answer(
            500,
            &HeaderMap::new(),
            "something went wrong :(",
            SystemTime::now(),
        );
        assert!(!e.status_is_unreportable() && e.is_retry());
        assert_eq!(
            e.to_string(),
            "the forge answered 500: something went wrong :("
        );
        let e = ForgeError::unreachable("connection refused");
        assert!(!e.status_is_unreportable() && e.is_retry());
    }

    #[test]
    fn rate_limits_say_when_to_retry() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        // Primary: no requests left until the reset (and a second).
        let h = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1030"),
        ]);
        let e = ForgeError::from_answer(
            403,
            &h,
            r#"{"message":"API rate limit exceeded for user ID 1."}"#,
            now,
        );
        assert_eq!(
            (e.kind, e.retry_after),
            (ErrorKind::Retry, Some(Duration::from_secs(31)))
        );
        // Retry-After wins, in seconds or as a date.
        let h = headers(&[
            ("retry-after", "7"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1030"),
        ]);
        assert_eq!(
            ForgeError::from_answer(429, &h, "", now).retry_after,
            Some(Duration::from_secs(7))
        );
        let h = headers(&[("retry-after", "Thu, 01 Jan 1970 00:17:00 GMT")]);
        assert_eq!(
            ForgeError::from_answer(503, &h, "", now).retry_after,
            Some(Duration::from_secs(20))
        );
        // Secondary with neither header: at least a minute.
        let body = r#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}"#;
        let e = ForgeError::from_answer(403, &HeaderMap::new(), body, now);
        assert_eq!(
            (e.kind, e.retry_after),
            (ErrorKind::Retry, Some(Duration::from_secs(60)))
        );
        assert_eq!(
            ForgeError::from_answer(429, &HeaderMap::new(), "", now).retry_after,
            Some(Duration::from_secs(60))
        );
        // A 403 that is no rate limit is retried (a rotated token), without a wait.
        let e = ForgeError::from_answer(
            403,
            &headers(&[("x-ratelimit-remaining", "4000")]),
            r#"{"message":"Resource not accessible by integration"}"#,
            now,
        );
        assert_eq!((e.kind, e.retry_after), (ErrorKind::Retry, None));
        assert_eq!(
            ForgeError::from_answer(401, &HeaderMap::new(), "", now).message,
            "HTTP 401"
        );
        assert_eq!(
            ForgeError::from_answer(400, &HeaderMap::new(), "", now).kind,
            ErrorKind::Permanent
        );
    }
}
