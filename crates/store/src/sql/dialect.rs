//! What SQLite and PostgreSQL do differently, and nothing else: the queries themselves are shared.

/// A database the shared queries run on ([`sqlx::Sqlite`] or [`sqlx::Postgres`]).
///
/// The queries' `impl` blocks also list the sqlx bounds they use (an executor for a connection,
/// the value types they bind and read): Rust does not carry such bounds along with a trait, so
/// each generic block states its own; both databases meet them all.
pub trait Dialect: sqlx::Database {
    /// Ends the sub-select that picks the next queued job or callback (its table is aliased `s`).
    /// PostgreSQL locks the chosen row and skips rows other claimers hold, so claimers on many
    /// nodes never wait for or collide with each other; SQLite has one writer at a time and needs
    /// nothing.
    const SKIP_LOCKED: &'static str;
    /// Ends a read that a transaction then writes back (a suite's owner before it is replaced):
    /// PostgreSQL locks the row; SQLite needs nothing when the transaction began with
    /// [`Dialect::BEGIN_WRITE`].
    const FOR_UPDATE: &'static str;
    /// Begins every transaction that writes (`SqlStore::begin_write`). SQLite's `BEGIN IMMEDIATE`
    /// takes the write lock first (waiting up to the busy timeout): a deferred transaction that
    /// reads, then writes after another connection committed, fails at once with "database is
    /// locked".
    const BEGIN_WRITE: &'static str;
    /// The next value of the fair-share counter (`queue_owners.served`): a sequence on
    /// PostgreSQL (concurrent claims each get their own), one more than the largest on SQLite.
    const NEXT_SERVED: &'static str;
    /// Makes the rest of a writing transaction exclusive for one key (`$1`, text): a check then
    /// write (count an owner's jobs, then insert) that two nodes must not interleave. PostgreSQL:
    /// a transaction-scoped advisory lock (its transactions read committed rows, so a count alone
    /// excludes nothing); SQLite: none needed, [`Dialect::BEGIN_WRITE`] already holds the one
    /// write lock.
    const LOCK_KEY: Option<&'static str>;
    /// Announces new work to every node (PostgreSQL `NOTIFY`; inside a transaction it is sent at
    /// commit). SQLite has no other nodes to tell.
    const NOTIFY_WORK: Option<&'static str>;
    /// Announces a finished job (`$1`: its id) to every node's waiting requests, sent at commit
    /// like [`Dialect::NOTIFY_WORK`]. SQLite: this process tells its own waiters.
    const NOTIFY_FINISHED: Option<&'static str>;

    /// The database's clock, Unix milliseconds (an expression). Leases are given and expired by
    /// it: nodes whose clocks disagree (or one whose clock jumps) still agree on when a lease
    /// ends — by their own clocks a node 20 s ahead expired every other node's 30 s leases.
    const NOW_MS: &'static str;
    /// Whether one server alone uses the store: SQLite's database lives in its server's data
    /// folder, whose lock keeps a second server off. Then, at a server's start, the jobs other
    /// servers' in-process workers held were its predecessor's, which is gone.
    const ONE_SERVER: bool;

    /// Rows a statement changed (each driver has its own result type).
    fn rows_affected(r: &Self::QueryResult) -> u64;
}
