//! The dashboard's stylesheet and script, embedded in the binary and served
//! at `/assets/NAME?v=HASH` (the hash of their content: a new build is
//! fetched anew, an unchanged one is cached).

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// Every asset: name, content type, bytes.
const ASSETS: [(&str, &str, &str); 2] = [
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../../assets/style.css"),
    ),
    (
        "live.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../assets/live.js"),
    ),
];

/// The content hash of an asset (the first 12 hex digits of its SHA-256).
fn version(name: &str) -> &'static str {
    static VERSIONS: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let versions = VERSIONS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|(n, _, body)| {
                let d = Sha256::digest(body.as_bytes());
                let hex: String = d.iter().take(6).map(|b| format!("{b:02x}")).collect();
                (*n, hex)
            })
            .collect()
    });
    versions
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, v)| v.as_str())
}

/// The URL of asset `name`.
pub fn url(name: &str) -> String {
    format!("/assets/{name}?v={}", version(name))
}

/// `GET /assets/{name}`.
pub async fn serve(Path(name): Path<String>) -> Response {
    let Some((_, kind, body)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut r = (*body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=86400"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}
