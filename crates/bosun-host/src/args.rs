//! Where the configuration comes from: the command-line arguments every
//! command that loads a configuration shares (`bosun check`, `bosun
//! schedule`, `bosun serve`, `bosun dispatch plan`, `bosun dispatcher`), and
//! the loader's options and kubeconfig contexts they make.

use std::path::PathBuf;

use bosun_config::types::InRepoSource;
use bosun_config::LoadOptions;
use clap::Args;

/// Where the configuration comes from (shared by every command that loads it).
#[derive(Args, Debug, Clone, Default)]
pub struct ConfigArgs {
    /// Prow's central config.yaml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A job-config directory (read recursively) or file; repeatable.
    #[arg(long = "job-config", value_name = "DIR")]
    pub job_config: Vec<PathBuf>,
    /// A local checkout whose in-repo config is loaded (the @BRANCH part is optional); repeatable.
    #[arg(long = "in-repo", value_name = "ORG/REPO=DIR[@BRANCH]", value_parser = parse_in_repo)]
    pub in_repo: Vec<InRepoSource>,
    /// A kubeconfig file whose contexts are build-cluster aliases; repeatable.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Vec<PathBuf>,
    /// A directory of kubeconfig files (each file's contexts are aliases).
    /// Without `--kubeconfig` and `--kubeconfig-dir`, the files of `$KUBECONFIG`.
    #[arg(long = "kubeconfig-dir", value_name = "DIR")]
    pub kubeconfig_dir: Option<PathBuf>,
}

impl ConfigArgs {
    /// The loader's options for these arguments.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            config: self.config.clone(),
            job_config: self.job_config.clone(),
            in_repo: self.in_repo.clone(),
            kubeconfigs: self.kubeconfig_files(),
            schedule_check: Some(std::sync::Arc::new(bosun_schedule::ConfigScheduleCheck)),
            ..LoadOptions::default()
        }
    }
}

impl ConfigArgs {
    /// The kubeconfig files, as Prow finds them: `--kubeconfig`, the files of
    /// `--kubeconfig-dir` (read again at each load, so files added later
    /// count), else `$KUBECONFIG` (colon-separated).
    pub fn kubeconfig_files(&self) -> Vec<PathBuf> {
        let mut files = self.kubeconfig.clone();
        if let Some(dir) = &self.kubeconfig_dir {
            let mut listed: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            listed.sort();
            files.extend(listed);
        }
        if files.is_empty() && self.kubeconfig_dir.is_none() {
            if let Some(v) = std::env::var_os("KUBECONFIG") {
                files.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
            }
        }
        files
    }

    /// The names of the kubeconfig files' contexts (build clusters too).
    pub fn kube_context_names(&self) -> Vec<String> {
        self.kube_contexts().into_iter().map(|c| c.name).collect()
    }

    /// The contexts of the kubeconfig files (a file that cannot be read adds
    /// none; the loader reports it).
    pub fn kube_contexts(&self) -> Vec<bosun_cluster::registry::KubeContext> {
        self.kubeconfig_files()
            .into_iter()
            .flat_map(|file| {
                bosun_config::load::kubeconfig_contexts(&bosun_config::OsFiles, &file)
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |name| bosun_cluster::registry::KubeContext {
                        name,
                        file: file.clone(),
                    })
            })
            .collect()
    }
}

fn parse_in_repo(s: &str) -> Result<InRepoSource, String> {
    let (repo, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected ORG/REPO=DIR[@BRANCH]"))?;
    let (path, branch) = match rest.rsplit_once('@') {
        Some((p, b)) if !b.is_empty() && !b.contains('/') || rest.ends_with('@') => {
            (p.to_string(), Some(b.to_string()).filter(|b| !b.is_empty()))
        }
        _ => (rest.to_string(), None),
    };
    if repo.split('/').filter(|p| !p.is_empty()).count() != 2 || path.is_empty() {
        return Err(format!("{s:?}: expected ORG/REPO=DIR[@BRANCH]"));
    }
    Ok(InRepoSource {
        repo: repo.to_string(),
        path,
        branch,
        ..InRepoSource::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_repo_argument() {
        let s = parse_in_repo("org/repo=/src/repo@release-1.0").unwrap();
        assert_eq!(
            (s.repo.as_str(), s.path.as_str(), s.branch.as_deref()),
            ("org/repo", "/src/repo", Some("release-1.0"))
        );
        let s = parse_in_repo("org/repo=../checkout").unwrap();
        assert_eq!((s.path.as_str(), s.branch), ("../checkout", None));
        assert!(parse_in_repo("repo=/x").is_err());
        assert!(parse_in_repo("org/repo").is_err());
        assert!(parse_in_repo("org/repo=").is_err());
    }
}
