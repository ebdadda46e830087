//! The daemon as its HTTP layer sees it: the shared state, the controller's
//! handle, run creation and the API token. `serve` builds it; `http` (the
//! API and the dashboard) and `reload` work on it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::controller::Controller;
use crate::runs::RunFactory;
use crate::state::Shared;

/// The daemon.
pub struct Daemon {
    /// What every task shares.
    pub shared: Arc<Shared>,
    /// The controller's handle (wake it, request aborts).
    pub controller: Arc<Controller>,
    /// Creates runs on request.
    pub runs: RunFactory,
    /// The bearer token mutating requests must present (none: no check).
    pub token: Option<String>,
    /// Where local clusters keep their runs (`DATA_DIR/runs`).
    pub runs_dir: PathBuf,
    /// The repositories followed from their remotes.
    pub repos: Arc<crate::repos::Repos>,
    /// The webhook intake's settings (`POST /hook`).
    pub webhooks: crate::repos::webhooks::Webhooks,
    /// Pull requests, comments and pushes: the forge's client and the
    /// trigger's settings.
    pub pulls: crate::pulls::settings::Pulls,
    /// Reporting to the forge (the outbox's worker and policy).
    pub reports: Arc<crate::reports::Reports>,
}

impl Daemon {
    /// The store, when replicas share it: a run that ran on another
    /// replica has its log and artifacts there.
    pub fn shared_store(&self) -> Option<Arc<dyn bosun_store::Store>> {
        self.shared
            .leadership
            .is_replicated()
            .then(|| self.shared.store.clone())
    }

    /// A daemon over `shared`, with a controller of its own, which `wake`
    /// (given to the executors) wakes.
    pub fn new(
        shared: Arc<Shared>,
        wake: Arc<Notify>,
        token: Option<String>,
        runs_dir: PathBuf,
        repos: Arc<crate::repos::Repos>,
        pulls: crate::pulls::settings::Pulls,
        reports: Arc<crate::reports::Reports>,
    ) -> Arc<Daemon> {
        Arc::new(Daemon {
            controller: Arc::new(Controller::new(shared.clone(), wake)),
            shared,
            runs: RunFactory::default(),
            token,
            runs_dir,
            repos,
            webhooks: Default::default(),
            pulls,
            reports,
        })
    }

    /// Ready to serve: the store is open and a configuration is in force
    /// (the daemon does not start without them), and the scheduler has
    /// evaluated every periodic once. A replica on a shared store is ready
    /// while its store answers, leader or not: readiness never says which
    /// replica leads (`GET /api/v1/leader` does).
    pub fn ready(&self) -> Result<(), &'static str> {
        if self.shared.leadership.is_replicated() {
            return match self.shared.store.get("readiness") {
                Ok(_) => Ok(()),
                Err(_) => Err("the store does not answer"),
            };
        }
        if self.shared.periodics_evaluated() {
            Ok(())
        } else {
            Err("the scheduler has not evaluated every periodic yet")
        }
    }
}
