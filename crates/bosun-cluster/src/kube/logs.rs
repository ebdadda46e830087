//! Pod logs: each pod's log is copied, as it is written, into the run's log
//! file `DIR/NAME.log` (the run log endpoint streams that file), once per
//! pod, from when its containers start until the pod ends: one follow of
//! the log per pod, and no other request when nothing goes wrong.
//!
//! A log stream can end before the container does (the API server or the
//! kubelet drops the connection); through the API server that looks like
//! the container's end. So the container's end comes from the watch: a
//! stream that ends after the watch has shown the container ended holds the
//! whole log (a kubelet ends a follow only after the container's end); one
//! that ends before is read once more to the log's end after the watch
//! shows the end, or followed again if the container still runs. The copy
//! asks for timestamps and resumes from the last line it wrote (`sinceTime`,
//! whole seconds, skipping the lines it already has), so no line is lost or
//! written twice. A pod's log counts as copied only once its container has
//! ended and the copy has read the log to its end; a copy that fails keeps
//! trying (with backoff) while the pod exists, and the sinker never deletes
//! a pod whose log is not copied.
//!
//! It knows nothing of runs' states: the watch hands it the pods it sees and
//! keeps the view it reads containers' ends from; the sinker asks it which
//! logs are complete.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use smallvec::SmallVec;

use super::client::{ApiError, Connection, StreamSlot};
use super::watch::{container_ended, ContainerEnd, PodCache};

/// How long, after a log stream ends before the watch shows its
/// container's end, the copy waits for the watch to tell whether the
/// container ended (then the log is read to its end) or still runs (the
/// stream was cut: it is followed again). A kubelet reports a container's
/// end a second or two after it.
const END_WAIT: Duration = Duration::from_secs(3);

/// The container whose log is the run's: Prow's `test` container, else the
/// first one.
pub(crate) fn log_container(pod: &Pod) -> Option<String> {
    let containers = &pod.spec.as_ref()?.containers;
    containers
        .iter()
        .find(|c| c.name == super::pod::TEST_CONTAINER_NAME)
        .or(containers.first())
        .map(|c| c.name.clone())
}

/// Where a copy stands: the last line written, to resume after it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Resume {
    /// The timestamp of the last line written.
    last: Option<jiff::Timestamp>,
    /// How many lines with exactly that timestamp were written.
    at_last: usize,
    /// In the current read: lines stamped `last` still to skip (written
    /// by an earlier read).
    skip: usize,
}

impl Resume {
    /// Starts a read: its `sinceTime` is the last line's second (the API
    /// takes whole seconds, and kube-rs would round it), so nothing after
    /// that line is missed; what comes again is skipped.
    fn begin(&mut self) -> Option<jiff::Timestamp> {
        self.skip = self.at_last;
        self.last.map(|t| {
            jiff::Timestamp::from_second(t.as_second()).expect("a second of a valid timestamp")
        })
    }

    /// Takes one line as the API sends it with `timestamps=true`
    /// (`RFC3339NANO TEXT`): the text to write, or `None` when an earlier
    /// read wrote it (or it is not stamped, which the API never sends).
    fn take<'a>(&mut self, line: &'a [u8]) -> Option<&'a [u8]> {
        let space = line.iter().position(|b| *b == b' ')?;
        let t: jiff::Timestamp = std::str::from_utf8(&line[..space]).ok()?.parse().ok()?;
        let text = &line[space + 1..];
        match self.last {
            Some(last) if t < last => None,
            // Lines of one instant come in the same order every time.
            Some(last) if t == last && self.skip > 0 => {
                self.skip -= 1;
                None
            }
            Some(last) if t == last => {
                self.at_last += 1;
                Some(text)
            }
            _ => {
                self.last = Some(t);
                self.at_last = 1;
                self.skip = 0;
                Some(text)
            }
        }
    }
}

