//! Where the dispatcher keeps its plan and its overrides ([`Persistence`]):
//!
//! - [`Files`], on disk (the default, and `bosun dispatcher`'s): the plan in
//!   its file (`dispatcher.assignments_file`, else `DATA_DIR/dispatcher-plan.json`,
//!   in OpenShift's format) and the overrides in `STEM.overrides.json`
//!   beside it, each written atomically (a temporary file in the same
//!   directory, fsync, rename over the old one, fsync the directory), so a
//!   crash leaves the old text or the new one, never half of one. One
//!   process writes them: they have no versions, and a write never
//!   conflicts.
//! - [`InStore`], in the store's documents [`PLAN_DOCUMENT`] and
//!   [`OVERRIDES_DOCUMENT`] (the same texts), for replicas of `bosun serve`
//!   on one shared store: the overrides are written by compare-and-set on
//!   their version, so two replicas changing them at once never lose either
//!   change (the engine reads them again and applies its change again).
//!
//! The plan is read back at start-up as the previous assignment.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use bosun_store::{SharedStore, StoreError};

/// The store's document the plan is kept in ([`InStore`]).
pub const PLAN_DOCUMENT: &str = "dispatcher-plan";
/// The store's document the overrides are kept in ([`InStore`]).
pub const OVERRIDES_DOCUMENT: &str = "dispatcher-overrides";

/// Why the plan or the overrides could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The overrides changed since the version the write expected (another
    /// replica wrote them); nothing was written.
    #[error("the overrides were changed meanwhile")]
    Conflict,
    /// Reading or writing failed (a file, the store).
    #[error("{0}")]
    Failed(String),
}

/// Where the engine keeps its plan and its overrides (their JSON texts).
pub trait Persistence: Send + Sync {
    /// Where, for logs and errors.
    fn describe(&self) -> String;

    /// The plan's text (none: no plan was written yet).
    fn read_plan(&self) -> Result<Option<String>, PersistError>;

    /// Replaces the plan's text whole (the last writer's plan is kept).
    fn write_plan(&self, text: &str) -> Result<(), PersistError>;

    /// The overrides' text (none: never written) and its version, which a
    /// write of them expects.
    fn read_overrides(&self) -> Result<(u64, Option<String>), PersistError>;

    /// Replaces the overrides' text if its version is still `expected`;
    /// the new version. [`PersistError::Conflict`] when it is not: nothing
    /// was written.
    fn write_overrides(&self, expected: u64, text: &str) -> Result<u64, PersistError>;
}

/// The plan and its overrides in files (see the module's doc).
#[derive(Debug, Clone)]
pub struct Files {
    plan: PathBuf,
    overrides: PathBuf,
}

impl Files {
    /// The plan in `plan_file`, the overrides in `STEM.overrides.json` in
    /// its directory.
    pub fn new(plan_file: PathBuf) -> Files {
        let stem = plan_file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dispatcher-plan".into());
        Files {
            overrides: plan_file.with_file_name(format!("{stem}.overrides.json")),
            plan: plan_file,
        }
    }

    /// The plan's file.
    pub fn plan_file(&self) -> &Path {
        &self.plan
    }

    /// The overrides' file.
    pub fn overrides_file(&self) -> &Path {
        &self.overrides
    }
}

fn failed(path: &Path, e: io::Error) -> PersistError {
    PersistError::Failed(format!("{}: {e}", path.display()))
}

impl Persistence for Files {
    fn describe(&self) -> String {
        self.plan.display().to_string()
    }

    fn read_plan(&self) -> Result<Option<String>, PersistError> {
        read(&self.plan).map_err(|e| failed(&self.plan, e))
    }

    fn write_plan(&self, text: &str) -> Result<(), PersistError> {
        write_atomically(&self.plan, text.as_bytes()).map_err(|e| failed(&self.plan, e))
    }

    /// Version 0 always: one process writes the file.
    fn read_overrides(&self) -> Result<(u64, Option<String>), PersistError> {
        let text = read(&self.overrides).map_err(|e| failed(&self.overrides, e))?;
        Ok((0, text))
    }

    /// Never a conflict: one process writes the file (version 0 always).
    fn write_overrides(&self, _expected: u64, text: &str) -> Result<u64, PersistError> {
        write_atomically(&self.overrides, text.as_bytes())
            .map_err(|e| failed(&self.overrides, e))?;
        Ok(0)
    }
}

/// The plan and its overrides in the store's documents (see the module's
/// doc).
#[derive(Clone)]
pub struct InStore {
    store: SharedStore,
}

