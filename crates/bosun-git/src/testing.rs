//! Test support (feature `test-support`, for dev-dependencies only): real
//! git remotes for the tests of the crates that follow repositories.
//!
//! - [`GitServer`]: bare repositories under a directory served over HTTP on
//!   127.0.0.1 by `git http-backend` (git's own smart-HTTP server, run as a
//!   CGI program for each request by a small `tiny_http` server here), with
//!   an optional required `Authorization` header, server errors on demand
//!   ([`GitServer::fail_next`]) and every request remembered
//!   ([`GitServer::requests`]);
//! - [`WorkRepo`]: a work repository that commits files and pushes them to
//!   those bare repositories (straight to their directories, not over HTTP).
//!
//! The CGI host is written here because no well-kept Rust crate runs a CGI
//! program; it passes what git-http-backend(1) reads (`GIT_PROJECT_ROOT`,
//! `PATH_INFO`, `QUERY_STRING`, `REQUEST_METHOD`, `CONTENT_TYPE`,
//! `CONTENT_LENGTH`, each request header as `HTTP_NAME`, so protocol v2's
//! `Git-Protocol` too) and turns its `Status:` line and headers into the
//! response. Failures of the helpers panic with what went wrong: they are
//! for tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Which requests a planned failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requests {
    /// Every request.
    All,
    /// Only fetches ([`Seen::fetch`]): listing refs still works, so a
    /// clone fails half-way.
    Fetches,
}

/// One request the server got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `POST`.
    pub method: String,
    /// The path (`/org/name.git/info/refs`).
    pub path: String,
    /// The query, without `?`.
    pub query: String,
    /// The `Authorization` header sent, if any.
    pub authorization: Option<String>,
    /// Whether it asked for objects: a POST to `git-upload-pack` whose
    /// body has `want` lines (small bodies are not compressed by git).
    pub fetch: bool,
    /// The status answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    authorization: Option<String>,
    /// (remaining, status, which).
    failure: Option<(usize, u16, Requests)>,
    seen: Vec<Seen>,
}

