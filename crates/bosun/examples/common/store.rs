//! The store a benchmark's daemons use: SQLite in their data directories
//! (the default), or, with `BOSUN_BENCH_STORE=postgres`, a database of a
//! PostgreSQL server the benchmark starts (Debian's binaries, a cluster in a
//! temporary directory on the same disk, every commit synced as a
//! production server does), a new database per daemon.

use bosun_kubetest::postgres::Postgres;

/// Where the benchmark's daemons keep their runs.
pub struct BenchStore {
    pg: Option<Postgres>,
}

impl BenchStore {
    /// The store `BOSUN_BENCH_STORE` names (`sqlite`, the default, or
    /// `postgres`).
    pub fn from_env() -> BenchStore {
        match std::env::var("BOSUN_BENCH_STORE").as_deref() {
            Ok("postgres") => BenchStore {
                pg: Some(Postgres::durable()),
            },
            Ok("sqlite") | Err(_) => BenchStore { pg: None },
            Ok(other) => panic!("BOSUN_BENCH_STORE={other}: sqlite or postgres"),
        }
    }

    /// Its name, for the report.
    pub fn name(&self) -> &'static str {
        if self.pg.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    }

    /// The arguments of `bosun serve` for one daemon (a new database of
    /// its own on PostgreSQL; nothing on SQLite).
    pub fn args(&self) -> Vec<String> {
        match &self.pg {
            None => Vec::new(),
            Some(pg) => {
                let url = pg.database();
                let db = url.rsplit('/').next().unwrap().to_string();
                vec![
                    "--store".into(),
                    pg.url(&db),
                    "--store-password-file".into(),
                    pg.password_file().display().to_string(),
                ]
            }
        }
    }
}
