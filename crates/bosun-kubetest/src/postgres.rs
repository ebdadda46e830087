//! A real PostgreSQL server for bosun's tests: Debian's `postgresql-15`
//! binaries, a cluster made by `initdb` in a temporary directory, served on
//! loopback only, and a database per test ([`Postgres::database`]).
//!
//! `initdb` refuses to run as root: when the tests run as root, the cluster
//! is made and served as the `postgres` user (the directory is handed to
//! it); as an ordinary user, as that user. The server is spawned by the
//! long-lived spawner thread ([`crate::process::spawn`]), so it dies with
//! the test process however that ends.
//!
//! The server takes passwords (SCRAM-SHA-256) on TCP, as a production
//! server does: every client, bosun included, gives the superuser
//! `bosun`'s password, kept in [`Postgres::password_file`]. `fsync` is off
//! (a test server need not survive a power loss; a crash of the server
//! process itself, `-m immediate` included, loses nothing committed, the
//! kernel's page cache still has it).
//!
//! [`Postgres::shared`] is one server per test binary; [`Postgres::dedicated`]
//! gives a test one of its own to restart ([`Postgres::restart_immediate`]),
//! stop or start.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use bosun_base::sync::Lock;

/// Where the server's binaries come from when it is set.
pub const BIN_DIR_ENV: &str = "BOSUN_PG_BIN_DIR";

/// The superuser the tests' clusters are made with.
pub const USER: &str = "bosun";

/// A PostgreSQL server of the tests'.
pub struct Postgres {
    /// Holds the cluster's directory (`data/`) and the password file.
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// The user the server runs as (uid, gid), when the tests run as root.
    owner: Option<(u32, u32)>,
    child: Mutex<Option<Child>>,
    password: String,
    /// Commits are synced to disk.
    durable: bool,
    /// The server takes TLS with `DIR/server.crt` and `DIR/server.key`.
    tls: bool,
}

/// The directory of `initdb` and `postgres`: `$BOSUN_PG_BIN_DIR`, else the
/// newest `/usr/lib/postgresql/*/bin` that has them (Debian's layout).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(BIN_DIR_ENV) {
        return PathBuf::from(d);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL's server is needed by this test and is not installed: install Debian's postgresql-15 (tools/test does), or set ${BIN_DIR_ENV}"
        ),
    }
}

/// The `postgres` user's uid and gid, from `/etc/passwd`.
fn postgres_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&"postgres") && f.len() > 3)
                .then(|| (f[2].parse().ok(), f[3].parse().ok()))
        })
        .and_then(|(u, g)| Some((u?, g?)))
        .expect("running as root, the tests run PostgreSQL as the `postgres` user, and /etc/passwd has none: install Debian's postgresql-15")
}

