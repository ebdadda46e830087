//! A client of Prometheus' HTTP API for the dispatcher's demand: one instant
//! query (`GET /api/v1/query?query=...&time=...`), its vector result read as
//! a number per `job_name`.
//!
//! It blocks (ureq) for at most its timeout (30 s by default, OpenShift's),
//! so an async caller runs it on a blocking thread. The bearer token file, or
//! the basic-auth password file (OpenShift's `--prometheus-username` and
//! `--prometheus-password-path`), is read at every query, so a rotated
//! secret is picked up. `https://`
//! URLs (OpenShift's Thanos querier is one) are verified against the
//! system's trust store, or against only the CA certificates of
//! `dispatcher.prometheus_ca_file` when it is set (a cluster's own CA); the
//! CA file is read when the client is made.
//!
//! The vector's series are read by their `job_name` label: series without
//! one are skipped (a query that does not aggregate by it has nothing to say
//! of a job), several series of one job are added up (a query that keeps
//! other labels), and a value that is not a finite number at least 0 fails
//! the whole answer, naming the job (`increase()` of a well-formed counter is
//! never negative: such a value means the query or the data are wrong, and
//! half an answer would move jobs on wrong numbers).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;
use ureq::tls::{parse_pem, Certificate, PemItem, RootCerts, TlsConfig};

/// OpenShift's query (`pkg/dispatcher/prometheus.go`, unchanged since 2020):
/// the runs that reached `pending` per job over the window, `$window`
/// (`dispatcher.prometheus_query`'s default).
pub const OPENSHIFT_QUERY: &str = bosun_config::types::DEFAULT_PROMETHEUS_QUERY;

/// The placeholder in a query that [`window_query`] replaces by the window.
pub const WINDOW: &str = "$window";

/// How long one query may take, connection included (OpenShift's 30 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read (a vector of tens of thousands of jobs is a few
/// MiB).
const MAX_BODY: u64 = 64 << 20;

/// What can go wrong with a query.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    /// The URL is not one this client can query.
    #[error("Prometheus URL {url:?}: {why}")]
    Url {
        /// The URL.
        url: String,
        /// Why not.
        why: String,
    },
    /// The CA file cannot be read, or holds no PEM certificate.
    #[error("cannot read the Prometheus CA file {}: {why}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// The basic-auth password file cannot be read, or is empty.
    #[error("cannot read the Prometheus password file {}: {why}", path.display())]
    PasswordFile {
        /// The file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// The bearer token file cannot be read, or is empty.
    #[error("cannot read the Prometheus token file {}: {why}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// No answer within the timeout.
    #[error("Prometheus at {url} did not answer within {timeout:?}")]
    Timeout {
        /// The query endpoint.
        url: String,
        /// The timeout.
        timeout: Duration,
    },
    /// No connection, or the connection broke.
    #[error("Prometheus at {url}: {source}")]
    Transport {
        /// The query endpoint.
        url: String,
        /// What failed.
        #[source]
        source: ureq::Error,
    },
    /// Prometheus refused the query (its `errorType` and `error`).
    #[error("Prometheus at {url} refused the query ({error_type}): {error}")]
    Query {
        /// The query endpoint.
        url: String,
        /// Prometheus' `errorType` (`bad_data`, `timeout`, `execution`, ...).
        error_type: String,
        /// Prometheus' message.
        error: String,
    },
    /// An HTTP status other than 200 without Prometheus' error body (a
    /// proxy's 401, 502, ...).
    #[error("Prometheus at {url} answered HTTP {status}: {body}")]
    Status {
        /// The query endpoint.
        url: String,
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer is not what Prometheus' API returns.
    #[error("Prometheus at {url}: unreadable answer: {why}")]
    Decode {
        /// The query endpoint.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// The query's result is not an instant vector.
    #[error(
        "Prometheus at {url}: the query returned a {result_type}, not a vector (query: {query})"
    )]
    NotVector {
        /// The query endpoint.
        url: String,
        /// Its `resultType`.
        result_type: String,
        /// The query.
        query: String,
    },
    /// A job's value is not a number at least 0.
    #[error("Prometheus at {url}: job {job}: value {value:?} is not a finite number at least 0")]
    BadValue {
        /// The query endpoint.
        url: String,
        /// The job.
        job: String,
        /// The value as Prometheus wrote it.
        value: String,
    },
}