/// Why a pod's log could not be copied (yet).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    /// The log could not be read from the API.
    #[error("{0}")]
    Api(#[from] ApiError),
    /// The log file could not be written (or the stream broke).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The copies of one cluster's pod logs.
pub(crate) struct LogCopier {
    conn: Arc<Connection>,
    /// The watch's view of the pods: where their containers stand.
    cache: Arc<PodCache>,
    /// Where pod logs are copied (`NAME.log`).
    dir: PathBuf,
    /// Pods whose log is being copied: the uids of each name's (a revived
    /// run's new pod has its old one's name). A copy task shares the name
    /// and uid it holds with this map and with its `writing` count: with
    /// thousands of pods followed at once, each copy of a name is memory a
    /// watched run costs.
    copying: Mutex<HashMap<Arc<str>, Uids>>,
    /// Pods whose log has been copied to its end.
    copied: Mutex<HashSet<String>>,
    /// How many copy tasks are running (writing the log file) for each pod
    /// name: a revived run's new pod may start before the old one's ends.
    writing: Writing,
    /// Pods whose log is to be copied once this process may act on the
    /// cluster (a replica that does not lead copies none): each name's
    /// latest pod, its uid and its log's container.
    waiting: Mutex<HashMap<String, (String, String)>>,
    /// Whether this process may read pods' logs now.
    pub(crate) acting: Acting,
}

/// Whether this process may read logs from the API server now: the
/// executor's gate once told (a replica on PostgreSQL, while it leads; set
/// once, a later gate is ignored), open without one.
#[derive(Default)]
pub(crate) struct Acting(OnceLock<Arc<dyn Fn() -> bool + Send + Sync>>);

impl Acting {
    /// Reads only while `gate` says so.
    pub(crate) fn only_while(&self, gate: Arc<dyn Fn() -> bool + Send + Sync>) {
        let _ = self.0.set(gate);
    }

    /// Whether this process may read now.
    pub(crate) fn open(&self) -> bool {
        self.0.get().is_none_or(|gate| gate())
    }
}

/// The uids of the pods of one name whose log is being copied: one,
/// inline, nearly always.
type Uids = SmallVec<[Arc<str>; 1]>;

/// The copy tasks running, by pod name.
pub(crate) type Writing = Arc<Mutex<HashMap<Arc<str>, usize>>>;

/// Counts a copy task as running until dropped (when the task ends, by any
/// path).
pub(crate) struct WritingGuard {
    set: Writing,
    name: Arc<str>,
}

impl WritingGuard {
    /// Counts one more task writing `name`'s log in `set`.
    pub(crate) fn enter(set: &Writing, name: &Arc<str>) -> Self {
        *set.locked().entry(name.clone()).or_default() += 1;
        WritingGuard {
            set: set.clone(),
            name: name.clone(),
        }
    }
}

impl Drop for WritingGuard {
    fn drop(&mut self) {
        let mut set = self.set.locked();
        if let Some(n) = set.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                set.remove(&self.name);
            }
        }
    }
}

impl LogCopier {
    /// Copies logs of pods reached through `conn` (and seen by the watch
    /// into `cache`) into `dir`.
    pub(crate) fn new(conn: Arc<Connection>, cache: Arc<PodCache>, dir: PathBuf) -> Self {
        LogCopier {
            conn,
            cache,
            dir,
            copying: Mutex::default(),
            copied: Mutex::default(),
            writing: Arc::default(),
            waiting: Mutex::default(),
            acting: Acting::default(),
        }
    }

    /// The log file of pod (or run) `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Whether pod `name`'s log has been copied to its end.
    pub(crate) fn is_copied(&self, name: &str) -> bool {
        self.copied.locked().contains(name)
    }

    /// Whether a copy is still writing pod `name`'s log file, or waits to
    /// (this process does not lead yet): the file does not hold all it will
    /// yet.
    pub(crate) fn is_writing(&self, name: &str) -> bool {
        self.writing.locked().contains_key(name) || self.waiting.locked().contains_key(name)
    }

    /// Pod `name` is gone: a pod of the same name (a revived run's) is
    /// copied again.
    pub(crate) fn forget(&self, name: &str) {
        self.copying.locked().remove(name);
        self.copied.locked().remove(name);
        self.waiting.locked().remove(name);
    }

