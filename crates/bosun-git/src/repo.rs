//! A bare repository bosun keeps for itself and reads without a checkout:
//! fetched with exactly the refs asked for ([`Repo::fetch`],
//! [`Repo::fetch_with`] for a remote needing credentials), its commits
//! resolved ([`Repo::resolve`]) and compared ([`Repo::is_ancestor`]), its
//! files read and listed at a commit ([`Repo::read_file`], [`Repo::list`],
//! or through one process for many reads: [`crate::objects`]). What follows
//! a repository's own configuration (its `.prow.yaml`, its
//! `.lighthouse/*/triggers.yaml` at a pushed commit) reads it here; clones
//! fetch through [`crate::mirror`].
//!
//! Every command sees the environment [`crate::runner`] gives git (nothing
//! pointing at another repository or identity, no prompt); the commands
//! that work on the repository alone see no system or user configuration,
//! the fetch sees this machine's (its credentials, its proxies) and the
//! [`RemoteEnv`] it is given. Paths and revisions are passed after `--` or
//! as `REV:PATH` objects, never as options, so a name starting with `-` is
//! read as a name.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::remote::{RemoteCall, RemoteEnv};
use crate::runner::{exit_error, scrub, Command as Record, Scope};

pub use crate::error::GitError;

/// A bare repository at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    dir: PathBuf,
}

impl Repo {
    /// The bare repository at `dir`, created (`git init --bare`) if there is
    /// none.
    pub fn open_or_init(dir: impl Into<PathBuf>) -> Result<Repo, GitError> {
        let repo = Repo { dir: dir.into() };
        if !repo.dir.join("HEAD").is_file() {
            std::fs::create_dir_all(&repo.dir).map_err(|e| repo.io_error("init", &e))?;
            repo.git(Scope::Local, &["init", "--bare", "--quiet"])?;
        }
        Ok(repo)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The bare repository at `dir`, which must be one (nothing is
    /// created): an error names what is missing.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Repo, GitError> {
        let repo = Repo { dir: dir.into() };
        if !repo.dir.join("HEAD").is_file() {
            return Err(GitError {
                args: "rev-parse --is-bare-repository".into(),
                dir: repo.dir.display().to_string(),
                error: "not a repository".into(),
                stderr: format!("{} has no HEAD", repo.dir.display()),
            });
        }
        let out = repo.git(Scope::Local, &["rev-parse", "--is-bare-repository"])?;
        if String::from_utf8_lossy(&out).trim() != "true" {
            return Err(GitError {
                args: "rev-parse --is-bare-repository".into(),
                dir: repo.dir.display().to_string(),
                error: "not a bare repository".into(),
                stderr: String::new(),
            });
        }
        Ok(repo)
    }

    /// Fetches `refspecs` (`+refs/heads/main:refs/heads/main`, a SHA, a
    /// name) from `url`, and nothing else: no tags, no other branches.
    pub fn fetch(&self, url: &str, refspecs: &[&str]) -> Result<(), GitError> {
        self.fetch_with(url, refspecs, &RemoteEnv::new()).map(drop)
    }

    /// [`Repo::fetch`] with `env` (credentials, through the environment
    /// only): the command's record, in which, as in the error, the URL has
    /// no user information and no secret of `env` shows.
    pub fn fetch_with(
        &self,
        url: &str,
        refspecs: &[&str],
        env: &RemoteEnv,
    ) -> Result<Record, GitError> {
        RemoteCall {
            git_dir: Some(&self.dir),
            before: &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--",
            ],
            url,
            after: refspecs,
            env,
        }
        .run()
        .map(|(_, record)| record)
    }

