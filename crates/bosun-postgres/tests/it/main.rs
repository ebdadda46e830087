//! bosun-postgres's integration tests, on a real PostgreSQL server the tests
//! start (`bosun_kubetest::postgres`), in one test binary. The store's rules
//! themselves are bosun-store's conformance suite, which runs against this
//! store too; these are what only a shared database shows: several stores
//! (replicas) on one database, and the server going away.

mod lease;
mod replicas;
mod tls;
