//! Pull requests, comments and pushes start jobs, with Prow's trigger
//! rules (`bosun_forge::trigger`): the stored webhook deliveries' pull
//! request, comment and push events ([`crate::repos::hook`] hands them
//! here, in order per repository) are decided by the trigger against a
//! [`host::DaemonHost`] (the forge's answers through its client, the
//! repository's mirror for the changed files and the pull request's merge,
//! the configuration in force), and the actions carried out ([`act`]):
//! runs created through the one run-creation path, runs aborted through
//! the controller, replies and labels queued in the store's outbox.
//!
//! Which repositories: every repository when no `--plugin-config` is
//! given; else those for which Prow's `plugins.yaml` enables `trigger`,
//! with its `triggers:` settings (trusted apps, trusted org, only org
//! members, ...). The file is read again when it changes; a file that does
//! not load keeps the last good one in force, with the error logged.

pub mod act;
pub mod host;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bosun_base::sync::Lock;
use bosun_config::plugins::{PluginConfig, Trigger};
use bosun_forge::client::Client;
use bosun_forge::hook::{Comment, Event, PullRequest, Push};
use bosun_forge::trigger;

use crate::daemon::Daemon;

/// The file a plugin configuration was read from, as it was then.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        len: m.len(),
        modified: m.modified().ok(),
        inode: m.ino(),
    })
}

/// Prow's plugin configuration in force, read again when its file changes.
#[derive(Default)]
struct Plugins {
    path: Option<PathBuf>,
    loaded: Option<(Option<Stamp>, Arc<PluginConfig>)>,
}

/// What pull requests, comments and pushes need beyond the daemon: the
/// forge's client and the trigger's settings.
pub struct Pulls {
    /// The forge's client (`--github-token-path` or a GitHub App), if one
    /// is configured: without it, the trigger cannot ask who is trusted and
    /// pull requests and comments start nothing (pushes still do).
    pub client: Option<Arc<Client>>,
    plugins: Mutex<Plugins>,
    /// The bot's login, asked of the forge once.
    bot: std::sync::OnceLock<String>,
}

impl Pulls {
    /// With `client`, and the plugin configuration at `plugin_config` (read
    /// now: an error is returned, so that `bosun serve` does not start with
    /// a broken file).
    pub fn new(
        client: Option<Arc<Client>>,
        plugin_config: Option<PathBuf>,
    ) -> Result<Pulls, String> {
        let pulls = Pulls {
            client,
            plugins: Mutex::new(Plugins {
                path: plugin_config,
                loaded: None,
            }),
            bot: std::sync::OnceLock::new(),
        };
        pulls.plugins()?;
        Ok(pulls)
    }

    /// The plugin configuration in force (`None`: no `--plugin-config`),
    /// read again if its file changed; an error when the file does not
    /// load and none was loaded before.
    fn plugins(&self) -> Result<Option<Arc<PluginConfig>>, String> {
        let mut p = self.plugins.locked();
        let Some(path) = p.path.clone() else {
            return Ok(None);
        };
        let now = stamp(&path);
        if let Some((seen, config)) = &p.loaded {
            if *seen == now {
                return Ok(Some(config.clone()));
            }
        }
        match bosun_config::plugins::load_plugins(&path) {
            Ok(config) => {
                let config = Arc::new(config);
                p.loaded = Some((now, config.clone()));
                Ok(Some(config))
            }
            Err(diagnostics) => {
                let text = diagnostics
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n");
                match &p.loaded {
                    Some((_, config)) => {
                        tracing::error!(file = %path.display(), "the plugin configuration has errors; the last good one stays in force:\n{text}");
                        Ok(Some(config.clone()))
                    }
                    None => Err(format!("the plugin configuration has errors:\n{text}")),
                }
            }
        }
    }

    /// The bot's login (asked of the forge the first time).
    pub fn bot(&self, client: &Client) -> Result<String, String> {
        if let Some(b) = self.bot.get() {
            return Ok(b.clone());
        }
        let login = client
            .bot_login()
            .map_err(|e| format!("cannot ask the forge who the bot is: {e}"))?;
        Ok(self.bot.get_or_init(|| login).clone())
    }