    /// Whether `older` is `newer` or one of its ancestors (`git merge-base
    /// --is-ancestor`). `newer` must be a commit of the repository; an
    /// `older` it does not have is no ancestor (every ancestor of a commit
    /// is in a repository that is not shallow, as bosun's are).
    pub fn is_ancestor(&self, older: &str, newer: &str) -> Result<bool, GitError> {
        let Some(newer) = self.resolve(newer)? else {
            return Err(GitError {
                args: format!("merge-base --is-ancestor {older} {newer}"),
                dir: self.dir.display().to_string(),
                error: "exit status 128".into(),
                stderr: format!("fatal: not a commit in this repository: {newer}"),
            });
        };
        let Some(older) = self.resolve(older)? else {
            return Ok(false);
        };
        let args = [
            "merge-base",
            "--is-ancestor",
            older.as_str(),
            newer.as_str(),
        ];
        let out = self.run(Scope::Local, &args)?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(self.failed(&args, &out)),
        }
    }

    /// Points `HEAD` at `refname` (`refs/heads/main`).
    pub fn set_head(&self, refname: &str) -> Result<(), GitError> {
        self.git(Scope::Local, &["symbolic-ref", "HEAD", refname])
            .map(drop)
    }

    /// Every ref of the repository (`refs/heads/main`), sorted.
    pub fn refs(&self) -> Result<Vec<String>, GitError> {
        let out = self.git(Scope::Local, &["for-each-ref", "--format=%(refname)"])?;
        let mut refs: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_string)
            .collect();
        refs.sort();
        Ok(refs)
    }

    /// Deletes the ref `name` (a full name).
    pub fn delete_ref(&self, name: &str) -> Result<(), GitError> {
        self.git(Scope::Local, &["update-ref", "-d", "--", name])
            .map(drop)
    }

    /// Sets the repository's own configuration `key` to `value`.
    pub fn set_config(&self, key: &str, value: &str) -> Result<(), GitError> {
        self.git(Scope::Local, &["config", "--", key, value])
            .map(drop)
    }

    /// The repository's own configuration `key`, `None` when unset.
    pub fn config(&self, key: &str) -> Result<Option<String>, GitError> {
        let args = ["config", "--get", "--", key];
        let out = self.run(Scope::Local, &args)?;
        match out.status.code() {
            Some(0) => Ok(Some(
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
            )),
            Some(1) => Ok(None),
            _ => Err(self.failed(&args, &out)),
        }
    }

    /// Removes the lock files (`*.lock`) a git process left when it was
    /// killed (`refs/heads/main.lock`, `packed-refs.lock`, `config.lock`),
    /// each of which would make every later update fail with "File
    /// exists"; the files removed. Only for a caller that knows no git
    /// process is working on the repository (bosun's own lock on it held):
    /// a live process's lock would be taken from it.
    pub fn clear_stale_locks(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let path = entry.path();
                let kind = entry.file_type()?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if kind.is_dir() {
                    // Loose objects' directories (`objects/ab`) hold no locks.
                    let loose = dir == self.dir.join("objects")
                        && name.len() == 2
                        && name.bytes().all(|b| b.is_ascii_hexdigit());
                    if !loose {
                        dirs.push(path);
                    }
                } else if name.ends_with(".lock") {
                    std::fs::remove_file(&path)?;
                    removed.push(path);
                }
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// The commit `rev` names (a SHA, a ref), or `None` when the repository
    /// has no such commit.
    pub fn resolve(&self, rev: &str) -> Result<Option<String>, GitError> {
        let object = format!("{rev}^{{commit}}");
        let out = self.run(
            Scope::Local,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &object,
            ],
        )?;
        match out.status.code() {
            Some(0) => Ok(Some(
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
            )),
            Some(1) => Ok(None),
            _ => Err(self.failed(&["rev-parse", &object], &out)),
        }
    }

    /// The bytes of `path` at `commit`, or `None` when the commit has no
    /// file there (no such path, or a directory). An unknown commit is an
    /// error.
    pub fn read_file(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, GitError> {
        let Some(kind) = self.kind_at(commit, path)? else {
            return Ok(None);
        };
        if kind != "blob" {
            return Ok(None);
        }
        let object = format!("{commit}:{path}");
        self.git(Scope::Local, &["cat-file", "blob", &object])
            .map(Some)
    }

    /// The files under `dir` at `commit` (every depth), as paths from the
    /// repository's root, sorted; empty when there is no such directory.
    pub fn list(&self, commit: &str, dir: &str) -> Result<Vec<String>, GitError> {
        self.kind_at(commit, "")?; // an unknown commit is an error, not an empty list
        let dir = dir.trim_end_matches('/');
        let out = self.git(
            Scope::Local,
            &[
                "ls-tree",
                "-r",
                "-z",
                "--name-only",
                "--full-tree",
                commit,
                "--",
                dir,
            ],
        )?;
        let mut files: Vec<String> = out
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        files.sort();
        Ok(files)
    }

    /// The object type at `commit:path` (`blob`, `tree`), `None` when there
    /// is none; `path` empty is the commit's tree. An unknown commit is an
    /// error.
    fn kind_at(&self, commit: &str, path: &str) -> Result<Option<String>, GitError> {
        if self.resolve(commit)?.is_none() {
            return Err(GitError {
                args: format!("cat-file -t {commit}:{path}"),
                dir: self.dir.display().to_string(),
                error: "exit status 128".into(),
                stderr: format!("fatal: not a commit in this repository: {commit}"),
            });
        }
        let object = format!("{commit}:{path}");
        let out = self.run(Scope::Local, &["cat-file", "-t", &object])?;
        if out.status.success() {
            Ok(Some(
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
            ))
        } else {
            Ok(None)
        }
    }

    /// The files changed from `from` to `to`, as paths from the
    /// repository's root, sorted: with `since_fork`, the changes of `to`
    /// since it forked from `from` (`git diff from...to`, what a pull
    /// request changes), else the difference of the two trees (`git diff
    /// from to`, what a push changes). A renamed file is listed by its new
    /// name only, as forges list a pull request's files. Both commits must be
    /// in the repository.
    pub fn changed_files(
        &self,
        from: &str,
        to: &str,
        since_fork: bool,
    ) -> Result<Vec<String>, GitError> {
        let range = if since_fork {
            format!("{from}...{to}")
        } else {
            format!("{from}..{to}")
        };
        let out = self.git(
            Scope::Local,
            &[
                "diff",
                "--name-only",
                "-z",
                "-M",
                "--no-ext-diff",
                "--no-textconv",
                &range,
                "--",
            ],
        )?;
        let mut files: Vec<String> = out
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        files.sort();
        files.dedup();
        Ok(files)
    }

    /// `heads` merged, in order, into `base`, without a checkout (`git
    /// merge-tree --write-tree`, then `git commit-tree` for each merge, as a
    /// pull request's jobs see their code): [`Merge::Merged`] with the merge
    /// commit (written to the repository's objects, reachable from no ref),
    /// or [`Merge::Conflict`] with the paths the first conflicting merge
    /// could not merge. `heads` empty is `base` itself.
    pub fn merge(&self, base: &str, heads: &[&str]) -> Result<Merge, GitError> {
        let mut at = self.resolve(base)?.ok_or_else(|| GitError {
            args: format!("merge-tree --write-tree {base}"),
            dir: self.dir.display().to_string(),
            error: "exit status 128".into(),
            stderr: format!("fatal: not a commit in this repository: {base}"),
        })?;
        for head in heads {
            let args = [
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                at.as_str(),
                head,
            ];
            let out = self.run(Scope::Local, &args)?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut lines = text.lines();
            let tree = lines.next().unwrap_or_default().trim().to_string();
            match out.status.code() {
                Some(0) => {}
                Some(1) => {
                    let mut paths: Vec<String> = lines
                        .take_while(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect();
                    paths.dedup();
                    return Ok(Merge::Conflict { paths });
                }
                _ => return Err(self.failed(&args, &out)),
            }
            let message = format!("Merge {head} into {at}");
            // A fixed identity: the merge commit is bosun's, and the same
            // inputs give the same commit.
            let commit_args = [
                "-c",
                "user.name=bosun",
                "-c",
                "user.email=bosun@localhost",
                "commit-tree",
                tree.as_str(),
                "-p",
                at.as_str(),
                "-p",
                head,
                "-m",
                message.as_str(),
            ];
            let mut cmd = Command::new("git");
            cmd.arg("--git-dir").arg(&self.dir).args(commit_args);
            cmd.current_dir(&self.dir).stdin(Stdio::null());
            scrub(&mut cmd, Scope::Local);
            cmd.env("GIT_AUTHOR_DATE", "1970-01-01T00:00:00Z")
                .env("GIT_COMMITTER_DATE", "1970-01-01T00:00:00Z");
            let out = cmd
                .output()
                .map_err(|e| self.io_error(&commit_args.join(" "), &e))?;
            if !out.status.success() {
                return Err(self.failed(&commit_args, &out));
            }
            at = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        Ok(Merge::Merged { commit: at })
    }

    /// Runs `git ARGS` in the repository; its standard output, or the
    /// failure.
    fn git(&self, scope: Scope, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let out = self.run(scope, args)?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.failed(args, &out))
        }
    }

    fn run(&self, scope: Scope, args: &[&str]) -> Result<Output, GitError> {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir").arg(&self.dir).args(args);
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        scrub(&mut cmd, scope);
        cmd.output().map_err(|e| self.io_error(&args.join(" "), &e))
    }

    fn failed(&self, args: &[&str], out: &Output) -> GitError {
        GitError {
            args: args.join(" "),
            dir: self.dir.display().to_string(),
            error: exit_error(out.status),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }
    }

    fn io_error(&self, args: &str, e: &std::io::Error) -> GitError {
        GitError {
            args: args.to_string(),
            dir: self.dir.display().to_string(),
            error: e.to_string(),
            stderr: String::new(),
        }
    }
}

