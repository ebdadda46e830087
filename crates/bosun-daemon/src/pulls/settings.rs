//! What pull requests, comments and pushes need beyond the daemon: the
//! forge's client (and the bot's login, asked once) and Prow's plugin
//! configuration (`--plugin-config`), read again when its file changes; a
//! file that does not load keeps the last good one in force.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bosun_base::sync::Lock;
use bosun_config::plugins::{PluginConfig, Trigger};
use bosun_forge::client::Client;
use bosun_forge::repos::PullFetched;

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
    /// Pull requests fetched together for a batch of events, by repository,
    /// number and head, taken by the first event that needs them.
    prefetched: Mutex<HashMap<(String, i64, String), PullFetched>>,
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
            prefetched: Mutex::default(),
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

    /// Keeps `fetched`, pull request `number` of `repo` at its head, for
    /// the event that needs it.
    pub fn put_prefetched(&self, repo: &str, number: i64, fetched: PullFetched) {
        let key = (repo.to_string(), number, fetched.head_sha.clone());
        self.prefetched.locked().insert(key, fetched);
    }

    /// The prefetched pull request `number` of `repo` at `head`, taken.
    pub fn take_prefetched(&self, repo: &str, number: i64, head: &str) -> Option<PullFetched> {
        self.prefetched
            .locked()
            .remove(&(repo.to_string(), number, head.to_string()))
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