    /// Starts copying `pod`'s log into `DIR/NAME.log` once its containers
    /// have started (the copy follows the log until the pod ends), once per
    /// pod. Runs on the caller's tokio runtime.
    ///
    /// While this process may not act on the cluster (a replica that does
    /// not lead), the copy waits for [`LogCopier::copy_waiting`]: the
    /// leader alone reads pods' logs and ships them to the store the
    /// replicas share, from which the others serve them, so that replicas
    /// add no log streams to the API server.
    pub(crate) fn copy(self: &Arc<Self>, pod: &Pod) {
        let started = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p != "Pending");
        let (Some(name), Some(uid)) = (&pod.metadata.name, &pod.metadata.uid) else {
            return;
        };
        let Some(container) = log_container(pod).filter(|_| started) else {
            return;
        };
        if !self.acting.open() {
            self.waiting
                .locked()
                .insert(name.clone(), (uid.clone(), container));
            return;
        }
        self.start(name, uid, container);
    }

    /// Starts the copies that waited while this process could not act
    /// (the pods its watch showed before it came to lead, ended ones
    /// included: their logs are copied whole), if it may now.
    pub(crate) fn copy_waiting(self: &Arc<Self>) {
        if !self.acting.open() {
            return;
        }
        let waiting = std::mem::take(&mut *self.waiting.locked());
        for (name, (uid, container)) in waiting {
            self.start(&name, &uid, container);
        }
    }

    /// Starts copying the log of pod `name` of `uid`, unless a copy of that
    /// pod runs or ran.
    fn start(self: &Arc<Self>, name: &str, uid: &str, container: String) {
        let (name, uid) = {
            let mut copying = self.copying.locked();
            // The name a copy of an earlier pod holds, else a new one.
            let name: Arc<str> = match copying.get_key_value(name) {
                Some((name, _)) => name.clone(),
                None => Arc::from(name),
            };
            let uids = copying.entry(name.clone()).or_default();
            if uids.iter().any(|u| **u == *uid) {
                return;
            }
            let uid: Arc<str> = Arc::from(uid);
            uids.push(uid.clone());
            (name, uid)
        };
        let writing = WritingGuard::enter(&self.writing, &name);
        tokio::spawn(self.clone().copy_until_done(name, uid, container, writing));
    }

    /// Copies the log of pod `name` (of `uid`) until it is whole or the pod
    /// is gone, counted in `writing` until then. Not an `async fn`: an
    /// async block holds its captures once, where an `async fn` kept its
    /// arguments twice for as long as it runs (a copy task lives as long as
    /// its pod runs).
    #[allow(clippy::manual_async_fn)]
    fn copy_until_done(
        self: Arc<Self>,
        name: Arc<str>,
        uid: Arc<str>,
        container: String,
        writing: WritingGuard,
    ) -> impl std::future::Future<Output = ()> {
        async move {
            use std::io::Write;
            let _writing = writing;
            // The path is not kept: the task lives as long as the pod runs.
            let mut file = match std::fs::create_dir_all(&self.dir)
                .and_then(|_| std::fs::File::create(self.path(&name)))
            {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(pod = %name, error = %e, "cannot write the pod's log file");
                    return;
                }
            };
            // What the copy holds for as long as its container runs is kept
            // small (a copy per watched run): the follow is a small future of
            // its own, and what waits between reads (timers, the watch's
            // notification, an error) is boxed.
            let mut resume = Resume::default();
            let mut backoff = Duration::from_millis(200);
            // Whether the next read follows the log (the container may still
            // write) or reads it to its end (the container has ended, and the
            // stream that followed it may have been cut first).
            let mut follow = true;
            loop {
                if !self.still_copying(&name, &uid) {
                    return;
                }
                if !self.acting.open() {
                    // No longer leading: the next leader copies the log
                    // whole; this one waits until this process leads again.
                    drop(file);
                    return self.hand_back(&name, &uid, container);
                }
                if !follow {
                    match Box::pin(self.read_whole(&name, &container, &mut resume, &mut file)).await
                    {
                        Ok(()) => return self.copied(&name, &mut file),
                        Err(e) => {
                            tracing::info!(pod = %name, error = %e, "the pod's log could not be read to its end yet")
                        }
                    }
                    Box::pin(tokio::time::sleep(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
                let followed = follow_log(&self.conn, &name, &container, &mut resume, &mut file)
                    .await
                    .map_err(Box::new);
                // The stream ended: the container ended (the kubelet ends a
                // follow at its next look at the container, after the end), or
                // the stream was cut, which through the API server looks the
                // same. A stream that ends after the watch has shown the
                // container's end cannot have missed a line: the log is whole.
                let end = self.cache.container_end(&name, &uid, &container);
                if followed.is_ok() && end == ContainerEnd::Ended {
                    return self.copied(&name, &mut file);
                }
                // Else the watch tells, when it shows the end: a container
                // that ended after the stream did may have written lines the
                // stream missed, read to the end once; one that still runs
                // had its stream cut, followed again.
                match Box::pin(self.end_after(&name, &uid, &container, END_WAIT)).await {
                    ContainerEnd::Ended => {
                        follow = false;
                        continue;
                    }
                    ContainerEnd::Running => {
                        if let Err(e) = &followed {
                            tracing::info!(pod = %name, error = %e, "the pod's log stream broke; resuming");
                        }
                    }
                    // Not in the watch's view: gone, or not shown yet (a
                    // listing under way); the API tells.
                    ContainerEnd::Unknown => {
                        // Boxed: a large future, and a rare one.
                        match Box::pin(self.container_ended(&name, &uid, &container)).await {
                            Ok(Some(true)) => {
                                follow = false;
                                continue;
                            }
                            Ok(Some(false)) => {}
                            Ok(None) => {
                                let _ = writeln!(
                                    file,
                                    "bosun: the pod was deleted before its log was copied to its end"
                                );
                                return;
                            }
                            Err(e) => {
                                tracing::info!(pod = %name, error = %e, "cannot read the pod")
                            }
                        }
                    }
                }
                if followed.is_ok() {
                    backoff = Duration::from_millis(200);
                }
                Box::pin(tokio::time::sleep(backoff)).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }

    /// Stops copying pod `name` (of `uid`) while this process may not act:
    /// its partial copy goes (the store's, shipped by the leader, is
    /// served), and the copy starts again from the log's start if this
    /// process comes to lead while the pod is there.
    fn hand_back(&self, name: &Arc<str>, uid: &Arc<str>, container: String) {
        {
            let mut copying = self.copying.locked();
            if let Some(uids) = copying.get_mut(name) {
                uids.retain(|u| **u != **uid);
                if uids.is_empty() {
                    copying.remove(name);
                }
            }
        }
        let _ = std::fs::remove_file(self.path(name));
        self.waiting
            .locked()
            .insert(name.to_string(), (uid.to_string(), container));
    }

    /// The log of `name` is whole in `file`.
    fn copied(&self, name: &str, file: &mut std::fs::File) {
        use std::io::Write;
        let _ = file.flush();
        self.copied.locked().insert(name.to_string());
    }

    /// Where pod `name`'s `container` stands once the watch shows its end,
    /// or after `wait` at most.
    async fn end_after(
        &self,
        name: &str,
        uid: &str,
        container: &str,
        wait: Duration,
    ) -> ContainerEnd {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let changed = self.cache.changed();
            let end = self.cache.container_end(name, uid, container);
            if end == ContainerEnd::Ended
                || tokio::time::timeout_at(deadline, changed).await.is_err()
            {
                return end;
            }
        }
    }

    fn still_copying(&self, name: &str, uid: &str) -> bool {
        self.copying
            .locked()
            .get(name)
            .is_some_and(|uids| uids.iter().any(|u| **u == *uid))
    }

    /// Whether the pod `name` (of `uid`)'s `container` has ended, asked of
    /// the API (when the watch does not show the pod); `None` when that pod
    /// is gone.
    async fn container_ended(
        &self,
        name: &str,
        uid: &str,
        container: &str,
    ) -> Result<Option<bool>, CopyError> {
        let api = self.conn.pods().await?;
        Ok(match api.get_opt(name).await.map_err(ApiError::from)? {
            Some(p) if p.metadata.uid.as_deref() == Some(uid) => {
                Some(container_ended(&p, container))
            }
            _ => None,
        })
    }

    /// Reads the log from where `resume` stands to its end (not following
    /// it) and appends the new lines to `file`.
    async fn read_whole(
        &self,
        name: &str,
        container: &str,
        resume: &mut Resume,
        file: &mut std::fs::File,
    ) -> Result<(), CopyError> {
        let api = self.conn.pods().await?;
        read_log(&api, name, container, resume, file).await
    }
}

/// Reads pod `name`'s `container` log from where `resume` stands to its
/// end (not following it) and appends the new lines to `file`.
pub(crate) async fn read_log(
    api: &kube::Api<Pod>,
    name: &str,
    container: &str,
    resume: &mut Resume,
    file: &mut std::fs::File,
) -> Result<(), CopyError> {
    let params = log_params(container, false, resume);
    let stream = api
        .log_stream(name, &params)
        .await
        .map_err(ApiError::from)?;
    copy_lines(stream, resume, file).await
}

/// Follows pod `name`'s `container` log from where `resume` stands on a
/// stream connection of `conn` (shared, no read timeout: a quiet container
/// keeps its one follow) and appends the new lines to `file`.
///
/// The future is [`Follow`]: what opens the stream (the client, the
/// request and its parameters) is boxed and freed once the stream is open,
/// so a follow that lasts as long as its container holds the stream and
/// little else.
pub(crate) fn follow_log<'a>(
    conn: &'a Connection,
    name: &'a str,
    container: &'a str,
    resume: &'a mut Resume,
    file: &'a mut std::fs::File,
) -> impl std::future::Future<Output = Result<(), CopyError>> + 'a {
    let params = log_params(container, true, resume);
    following(
        Box::pin(async move { conn.pod_log_stream(name, &params).await }),
        resume,
        file,
    )
}

