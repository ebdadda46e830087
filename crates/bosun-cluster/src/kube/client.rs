//! A Kubernetes cluster's API client: one per kubeconfig context, every call
//! bounded by [`API_TIMEOUT`] and never retried by kube-rs (bosun's own loops
//! come back to a cluster soon enough). A `Connection` (crate-private) holds
//! a context's client, made on first use, and hands out the pod API of the
//! pod namespace.
//!
//! Every request says who sent it: `User-Agent: bosun/VERSION`, or, in a
//! replica on PostgreSQL, `bosun/VERSION (replica ID)` ([`set_user_agent`]),
//! so that a cluster's audit log tells the replicas apart (they share one
//! service account).
//!
//! It knows nothing of runs, pods' meaning, health or executors: only how to
//! reach a cluster, and the errors of doing so ([`ApiError`]).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::executor::ExecError;

/// How long any call to a cluster's API may take.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to a cluster's API failed (its text is kube-rs's, or bosun's
/// where bosun gave up).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The kubeconfig file cannot be read.
    #[error("kubeconfig {}: {reason}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The context cannot give a client (missing, bad credentials, ...).
    #[error("context {context:?}: {reason}")]
    Context {
        /// The context.
        context: String,
        /// Why.
        reason: String,
    },
    /// The API answered with an error status (`code`: 404, 409, 5xx, ...).
    #[error("{text}")]
    Status {
        /// The HTTP status.
        code: u16,
        /// kube-rs's text of the answer.
        text: String,
    },
    /// The request got no usable answer (connection, TLS, decoding, ...).
    #[error("{0}")]
    Request(String),
    /// One step of a health probe failed (`reason` may be "timed out").
    #[error("{step}: {reason}")]
    Step {
        /// The step: `version`, `access review (VERB pods)`.
        step: String,
        /// Why.
        reason: String,
    },
    /// No answer within [`API_TIMEOUT`].
    #[error("the cluster's API did not answer in time")]
    TimedOut,
    /// The executor's runtime was stopped.
    #[error("executor stopped")]
    Stopped,
}

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> Self {
        match &e {
            kube::Error::Api(s) => ApiError::Status {
                code: s.code,
                text: e.to_string(),
            },
            _ => ApiError::Request(e.to_string()),
        }
    }
}

/// The `User-Agent` of this process's requests, once set.
static USER_AGENT: OnceLock<String> = OnceLock::new();

/// `bosun/VERSION`, and ` (replica ID)` when `replica` is given: the
/// `User-Agent` of a replica `replica` (its lease holder id). Characters a
/// header cannot carry (outside printable ASCII) become `?`.
pub fn user_agent_of(replica: Option<&str>) -> String {
    let base = concat!("bosun/", env!("CARGO_PKG_VERSION"));
    match replica {
        None => base.to_string(),
        Some(id) => {
            let id: String = id
                .chars()
                .map(|c| {
                    if c == ' ' || c.is_ascii_graphic() {
                        c
                    } else {
                        '?'
                    }
                })
                .collect();
            format!("{base} (replica {id})")
        }
    }
}

/// Sets the `User-Agent` of every client made from now on in this process
/// (once: a later call changes nothing and returns false). Unset, it is
/// [`user_agent_of`]`(None)`.
pub fn set_user_agent(agent: String) -> bool {
    USER_AGENT.set(agent).is_ok()
}

/// The `User-Agent` this process's clients send.
pub fn user_agent() -> String {
    USER_AGENT
        .get()
        .cloned()
        .unwrap_or_else(|| user_agent_of(None))
}

/// The configuration of `context` of `kubeconfig` (the default kubeconfig
/// when none), with bosun's timeouts, no retries and its `User-Agent`.
async fn config_of(kubeconfig: Option<&Path>, context: &str) -> Result<Config, ApiError> {
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    let in_context = |e: kube::config::KubeconfigError| ApiError::Context {
        context: context.to_string(),
        reason: e.to_string(),
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| ApiError::Kubeconfig {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
            Config::from_custom_kubeconfig(file, &options).await
        }
        None => Config::from_kubeconfig(&options).await,
    }
    .map_err(in_context)?;
    config.connect_timeout = Some(API_TIMEOUT);
    config.read_timeout = Some(API_TIMEOUT);
    config.write_timeout = Some(API_TIMEOUT);
    // kube retries 429, 503 and 504 answers for minutes by default; bosun's
    // own loops come back to a cluster soon enough, and a call must not hold
    // a task past the API timeout.
    config.default_retry = false;
    if let Ok(agent) = http::HeaderValue::from_str(&user_agent()) {
        config.headers.push((http::header::USER_AGENT, agent));
    }
    Ok(config)
}