/// Bare repositories served over HTTP by `git http-backend` (see the
/// module's doc). Stopped when dropped.
pub struct GitServer {
    root: PathBuf,
    port: u16,
    server: Arc<tiny_http::Server>,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for GitServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitServer")
            .field("root", &self.root)
            .field("port", &self.port)
            .finish()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl GitServer {
    /// Serves the bare repositories under `root` (`root/org/name.git`) on
    /// a free port of 127.0.0.1.
    pub fn start(root: impl Into<PathBuf>) -> GitServer {
        let root = root.into();
        std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("create {}: {e}", root.display()));
        let server = Arc::new(
            tiny_http::Server::http("127.0.0.1:0")
                .unwrap_or_else(|e| panic!("listen on 127.0.0.1: {e}")),
        );
        let port = server.server_addr().to_ip().expect("an IP address").port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (server, state, stop, root) =
                (server.clone(), state.clone(), stop.clone(), root.clone());
            // Each request on a thread of its own, as a forge serves
            // clients side by side.
            std::thread::spawn(move || loop {
                match server.recv() {
                    Ok(request) => {
                        let (root, state) = (root.clone(), state.clone());
                        std::thread::spawn(move || handle(&root, &state, request));
                    }
                    Err(_) if stop.load(Ordering::SeqCst) => break,
                    Err(_) => continue,
                }
            })
        };
        GitServer {
            root,
            port,
            server,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// The URL of `repo` (`org/name`): `http://127.0.0.1:PORT/org/name.git`.
    pub fn url(&self, repo: &str) -> String {
        format!("http://127.0.0.1:{}/{repo}.git", self.port)
    }

    /// The directory of `repo` (`org/name`): `ROOT/org/name.git`.
    pub fn repo_dir(&self, repo: &str) -> PathBuf {
        self.root.join(format!("{repo}.git"))
    }

    /// Creates the bare repository `repo` (`org/name`), its `HEAD` naming
    /// `head_branch`; its directory.
    pub fn create(&self, repo: &str, head_branch: &str) -> PathBuf {
        let dir = self.repo_dir(repo);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        git(
            &dir,
            &[
                "init",
                "--bare",
                "--quiet",
                &format!("--initial-branch={head_branch}"),
            ],
        );
        dir
    }

    /// From now on, answers 401 to every request whose `Authorization`
    /// header is not exactly `value` (`None`: no header needed).
    pub fn require_authorization(&self, value: Option<&str>) {
        lock(&self.state).authorization = value.map(str::to_string);
    }

    /// Answers the next `count` requests of the kind `which` with `status`
    /// (500: "a server error for a while") instead of serving them.
    pub fn fail_next(&self, count: usize, status: u16, which: Requests) {
        lock(&self.state).failure = (count > 0).then_some((count, status, which));
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.state).seen.clone()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        lock(&self.state).seen.clear();
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves one request (see the module's doc).
fn handle(root: &Path, state: &Mutex<State>, mut request: tiny_http::Request) {
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let method = request.method().as_str().to_string();
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|h| {
            (
                h.field.as_str().as_str().to_string(),
                h.value.as_str().to_string(),
            )
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let authorization = header("Authorization");
    let mut body = Vec::new();
    let read = request.as_reader().read_to_end(&mut body);
    let fetch = method == "POST"
        && path.ends_with("/git-upload-pack")
        && header("Content-Encoding").is_none()
        && body.windows(5).any(|w| w == b"want ");
    let mut seen = Seen {
        method: method.clone(),
        path: path.to_string(),
        query: query.to_string(),
        authorization: authorization.clone(),
        fetch,
        status: 0,
    };

    // A planned failure, then the credentials, then git.
    let refusal = {
        let mut s = lock(state);
        let failed = match &mut s.failure {
            Some((remaining, status, which))
                if *which == Requests::All || (*which == Requests::Fetches && fetch) =>
            {
                let status = *status;
                *remaining -= 1;
                if *remaining == 0 {
                    s.failure = None;
                }
                Some(status)
            }
            _ => None,
        };
        failed.or_else(|| match &s.authorization {
            Some(want) if authorization.as_deref() != Some(want.as_str()) => Some(401),
            _ => None,
        })
    };
    let response = match (refusal, read) {
        (Some(status), _) => {
            let mut r = tiny_http::Response::from_string(format!("refused: {status}\n"))
                .with_status_code(status);
            if status == 401 {
                r.add_header(
                    tiny_http::Header::from_bytes("WWW-Authenticate", "Basic realm=\"bosun-test\"")
                        .expect("a header"),
                );
            }
            r
        }
        (None, Err(e)) => tiny_http::Response::from_string(format!("reading the body: {e}\n"))
            .with_status_code(400),
        (None, Ok(_)) => cgi(root, &method, path, query, &headers, &body),
    };
    seen.status = response.status_code().0;
    lock(state).seen.push(seen);
    let _ = request.respond(response);
}

/// Runs `git http-backend` for one request; its answer as a response.
fn cgi(
    root: &Path,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string());
    for (name, value) in headers {
        let upper = name.to_ascii_uppercase().replace('-', "_");
        match upper.as_str() {
            // CGI passes these as their own variables, and never the
            // credentials.
            "CONTENT_TYPE" => {
                cmd.env("CONTENT_TYPE", value);
            }
            "CONTENT_LENGTH" | "AUTHORIZATION" | "TRANSFER_ENCODING" => {}
            _ => {
                cmd.env(format!("HTTP_{upper}"), value);
            }
        }
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return tiny_http::Response::from_string(format!("git http-backend: {e}\n"))
                .with_status_code(500)
        }
    };
    // Written from another thread: git may answer before it has read all.
    let writer = child.stdin.take().map(|mut stdin| {
        let body = body.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&body);
        })
    });
    let out = child.wait_with_output();
    if let Some(w) = writer {
        let _ = w.join();
    }
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return tiny_http::Response::from_string(format!("git http-backend: {e}\n"))
                .with_status_code(500)
        }
    };
    let (head, content) = split_cgi(&out.stdout);
    let mut status = 200;
    let mut response_headers = Vec::new();
    for line in String::from_utf8_lossy(head).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("Status") {
            status = value
                .split(' ')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
        } else if let Ok(h) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response_headers.push(h);
        }
    }
    if !out.status.success() && status == 200 {
        status = 500;
    }
    let mut response = tiny_http::Response::from_data(content.to_vec()).with_status_code(status);
    for h in response_headers {
        response.add_header(h);
    }
    response
}

