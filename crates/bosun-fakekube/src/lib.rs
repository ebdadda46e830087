//! A fake Kubernetes API server for tests, run as a separate process.
//!
//! **This is a test fake, not a Kubernetes implementation.** It exists so that
//! bosun's Kubernetes executor (built on kube-rs) can be tested on machines where no
//! real API server can be installed. It models only what that executor needs, with
//! real wire formats (JSON bodies, `Status` errors, watch streams, TLS, bearer
//! tokens) but none of Kubernetes' machinery: there is no scheduler, no kubelet, no
//! admission, no validation beyond what the fake needs, and no persistence. Tests
//! drive pod lifecycles by hand through a plain-HTTP *control API*.
//!
//! # What is modelled
//!
//! * `GET /version`, discovery (`/api`, `/api/v1`, `/apis`) for pods only.
//! * Pods (`/api/v1/namespaces/{ns}/pods[/{name}]`, and `/api/v1/pods` for all
//!   namespaces): create (uid, creationTimestamp, `Pending`), get, list and watch
//!   with label selectors (`k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (..)`,
//!   `k notin (..)`), field selectors (`metadata.name`, `metadata.namespace`,
//!   `status.phase`, `spec.nodeName`), replace (`PUT`), merge patch (strategic merge
//!   and apply patches are treated as JSON merge patches), delete (immediate, the
//!   deletion is recorded).
//! * One global resourceVersion counter, bumped on every change; a bounded watch
//!   history; 410 `Expired` for watches older than the history; bookmarks;
//!   `timeoutSeconds`.
//! * `GET .../pods/{name}/log` with `follow`, `tailLines`; a pod whose containers have
//!   not started answers 400 like a real API server.
//! * `SelfSubjectAccessReview` answered from a configurable deny set.
//! * Faults: hanging requests, a "down" API server (connections closed, or 503),
//!   forced 410 on watches,
//!   pods disappearing (node lost).
//!
//! # Control API (plain HTTP JSON, no auth)
//!
//! | Call | Effect |
//! |---|---|
//! | `POST /control/pods/{ns}/{name}/phase` [`PhaseUpdate`] | phase, container states, reason, message, node; MODIFIED |
//! | `POST /control/pods/{ns}/{name}/unschedulable` `{"message"?}` | PodScheduled=False, `Unschedulable`; MODIFIED |
//! | `POST /control/pods/{ns}/{name}/log` raw text | appends to the pod's log (`GET` reads it) |
//! | `POST /control/pods/{ns}/{name}/delete` | the pod vanishes (node lost); DELETED |
//! | `POST /control/gone` | open watches end with 410; history forgotten |
//! | `POST /control/hang` `{"hang": bool}` | every Kubernetes request hangs while true |
//! | `POST /control/down` `{"down": bool, "mode"?: "refuse"\|"503"}` | connections closed (default) or 503 |
//! | `POST /control/deny` [`DenyRule`]; `DELETE`, `GET` | SSAR deny set |
//! | `GET /control/pods`, `/control/deleted`, `/control/requests` (`DELETE` clears) | inspection |
//!
//! Not modelled: other resources, JSON patches (415), `/status` subresources,
//! graceful deletion (pods go at once), list pagination and `resourceVersionMatch`
//! (lists always answer the latest state), HTTP/2, per-container logs.
//!
//! # Layout
//!
//! * [`server`]: the server (used by the `bosun-fakekube` binary).
//! * [`FakeCluster`]: a handle for tests in other crates: spawns the binary, reads its
//!   ready line, offers typed control calls, kills the process on drop.

pub mod cluster;
pub mod server;
pub mod wire;

pub use cluster::{FakeCluster, Options};
pub use wire::{ContainerOutcome, Deletion, DenyRule, DownMode, PhaseUpdate, Ready, RequestRecord};