impl Postgres {
    /// One server for the whole test binary, started on first use.
    pub fn shared() -> &'static Postgres {
        static SHARED: OnceLock<Postgres> = OnceLock::new();
        SHARED.get_or_init(Postgres::dedicated)
    }

    /// A server of the caller's own, stopped when it is dropped.
    pub fn dedicated() -> Postgres {
        Postgres::make(false, None)
    }

    /// A server of the caller's own that syncs every commit to disk, as a
    /// production server does (`fsync`, `full_page_writes` on): for
    /// benchmarks beside SQLite's `synchronous = FULL`.
    pub fn durable() -> Postgres {
        Postgres::make(true, None)
    }

    /// A server of the caller's own that also takes TLS (`ssl = on`) with
    /// the certificate and key of `pair` (PEM); plain connections are still
    /// taken.
    pub fn with_tls(pair: &crate::pki::Pair) -> Postgres {
        Postgres::make(false, Some(pair))
    }

    fn make(durable: bool, tls: Option<&crate::pki::Pair>) -> Postgres {
        sweep();
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("bosun-pg-")
            .tempdir()
            .expect("a temporary directory");
        let owner = rustix::process::getuid().is_root().then(postgres_user);
        let password = format!("pw-{}", std::process::id());
        std::fs::write(dir.path().join("owner-pid"), std::process::id().to_string())
            .expect("the owner's pid");
        std::fs::write(dir.path().join("password"), &password).expect("the password file");
        let mut owned = vec![dir.path().to_path_buf(), dir.path().join("password")];
        if let Some(pair) = tls {
            use std::os::unix::fs::PermissionsExt;
            let (cert, key) = (dir.path().join("server.crt"), dir.path().join("server.key"));
            std::fs::write(&cert, &pair.cert_pem).expect("the server's certificate");
            std::fs::write(&key, &pair.key_pem).expect("the server's key");
            // The server refuses a key others may read.
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .expect("the key's mode");
            owned.extend([cert, key]);
        }
        if let Some((uid, gid)) = owner {
            for p in &owned {
                rustix::fs::chown(
                    p,
                    Some(rustix::fs::Uid::from_raw(uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                )
                .expect("the cluster's directory handed to the postgres user");
            }
        }
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(dir.path().join("data"))
            .args([
                "-U",
                USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .args(["--encoding=UTF8", "--locale=C", "--no-sync"])
            .arg(format!(
                "--pwfile={}",
                dir.path().join("password").display()
            ));
        let out = as_owner(&mut initdb, owner).output().expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let pg = Postgres {
            dir,
            bin,
            port: 0,
            owner,
            child: Mutex::new(None),
            password,
            durable,
            tls: tls.is_some(),
        };
        pg.start_on_free_port()
    }

    /// Starts the server on a free port (retrying when another process took
    /// the port first).
    fn start_on_free_port(mut self) -> Postgres {
        for _ in 0..5 {
            self.port = crate::process::free_port();
            if self.start().is_ok() {
                return self;
            }
        }
        panic!("PostgreSQL did not start; its log: {}", self.log());
    }

    /// Starts the server (stopped before) on its port; waits until it takes
    /// connections.
    pub fn start(&self) -> Result<(), String> {
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "unix_socket_directories="])
            .args(if self.durable {
                ["-c", "fsync=on", "-c", "full_page_writes=on"]
            } else {
                ["-c", "fsync=off", "-c", "full_page_writes=off"]
            })
            .args(["-c", "max_connections=300", "-c", "shared_buffers=64MB"])
            .args(if self.tls {
                vec![
                    "-c".to_string(),
                    "ssl=on".to_string(),
                    "-c".to_string(),
                    format!(
                        "ssl_cert_file={}",
                        self.dir.path().join("server.crt").display()
                    ),
                    "-c".to_string(),
                    format!(
                        "ssl_key_file={}",
                        self.dir.path().join("server.key").display()
                    ),
                ]
            } else {
                Vec::new()
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.path().join("log"))
                    .map_err(|e| e.to_string())?,
            );
        as_owner(&mut cmd, self.owner);
        let child = crate::process::spawn(cmd).map_err(|e| e.to_string())?;
        *self.child.locked() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.admin("postgres", "SELECT 1").is_ok() {
                return Ok(());
            }
            let exited = self
                .child
                .locked()
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            if exited || Instant::now() > deadline {
                self.kill();
                return Err(format!("PostgreSQL did not start: {}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server at once, as `pg_ctl stop -m immediate` does
    /// (SIGQUIT: no checkpoint, clients cut; the next start recovers from
    /// the WAL).
    pub fn stop_immediate(&self) {
        if let Some(mut c) = self.child.locked().take() {
            crate::process::signal(&c, rustix::process::Signal::QUIT);
            let _ = c.wait();
        }
    }

    /// `pg_ctl restart -m immediate`: stopped at once, started again on the
    /// same port.
    pub fn restart_immediate(&self) {
        self.stop_immediate();
        self.start().expect("PostgreSQL starts again");
    }

    /// Kills the server (SIGKILL).
    fn kill(&self) {
        if let Some(mut c) = self.child.locked().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A file holding the superuser's password (what `--store-password-file`
    /// takes).
    pub fn password_file(&self) -> PathBuf {
        self.dir.path().join("password")
    }

    /// The URL of database `db`, without its password.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// The URL of database `db` with the password in it.
    pub fn url_with_password(&self, db: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{db}",
            self.password, self.port
        )
    }

    /// A new, empty database; its URL with the password in it.
    pub fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.admin("postgres", &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        self.url_with_password(&name)
    }

    /// Runs `sql` in database `db` with `psql` as the superuser; its output
    /// (unaligned, tuples only).
    pub fn admin(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-d", db, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-c", sql])
            .env("PGPASSWORD", &self.password)
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The cluster's directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Deletes the clusters of test processes that are gone: a test binary's
/// shared server is never dropped (a static), so its directory would stay.
fn sweep() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("bosun-pg-") {
            continue;
        }
        let Ok(pid) = std::fs::read_to_string(e.path().join("owner-pid")) else {
            continue;
        };
        let alive = pid
            .trim()
            .parse::<i32>()
            .is_ok_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `cmd` run as `owner` (uid, gid) when given.
fn as_owner(cmd: &mut Command, owner: Option<(u32, u32)>) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid).env("HOME", "/tmp");
    }
    cmd
}