/// A [`Follow`] of the stream `open` gives.
fn following<'a, O, S>(
    open: std::pin::Pin<Box<O>>,
    resume: &'a mut Resume,
    file: &'a mut std::fs::File,
) -> Follow<'a, O, S>
where
    O: std::future::Future<Output = Result<(S, StreamSlot), ApiError>>,
    S: futures_util::AsyncBufRead + Unpin,
{
    Follow {
        state: Following::Opening(open),
        resume,
        file,
    }
}

/// A log followed into a file: its stream's opening, then its lines. A
/// future written out rather than an `async fn`: the latter keeps the
/// stream twice (the opening's answer, and the value the copy reads), and
/// a copy task lives as long as its container runs.
struct Follow<'a, O, S> {
    state: Following<O, S>,
    resume: &'a mut Resume,
    file: &'a mut std::fs::File,
}

/// Where a [`Follow`] stands.
enum Following<O, S> {
    /// The stream is being opened.
    Opening(std::pin::Pin<Box<O>>),
    /// Its lines are copied, holding the stream's place on its connection.
    Copying { lines: Lines<S>, _slot: StreamSlot },
}

impl<O, S> std::future::Future for Follow<'_, O, S>
where
    O: std::future::Future<Output = Result<(S, StreamSlot), ApiError>>,
    S: futures_util::AsyncBufRead + Unpin,
{
    type Output = Result<(), CopyError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                Following::Opening(open) => {
                    let (stream, slot) = std::task::ready!(open.as_mut().poll(cx))?;
                    this.state = Following::Copying {
                        lines: Lines::new(stream),
                        _slot: slot,
                    };
                }
                Following::Copying { lines, .. } => {
                    return lines.poll_copy(cx, this.resume, this.file);
                }
            }
        }
    }
}