/// A CGI answer's header block and content (split at the first empty
/// line, `\r\n` or `\n`).
fn split_cgi(out: &[u8]) -> (&[u8], &[u8]) {
    for (i, w) in out.windows(2).enumerate() {
        if w == b"\n\n" {
            return (&out[..i], &out[i + 2..]);
        }
        if w == b"\n\r" && out.get(i + 2) == Some(&b'\n') {
            return (&out[..i], &out[i + 3..]);
        }
    }
    (out, &[])
}

/// Runs `git ARGS` in `dir` with no user or system configuration and a
/// fixed identity; its standard output, trimmed. Panics when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bosun test")
        .env("GIT_AUTHOR_EMAIL", "test@bosun.invalid")
        .env("GIT_COMMITTER_NAME", "bosun test")
        .env("GIT_COMMITTER_EMAIL", "test@bosun.invalid")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("git could not run ({e}): install it with `apt-get install -y git`")
        });
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A work repository whose commits a test pushes to a bare repository.
#[derive(Debug, Clone)]
pub struct WorkRepo {
    dir: PathBuf,
}

impl WorkRepo {
    /// A new work repository at `dir` on `branch`.
    pub fn init(dir: impl Into<PathBuf>, branch: &str) -> WorkRepo {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        git(
            &dir,
            &["init", "--quiet", &format!("--initial-branch={branch}")],
        );
        WorkRepo { dir }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `text` to `path` (parents created).
    pub fn write(&self, path: &str, text: &str) -> &Self {
        let p = self.dir.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create the parent");
        }
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        self
    }

    /// Makes `path` a symbolic link to `target` (as written).
    pub fn symlink(&self, path: &str, target: &str) -> &Self {
        let p = self.dir.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create the parent");
        }
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(target, &p)
            .unwrap_or_else(|e| panic!("symlink {}: {e}", p.display()));
        self
    }

    /// Removes `path`.
    pub fn remove(&self, path: &str) -> &Self {
        let p = self.dir.join(path);
        std::fs::remove_file(&p).unwrap_or_else(|e| panic!("remove {}: {e}", p.display()));
        self
    }

    /// Commits everything as it is; the new commit's SHA.
    pub fn commit(&self, message: &str) -> String {
        git(&self.dir, &["add", "--all"]);
        git(
            &self.dir,
            &["commit", "--quiet", "--allow-empty", "-m", message],
        );
        self.git(&["rev-parse", "HEAD"])
    }

    /// Runs `git ARGS` in it (see [`git`]).
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.dir, args)
    }

    /// Pushes `refspec` to the bare repository at `to` (`--force` when
    /// `force`).
    pub fn push(&self, to: &Path, refspec: &str, force: bool) {
        let to = to.display().to_string();
        let mut args = vec!["push", "--quiet"];
        if force {
            args.push("--force");
        }
        args.extend([to.as_str(), refspec]);
        git(&self.dir, &args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgi_answers_split_at_the_first_empty_line() {
        assert_eq!(
            split_cgi(b"Status: 404\r\nA: b\r\n\r\nbody\n\nmore"),
            (&b"Status: 404\r\nA: b\r"[..], &b"body\n\nmore"[..])
        );
        assert_eq!(split_cgi(b"A: b\n\nbody"), (&b"A: b"[..], &b"body"[..]));
        assert_eq!(split_cgi(b"no body"), (&b"no body"[..], &b""[..]));
    }
}