/// A Prometheus (or Thanos querier) to ask.
#[derive(Debug, Clone)]
pub struct PrometheusClient {
    endpoint: String,
    token_file: Option<PathBuf>,
    /// Basic auth: the user and the password's file.
    basic: Option<(String, PathBuf)>,
    timeout: Duration,
    /// The CA certificates an https Prometheus is verified against (none:
    /// the system's trust store).
    roots: Option<Arc<Vec<Certificate<'static>>>>,
    agent: ureq::Agent,
}

fn agent(timeout: Duration, roots: Option<&Arc<Vec<Certificate<'static>>>>) -> ureq::Agent {
    let roots = match roots {
        Some(certs) => RootCerts::Specific(certs.clone()),
        None => RootCerts::PlatformVerifier,
    };
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .build()
        .into()
}

impl PrometheusClient {
    /// A client of the Prometheus at `url` (`http://host:port` or
    /// `https://...`, optionally with a path prefix), with the default
    /// timeout, no token, and the system's trust store for https.
    pub fn new(url: &str) -> Result<Self, PromError> {
        let bad = |why: &str| PromError::Url {
            url: url.to_string(),
            why: why.to_string(),
        };
        let Some(rest) = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
        else {
            return Err(bad("not an http:// or https:// URL"));
        };
        if rest.is_empty() || rest.starts_with('/') {
            return Err(bad("no host"));
        }
        if url.contains(['?', '#']) {
            return Err(bad("a query or fragment has no place in the base URL"));
        }
        Ok(PrometheusClient {
            endpoint: format!("{}/api/v1/query", url.trim_end_matches('/')),
            token_file: None,
            basic: None,
            timeout: DEFAULT_TIMEOUT,
            roots: None,
            agent: agent(DEFAULT_TIMEOUT, None),
        })
    }

    /// Verifies an https Prometheus against only the PEM CA certificates in
    /// `path` (none: the system's trust store). The file is read now.
    pub fn with_ca_file(mut self, path: Option<PathBuf>) -> Result<Self, PromError> {
        self.roots = match path {
            None => None,
            Some(path) => {
                let bad = |why: String| PromError::CaFile {
                    path: path.clone(),
                    why,
                };
                let pem = std::fs::read(&path).map_err(|e| bad(e.to_string()))?;
                let mut certs = Vec::new();
                for item in parse_pem(&pem) {
                    match item.map_err(|e| bad(e.to_string()))? {
                        PemItem::Certificate(c) => certs.push(c),
                        _ => continue,
                    }
                }
                if certs.is_empty() {
                    return Err(bad("no PEM certificate in it".into()));
                }
                Some(Arc::new(certs))
            }
        };
        self.agent = agent(self.timeout, self.roots.as_ref());
        Ok(self)
    }

    /// Sends `Authorization: Bearer <the file's content, trimmed>`.
    pub fn with_token_file(mut self, path: Option<PathBuf>) -> Self {
        self.token_file = path;
        self
    }

    /// Sends `Authorization: Basic` with `user` and the content of
    /// `password_file` (trimmed), unless a bearer token is set.
    pub fn with_basic_auth(mut self, user: Option<String>, password_file: Option<PathBuf>) -> Self {
        self.basic = user.zip(password_file);
        self
    }