/// A log's stream and the start of a line not yet whole.
struct Lines<S> {
    stream: S,
    /// Empty between lines: a follow waits for its next line far longer
    /// than it takes one, and waits holding no buffer.
    partial: Vec<u8>,
}

impl<S: futures_util::AsyncBufRead + Unpin> Lines<S> {
    fn new(stream: S) -> Self {
        Lines {
            stream,
            partial: Vec::new(),
        }
    }

    /// Appends the lines `resume` has not seen to `file` until the stream
    /// ends (a last line without its newline counts too). A line that
    /// arrives whole is taken from the stream's own buffer (kube-rs's
    /// stream hands out the body's chunks), with no copy.
    fn poll_copy(
        &mut self,
        cx: &mut std::task::Context<'_>,
        resume: &mut Resume,
        file: &mut std::fs::File,
    ) -> std::task::Poll<Result<(), CopyError>> {
        use std::io::Write;
        use std::pin::Pin;
        let mut write = |line: &[u8]| match resume.take(line) {
            Some(text) => file.write_all(text),
            None => Ok(()),
        };
        loop {
            let chunk = std::task::ready!(Pin::new(&mut self.stream).poll_fill_buf(cx))?;
            if chunk.is_empty() {
                if !self.partial.is_empty() {
                    write(&std::mem::take(&mut self.partial))?;
                }
                return std::task::Poll::Ready(Ok(()));
            }
            let used = match chunk.iter().position(|b| *b == b'\n') {
                Some(end) if self.partial.is_empty() => {
                    write(&chunk[..=end])?;
                    end + 1
                }
                Some(end) => {
                    self.partial.extend_from_slice(&chunk[..=end]);
                    write(&std::mem::take(&mut self.partial))?;
                    end + 1
                }
                None => {
                    self.partial.extend_from_slice(chunk);
                    chunk.len()
                }
            };
            Pin::new(&mut self.stream).consume(used);
        }
    }
}