impl InStore {
    /// The plan and overrides kept in `store`.
    pub fn new(store: SharedStore) -> InStore {
        InStore { store }
    }

    fn text(&self, name: &str) -> Result<(u64, Option<String>), PersistError> {
        match self.store.document(name).map_err(store_failed)? {
            None => Ok((0, None)),
            Some(d) => {
                let text = String::from_utf8(d.body)
                    .map_err(|e| PersistError::Failed(format!("document {name}: {e}")))?;
                Ok((d.version, Some(text)))
            }
        }
    }
}

fn store_failed(e: StoreError) -> PersistError {
    match e {
        StoreError::Conflict(_) => PersistError::Conflict,
        other => PersistError::Failed(other.to_string()),
    }
}

/// How often a plan's write reads the version again after a conflict.
const PLAN_WRITE_ATTEMPTS: usize = 5;

impl Persistence for InStore {
    fn describe(&self) -> String {
        format!("the store's document {PLAN_DOCUMENT}")
    }

    fn read_plan(&self) -> Result<Option<String>, PersistError> {
        Ok(self.text(PLAN_DOCUMENT)?.1)
    }

    /// Over whatever version is there: a replica's new plan replaces the
    /// last one, whoever wrote it.
    fn write_plan(&self, text: &str) -> Result<(), PersistError> {
        for _ in 0..PLAN_WRITE_ATTEMPTS {
            let version = self
                .store
                .document(PLAN_DOCUMENT)
                .map_err(store_failed)?
                .map_or(0, |d| d.version);
            match self
                .store
                .put_document(PLAN_DOCUMENT, version, text.as_bytes())
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(store_failed(e)),
            }
        }
        Err(PersistError::Conflict)
    }

    fn read_overrides(&self) -> Result<(u64, Option<String>), PersistError> {
        self.text(OVERRIDES_DOCUMENT)
    }

    fn write_overrides(&self, expected: u64, text: &str) -> Result<u64, PersistError> {
        self.store
            .put_document(OVERRIDES_DOCUMENT, expected, text.as_bytes())
            .map_err(store_failed)
    }
}

/// Writes `bytes` to `path` atomically (its directory made first).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    bosun_base::fs::write_atomic(path, bytes)
}

/// The plan file's text, if there is one (`None`: no plan was written yet).
pub fn read(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn files_keep_the_plan_and_the_overrides_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(dir.path().join("plans/assignments.json"));
        assert_eq!(
            files.overrides_file(),
            dir.path().join("plans/assignments.overrides.json")
        );
        assert_eq!(files.read_plan().unwrap(), None);
        assert_eq!(files.read_overrides().unwrap(), (0, None));
        files.write_plan("{}").unwrap();
        assert_eq!(files.write_overrides(0, "[]").unwrap(), 0);
        // One writer: a file's writes never conflict.
        assert_eq!(files.write_overrides(7, "[1]").unwrap(), 0);
        assert_eq!(
            fs::read_to_string(dir.path().join("plans/assignments.json")).unwrap(),
            "{}"
        );
        assert_eq!(files.read_overrides().unwrap(), (0, Some("[1]".into())));
    }

    #[test]
    fn the_store_keeps_the_plan_and_compares_the_overrides_version() {
        let store: SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
        let kept = InStore::new(store.clone());
        assert_eq!(kept.read_plan().unwrap(), None);
        assert_eq!(kept.read_overrides().unwrap(), (0, None));
        kept.write_plan("{\"generation\": 1}").unwrap();
        // Another replica's plan replaces it, whatever its version.
        InStore::new(store.clone())
            .write_plan("{\"generation\": 2}")
            .unwrap();
        assert_eq!(
            kept.read_plan().unwrap().as_deref(),
            Some("{\"generation\": 2}")
        );
        assert_eq!(store.document(PLAN_DOCUMENT).unwrap().unwrap().version, 2);
        assert_eq!(kept.write_overrides(0, "[]").unwrap(), 1);
        assert!(matches!(
            kept.write_overrides(0, "[\"lost\"]"),
            Err(PersistError::Conflict)
        ));
        assert_eq!(kept.write_overrides(1, "[2]").unwrap(), 2);
        assert_eq!(kept.read_overrides().unwrap(), (2, Some("[2]".into())));
    }

    #[test]
    fn a_write_replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/plan.json");
        assert_eq!(read(&path).unwrap(), None);
        write_atomically(&path, b"{\"generation\": 1}").unwrap();
        write_atomically(&path, b"{\"generation\": 2}").unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some("{\"generation\": 2}"));
        let names: Vec<String> = fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names, ["plan.json"]);
    }
}
