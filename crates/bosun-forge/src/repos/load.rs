//! What a repository's own configuration says at a commit: bosun-config's
//! in-repo loader (Prow's `.prow.yaml` or `.prow/`, Lighthouse's
//! `.lighthouse/*/triggers.yaml` with their `source:` pipeline files) run
//! over the commit's files ([`super::CommitFiles`]) instead of a checkout.
//! Nothing of the loader is repeated here: the commit's tree is the
//! checkout directory `org/name@COMMIT` it is given, so its jobs' origins
//! and its diagnostics name the repository, the commit, the file and the
//! line (`acme/widgets@3f2a…/.prow.yaml:4:3: error: …`).

use std::io;
use std::path::{Path, PathBuf};

use bosun_config::source::{DirEntry, EntryKind, FileSource};
use bosun_config::types::InRepoSource;
use bosun_config::{LoadOptions, Loaded};
use bosun_git::repo::{GitError, Repo};

use super::files::CommitFiles;
use super::mirror::split_repo;

/// A repository's configuration loaded at a commit.
#[derive(Debug)]
pub struct AtCommit {
    /// The repository, `org/name`.
    pub repo: String,
    /// The branch its jobs belong to (periodics' base ref).
    pub branch: String,
    /// The commit (its full id).
    pub commit: String,
    /// The path the commit's files were loaded under (`org/name@COMMIT`),
    /// which starts every file name in [`AtCommit::loaded`].
    pub root: PathBuf,
    /// What the loader made of it: the jobs (in the snapshot, when there
    /// was no error) and every diagnostic.
    pub loaded: Loaded,
    /// The files the loader read, as paths in the tree, sorted.
    pub files_read: Vec<String>,
    /// The directories it listed, as paths in the tree (`` for the root),
    /// sorted.
    pub dirs_listed: Vec<String>,
}

impl AtCommit {
    /// The path in the tree of a file name the load gave (a job's origin,
    /// a diagnostic's file): `.prow.yaml` for `org/name@COMMIT/.prow.yaml`.
    pub fn in_tree<'a>(&self, file: &'a str) -> Option<&'a str> {
        let root = self.root.to_str()?;
        file.strip_prefix(root)?.strip_prefix('/')
    }
}

/// The configuration of a commit could not be read at all (the
/// configuration's own problems are diagnostics, not this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {repo} at {commit} in {dir}: {problem}; check {check}")]
pub struct LoadError {
    /// The repository, `org/name`.
    pub repo: String,
    /// The commit asked for.
    pub commit: String,
    /// The mirror.
    pub dir: String,
    /// What went wrong.
    pub problem: String,
    /// What to check.
    pub check: String,
}

/// The configuration of `org_repo` (whose jobs belong to `branch`) at
/// `commit` of the bare repository at `repo_dir`, with Prow's defaults for
/// everything central (no `config.yaml`).
pub fn load_at(
    repo_dir: &Path,
    commit: &str,
    org_repo: &str,
    branch: &str,
) -> Result<AtCommit, LoadError> {
    load_at_with(
        &LoadOptions::default(),
        &NoFiles,
        repo_dir,
        commit,
        org_repo,
        branch,
    )
}

/// [`load_at`] with the central configuration `opts` names (its
/// `config.yaml`, job configuration, schedule checks: in-repo jobs are
/// defaulted and validated against it), read through `others`; the
/// commit's files are added to `opts.in_repo`.
pub fn load_at_with(
    opts: &LoadOptions,
    others: &dyn FileSource,
    repo_dir: &Path,
    commit: &str,
    org_repo: &str,
    branch: &str,
) -> Result<AtCommit, LoadError> {
    let fail = |problem: String, check: &str| LoadError {
        repo: org_repo.to_string(),
        commit: commit.to_string(),
        dir: repo_dir.display().to_string(),
        problem,
        check: check.to_string(),
    };
    if split_repo(org_repo).is_none() {
        return Err(fail(
            format!("{org_repo:?} is not ORG/NAME"),
            "the repository's name",
        ));
    }
    let git = |e: GitError| {
        fail(
            e.to_string(),
            "that the mirror has the commit (sync it first)",
        )
    };
    let repo = Repo::open(repo_dir).map_err(git)?;
    // The full id names the root: resolved first.
    let full = repo.resolve(commit).map_err(git)?.ok_or_else(|| {
        fail(
            "no such commit in the mirror".into(),
            "that the mirror has the commit (sync it first)",
        )
    })?;
    let root = PathBuf::from(format!("{org_repo}@{full}"));
    let files = CommitFiles::open(&repo, &full, &root).map_err(git)?;
    let mut opts = opts.clone();
    opts.in_repo.push(InRepoSource {
        repo: org_repo.to_string(),
        path: root.to_string_lossy().into_owned(),
        branch: Some(branch.to_string()),
        ..InRepoSource::default()
    });
    let loaded = bosun_config::load(
        &opts,
        &Beside {
            commit: &files,
            others,
        },
    );
    Ok(AtCommit {
        repo: org_repo.to_string(),
        branch: branch.to_string(),
        commit: full,
        root,
        loaded,
        files_read: files.files_read(),
        dirs_listed: files.dirs_listed(),
    })
}

/// A file source with nothing in it.
struct NoFiles;

impl NoFiles {
    fn none(path: &Path) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no such file", path.display()),
        )
    }
}

impl FileSource for NoFiles {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        Err(NoFiles::none(path))
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        Err(NoFiles::none(path))
    }
    fn stat(&self, path: &Path) -> io::Result<EntryKind> {
        Err(NoFiles::none(path))
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        Err(NoFiles::none(path))
    }
}

/// The commit's files under their root, `others` everywhere else.
struct Beside<'a> {
    commit: &'a CommitFiles,
    others: &'a dyn FileSource,
}

impl Beside<'_> {
    fn pick(&self, path: &Path) -> &dyn FileSource {
        if self.commit.contains(path) {
            self.commit
        } else {
            self.others
        }
    }
}

impl FileSource for Beside<'_> {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.pick(path).read(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.pick(path).read_dir(path)
    }
    fn stat(&self, path: &Path) -> io::Result<EntryKind> {
        self.pick(path).stat(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.pick(path).canonicalize(path)
    }
}
