//! kube-apiserver's audit log, counted by who asked what:
//! `apiserver_request_total` has no user label, the audit log does, so a test
//! or a benchmark can tell bosun's own requests (user
//! `system:serviceaccount:NS:bosun`) from the harness's (the admin,
//! [`ADMIN_USER`]) and from kube-apiserver's own (`system:apiserver`).
//!
//! [`ControlPlane::audited`](crate::ControlPlane::audited) starts
//! kube-apiserver with `--audit-policy-file` ([`POLICY`]: every request at
//! level `Metadata`, stage `RequestReceived` omitted),
//! `--audit-log-path`, `--audit-log-format=json`, no rotation
//! (`--audit-log-maxsize=0`) and the default `blocking` mode: a request's
//! event is written before its answer goes out.
//!
//! What is counted: every request once, by its `auditID`, at its first event
//! of stage `ResponseStarted`, `ResponseComplete` or `Panic`.
//! `ResponseStarted` is logged for long-running requests only (watches,
//! `pods/log` with `follow`, proxies): such a request is counted when its
//! answer starts, not when it ends, so a watch still open when the log is read
//! is counted, once, in the window it started in; a short request is counted
//! when it is answered. A request not answered yet when the log is read is not
//! counted yet. Rejected requests count too (with their code): a 401 from
//! authentication (user empty), a 403 from authorization, a 429 from priority
//! and fairness.
//!
//! This differs from `apiserver_request_total`, which counts a request when
//! it *ends* (an open watch or log stream is not in it yet) and names a
//! `pods/log` read `CONNECT`: compare the two over windows long against a
//! watch's life, or say which one a figure is.

use bosun_base::sync::Lock;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The audit policy: every request's metadata (who, verb, object, code), no
/// bodies; `RequestReceived` is omitted (it would double the log and is not
/// counted).
pub const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// The admin's user name (its client certificate's CN).
pub const ADMIN_USER: &str = "bosun-test-admin";

/// The user name of service account `name` in `namespace`.
pub fn service_account(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What a request is counted under.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The authenticated user (`user.username`; empty when authentication
    /// failed).
    pub user: String,
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `deletecollection`; for a non-resource request the
    /// HTTP method in lower case (`get`).
    pub verb: String,
    /// The resource (`pods`, `selfsubjectaccessreviews`); for a
    /// non-resource request its path (`/version`, `/api`).
    pub resource: String,
    /// The subresource (`log`, `status`, `binding`), or empty.
    pub subresource: String,
    /// The answer's HTTP code (0 when the event has none).
    pub code: u16,
}

/// Requests counted by [`Key`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts(BTreeMap<Key, u64>);

impl Counts {
    /// The requests counted here but not in `earlier` (a count of the same
    /// log taken before).
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts(
            self.0
                .iter()
                .filter_map(|(k, n)| {
                    let d = n.saturating_sub(earlier.0.get(k).copied().unwrap_or(0));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect(),
        )
    }

    /// Only the requests whose key satisfies `keep`.
    pub fn filter(&self, keep: impl Fn(&Key) -> bool) -> Counts {
        Counts(
            self.0
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, n)| (k.clone(), *n))
                .collect(),
        )
    }

    /// Only user `user`'s requests.
    pub fn of_user(&self, user: &str) -> Counts {
        self.filter(|k| k.user == user)
    }

    /// How many requests.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The counts summed by `group` of each key (e.g. `(verb, resource,
    /// subresource)`, users and codes together).
    pub fn group<G: Ord>(&self, group: impl Fn(&Key) -> G) -> BTreeMap<G, u64> {
        let mut out = BTreeMap::new();
        for (k, n) in &self.0 {
            *out.entry(group(k)).or_insert(0) += n;
        }
        out
    }

    /// How many requests with this verb, resource and subresource (all users
    /// and codes).
    pub fn get(&self, verb: &str, resource: &str, subresource: &str) -> u64 {
        self.filter(|k| k.verb == verb && k.resource == resource && k.subresource == subresource)
            .total()
    }

    /// Every key and its count.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, u64)> {
        self.0.iter().map(|(k, n)| (k, *n))
    }
}

/// Counting state: what is counted, and the long-running requests seen
/// started and not yet completed.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    started: HashSet<String>,
}

impl Tally {
    /// Takes one event (a JSON line); lines that are not events are skipped.
    fn event(&mut self, line: &[u8]) {
        let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else {
            return;
        };
        let Some(id) = event["auditID"].as_str() else {
            return;
        };
        let counted = match event["stage"].as_str() {
            // Long-running: counted now, and not again when it completes.
            Some("ResponseStarted") => self.started.insert(id.to_string()),
            Some("ResponseComplete") | Some("Panic") => !self.started.remove(id),
            _ => false,
        };
        if !counted {
            return;
        }
        *self.counts.0.entry(Key::of(&event)).or_insert(0) += 1;
    }
}

