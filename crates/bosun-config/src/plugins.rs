//! Prow's `plugins.yaml`, the part bosun reads: the `trigger` plugin's
//! settings (`triggers:`) and which repositories have it enabled
//! (`plugins:`). Every other section (`approve`, `lgtm`, `external_plugins`,
//! ...) and any unknown top-level key is accepted and not read, so a
//! deployment's existing file loads unchanged.
//!
//! Keys are matched as Prow matches them (Go's `encoding/json` rules, see
//! [`from_node_as_go`]); keys no setting takes are ignored, as Prow ignores
//! them (it reads this file non-strictly). A value of the wrong type is a
//! [`Diagnostic`] naming the file, line and column.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::diag::Diagnostic;
use crate::source::{FileSource, OsFiles};
use crate::yaml::{from_node_as_go, parse_documents, KeyNotes, Node, Value};

/// The name the trigger plugin is enabled by in `plugins:`.
pub const TRIGGER_PLUGIN: &str = "trigger";

/// What bosun reads of a `plugins.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PluginConfig {
    /// The `triggers:` list, in file order, each with Prow's defaults
    /// applied ([`Trigger::set_defaults`]).
    pub triggers: Vec<Trigger>,
    /// The `plugins:` map: `org` or `org/repo` to the plugins enabled there.
    pub plugins: BTreeMap<String, OrgPlugins>,
}

/// The plugins enabled for an org or a repository (Prow's `OrgPlugins`).
///
/// Written as a plain list (`org: [trigger, lgtm]`, Prow's older form) or as
/// `{plugins: [...], excluded_repos: [...]}`. Prow reads the older form only
/// when every entry of the map uses it; bosun reads each entry by its own
/// form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct OrgPlugins {
    /// Plugin names.
    pub plugins: Vec<String>,
    /// For an org entry: repository names (without the org) the org's
    /// plugins do not apply to.
    pub excluded_repos: Vec<String>,
}

/// The trigger plugin's settings for some repositories (one entry of
/// `triggers:`, Prow's `plugins.Trigger`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Trigger {
    /// `org/repo` or `org` entries these settings apply to.
    pub repos: Vec<String>,
    /// GitHub Apps (their names, without `[bot]`) whose pull requests and
    /// comments are trusted: `<app>[bot]` is a trusted user.
    pub trusted_apps: Vec<String>,
    /// A second organization whose members are trusted (besides the
    /// repository's own org). Deprecated in Prow, still honoured.
    pub trusted_org: String,
    /// Where untrusted authors learn how to join the org; default the
    /// trusted org's people page when `trusted_org` is set, else the
    /// repository org's.
    pub join_org_url: String,
    /// Trust org members only, not repository collaborators.
    pub only_org_members: bool,
    /// Ignore `/ok-to-test`: untrusted authors' pull requests are never
    /// tested automatically; trusted users can still `/test` them.
    pub ignore_ok_to_test: bool,
    /// Also approve pending GitHub Actions runs on `/ok-to-test` and rerun
    /// failed ones on `/retest` and `/test all`.
    pub trigger_github_workflows: bool,
    /// The invitation to join the org in the welcome comment.
    pub org_invite: OrgInvite,
}

/// Prow's `org_invite` of a trigger entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct OrgInvite {
    /// The prominent invitation shown to authors with several merged pull
    /// requests.
    pub prominent: ProminentOrgInvite,
}

/// Prow's `org_invite.prominent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ProminentOrgInvite {
    /// Never show the prominent invitation (and never count merged pull
    /// requests).
    pub disabled: bool,
    /// Merged pull requests in the org from which the author is shown the
    /// prominent invitation; unset: 3.
    pub merged_pr_threshold: Option<i64>,
    /// The prominent text instead of Prow's; `{join_org_url}` is replaced by
    /// the join URL.
    pub message: String,
}

impl ProminentOrgInvite {
    /// The merged pull requests from which the prominent invitation shows:
    /// `merged_pr_threshold`, or 3 when unset (Prow's default).
    pub fn threshold(&self) -> i64 {
        self.merged_pr_threshold.unwrap_or(3)
    }
}

impl Trigger {
    /// Prow's `SetDefaults`: with a `trusted_org` and no `join_org_url`, the
    /// join URL is that org's GitHub people page.
    pub fn set_defaults(&mut self) {
        if !self.trusted_org.is_empty() && self.join_org_url.is_empty() {
            self.join_org_url = format!("https://github.com/orgs/{}/people", self.trusted_org);
        }
    }
}