/// What [`Repo::merge`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// Every head merged cleanly: the merge commit.
    Merged {
        /// The commit whose tree is the merge.
        commit: String,
    },
    /// A head does not merge cleanly into what came before it.
    Conflict {
        /// The conflicting paths.
        paths: Vec<String>,
    },
}

/// Whether git takes `name` as a branch name (`git check-ref-format
/// refs/heads/NAME`): no `:`, no wildcard, no `..`, no space, so that it
/// can stand in a refspec as itself.
pub fn is_branch_name(name: &str) -> bool {
    if name.is_empty() || name.starts_with('-') {
        return false;
    }
    let mut cmd = Command::new("git");
    cmd.args(["check-ref-format", &format!("refs/heads/{name}")])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    scrub(&mut cmd, Scope::Local);
    cmd.status().is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A work repository at `dir` with one commit per `(message, files)`;
    /// returns the commits' SHAs.
    fn source(dir: &Path, commits: &[(&str, &[(&str, &str)])]) -> Vec<String> {
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap_or_else(|e| {
                    panic!("git could not run ({e}): install it with `apt-get install -y git`, or run the tests with tools/test")
                });
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        git(&["init", "--quiet", "--initial-branch=main"]);
        let mut shas = Vec::new();
        for (message, files) in commits {
            for (path, text) in *files {
                let p = dir.join(path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            }
            git(&["add", "--all"]);
            git(&["commit", "--quiet", "-m", message]);
            shas.push(git(&["rev-parse", "HEAD"]));
        }
        shas
    }

    /// `git ARGS` in the work repository `dir`, its output trimmed.
    fn work(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn a_pull_requests_changes_and_merge_are_read_from_the_mirror() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let base = source(&src, &[("one", &[("a.txt", "a\n"), ("b.txt", "b\n")])]);
        let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
        let commit = |message: &str| {
            work(&src, &["add", "--all"]);
            work(&src, &["commit", "--quiet", "-m", message]);
            work(&src, &["rev-parse", "HEAD"])
        };
        // A pull request changing a.txt and renaming b.txt.
        work(&src, &["checkout", "--quiet", "-b", "pr", &base[0]]);
        write("a.txt", "pr\n");
        work(&src, &["mv", "b.txt", "c.txt"]);
        let pr = commit("pr");
        // Another, touching a file of its own only.
        work(&src, &["checkout", "--quiet", "-b", "other", &base[0]]);
        write("e.txt", "e\n");
        let other = commit("other");
        // The base branch moves on: a.txt changed there too, d.txt added.
        work(&src, &["checkout", "--quiet", "main"]);
        write("a.txt", "main\n");
        write("d.txt", "d\n");
        let main = commit("two");

        let repo = Repo::open_or_init(tmp.path().join("mirror.git")).unwrap();
        let url = format!("file://{}", src.display());
        repo.fetch(&url, &["+refs/heads/*:refs/heads/*"]).unwrap();

        // What the pull request changes: not what the base did since.
        assert_eq!(
            repo.changed_files(&main, &pr, true).unwrap(),
            ["a.txt", "c.txt"]
        );
        // Tree to tree (a push from main to pr): d.txt too.
        assert_eq!(
            repo.changed_files(&main, &pr, false).unwrap(),
            ["a.txt", "c.txt", "d.txt"]
        );

        // Both change a.txt: a conflict, naming it.
        assert_eq!(
            repo.merge(&main, &[&pr]).unwrap(),
            Merge::Conflict {
                paths: vec!["a.txt".into()]
            }
        );
        // A clean merge: a commit with both sides' files, the same each time.
        let Merge::Merged { commit } = repo.merge(&main, &[&other]).unwrap() else {
            panic!("a clean merge");
        };
        assert_eq!(repo.read_file(&commit, "e.txt").unwrap().unwrap(), b"e\n");
        assert_eq!(repo.read_file(&commit, "d.txt").unwrap().unwrap(), b"d\n");
        assert_eq!(
            repo.read_file(&commit, "a.txt").unwrap().unwrap(),
            b"main\n"
        );
        assert!(repo.is_ancestor(&other, &commit).unwrap());
        assert!(repo.is_ancestor(&main, &commit).unwrap());
        assert_eq!(
            repo.merge(&main, &[&other]).unwrap(),
            Merge::Merged { commit }
        );
        // No heads: the base.
        assert_eq!(
            repo.merge("refs/heads/main", &[]).unwrap(),
            Merge::Merged { commit: main }
        );
    }

    #[test]
    fn a_fetched_commits_files_are_read_and_listed_without_a_checkout() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let shas = source(
            &src,
            &[
                (
                    "one",
                    &[
                        (".lighthouse/jenkins-x/triggers.yaml", "v1\n"),
                        ("README", "r"),
                    ],
                ),
                (
                    "two",
                    &[
                        (".lighthouse/jenkins-x/triggers.yaml", "v2\n"),
                        (".prow.yaml", "p"),
                    ],
                ),
            ],
        );
        let repo = Repo::open_or_init(tmp.path().join("mirror.git")).unwrap();
        let url = format!("file://{}", src.display());
        repo.fetch(&url, &["+refs/heads/main:refs/heads/main"])
            .unwrap();
        assert_eq!(
            repo.resolve("refs/heads/main").unwrap().as_ref(),
            Some(&shas[1])
        );
        // Each commit's own version of a file.
        let read = |sha: &str, path: &str| repo.read_file(sha, path).unwrap();
        assert_eq!(
            read(&shas[0], ".lighthouse/jenkins-x/triggers.yaml").unwrap(),
            b"v1\n"
        );
        assert_eq!(
            read(&shas[1], ".lighthouse/jenkins-x/triggers.yaml").unwrap(),
            b"v2\n"
        );
        assert_eq!(read(&shas[0], ".prow.yaml"), None, "not there yet");
        assert_eq!(
            read(&shas[1], ".lighthouse"),
            None,
            "a directory is not a file"
        );
        assert_eq!(
            repo.list(&shas[1], ".lighthouse/").unwrap(),
            vec![".lighthouse/jenkins-x/triggers.yaml".to_string()]
        );
        assert_eq!(
            repo.list(&shas[1], "nowhere").unwrap(),
            Vec::<String>::new()
        );
        // A commit the repository does not have is an error, not "no file".
        let unknown = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(repo.resolve(unknown).unwrap(), None);
        assert!(repo.read_file(unknown, "README").is_err());
        assert!(repo.list(unknown, "").is_err());
    }

    #[test]
    fn branch_names_are_those_git_takes() {
        for ok in ["main", "release/1.2", "feature-x", "v1.0_rc"] {
            assert!(is_branch_name(ok), "{ok}");
        }
        for bad in [
            "", "*", "a:b", "a..b", "-x", "a b", "x.lock", "a/", "@{-1}", "a^",
        ] {
            assert!(!is_branch_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_fetch_takes_only_the_refs_asked_for() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let shas = source(&src, &[("one", &[("a", "1")])]);
        let tag = Command::new("git")
            .args(["tag", "v1"])
            .current_dir(&src)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(tag.success());
        let repo = Repo::open_or_init(tmp.path().join("m.git")).unwrap();
        let url = format!("file://{}", src.display());
        repo.fetch(&url, &["+refs/heads/main:refs/bosun/main"])
            .unwrap();
        assert_eq!(
            repo.resolve("refs/bosun/main").unwrap().as_ref(),
            Some(&shas[0])
        );
        assert_eq!(repo.resolve("refs/tags/v1").unwrap(), None, "no tags");
        assert_eq!(
            repo.resolve("refs/heads/main").unwrap(),
            None,
            "only where asked"
        );
        // A remote that is not there: the error says what was run.
        let e = repo
            .fetch("file:///nonexistent/repo", &["main"])
            .unwrap_err();
        assert!(e.to_string().contains("fetch"), "{e}");
    }
}