    /// The trigger's settings for `repo` (`org/repo`), `None` when the
    /// trigger is not enabled for it.
    pub fn settings(&self, repo: &str) -> Option<Trigger> {
        let (org, name) = repo.split_once('/').unwrap_or((repo, ""));
        match self.plugins() {
            Ok(None) => Some(Trigger::default()),
            Ok(Some(p)) => p
                .trigger_enabled(org, name)
                .then(|| p.trigger_for(org, name)),
            Err(e) => {
                tracing::error!("{e}");
                None
            }
        }
    }
}

/// Carries out what `event` (of delivery `delivery`) starts; errors are
/// logged (a delivery is processed once: what the forge could not answer
/// is not retried, as Prow's trigger does not retry a webhook).
pub async fn on_event(daemon: &Arc<Daemon>, delivery: &str, event: Event) {
    match event {
        Event::PullRequest(pr) => on_pull_request(daemon, delivery, pr).await,
        Event::Comment(c) => on_comment(daemon, delivery, c).await,
        Event::Push(p) => on_push(daemon, delivery, p).await,
        _ => {}
    }
}

async fn on_pull_request(daemon: &Arc<Daemon>, delivery: &str, pr: PullRequest) {
    let Some(settings) = daemon.pulls.settings(&pr.repo) else {
        return;
    };
    let d = daemon.clone();
    let repo = pr.repo.clone();
    let number = pr.number;
    let decided = tokio::task::spawn_blocking(move || {
        let host = host::DaemonHost::new(&d, &pr.repo, &pr.clone_url)?;
        let actions = trigger::on_pull_request(&host, &settings, &pr).map_err(|e| e.to_string())?;
        Ok::<_, String>((actions, host.into_snapshot()))
    })
    .await;
    finish(daemon, delivery, &repo, number, decided).await;
}

async fn on_comment(daemon: &Arc<Daemon>, delivery: &str, c: Comment) {
    if !c.is_pull {
        return;
    }
    let Some(settings) = daemon.pulls.settings(&c.repo) else {
        return;
    };
    let d = daemon.clone();
    let repo = c.repo.clone();
    let number = c.number;
    let decided = tokio::task::spawn_blocking(move || {
        let host = host::DaemonHost::new(&d, &c.repo, &c.clone_url)?;
        let actions = trigger::on_comment(&host, &settings, &c).map_err(|e| e.to_string())?;
        Ok::<_, String>((actions, host.into_snapshot()))
    })
    .await;
    finish(daemon, delivery, &repo, number, decided).await;
}

type Decided = Result<
    Result<(Vec<trigger::Action>, Arc<bosun_config::Snapshot>), String>,
    tokio::task::JoinError,
>;

async fn finish(daemon: &Arc<Daemon>, delivery: &str, repo: &str, number: i64, decided: Decided) {
    match decided {
        Ok(Ok((actions, snapshot))) => act::carry_out(daemon, delivery, &snapshot, actions).await,
        Ok(Err(e)) => {
            tracing::warn!(repo, number, delivery, error = %e, "the trigger could not decide; nothing started")
        }
        Err(e) => tracing::error!(repo, number, delivery, error = %e, "the trigger failed"),
    }
}

async fn on_push(daemon: &Arc<Daemon>, delivery: &str, push: Push) {
    if daemon.pulls.settings(&push.repo).is_none() {
        return;
    }
    let d = daemon.clone();
    let repo = push.repo.clone();
    let decided = tokio::task::spawn_blocking(move || {
        let snapshot = d.shared.snapshot();
        let Some(postsubmits) = snapshot.postsubmits.get(&push.repo) else {
            return Ok((Vec::new(), snapshot, push));
        };
        let jobs = trigger::on_push(&push, postsubmits, || host::push_changes(&d, &push))?;
        Ok::<_, String>((jobs, snapshot.clone(), push))
    })
    .await;
    match decided {
        Ok(Ok((jobs, snapshot, push))) => {
            act::run_postsubmits(daemon, &snapshot, &push, jobs).await
        }
        Ok(Err(e)) => {
            tracing::warn!(repo, delivery, error = %e, "the push's postsubmits could not be chosen; none started")
        }
        Err(e) => tracing::error!(repo, delivery, error = %e, "the push's postsubmits failed"),
    }
}

/// The trigger as the delivery processor's [`JobEvents`].
///
/// [`JobEvents`]: crate::repos::hook::JobEvents
pub struct Events(pub Arc<Daemon>);

impl crate::repos::hook::JobEvents for Events {
    fn handle(
        &self,
        delivery: String,
        event: Event,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move { on_event(&self.0, &delivery, event).await })
    }
}