/// A JSON value's text, or empty.
fn text(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

impl Key {
    /// What an audit event counts under.
    fn of(event: &serde_json::Value) -> Key {
        let object = &event["objectRef"];
        let resource = match object["resource"].as_str() {
            Some(r) => r.to_string(),
            // A non-resource request: its path.
            None => text(&event["requestURI"])
                .split('?')
                .next()
                .unwrap_or("")
                .to_string(),
        };
        Key {
            user: text(&event["user"]["username"]),
            verb: text(&event["verb"]),
            resource,
            subresource: text(&object["subresource"]),
            code: event["responseStatus"]["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
        }
    }
}

/// An audit log being written, read on from where the last count stopped.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    read: Mutex<(u64, Tally)>,
}

impl AuditLog {
    pub(crate) fn new(path: PathBuf) -> AuditLog {
        AuditLog {
            path,
            read: Mutex::new((0, Tally::default())),
        }
    }

    /// The log file (JSON lines, one event each).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every request counted so far (the log is read on from the last call;
    /// a last line still being written waits for the next).
    pub fn counts(&self) -> Counts {
        let mut guard = self.read.locked();
        let (offset, tally) = &mut *guard;
        let mut text = Vec::new();
        if let Ok(mut file) = std::fs::File::open(&self.path) {
            if file.seek(SeekFrom::Start(*offset)).is_ok() {
                let _ = file.read_to_end(&mut text);
            }
        }
        let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in text[..complete].split(|b| *b == b'\n') {
            if !line.is_empty() {
                tally.event(line);
            }
        }
        *offset += complete as u64;
        tally.counts.clone()
    }
}

/// One request of the audit log, as it was answered: for a test that asks
/// who did what to which object, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What it is counted under.
    pub key: Key,
    /// The client's `User-Agent` (empty when it sent none).
    pub user_agent: String,
    /// The object's namespace, or empty.
    pub namespace: String,
    /// The object's name, or empty (a list, a watch; a create's name is
    /// the created object's).
    pub name: String,
    /// When kube-apiserver received the request (its clock, to the
    /// microsecond).
    pub received: jiff::Timestamp,
}

impl Event {
    /// The event of one JSON line, when it is a request's last one
    /// (`ResponseComplete` or `Panic`).
    fn parse(line: &[u8]) -> Option<Event> {
        let event: serde_json::Value = serde_json::from_slice(line).ok()?;
        if !matches!(
            event["stage"].as_str(),
            Some("ResponseComplete") | Some("Panic")
        ) {
            return None;
        }
        let object = &event["objectRef"];
        Some(Event {
            key: Key::of(&event),
            user_agent: text(&event["userAgent"]),
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
            received: event["requestReceivedTimestamp"].as_str()?.parse().ok()?,
        })
    }
}

impl AuditLog {
    /// Every request answered so far, in the log's order (read from the
    /// start each time; a last line still being written is left out).
    pub fn events(&self) -> Vec<Event> {
        let text = std::fs::read(&self.path).unwrap_or_default();
        let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        text[..complete]
            .split(|b| *b == b'\n')
            .filter_map(Event::parse)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, stage: &str, verb: &str, object: &str, code: u16) -> String {
        format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"{stage}","requestURI":"/version?timeout=10s","verb":"{verb}","user":{{"username":"system:serviceaccount:ns:bosun"}},"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z",{object}"responseStatus":{{"metadata":{{}},"code":{code}}}}}"#
        )
    }

    #[test]
    fn counts_each_request_once_as_it_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let pods = r#""objectRef":{"resource":"pods","namespace":"ns","apiVersion":"v1"},"#;
        let log = r#""objectRef":{"resource":"pods","namespace":"ns","name":"a","apiVersion":"v1","subresource":"log"},"#;
        let lines = [
            event("1", "ResponseComplete", "create", pods, 201),
            // A watch: counted when it starts, not again when it ends.
            event("2", "ResponseStarted", "watch", pods, 200),
            event("3", "ResponseStarted", "get", log, 200),
            event("3", "ResponseComplete", "get", log, 200),
            event("4", "ResponseComplete", "get", "", 200),
        ];
        std::fs::write(&path, lines[..2].join("\n") + "\n" + &lines[2][..20]).unwrap();
        let audit = AuditLog::new(path.clone());
        let first = audit.counts();
        assert_eq!(first.total(), 2, "{first:?}");
        assert_eq!(first.get("watch", "pods", ""), 1);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let second = audit.counts();
        assert_eq!(second.get("get", "pods", "log"), 1);
        assert_eq!(second.get("get", "/version", ""), 1);
        assert_eq!(second.get("watch", "pods", ""), 1);
        let later = second.since(&first);
        assert_eq!(later.total(), 2, "{later:?}");
        assert_eq!(later.of_user("system:serviceaccount:ns:bosun").total(), 2);
        let events = audit.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0].key.verb, "create");
        assert_eq!(events[0].namespace, "ns");
        assert_eq!(events[1].name, "a");
        assert_eq!(
            events[1].received.to_string(),
            "2026-01-02T03:04:05.123456Z"
        );
        // The watch ends: nothing new.
        let end = event("2", "ResponseComplete", "watch", pods, 200);
        std::fs::write(&path, lines.join("\n") + "\n" + &end + "\n").unwrap();
        assert_eq!(audit.counts(), second);
    }
}