    /// Gives up on a query after `timeout` (connection included).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.agent = agent(timeout, self.roots.as_ref());
        self
    }

    /// The query endpoint (`.../api/v1/query`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The `Authorization` header's value, if any: the bearer token, else
    /// basic auth.
    fn authorization(&self) -> Result<Option<String>, PromError> {
        if let Some(path) = &self.token_file {
            let token = read_secret(path).map_err(|why| PromError::TokenFile {
                path: path.clone(),
                why,
            })?;
            return Ok(Some(format!("Bearer {token}")));
        }
        let Some((user, path)) = &self.basic else {
            return Ok(None);
        };
        let password = read_secret(path).map_err(|why| PromError::PasswordFile {
            path: path.clone(),
            why,
        })?;
        use base64::Engine;
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Ok(Some(format!("Basic {pair}")))
    }

    /// Evaluates `query` at `at` and reads its vector as a number per
    /// `job_name` (see the module's documentation for the rules).
    pub fn job_values(
        &self,
        query: &str,
        at: Timestamp,
    ) -> Result<BTreeMap<String, f64>, PromError> {
        let body = self.get(query, at)?;
        parse_job_values(&body, &self.endpoint, query)
    }

    /// The body of a successful (HTTP 200) answer to `query` at `at`.
    fn get(&self, query: &str, at: Timestamp) -> Result<String, PromError> {
        let url = &self.endpoint;
        let mut req = self
            .agent
            .get(url)
            .query("query", query)
            .query("time", prom_time(at));
        if let Some(value) = self.authorization()? {
            req = req.header("Authorization", &value);
        }
        let transport = |e: ureq::Error| match e {
            ureq::Error::Timeout(_) => PromError::Timeout {
                url: url.clone(),
                timeout: self.timeout,
            },
            source => PromError::Transport {
                url: url.clone(),
                source,
            },
        };
        let mut resp = req.call().map_err(transport)?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(transport)?;
        if status == 200 {
            return Ok(body);
        }
        // Prometheus' own refusals (400 bad_data, 422 execution, 503
        // timeout, ...) carry its error in JSON.
        if let Ok(Answer {
            status: s,
            error_type: Some(error_type),
            error: Some(error),
            ..
        }) = serde_json::from_str::<Answer>(&body)
        {
            if s == "error" {
                return Err(PromError::Query {
                    url: url.clone(),
                    error_type,
                    error,
                });
            }
        }
        Err(PromError::Status {
            url: url.clone(),
            status,
            body: truncate(&body, 512),
        })
    }
}

/// `query` with every [`WINDOW`] replaced by `window` in Prometheus'
/// duration syntax ([`prom_duration`]).
pub fn window_query(query: &str, window: Duration) -> String {
    query.replace(WINDOW, &prom_duration(window))
}