/// A client for `context` of `kubeconfig` (the default kubeconfig when none).
pub async fn client(kubeconfig: Option<&Path>, context: &str) -> Result<Client, ApiError> {
    let config = config_of(kubeconfig, context).await?;
    Client::try_from(config).map_err(|e| ApiError::Context {
        context: context.to_string(),
        reason: e.to_string(),
    })
}

/// A client for long streams (pod logs followed) of `context`: HTTP/2 when
/// the API server offers it (it does), so that its streams share one
/// connection, where kube-rs's own client (HTTP/1.1) holds a connection,
/// with its TLS state and buffers, for each. No read timeout (a quiet
/// container's log is silent for as long as it likes); HTTP/2 pings and TCP
/// keepalive find a dead connection instead.
fn stream_client(setup: &StreamSetup) -> Result<StreamService, ApiError> {
    use kube::client::ConfigExt;
    let (config, tls) = (&setup.config, setup.tls.clone());
    let in_context = |reason: String| ApiError::Context {
        context: setup.context.clone(),
        reason,
    };
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(API_TIMEOUT));
    http.set_keepalive(Some(Duration::from_secs(30)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http);
    let connections =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(API_TIMEOUT)
            .build(https);
    let auth = config.auth_layer().map_err(|e| in_context(e.to_string()))?;
    let headers = config
        .extra_headers_layer()
        .map_err(|e| in_context(e.to_string()))?;
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(auth)
        .layer(headers)
        .map_err(
            |e: hyper_util::client::legacy::Error| -> Box<dyn std::error::Error + Send + Sync> {
                Box::new(e)
            },
        )
        .service(connections);
    Ok(StreamService::new(service))
}

/// The requests of a stream connection: the kubeconfig's base URI,
/// credentials and headers over an HTTP/2 client, called directly. A
/// kube-rs `Client` would put a queue and a task of its own in front of it
/// (about 15 KB a connection: 150 bytes of every log followed).
type StreamService = tower::util::BoxCloneSyncService<
    http::Request<kube::client::Body>,
    http::Response<hyper::body::Incoming>,
    Box<dyn std::error::Error + Send + Sync>,
>;

/// What every stream client of a context is made from, read once: its
/// kubeconfig's settings and TLS configuration (one session cache shared by
/// its connections, where a configuration made for each connection kept
/// one each).
struct StreamSetup {
    context: String,
    config: kube::Config,
    /// The connector offers h2, then http/1.1.
    tls: rustls::ClientConfig,
}

impl StreamSetup {
    async fn new(kubeconfig: Option<&Path>, context: &str) -> Result<Self, ApiError> {
        use kube::client::ConfigExt;
        let config = config_of(kubeconfig, context).await?;
        let mut tls = config
            .rustls_client_config()
            .map_err(|e| ApiError::Context {
                context: context.to_string(),
                reason: e.to_string(),
            })?;
        tls.alpn_protocols.clear();
        Ok(StreamSetup {
            context: context.to_string(),
            config,
            tls,
        })
    }
}

/// How many log streams one connection of [`stream_client`] carries at
/// once. kube-apiserver advertises 250 or more, but at 200 a connection
/// answered only about 100 follows (the 10,000-run memory benchmark: the
/// others waited, never answered); 100 each is what was seen to work.
const STREAMS_PER_CONNECTION: usize = 100;

/// A stream client and how many streams it carries.
struct StreamConnection {
    service: StreamService,
    open: std::sync::atomic::AtomicUsize,
}

