//! The dispatcher's plan on disk: written atomically (a temporary file in
//! the same directory, fsync, rename over the old one, fsync the directory),
//! so a crash leaves the old plan or the new one, never half of one; read
//! back at start-up as the previous assignment.

use std::fs;
use std::io;
use std::path::Path;

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
