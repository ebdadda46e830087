//! Leadership among replicas: which `bosun serve` runs what must run once.
//!
//! On a store no other process shares (SQLite, memory), this process is the
//! leader for as long as it runs ([`Leadership::single`]). On PostgreSQL,
//! replicas compete for one lease in the database ([`Leadership::replicated`],
//! [`campaign`]): a follower tries to take it every `retry` (and at once when
//! a leader resigns), the leader renews it every `renew`. While this replica
//! leads, the leader's tasks run (the scheduler, the controller, the sinker,
//! re-planning, repository resyncs, webhook processing, reporting) and every
//! write of its store carries its term (the store refuses it once the term
//! is over: a paused or cut-off leader commits nothing of its old term).
//!
//! What it does outside the database (starting and deleting pods and
//! processes, calling the forge) is fenced by time instead: it acts only
//! inside its trust window, from the start of its last successful renewal
//! for the lease's time to live less a margin, on its own monotonic clock
//! ([`Leadership::trusted`]). The lease, measured by the database's clock
//! from a moment after that start, outlives the window by at least the
//! margin, so no new leader acts while the old one may.
//!
//! A leader stops leading when a renewal finds the lease gone, or when its
//! window ends without a renewal (the database unreachable): its tasks are
//! told to stop and are waited for, then its writes carry no term (it
//! serves as a follower). A graceful stop resigns the lease, so a follower
//! takes over at once instead of after the lease expires.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bosun_base::sync::Lock;
use bosun_postgres::{Lease, LeaseInfo, PgStore};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// The lease's name.
pub const LEASE: &str = "bosun-leader";

/// The lease's timings.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// How long a lease lasts unrenewed (15 s).
    pub ttl: Duration,
    /// How often the leader renews (5 s).
    pub renew: Duration,
    /// How often a follower tries to take the lease (2 s).
    pub retry: Duration,
    /// How much sooner than the lease the trust window ends (2 s).
    pub margin: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            ttl: Duration::from_secs(15),
            renew: Duration::from_secs(5),
            retry: Duration::from_secs(2),
            margin: Duration::from_secs(2),
        }
    }
}

/// This replica's standing.
#[derive(Debug, Clone, Default)]
struct Standing {
    /// The term it leads (none: it follows).
    term: Option<i64>,
    /// When it became the leader.
    since: Option<jiff::Timestamp>,
    /// Until when it may act outside the database.
    trusted_until: Option<Instant>,
}

/// Which replica leads, and whether this one may act.
pub struct Leadership {
    /// This process, as a lease holder (unique per start).
    id: String,
    /// The lease and the store it fences (none: a store of its own, always
    /// the leader).
    lease: Option<(Lease, Arc<PgStore>)>,
    timings: Timings,
    standing: Mutex<Standing>,
    /// Told when the lease was resigned: a follower tries at once.
    pub lease_free: tokio::sync::Notify,
}

/// What `GET /api/v1/leader` tells.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LeaderView {
    /// This replica's id.
    pub replica: String,
    /// Whether this replica leads.
    pub leader: bool,
    /// The replica holding the lease (this one on a store of its own); none
    /// while no replica leads.
    pub holder: Option<String>,
    /// The leader's term (none on a store of its own).
    pub term: Option<i64>,
    /// When the leader began its term.
    pub since: Option<jiff::Timestamp>,
    /// When the lease expires unless renewed.
    pub expires_at: Option<jiff::Timestamp>,
    /// `sqlite`/`memory` (one process) or `postgres` (replicas).
    pub store: &'static str,
}

/// This process's id as a lease holder: the replica's name (`name`: the
/// host and the data directory by default), then `#`, the process id and
/// its start time: unique per start. A replica that starts again under its
/// name takes back a lease its previous process held (see
/// [`bosun_postgres::Lease::try_acquire`]).
pub fn replica_id(name: Option<&str>, data_dir: &std::path::Path) -> String {
    let name = match name {
        Some(n) => n.to_string(),
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "host".into());
            format!("{host}:{}", data_dir.display())
        }
    };
    format!(
        "{name}#{}.{}",
        std::process::id(),
        jiff::Timestamp::now().as_microsecond()
    )
}

impl Leadership {
    /// The leadership of a process with a store of its own: it leads, and
    /// may act, for as long as it runs.
    pub fn single() -> Arc<Leadership> {
        Arc::new(Leadership {
            id: replica_id(Some("single"), std::path::Path::new("")),
            lease: None,
            timings: Timings::default(),
            standing: Mutex::new(Standing {
                term: Some(0),
                since: Some(jiff::Timestamp::now()),
                trusted_until: None,
            }),
            lease_free: tokio::sync::Notify::new(),
        })
    }