/// A stream's place on a connection of [`stream_client`], held while the
/// stream is open.
pub(crate) struct StreamSlot(std::sync::Arc<StreamConnection>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0
            .open
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A context's client, made on first use, and its pod namespace.
pub(crate) struct Connection {
    kubeconfig: Option<PathBuf>,
    context: String,
    namespace: String,
    client: tokio::sync::Mutex<Option<Client>>,
    /// The clients of long streams, each carrying at most
    /// [`STREAMS_PER_CONNECTION`], and what they are made from.
    streams: tokio::sync::Mutex<(Option<StreamSetup>, Vec<std::sync::Arc<StreamConnection>>)>,
}

impl Connection {
    /// The connection to `context` of `kubeconfig`, for pods in `namespace`.
    pub(crate) fn new(kubeconfig: Option<PathBuf>, context: &str, namespace: &str) -> Self {
        Connection {
            kubeconfig,
            context: context.to_string(),
            namespace: namespace.to_string(),
            client: tokio::sync::Mutex::new(None),
            streams: tokio::sync::Mutex::default(),
        }
    }

    /// The context's client, made on first use.
    pub(crate) async fn client(&self) -> Result<Client, ApiError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        // Boxed: loading a kubeconfig is a large future, and rare.
        let c = Box::pin(client(self.kubeconfig.as_deref(), &self.context)).await?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// The pods of the pod namespace.
    pub(crate) async fn pods(&self) -> Result<Api<Pod>, ApiError> {
        Ok(Api::namespaced(self.client().await?, &self.namespace))
    }

    /// Pod `name`'s log, read as `params` say (followed), as one long
    /// stream: through a stream client with room for it (a new one when all
    /// are full), holding its place until the slot is dropped. The errors
    /// are those of kube-rs's `Api::log_stream`.
    pub(crate) async fn pod_log_stream(
        &self,
        name: &str,
        params: &kube::api::LogParams,
    ) -> Result<(impl futures_util::AsyncBufRead + use<>, StreamSlot), ApiError> {
        use futures_util::TryStreamExt;
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let request =
            kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", self.namespace))
                .logs(name, params)
                .map_err(|e| ApiError::from(kube::Error::BuildRequest(e)))?;
        let (service, slot) = self.stream_service().await?;
        let answer = service
            .oneshot(request.map(kube::client::Body::from))
            .await
            .map_err(|e| ApiError::from(kube::Error::Service(e)))?;
        let code = answer.status();
        if code.is_client_error() || code.is_server_error() {
            let body = answer
                .into_body()
                .collect()
                .await
                .map_err(|e| ApiError::from(kube::Error::HyperError(e)))?
                .to_bytes();
            let status = answer_status(code, &body);
            return Err(ApiError::from(kube::Error::Api(status.boxed())));
        }
        let lines = answer
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other)
            .into_async_read();
        Ok((lines, slot))
    }

    /// A stream client with room for one more stream (a new one when all
    /// are full), and the stream's place on it.
    async fn stream_service(&self) -> Result<(StreamService, StreamSlot), ApiError> {
        use std::sync::atomic::Ordering;
        let mut guard = self.streams.lock().await;
        let (setup, streams) = &mut *guard;
        // Connections left without a stream go, but the first.
        let mut first = true;
        streams.retain(|c| std::mem::take(&mut first) || c.open.load(Ordering::SeqCst) > 0);
        let room = streams
            .iter()
            .find(|c| c.open.load(Ordering::SeqCst) < STREAMS_PER_CONNECTION)
            .cloned();
        let conn = match room {
            Some(c) => c,
            None => {
                if setup.is_none() {
                    *setup = Some(
                        Box::pin(StreamSetup::new(self.kubeconfig.as_deref(), &self.context))
                            .await?,
                    );
                }
                let setup = setup.as_ref().expect("made above");
                let service = stream_client(setup)?;
                let c = std::sync::Arc::new(StreamConnection {
                    service,
                    open: Default::default(),
                });
                streams.push(c.clone());
                c
            }
        };
        conn.open.fetch_add(1, Ordering::SeqCst);
        Ok((conn.service.clone(), StreamSlot(conn)))
    }

    /// Creates `pod` in the pod namespace (see [`Connection::create_in`]).
    pub(crate) async fn create_pod(&self, pod: &Pod) -> Result<(), Refusal> {
        let body =
            serde_json::to_vec(pod).map_err(|e| Refusal::from(kube::Error::SerdeError(e)))?;
        self.create_in("/api/v1", "pods", body).await
    }

    /// Creates the object `body` in collection `resource` of API `group`
    /// (`/api/v1`, `/apis/tekton.dev/v1`) in the pod namespace, as
    /// `Api::create` does, keeping the answer's `Retry-After` and its whole
    /// `Status` with its error: kube-rs drops a failed answer's headers,
    /// and kube-apiserver's priority and fairness says how long to wait
    /// after a 429 only there (its body is plain text).
    pub(crate) async fn create_in(
        &self,
        group: &str,
        resource: &str,
        body: Vec<u8>,
    ) -> Result<(), Refusal> {
        let client = self.client().await.map_err(Refusal::from)?;
        let request =
            kube::core::Request::new(format!("{group}/namespaces/{}/{resource}", self.namespace))
                .create(&kube::api::PostParams::default(), body)
                .map_err(|e| Refusal::from(kube::Error::BuildRequest(e)))?;
        let answer = client
            .send(request.map(kube::client::Body::from))
            .await
            .map_err(Refusal::from)?;
        let code = answer.status();
        let retry_after = answer
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = answer
            .into_body()
            .collect_bytes()
            .await
            .map_err(Refusal::from)?;
        if code.is_success() {
            return Ok(());
        }
        let status = answer_status(code, &body);
        let retry_after = retry_after.or_else(|| {
            let seconds = status.details.as_ref()?.retry_after_seconds;
            (seconds > 0).then(|| Duration::from_secs(seconds.into()))
        });
        Err(Refusal {
            answer: Ok(status.boxed()),
            retry_after,
        })
    }
}