/// How `container`'s log is asked for from where `resume` stands (a read
/// begins): stamped lines, followed if `follow`.
fn log_params(container: &str, follow: bool, resume: &mut Resume) -> kube::api::LogParams {
    kube::api::LogParams {
        follow,
        timestamps: true,
        container: Some(container.to_string()),
        since_time: resume.begin(),
        ..Default::default()
    }
}

/// Appends the lines of `stream` that `resume` has not seen to `file`.
async fn copy_lines(
    stream: impl futures_util::AsyncBufRead + Unpin,
    resume: &mut Resume,
    file: &mut std::fs::File,
) -> Result<(), CopyError> {
    let mut lines = Lines::new(stream);
    futures_util::future::poll_fn(|cx| lines.poll_copy(cx, resume, file)).await
}

#[cfg(test)]
mod tests {
    use super::{LogCopier, Resume, WritingGuard};
    use std::sync::Arc;

    fn read(r: &mut Resume, lines: &[&str]) -> String {
        r.begin();
        lines
            .iter()
            .filter_map(|l| r.take(l.as_bytes()))
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect()
    }

    #[test]
    fn a_resumed_read_writes_each_line_once() {
        let mut r = Resume::default();
        let first = read(
            &mut r,
            &[
                "2026-12-01T10:00:00.5Z a\n",
                "2026-12-01T10:00:01.25Z b\n",
                "2026-12-01T10:00:01.25Z c\n",
            ],
        );
        assert_eq!(first, "a\nb\nc\n");
        // The read from 10:00:01 sends b and c again, then more of the same
        // instant and later.
        assert_eq!(
            r.begin().map(|t| t.to_string()).as_deref(),
            Some("2026-12-01T10:00:01Z")
        );
        let second = read(
            &mut r,
            &[
                "2026-12-01T10:00:01.25Z b\n",
                "2026-12-01T10:00:01.25Z c\n",
                "2026-12-01T10:00:01.25Z d\n",
                "2026-12-01T10:00:02Z e",
            ],
        );
        assert_eq!(second, "d\ne");
        assert_eq!(read(&mut r, &["2026-12-01T10:00:02Z e", "not stamped"]), "");
    }

    /// A copy task lives as long as its container runs, one per watched
    /// run: its future is kept small enough that tokio's task (about 100
    /// bytes of header and trailer around the future, in 128-byte lines)
    /// takes four lines, not the six it took with a 656-byte future.
    #[test]
    fn a_copy_task_fits_in_four_cache_lines() {
        let conn = Arc::new(super::Connection::new(None, "ctx", "ns"));
        let copier = Arc::new(LogCopier::new(conn, Arc::default(), std::env::temp_dir()));
        let name: Arc<str> = Arc::from("pod");
        let writing = WritingGuard::enter(&copier.writing, &name);
        let task =
            copier
                .clone()
                .copy_until_done(name, Arc::from("uid"), "test".to_string(), writing);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 400, "a copy task's future takes {size} bytes");
    }

    /// Lines are written whole however the stream's chunks cut them: a
    /// line in one chunk, a line over three, several in one, a last line
    /// without its newline; the lines a resumed read has seen are skipped.
    #[test]
    fn lines_are_copied_whole_across_chunks() {
        use futures_util::{StreamExt, TryStreamExt};
        let chunks = [
            "2026-12-01T10:00:00Z a\n",
            "2026-12-01T10:00:01Z b",
            "c",
            "d\n2026-12-01T10:00:02Z e\n2026-12-01T10:00:03Z ",
            "f\n2026-12-01T10:00:04Z g",
        ];
        let copy = |resume: &mut Resume| {
            let stream = futures_util::stream::iter(chunks)
                .map(|c| Ok::<_, std::io::Error>(c.as_bytes().to_vec()))
                .into_async_read();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log");
            let mut file = std::fs::File::create(&path).unwrap();
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(super::copy_lines(stream, resume, &mut file))
                .unwrap();
            std::fs::read_to_string(&path).unwrap()
        };
        let mut resume = Resume::default();
        assert_eq!(copy(&mut resume), "a\nbcd\ne\nf\ng");
        // Read again from the last line's second: nothing is written twice.
        resume.begin();
        assert_eq!(copy(&mut resume), "");
    }
}