    /// The leadership of a replica on the shared `store`, as holder `id`
    /// ([`replica_id`]): it follows until [`campaign`] takes the lease.
    pub fn replicated(store: Arc<PgStore>, timings: Timings, id: String) -> Arc<Leadership> {
        let lease = store.lease(LEASE, &id, timings.ttl);
        Arc::new(Leadership {
            id,
            lease: Some((lease, store)),
            timings,
            standing: Mutex::default(),
            lease_free: tokio::sync::Notify::new(),
        })
    }

    /// This replica's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether replicas share the store (leadership is by lease).
    pub fn is_replicated(&self) -> bool {
        self.lease.is_some()
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        self.standing.locked().term.is_some()
    }

    /// Whether this replica may act outside the database now (start or
    /// delete pods and processes, call the forge): it leads, and its trust
    /// window has not ended. Checked before each such action.
    pub fn trusted(&self) -> bool {
        let s = self.standing.locked();
        trusted_at(self.lease.is_some(), &s, Instant::now())
    }

    /// What `GET /api/v1/leader` tells (reads the lease: blocking).
    pub fn view(&self) -> Result<LeaderView, String> {
        let s = self.standing.locked().clone();
        let Some((lease, _)) = &self.lease else {
            return Ok(LeaderView {
                replica: self.id.clone(),
                leader: true,
                holder: Some(self.id.clone()),
                term: None,
                since: s.since,
                expires_at: None,
                store: "sqlite",
            });
        };
        let info: Option<LeaseInfo> = lease.current().map_err(|e| e.to_string())?;
        let live = info.as_ref().filter(|i| i.live);
        Ok(LeaderView {
            replica: self.id.clone(),
            leader: s.term.is_some(),
            holder: live.map(|i| i.holder.clone()),
            term: live.map(|i| i.term),
            since: live.map(|i| i.since),
            expires_at: live.map(|i| i.expires_at),
            store: "postgres",
        })
    }
}

/// The label on this replica's own pod that says whether it leads
/// (`bosun.dev/leader: "true"` or `"false"`), when it runs in a pod that
/// names itself (`POD_NAME`, `POD_NAMESPACE` from the downward API) and may
/// patch it: a Service or `kubectl get pods -l bosun.dev/leader=true`
/// finds the leader. Readiness never says it.
pub struct PodLabel {
    client: kube::Client,
    namespace: String,
    name: String,
}

/// The label's key.
pub const LEADER_LABEL: &str = "bosun.dev/leader";

impl PodLabel {
    /// The label of the pod `POD_NAME` in `POD_NAMESPACE`, through the
    /// in-cluster (or `KUBECONFIG`'s) client; none outside a pod.
    pub async fn from_env() -> Option<PodLabel> {
        let (name, namespace) = (
            std::env::var("POD_NAME").ok()?,
            std::env::var("POD_NAMESPACE").ok()?,
        );
        match kube::Client::try_default().await {
            Ok(client) => Some(PodLabel {
                client,
                namespace,
                name,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "no Kubernetes client: this replica's pod is not labelled with its leadership");
                None
            }
        }
    }

    /// Sets the label to `leads` (a failure is logged: the label is a hint,
    /// the lease decides).
    pub async fn set(&self, leads: bool) {
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), &self.namespace);
        let patch = serde_json::json!({"metadata": {"labels": {LEADER_LABEL: leads.to_string()}}});
        if let Err(e) = pods
            .patch(
                &self.name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            tracing::warn!(pod = %self.name, error = %e, "cannot label this replica's pod with its leadership");
        }
    }
}

async fn label(pod: &Option<PodLabel>, leads: bool) {
    if let Some(p) = pod {
        p.set(leads).await;
    }
}

/// Starts the leader's tasks, each stopping when its receiver turns true.
pub type StartTasks = Box<dyn Fn(watch::Receiver<bool>) -> Vec<JoinHandle<()>> + Send + Sync>;

/// Called when this replica becomes the leader, before its tasks start
/// (blocking: reloads what followers do not keep current).
pub type OnLead = Box<dyn Fn() + Send + Sync>;