impl PluginConfig {
    /// The trigger settings for `org/repo`, as Prow's `TriggerFor` picks
    /// them: the first entry listing `org/repo`, else the first listing
    /// `org`, else the defaults.
    pub fn trigger_for(&self, org: &str, repo: &str) -> Trigger {
        let full = format!("{org}/{repo}");
        let listing = |name: &str| {
            self.triggers
                .iter()
                .find(|t| t.repos.iter().any(|r| r == name))
        };
        if let Some(t) = listing(&full).or_else(|| listing(org)) {
            return t.clone();
        }
        let mut t = Trigger::default();
        t.set_defaults();
        t
    }

    /// Whether the trigger plugin is enabled for `org/repo`, as Prow's hook
    /// decides which plugins an event goes to: listed for the org (unless
    /// the repository is in the org entry's `excluded_repos`) or for
    /// `org/repo` itself.
    pub fn trigger_enabled(&self, org: &str, repo: &str) -> bool {
        self.enabled(org, repo, TRIGGER_PLUGIN)
    }

    /// Whether `plugin` is enabled for `org/repo` (see
    /// [`PluginConfig::trigger_enabled`]).
    pub fn enabled(&self, org: &str, repo: &str, plugin: &str) -> bool {
        let by_org = self.plugins.get(org).is_some_and(|o| {
            !o.excluded_repos.iter().any(|r| r == repo) && o.plugins.iter().any(|p| p == plugin)
        });
        by_org
            || self
                .plugins
                .get(&format!("{org}/{repo}"))
                .is_some_and(|o| o.plugins.iter().any(|p| p == plugin))
    }
}

/// Reads Prow's `plugins.yaml` at `path` from the file system.
pub fn load_plugins(path: &Path) -> Result<PluginConfig, Vec<Diagnostic>> {
    load_plugins_from(&OsFiles, path)
}

/// Reads Prow's `plugins.yaml` at `path` through `files`.
pub fn load_plugins_from(
    files: &dyn FileSource,
    path: &Path,
) -> Result<PluginConfig, Vec<Diagnostic>> {
    let name: Arc<str> = path.display().to_string().into();
    let bytes = files.read(path).map_err(|e| {
        vec![Diagnostic::error(format!("cannot read the plugin configuration: {e}")).in_file(&name)]
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        vec![Diagnostic::error("the plugin configuration is not UTF-8").in_file(&name)]
    })?;
    parse_plugins(&name, &text)
}