/// A duration in Prometheus' syntax, in its largest whole unit: `168h`,
/// `90m`, `45s`, `1500ms` (at least `1ms`).
pub fn prom_duration(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// An evaluation time as Prometheus reads it: Unix seconds, to the
/// millisecond (its own precision).
pub fn prom_time(at: Timestamp) -> String {
    let ms = at.as_millisecond();
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// A secret file's content, trimmed; why not when it cannot be read or is
/// empty.
fn read_secret(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    match text.trim() {
        "" => Err("the file is empty".into()),
        t => Ok(t.to_string()),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.trim().to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", s[..end].trim())
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    /// `[unix seconds, "value"]`; absent for a native histogram.
    #[serde(default)]
    value: Option<(f64, String)>,
}

/// Reads a successful answer's vector as a number per `job_name` (`endpoint`
/// and `query` only name things in errors).
pub fn parse_job_values(
    body: &str,
    endpoint: &str,
    query: &str,
) -> Result<BTreeMap<String, f64>, PromError> {
    let decode = |why: String| PromError::Decode {
        url: endpoint.to_string(),
        why,
    };
    let answer: Answer = serde_json::from_str(body).map_err(|e| decode(e.to_string()))?;
    if answer.status != "success" {
        return Err(PromError::Query {
            url: endpoint.to_string(),
            error_type: answer.error_type.unwrap_or_else(|| answer.status.clone()),
            error: answer.error.unwrap_or_default(),
        });
    }
    for w in &answer.warnings {
        tracing::warn!(endpoint, query, warning = %w, "Prometheus warns about the demand query");
    }
    let data = answer
        .data
        .ok_or_else(|| decode("a success without data".into()))?;
    if data.result_type != "vector" {
        return Err(PromError::NotVector {
            url: endpoint.to_string(),
            result_type: data.result_type,
            query: query.to_string(),
        });
    }
    let series: Vec<Series> =
        serde_json::from_value(data.result).map_err(|e| decode(format!("vector: {e}")))?;
    let mut out = BTreeMap::new();
    let mut unlabelled = 0usize;
    for s in series {
        let Some(job) = s.metric.get("job_name") else {
            unlabelled += 1;
            continue;
        };
        let Some((_, text)) = s.value else {
            return Err(decode(format!("job {job}: a series without a value")));
        };
        let value = text
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0);
        let Some(value) = value else {
            return Err(PromError::BadValue {
                url: endpoint.to_string(),
                job: job.clone(),
                value: text,
            });
        };
        *out.entry(job.clone()).or_insert(0.0) += value;
    }
    if unlabelled > 0 {
        tracing::debug!(endpoint, unlabelled, "series without job_name skipped");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EP: &str = "http://p/api/v1/query";

    fn vector(series: &str) -> String {
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{series}]}}}}"#)
    }

    #[test]
    fn windows_and_times_in_prometheus_syntax() {
        let h = |n: u64| Duration::from_secs(n * 3600);
        assert_eq!(prom_duration(h(168)), "168h");
        assert_eq!(prom_duration(Duration::from_secs(5400)), "90m");
        assert_eq!(prom_duration(Duration::from_secs(45)), "45s");
        assert_eq!(prom_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(prom_duration(Duration::ZERO), "1ms");
        assert_eq!(
            window_query(OPENSHIFT_QUERY, h(168)),
            r#"sum(increase(prowjob_state_transitions{state="pending"}[168h])) by (job_name)"#
        );
        let at: Timestamp = "2026-01-10T00:00:01.25Z".parse().unwrap();
        assert_eq!(prom_time(at), "1768003201.250");
    }

    #[test]
    fn urls() {
        let c = PrometheusClient::new("http://thanos:9090/prefix/").unwrap();
        assert_eq!(c.endpoint(), "http://thanos:9090/prefix/api/v1/query");
        let c = PrometheusClient::new("https://thanos-querier.example").unwrap();
        assert_eq!(c.endpoint(), "https://thanos-querier.example/api/v1/query");
        for bad in ["ftp://p", "p:9090", "http://", "https://", "http://p/?x=1"] {
            assert!(
                matches!(PrometheusClient::new(bad), Err(PromError::Url { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let client = || PrometheusClient::new("https://p").unwrap();
        let missing = dir.path().join("missing.pem");
        let e = client().with_ca_file(Some(missing.clone())).err().unwrap();
        assert!(
            matches!(&e, PromError::CaFile { path, .. } if *path == missing),
            "{e}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client().with_ca_file(Some(empty)).err().unwrap();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        assert!(client().with_ca_file(None).is_ok());
    }

    #[test]
    fn a_vector_by_job_name() {
        let body = vector(
            r#"{"metric":{"job_name":"a"},"value":[1,"12"]},
               {"metric":{"job_name":"b","state":"pending"},"value":[1,"2.5"]},
               {"metric":{"job_name":"b","state":"x"},"value":[1,"0.5"]},
               {"metric":{},"value":[1,"7"]}"#,
        );
        let v = parse_job_values(&body, EP, "q").unwrap();
        assert_eq!(v, BTreeMap::from([("a".into(), 12.0), ("b".into(), 3.0)]));
        assert!(parse_job_values(&vector(""), EP, "q").unwrap().is_empty());
    }

    #[test]
    fn bad_values_name_their_job() {
        for bad in ["NaN", "-1", "+Inf", "-Inf", "x"] {
            let body = vector(&format!(
                r#"{{"metric":{{"job_name":"a"}},"value":[1,"1"]}},{{"metric":{{"job_name":"j-{bad}"}},"value":[1,"{bad}"]}}"#
            ));
            let e = parse_job_values(&body, EP, "q").unwrap_err();
            assert!(
                matches!(&e, PromError::BadValue { job, value, .. } if *job == format!("j-{bad}") && value == bad),
                "{e}"
            );
            assert!(e.to_string().contains(&format!("job j-{bad}")), "{e}");
        }
    }

    #[test]
    fn answers_that_are_not_a_vector() {
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#;
        assert!(matches!(
            parse_job_values(scalar, EP, "1"),
            Err(PromError::NotVector { result_type, .. }) if result_type == "scalar"
        ));
        let refused = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert!(matches!(
            parse_job_values(refused, EP, "("),
            Err(PromError::Query { error_type, .. }) if error_type == "bad_data"
        ));
        for junk in ["", "<html>", r#"{"status":"success"}"#] {
            assert!(
                matches!(
                    parse_job_values(junk, EP, "q"),
                    Err(PromError::Decode { .. })
                ),
                "{junk}"
            );
        }
    }
}