/// Runs the leader's tasks while this replica leads, until `stop`: on a
/// store of its own at once and for good; on a shared one by the lease.
/// At `stop` the tasks are stopped and waited for, and the lease resigned.
pub async fn campaign(
    leadership: Arc<Leadership>,
    metrics: Arc<Metrics>,
    start: StartTasks,
    on_lead: OnLead,
    mut stop: watch::Receiver<bool>,
) {
    let Some((lease, store)) = &leadership.lease else {
        metrics.leader.set(1);
        let (tx, rx) = watch::channel(false);
        let tasks = start(rx);
        let _ = stop.changed().await;
        let _ = tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        return;
    };
    let t = leadership.timings;
    let pod = PodLabel::from_env().await;
    label(&pod, false).await;
    let mut leading: Option<(i64, watch::Sender<bool>, Vec<JoinHandle<()>>)> = None;
    loop {
        match &leading {
            None => {
                let began = Instant::now();
                let l = lease.clone();
                match blocking(move || l.try_acquire()).await {
                    Ok(Some(term)) => {
                        store.set_fence(Some(lease.fence(term)));
                        {
                            let mut s = leadership.standing.locked();
                            s.term = Some(term);
                            s.since = Some(jiff::Timestamp::now());
                            s.trusted_until = Some(began + t.ttl - t.margin);
                        }
                        tracing::info!(term, replica = %leadership.id, "this replica leads");
                        metrics.leader.set(1);
                        metrics.leader_term.set(term);
                        metrics.leader_acquired.inc();
                        let reload = &on_lead;
                        let _ = blocking_ref(reload).await;
                        let (tx, rx) = watch::channel(false);
                        let tasks = start(rx);
                        leading = Some((term, tx, tasks));
                        label(&pod, true).await;
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot try to take the leader's lease"),
                }
                tokio::select! {
                    _ = tokio::time::sleep(t.retry) => {}
                    _ = leadership.lease_free.notified() => {}
                    _ = stop.changed() => return,
                }
            }
            Some((term, _, _)) => {
                let term = *term;
                let trusted_until = leadership.standing.locked().trusted_until;
                let wait = renewal_wait(trusted_until, Instant::now(), &t);
                let stopping = tokio::select! {
                    _ = tokio::time::sleep(wait) => false,
                    _ = stop.changed() => true,
                };
                if stopping {
                    let (_, tx, tasks) = leading.take().expect("leading");
                    stop_tasks(tx, tasks).await;
                    let l = lease.clone();
                    let resign = blocking(move || l.resign(term)).await;
                    store.set_fence(None);
                    leadership.standing.locked().term = None;
                    metrics.leader.set(0);
                    metrics.leader_term.set(0);
                    label(&pod, false).await;
                    match resign {
                        Ok(_) => {
                            metrics.leader_lost.get_or_create(&reason("resigned")).inc();
                            tracing::info!(term, "resigned the leader's lease")
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot resign the leader's lease"),
                    }
                    return;
                }
                let began = Instant::now();
                let l = lease.clone();
                let renewal = tokio::time::timeout_at(
                    tokio::time::Instant::from_std(renewal_deadline(trusted_until, began, &t)),
                    blocking(move || l.renew(term)),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(bosun_store::StoreError::Unavailable(
                        "the renewal did not answer within the trust window".into(),
                    ))
                });
                let lost = match renewal {
                    Ok(true) => {
                        leadership.standing.locked().trusted_until = Some(began + t.ttl - t.margin);
                        metrics
                            .leader_renewals
                            .get_or_create(&reason_result("renewed"))
                            .inc();
                        None
                    }
                    Ok(false) => {
                        metrics
                            .leader_renewals
                            .get_or_create(&reason_result("lost"))
                            .inc();
                        Some("lost")
                    }
                    Err(e) => {
                        metrics
                            .leader_renewals
                            .get_or_create(&reason_result("error"))
                            .inc();
                        tracing::warn!(error = %e, "cannot renew the leader's lease");
                        match leadership.standing.locked().trusted_until {
                            Some(until) if Instant::now() < until => None,
                            _ => Some("untrusted"),
                        }
                    }
                };
                if let Some(why) = lost {
                    tracing::warn!(term, reason = why, "this replica no longer leads");
                    // Acting stops at once; the tasks are waited for before
                    // the writes lose their term.
                    {
                        let mut s = leadership.standing.locked();
                        s.term = None;
                        s.trusted_until = None;
                    }
                    metrics.leader.set(0);
                    metrics.leader_term.set(0);
                    metrics.leader_lost.get_or_create(&reason(why)).inc();
                    label(&pod, false).await;
                    let (_, tx, tasks) = leading.take().expect("leading");
                    stop_tasks(tx, tasks).await;
                    store.set_fence(None);
                }
            }
        }
    }
}

/// How long the leader waits before its next renewal, at `now` with its
/// trust window ending at `until`: `renew` while more than that is left;
/// then (renewals failing) every `retry`, but never more than half of what
/// is left, so that each try begins with time to answer. A window already
/// over (the acquisition waited on the lease's row past it) is renewed at
/// once.
fn renewal_wait(until: Option<Instant>, now: Instant, t: &Timings) -> Duration {
    let left = until.map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
    if left > t.renew {
        t.renew
    } else {
        t.retry.min(left / 2)
    }
}

/// Until when a renewal that began at `began` may take, the trust window
/// ending at `until`. A renewal that does not answer by the window's end (a
/// connection cut without a FIN hangs until TCP gives up) is a failed one:
/// the replica stops leading then, not when the call returns. One that
/// began with the window already over (the replica acts on nothing
/// meanwhile, and its writes are fenced by the lease) gets `margin`: the
/// lease, measured from a moment after the acquisition began, may still be
/// its own, and an answer gives it a new window instead of a new term.
fn renewal_deadline(until: Option<Instant>, began: Instant, t: &Timings) -> Instant {
    match until {
        Some(u) if u > began => u,
        _ => began + t.margin,
    }
}

/// Whether a replica standing as `s` may act at `now`: always on a store
/// of its own (`by_lease` false); by lease, only with a term and before its
/// trust window's end. The window is what counts, not the term: a replica
/// woken from a pause past its window still holds its term until its
/// overdue renewal fails, and must not act meanwhile.
fn trusted_at(by_lease: bool, s: &Standing, now: Instant) -> bool {
    match (by_lease, s.term) {
        (false, _) => true,
        (true, None) => false,
        (true, Some(_)) => s.trusted_until.is_some_and(|t| now < t),
    }
}

fn reason(why: &str) -> Vec<(String, String)> {
    vec![("reason".into(), why.into())]
}

fn reason_result(what: &str) -> Vec<(String, String)> {
    vec![("result".into(), what.into())]
}

/// Tells the leader's tasks to stop and waits for them.
async fn stop_tasks(tx: watch::Sender<bool>, tasks: Vec<JoinHandle<()>>) {
    let _ = tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
}

/// Runs a blocking lease call off the runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("a lease call does not panic")
}