/// Reads the text of a `plugins.yaml`; `file` names it in diagnostics.
/// Only the first YAML document is read, as Prow reads it.
pub fn parse_plugins(file: &Arc<str>, text: &str) -> Result<PluginConfig, Vec<Diagnostic>> {
    let docs =
        parse_documents(text).map_err(|e| vec![Diagnostic::error(e.message).at(file, e.mark)])?;
    let mut out = PluginConfig::default();
    let Some(doc) = docs.first().filter(|d| !d.is_null()) else {
        return Ok(out);
    };
    if !matches!(doc.value, Value::Map(_)) {
        return Err(vec![Diagnostic::error(format!(
            "the plugin configuration must be a mapping, not {}",
            doc.kind()
        ))
        .at(file, doc.mark)]);
    }
    let mut diagnostics = Vec::new();
    let mut error = |message: String, node: &Node<'_>, mark: Option<crate::yaml::Mark>| {
        diagnostics.push(Diagnostic::error(message).at(file, mark.unwrap_or(node.mark)));
    };
    if let Some(triggers) = doc.go_field("triggers").filter(|n| !n.is_null()) {
        if !matches!(triggers.value, Value::Seq(_)) {
            error(
                format!("`triggers` must be a list, not {}", triggers.kind()),
                &triggers,
                None,
            );
        }
        for item in triggers.items() {
            match from_node_as_go::<Trigger>(item, &KeyNotes::default()) {
                Ok(mut t) => {
                    t.set_defaults();
                    out.triggers.push(t);
                }
                Err(e) => error(format!("triggers: {}", e.message), item, e.mark),
            }
        }
    }
    if let Some(plugins) = doc.go_field("plugins").filter(|n| !n.is_null()) {
        if !matches!(plugins.value, Value::Map(_)) {
            error(
                format!("`plugins` must be a mapping, not {}", plugins.kind()),
                &plugins,
                None,
            );
        }
        for (key, value) in plugins.entries() {
            let Some(name) = key.as_str() else {
                error("plugins: a key must be a string".into(), key, None);
                continue;
            };
            let read =
                match &value.value {
                    Value::Seq(_) => from_node_as_go::<Vec<String>>(value, &KeyNotes::default())
                        .map(|plugins| OrgPlugins {
                            plugins,
                            excluded_repos: Vec::new(),
                        }),
                    _ if value.is_null() => Ok(OrgPlugins::default()),
                    _ => from_node_as_go::<OrgPlugins>(value, &KeyNotes::default()),
                };
            match read {
                Ok(p) => {
                    out.plugins.insert(name.to_owned(), p);
                }
                Err(e) => error(format!("plugins.{name}: {}", e.message), value, e.mark),
            }
        }
    }
    if diagnostics.is_empty() {
        Ok(out)
    } else {
        Err(diagnostics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PluginConfig, Vec<Diagnostic>> {
        parse_plugins(&Arc::from("plugins.yaml"), text)
    }

    const FILE: &str = "\
# a deployment's file: only these sections are read
approve:
- repos: [org/repo]
  require_self_approval: false
triggers:
- repos:
  - org
  trusted_apps: [dependabot]
  only_org_members: true
- repos: [org/special, other]
  trusted_org: friends
  ignore_ok_to_test: true
  trigger_github_workflows: true
  org_invite:
    prominent:
      merged_pr_threshold: 5
  some_future_key: 1
plugins:
  org:
    plugins: [trigger, lgtm]
    excluded_repos: [skipped]
  org/skipped:
    plugins: [lgtm]
  old-style:
  - trigger
  other/repo:
  - trigger
external_plugins:
  org:
  - name: x
";

    #[test]
    fn trigger_for_prefers_a_repo_entry_then_an_org_entry() {
        // Prow: TriggerFor (repo-level entries first, then org-level).
        let c = parse(FILE).unwrap();
        let t = c.trigger_for("org", "special");
        assert_eq!(t.trusted_org, "friends");
        assert!(t.ignore_ok_to_test && t.trigger_github_workflows);
        assert_eq!(t.join_org_url, "https://github.com/orgs/friends/people");
        assert_eq!(t.org_invite.prominent.threshold(), 5);
        let t = c.trigger_for("org", "repo");
        assert_eq!(t.trusted_apps, ["dependabot"]);
        assert!(t.only_org_members);
        assert_eq!(t.org_invite.prominent.threshold(), 3);
        assert_eq!(c.trigger_for("other", "x").trusted_org, "friends");
        assert_eq!(c.trigger_for("nobody", "x"), Trigger::default());
    }

    #[test]
    fn trigger_enabled_by_org_or_repo_with_excluded_repos() {
        let c = parse(FILE).unwrap();
        assert!(c.trigger_enabled("org", "repo"));
        assert!(!c.trigger_enabled("org", "skipped"));
        assert!(c.enabled("org", "skipped", "lgtm"));
        assert!(c.trigger_enabled("old-style", "any"));
        assert!(c.trigger_enabled("other", "repo"));
        assert!(!c.trigger_enabled("other", "else"));
        assert!(!c.trigger_enabled("nobody", "repo"));
    }

    #[test]
    fn a_repo_entry_enables_a_repo_its_org_excludes() {
        // Prow: EnabledReposForPlugin removes org/repo entries from the org's exceptions.
        let c = parse("plugins:\n  org:\n    plugins: [trigger]\n    excluded_repos: [r]\n  org/r: [trigger]\n").unwrap();
        assert!(c.trigger_enabled("org", "r"));
    }

    #[test]
    fn an_empty_file_enables_nothing() {
        let c = parse("").unwrap();
        assert_eq!(c, PluginConfig::default());
        assert!(!c.trigger_enabled("o", "r"));
        assert!(parse("# nothing\n").unwrap().triggers.is_empty());
    }

    #[test]
    fn a_bad_file_is_reported_with_lines() {
        let text = "\
triggers:
- repos: [org]
  only_org_members: maybe
- repos: org/repo
plugins:
  org: 7
  org/repo: [trigger]
";
        let errors = parse(text).unwrap_err();
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 3, "{shown:#?}");
        assert!(
            shown[0].starts_with("plugins.yaml:3:21: error: triggers: ")
                && shown[0].contains("bool"),
            "{shown:#?}"
        );
        assert!(
            shown[1].starts_with("plugins.yaml:4:10: error: triggers: "),
            "{shown:#?}"
        );
        assert!(
            shown[2].starts_with("plugins.yaml:6:8: error: plugins.org: "),
            "{shown:#?}"
        );

        let errors = parse("triggers: [\n").unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].file.as_deref(), Some("plugins.yaml"));
        assert!(errors[0].mark.is_some());

        let errors = parse("- a list\n").unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "plugins.yaml:1:1: error: the plugin configuration must be a mapping, not a sequence"
        );
    }

    #[test]
    fn load_plugins_reads_the_file_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugins.yaml");
        std::fs::write(&path, FILE).unwrap();
        assert!(load_plugins(&path).unwrap().trigger_enabled("org", "repo"));
        let missing = dir.path().join("none.yaml");
        let errors = load_plugins(&missing).unwrap_err();
        assert_eq!(
            errors[0].file.as_deref(),
            Some(missing.display().to_string().as_str())
        );
        std::fs::write(&path, "triggers:\n- repos: 3\n").unwrap();
        let errors = load_plugins(&path).unwrap_err();
        assert_eq!(errors[0].mark.map(|m| m.line), Some(2));
    }
}