/// The `Status` of an error answer (`code`, `body`), as kube-rs makes it:
/// the body's, or one made of its text when it is not a `Status` (a proxy's
/// answer, plain text).
fn answer_status(code: http::StatusCode, body: &[u8]) -> kube::core::Status {
    serde_json::from_slice::<kube::core::Status>(body).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(body);
        kube::core::Status::failure(text.trim(), "Failed to parse error data")
            .with_code(code.as_u16())
    })
}

/// Why a creation did not go through, and how long the API asked to wait
/// before the next (`Retry-After`, or a `Status`'s `retryAfterSeconds`).
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    /// The API's answer (its whole `Status`), or why there was none.
    pub(crate) answer: Result<Box<kube::core::Status>, ApiError>,
    /// The wait the API asked for.
    pub(crate) retry_after: Option<Duration>,
}

impl<E: Into<ApiError>> From<E> for Refusal {
    fn from(e: E) -> Self {
        Refusal {
            answer: Err(e.into()),
            retry_after: None,
        }
    }
}

impl Refusal {
    /// The answer's HTTP status, if the API answered.
    pub(crate) fn code(&self) -> Option<u16> {
        match &self.answer {
            Ok(status) => Some(status.code),
            Err(e) => e.code(),
        }
    }

    /// The refusal as an error.
    pub(crate) fn error(&self) -> ApiError {
        match &self.answer {
            Ok(status) => ApiError::from(kube::Error::Api(status.clone())),
            Err(e) => e.clone(),
        }
    }

    /// What the refusal of a creation means for it: made before (409: the
    /// object of that name is there, a restart between create and commit),
    /// refused for good (see [`refuses`]), or else (the outer error) a
    /// failure that may pass.
    pub(crate) fn of_creation(self) -> Result<Result<(), ExecError>, Refusal> {
        match self.code() {
            Some(409) => Ok(Ok(())),
            Some(code) if refuses(code) => Ok(Err(ExecError::Refused(self.error().to_string()))),
            _ => Err(self),
        }
    }
}

impl ApiError {
    /// The HTTP status of an answer the API gave, if it gave one.
    pub(crate) fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Whether an answer of HTTP status `code` is the API refusing the request
/// itself (a 4xx): trying it again would get the same answer. Not so `429
/// Too Many Requests` (kube-apiserver's priority and fairness shedding
/// load, as client-go retries it under plank) nor `408`: those pass.
fn refuses(code: u16) -> bool {
    (400..500).contains(&code) && code != 429 && code != 408
}

#[cfg(test)]
mod user_agent_tests {
    #[test]
    fn a_replica_names_itself_in_printable_ascii() {
        let v = env!("CARGO_PKG_VERSION");
        assert_eq!(super::user_agent_of(None), format!("bosun/{v}"));
        assert_eq!(
            super::user_agent_of(Some("host:/var/lib/bosun#12.345")),
            format!("bosun/{v} (replica host:/var/lib/bosun#12.345)")
        );
        let odd = super::user_agent_of(Some("h\u{f6}st\n"));
        assert_eq!(odd, format!("bosun/{v} (replica h?st?)"));
        assert!(http::HeaderValue::from_str(&odd).is_ok());
    }
}

#[cfg(test)]
mod refusal_tests {
    #[test]
    fn only_answers_that_would_not_change_are_refusals() {
        for code in [400, 403, 404, 409, 422] {
            assert!(super::refuses(code), "{code}");
        }
        // Load shed by priority and fairness, a request timeout, a server
        // error: they pass.
        for code in [408, 429, 500, 503] {
            assert!(!super::refuses(code), "{code}");
        }
    }
}