/// Runs `f` in place (it blocks briefly: the reload of the active runs).
async fn blocking_ref(f: &OnLead) {
    tokio::task::block_in_place(f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_renewal_begins_with_time_to_answer() {
        let t = Timings {
            ttl: Duration::from_secs(3),
            renew: Duration::from_secs(1),
            retry: Duration::from_millis(500),
            margin: Duration::from_secs(1),
        };
        let now = Instant::now();
        let ms = Duration::from_millis;
        // A fresh window: the next renewal after `renew`, which ends well
        // inside it.
        assert_eq!(renewal_wait(Some(now + ms(1900)), now, &t), ms(1000));
        assert_eq!(
            renewal_deadline(Some(now + ms(1900)), now, &t),
            now + ms(1900)
        );
        // Renewals failing: every `retry` while that leaves half.
        assert_eq!(renewal_wait(Some(now + ms(1000)), now, &t), ms(500));
        // Little left: half of it, never a try that begins at the end.
        assert_eq!(renewal_wait(Some(now + ms(520)), now, &t), ms(260));
        assert_eq!(renewal_wait(Some(now + ms(40)), now, &t), ms(20));
        // A window over before the renewal began (an acquisition that
        // waited on the lease's row): at once, with `margin` to answer.
        assert_eq!(renewal_wait(Some(now - ms(300)), now, &t), Duration::ZERO);
        assert_eq!(renewal_wait(None, now, &t), Duration::ZERO);
        assert_eq!(
            renewal_deadline(Some(now - ms(300)), now, &t),
            now + ms(1000)
        );
        assert_eq!(renewal_deadline(Some(now), now, &t), now + ms(1000));
        assert_eq!(renewal_deadline(None, now, &t), now + ms(1000));
    }

    #[test]
    fn a_term_past_its_trust_window_may_not_act() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        let standing = |term, until| Standing {
            term,
            since: None,
            trusted_until: until,
        };
        // Inside the window.
        assert!(trusted_at(
            true,
            &standing(Some(3), Some(now + second)),
            now
        ));
        // Past it, the term still held (a renewal not failed yet).
        assert!(!trusted_at(
            true,
            &standing(Some(3), Some(now - second)),
            now
        ));
        assert!(!trusted_at(true, &standing(Some(3), Some(now)), now));
        assert!(!trusted_at(true, &standing(Some(3), None), now));
        // No term.
        assert!(!trusted_at(true, &standing(None, Some(now + second)), now));
        // A store of its own: always.
        assert!(trusted_at(false, &standing(None, None), now));
    }
}
