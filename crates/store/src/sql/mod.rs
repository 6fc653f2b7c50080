//! The store on a SQL database, written once for SQLite and PostgreSQL: every query is one SQL
//! text with numbered `$N` parameters (both sqlx drivers take them) and rows are read into
//! `#[derive(sqlx::FromRow)]` types. What the two databases truly do differently is the
//! [`Dialect`]; connecting (and PostgreSQL's `LISTEN`) is per database.
//!
//! - `store.rs`: [`SqlStore`], what a store holds (pool, blob folder, listener);
//! - `dialect.rs`: [`Dialect`], the SQL fragments and results that differ between the databases;
//! - `sqlite.rs`, `postgres.rs`: connecting, migrations and each database's [`Dialect`];
//! - `migrate.rs`: running the migrations and logging the ones applied;
//! - `health.rs`: the write probe ([`WriteProbe`](crate::WriteProbe)), and SQLite's file as
//!   opened;
//! - `pg_listener.rs`: PostgreSQL's `LISTEN` connection (new work, finished jobs);
//! - the queries, one module per domain: `tokens_uploads_suites.rs` (the [`Store`](crate::Store)
//!   trait), `revisions.rs`, `jobs.rs` (the [`JobStore`](crate::JobStore) trait) and
//!   `callbacks.rs`, with what the last two share in `submissions.rs`.

mod callbacks;
mod db_file;
mod dialect;
mod health;
mod jobs;
mod migrate;
mod nodes;
mod pg_listener;
mod postgres;
mod revisions;
mod sqlite;
mod store;
mod submissions;
mod tokens_uploads_suites;

pub use dialect::Dialect;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;
pub use store::SqlStore;
