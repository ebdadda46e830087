//! `/api/v1/runs/{id}/artifacts[/{*path}]`: the files a run left on this
//! machine, as [`crate::artifacts::open`] finds them (a path checked, then
//! walked without following a link), or on a replica without them, those
//! the store keeps ([`crate::artifacts::find`]): a directory as a JSON
//! listing, a regular file as its bytes, any refusal as an error
//! (`{"error": ...}`).
//!
//! Those files are written by the job, so no answer is ever `text/html`:
//! text and JSON are served as such, anything else as
//! `application/octet-stream` to download (`Content-Disposition:
//! attachment`), and every answer, errors included, carries `nosniff`, a
//! sandboxing `Content-Security-Policy` and `Cache-Control: no-store`
//! ([`harden`], a layer on these routes in the router).

use std::io;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tokio::io::AsyncReadExt;

use super::runs::find;
use crate::artifacts::{ArtifactError, ArtifactPath, Found};
use crate::daemon::Daemon;
use crate::http::error::ApiError;
use crate::runs::blocking;

/// The size of the chunks a file is streamed in.
const CHUNK: usize = 64 * 1024;

/// `GET /api/v1/runs/{id}/artifacts` (and `.../artifacts/`): the listing of
/// the run's artifacts directory.
pub async fn root(State(daemon): State<Arc<Daemon>>, Path(id): Path<String>) -> Response {
    answer(&daemon, id, String::new()).await
}

/// `GET /api/v1/runs/{id}/artifacts/{*path}`: a directory's listing or a
/// file's bytes.
pub async fn at_path(
    State(daemon): State<Arc<Daemon>>,
    Path((id, path)): Path<(String, String)>,
) -> Response {
    answer(&daemon, id, path).await
}

/// The headers every answer of these routes carries, whatever it is (an
/// extractor's rejection and a 405 included): the browser must never sniff a
/// type, run a script or keep a copy.
pub async fn harden(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// How a file is served, by its name's extension: text and JSON as such;
/// anything else (HTML, SVG, XML, scripts, archives, unknown) as bytes to
/// download, never rendered on bosun's origin. A name without an extension
/// is text (`nosniff` keeps a browser from taking it for anything else).
fn content_type(name: &str) -> (&'static str, bool) {
    const TEXT: (&str, bool) = ("text/plain; charset=utf-8", false);
    let Some((_, ext)) = name.rsplit_once('.') else {
        return TEXT;
    };
    match ext.to_ascii_lowercase().as_str() {
        "txt" | "log" => TEXT,
        "json" => ("application/json", false),
        _ => ("application/octet-stream", true),
    }
}

/// The answer to a request for `path` among the artifacts of run `id`: the
/// path is checked before the run is looked up.
async fn answer(daemon: &Daemon, id: String, path: String) -> Response {
    let path = match ArtifactPath::parse(&path) {
        Ok(path) => path,
        Err(e) => return refusal(e),
    };
    let run = match find(daemon, id).await {
        Ok(run) => run,
        Err(e) => return e.into_response(),
    };
    let clusters = daemon.shared.clusters();
    let wanted = path.clone();
    let store = daemon.shared_store();
    let found =
        blocking(move || crate::artifacts::find(store.as_deref(), &clusters, &run, &wanted)).await;
    let (kind, attachment) = content_type(path.file_name().unwrap_or_default());
    let attach = |mut response: Response| {
        if attachment {
            response.headers_mut().insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment"),
            );
        }
        response
    };
    match found {
        Err(e) => refusal(e),
        Ok(Found::Dir(listing)) => Json(listing).into_response(),
        Ok(Found::Stored(data)) => attach(([(header::CONTENT_TYPE, kind)], data).into_response()),
        Ok(Found::File(file, size)) => {
            // What the file holds now: a file still being written is not
            // followed past the size it had when opened.
            let file = tokio::fs::File::from_std(file).take(size);
            let stream = futures_util::stream::unfold(Some(file), |file| async move {
                let mut file = file?;
                let mut buf = vec![0u8; CHUNK];
                match file.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(Bytes::from(buf)), Some(file)))
                    }
                    Err(e) => Some((Err::<Bytes, io::Error>(e), None)),
                }
            });
            attach(([(header::CONTENT_TYPE, kind)], Body::from_stream(stream)).into_response())
        }
    }
}

/// A refusal as the API answers errors (`{"error": ...}`): a bad path 400,
/// what bosun may not read 403, a read that failed 500, anything else
/// missing 404.
fn refusal(e: ArtifactError) -> Response {
    let message = e.to_string();
    match e {
        ArtifactError::BadPath { .. } => ApiError::BadRequest(message).into_response(),
        ArtifactError::Denied { .. } => ApiError::Forbidden(message).into_response(),
        ArtifactError::Io { .. } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(serde_json::json!({ "error": message })),
        )
            .into_response(),
        ArtifactError::Kubernetes { .. }
        | ArtifactError::NotLocal { .. }
        | ArtifactError::NoArtifacts { .. }
        | ArtifactError::RootIsLink { .. }
        | ArtifactError::Missing { .. }
        | ArtifactError::Link { .. }
        | ArtifactError::Special { .. } => ApiError::NotFound(message).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_and_json_are_served_inline() {
        let text = ("text/plain; charset=utf-8", false);
        assert_eq!(content_type("build-log.txt"), text);
        assert_eq!(content_type("BUILD.LOG"), text);
        assert_eq!(content_type("stdout"), text);
        assert_eq!(content_type("finished.json"), ("application/json", false));
        for name in [
            "index.html",
            "a.HTM",
            "x.svg",
            "junit.xml",
            "app.js",
            "page.xhtml",
            "a.tar.gz",
            ".hidden",
            "trailing.",
        ] {
            assert_eq!(
                content_type(name),
                ("application/octet-stream", true),
                "{name}"
            );
        }
    }
}
