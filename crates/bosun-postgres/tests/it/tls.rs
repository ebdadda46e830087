//! TLS to the database, against a real server that takes it (`ssl = on`,
//! a certificate for 127.0.0.1 signed by a test CA): encrypted and checked
//! against `--store-ca-file`'s CA, refused when the certificate does not
//! check out (never used unverified), plain when the URL says
//! `sslmode=disable`.

use bosun_kubetest::pki;
use bosun_kubetest::postgres::Postgres;
use bosun_postgres::{config, PgOptions, PgStore};
use bosun_store::{Store, StoreError};

/// Whether the connections of application `app` to the server are
/// encrypted: `Some(true)` all of them, `Some(false)` none, `None` when
/// there are none.
fn encrypted(pg: &Postgres, app: &str) -> Option<bool> {
    let out = pg
        .admin(
            "postgres",
            &format!(
                "SELECT bool_and(s.ssl), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '{app}'"
            ),
        )
        .unwrap();
    let (all, count) = out.split_once('|').unwrap();
    (count != "0").then(|| all == "t")
}

fn open(url: &str, ca_file: Option<std::path::PathBuf>) -> Result<PgStore, StoreError> {
    PgStore::open(
        config(url, None).unwrap(),
        PgOptions {
            ca_file,
            ..PgOptions::default()
        },
        None,
    )
}

#[test]
fn the_store_speaks_tls_checked_against_its_ca_and_never_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki::generate(dir.path()).unwrap();
    let pg = Postgres::with_tls(&pki.apiserver);
    let url = pg.database();

    // Encrypted by default (`prefer`, the server offers TLS), the server's
    // certificate checked against the given CA.
    let store = open(
        &format!("{url}?application_name=checked"),
        Some(pki.ca_file()),
    )
    .unwrap();
    assert_eq!(store.count_runs().unwrap(), vec![]);
    assert_eq!(encrypted(&pg, "checked"), Some(true));

    // Without the CA, the system's roots do not know the test CA: refused,
    // saying why, not used unverified, whatever `sslmode` says.
    for mode in ["prefer", "require"] {
        let refused = open(
            &format!("{url}?sslmode={mode}&application_name=unchecked"),
            None,
        )
        .err()
        .unwrap_or_else(|| panic!("sslmode={mode}: a server the system does not trust was used"));
        let message = refused.to_string();
        assert!(message.contains("certificate"), "sslmode={mode}: {message}");
        assert_eq!(encrypted(&pg, "unchecked"), None);
    }

    // A CA that did not sign the server's certificate: refused too.
    let other_dir = tempfile::tempdir().unwrap();
    let other = pki::generate(other_dir.path()).unwrap();
    let refused = open(
        &format!("{url}?application_name=other"),
        Some(other.ca_file()),
    );
    assert!(refused.is_err(), "a server signed by another CA was used");

    // `sslmode=disable`: plain, as asked.
    let plain = open(
        &format!("{url}?sslmode=disable&application_name=plain"),
        None,
    )
    .unwrap();
    assert_eq!(plain.count_runs().unwrap(), vec![]);
    assert_eq!(encrypted(&pg, "plain"), Some(false));

    // A CA file that holds no certificate is a clear error naming it.
    let bad = dir.path().join("not-a-ca.pem");
    std::fs::write(&bad, "hello\n").unwrap();
    let message = open(&url, Some(bad.clone())).err().unwrap().to_string();
    assert!(message.contains(&bad.display().to_string()), "{message}");
    drop((store, plain));
}
