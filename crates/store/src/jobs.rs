//! The durable submission queue: what the store keeps about each submission, and the operations
//! workers use ([`JobStore`]).
//!
//! A submission is `queued` until a worker **claims** it: the claim is a lease (a random secret
//! and an expiry) that the worker renews with heartbeats. A result is recorded only for the
//! current lease, once (`done`, or `failed` when the worker could not judge it); a lease that
//! expires puts the job back in the queue, unless it has already been claimed `max_attempts`
//! times — a job that keeps killing its workers is marked `failed`, not retried forever.
//!
//! Claims are **fair between owners**: the next job comes from the owner whose work was claimed
//! longest ago (round robin), in arrival order within an owner, so one token's flood of
//! submissions does not starve the others.
//!
//! When a finished submission has a callback URL, its callback becomes `pending`; a delivery loop
//! claims callbacks with a lease too (several API nodes never deliver the same try twice at once)
//! and records each try. Staff may put a finished submission's callback back to `pending`, its
//! tries counted afresh ([`JobStore::redeliver_callback`]).
//!
//! A remote worker holds its claims under a name that starts with its token's id
//! ([`remote_worker`]): revoking the token gives them back at once.

use std::time::Duration;

use serde::Serialize;

use crate::error::{Result, StoreError};

/// Where a submission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    Done,
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Result<JobState> {
        Ok(match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown submission state {other:?}"
                )))
            }
        })
    }

    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Done | JobState::Failed)
    }
}

/// Reads a stored state.
impl TryFrom<String> for JobState {
    type Error = StoreError;
    fn try_from(s: String) -> Result<Self> {
        JobState::parse(&s)
    }
}

/// A submission to enqueue.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub owner: String,
    /// What to run, as JSON text (the server's format; the store does not read it).
    pub spec: String,
    /// The upload holding the files, kept from retention while the job is unfinished.
    pub upload_id: Option<String>,
    /// The upload of the suite the job is graded with (a registered suite's files, pinned when
    /// the job was accepted), kept from retention likewise.
    pub suite_upload_id: Option<String>,
    /// The id of the suite that grades it (staff list and grade submissions by it).
    pub suite: Option<String>,
    /// A regrade: the submission it judges again (the original of a regrade of a regrade is
    /// recorded); it stands where that original stands in its owner's order.
    pub regrade_of: Option<String>,
    pub callback_url: Option<String>,
    /// Claims after which an expired lease marks the job failed instead of queueing it again.
    pub max_attempts: u32,
    /// The client's key for the request that made it (`Idempotency-Key`): an owner's key names
    /// one job while the job is kept.
    pub idempotency: Option<IdempotencyKey>,
}

/// A client's key for one request (`Idempotency-Key`), and what that request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub key: String,
    /// A hash of the request (the server's): a retry carries the same, a request that reuses the
    /// key for something else another.
    pub fingerprint: String,
}

/// The job an owner's idempotency key names.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyedJob {
    pub id: String,
    #[sqlx(try_from = "String")]
    pub state: JobState,
    /// The fingerprint of the request that made it.
    pub fingerprint: String,
}

/// A submission as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Job {
    pub id: String,
    pub owner: String,
    #[sqlx(try_from = "String")]
    pub state: JobState,
    pub spec: String,
    pub upload_id: Option<String>,
    /// The verdict (JSON text) once finished by a worker.
    pub result: Option<String>,
    /// Why it failed without a verdict (lease expired too often).
    pub error: Option<String>,
    #[sqlx(try_from = "i64")]
    pub attempts: u32,
    #[sqlx(try_from = "i64")]
    pub max_attempts: u32,
    pub created_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub worker: Option<String>,
    pub callback_url: Option<String>,
    /// `none`, `waiting` (not finished yet), `pending`, `delivering`, `delivered`, `failed`.
    pub callback_state: String,
    #[sqlx(try_from = "i64")]
    pub callback_attempts: u32,
    pub callback_error: Option<String>,
    /// The container image the verdict was reached in (both `None` on the host root).
    pub image_name: Option<String>,
    /// That image's manifest digest (`sha256:…`).
    pub image_digest: Option<String>,
    /// A regrade: the original submission it judges again.
    pub regrade_of: Option<String>,
    /// A regrade: when the original was submitted (Unix ms).
    pub submitted_ms: Option<i64>,
}

/// Which jobs [`JobStore::list_jobs`] returns: every condition given must hold.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub owner: Option<String>,
    pub suite: Option<String>,
    pub state: Option<JobState>,
    /// Only regrades of this original (a regrade of a regrade names the first original).
    pub regrade_of: Option<String>,
    /// Only jobs that arrived before this position (a page's last `seq`).
    pub before: Option<i64>,
    pub limit: u32,
}

/// A job in a list: where it is in the arrival order, its suite and its owner's token name.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ListedJob {
    pub seq: i64,
    pub suite: Option<String>,
    /// The owner's token name (`None` when the token is gone).
    pub owner_name: Option<String>,
    #[sqlx(flatten)]
    pub job: Job,
}

/// The container image a job ran in, recorded with its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobImage {
    pub name: String,
    /// The image manifest's digest (`sha256:…`).
    pub digest: String,
}

/// A job a worker now holds: the lease secret proves it when heartbeating and completing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub job: Job,
    pub lease: String,
    pub lease_expires_ms: i64,
}

/// What happened to a result a worker sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    /// Recorded now.
    Recorded,
    /// This lease's result was recorded before (a retried request): nothing changes.
    AlreadyRecorded,
    /// The lease is not current (expired and given to someone else, or the job is finished by
    /// another claim): refused, nothing changes.
    LeaseLost,
}

/// Leases found expired by [`JobStore::expire_leases`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expired {
    /// Put back in the queue.
    pub requeued: Vec<String>,
    /// Claimed `max_attempts` times: failed.
    pub failed: Vec<String>,
}

/// One entry of a submission's audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct JobEvent {
    pub at_ms: i64,
    /// `queued`, `claimed`, `released`, `expired`, `completed`, `failed`, `result_refused`,
    /// `callback`, `redelivery`.
    pub kind: String,
    pub worker: Option<String>,
    pub detail: Option<String>,
}

/// Submissions by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub queued: u64,
    pub running: u64,
    pub done: u64,
    pub failed: u64,
    /// When the queued submission that has waited longest was made (Unix ms); none queued.
    pub oldest_queued_ms: Option<i64>,
}

/// A callback to deliver: the job and which try this is (1 = first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackClaim {
    pub job: Job,
    pub attempt: u32,
}

/// What [`JobStore::redeliver_callback`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redelivery {
    /// Pending again, its tries counted afresh and due now: the job as it is now.
    Pending(Box<Job>),
    NotFound,
    /// Not finished: its callback goes out when it is.
    NotFinished(JobState),
    /// It has no callback URL.
    NoCallback,
    /// A try is under way (its outcome is recorded within its lease).
    Delivering,
}

/// The start of every remote worker's name: `remote:{token id}:`.
pub(crate) const REMOTE_WORKER: &str = "remote:";

/// The name a remote worker's claims are held under: its worker token's public id, then the name
/// it gave, so that revoking the token finds the jobs its workers hold
/// ([`Store::revoke_token`](crate::Store::revoke_token)), and a claim under it is refused once the
/// token is revoked.
pub fn remote_worker(token: &str, name: &str) -> String {
    format!("{}{name}", remote_worker_prefix(token))
}

/// What the names of a token's remote workers start with.
pub fn remote_worker_prefix(token: &str) -> String {
    format!("{REMOTE_WORKER}{token}:")
}

/// The token id in a remote worker's name (`None`: not a remote worker's).
pub fn remote_worker_token(worker: &str) -> Option<&str> {
    let (token, _) = worker.strip_prefix(REMOTE_WORKER)?.split_once(':')?;
    Some(token)
}

/// What [`JobStore::enqueue_within`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// Stored: the jobs' ids in order.
    Queued(Vec<String>),
    /// Nothing stored: `owner` has `pending` jobs queued or running, and `adding` more would take
    /// it past the cap.
    Full {
        owner: String,
        pending: u64,
        adding: u64,
    },
    /// Nothing stored: a job's owner already has a job under its idempotency key (a retry, or
    /// the key reused): that job.
    Existing(KeyedJob),
}

/// The queue's operations. Every method is one transaction; any number of API nodes and workers
/// may call them at once.
#[async_trait::async_trait]
pub trait JobStore: Send + Sync {
    /// Stores the jobs (all or none) as `queued`; returns their ids in order.
    async fn enqueue(&self, jobs: Vec<NewJob>) -> Result<Vec<String>> {
        match self.enqueue_within(jobs, None).await? {
            Enqueued::Queued(ids) => Ok(ids),
            Enqueued::Full { .. } => Err(StoreError::Invalid(
                "an enqueue without a cap was refused as over it".into(),
            )),
            Enqueued::Existing(j) => Err(StoreError::Conflict(format!(
                "the idempotency key already names submission {}",
                j.id
            ))),
        }
    }
    /// Stores the jobs (all or none) as `queued`, unless an owner among them would then have
    /// more than `max_pending` jobs queued or running (`None`: no cap), or a job's idempotency key
    /// already names a job of its owner ([`Enqueued::Existing`], before the cap is looked at).
    /// The count and the insert are one atomic step: concurrent calls, on any number of nodes,
    /// never take an owner past the cap together; a unique index makes concurrent calls with one
    /// key store one job between them.
    async fn enqueue_within(&self, jobs: Vec<NewJob>, max_pending: Option<u64>)
        -> Result<Enqueued>;
    async fn get_job(&self, id: &str) -> Result<Option<Job>>;
    /// The jobs `filter` selects, newest first, at most `filter.limit`; a page ends at the
    /// last one's `seq` (give it as the next page's `before`).
    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<ListedJob>>;
    /// Each student's latest finished (done or failed) job graded by suite `suite`, by name: of
    /// its latest submission that has a verdict, the latest verdict (a regrade's; a regrade
    /// stands where its original does, so regrading an older submission does not displace a
    /// newer one). Staff's and admins' submissions are left out, and so are judgements whose
    /// verdict is `not_gradable` (the result's `verdict`; a grader refused the submission).
    async fn gradebook(&self, suite: &str) -> Result<Vec<ListedJob>>;
    /// The job `owner` made under idempotency key `key`, while that job is kept (retention
    /// forgets the key with it).
    async fn job_by_key(&self, owner: &str, key: &str) -> Result<Option<KeyedJob>>;
    /// The oldest queued job of the owner served longest ago, now `running` under a new lease
    /// of `lease` held by `worker`; `None` when nothing is queued, or when `worker` is a remote
    /// worker ([`remote_worker`]) whose token is revoked.
    async fn claim_job(&self, worker: &str, lease: Duration) -> Result<Option<Claim>>;
    /// Extends a lease; false when it is no longer current (the worker should stop).
    async fn heartbeat_job(&self, id: &str, lease: &str, extend: Duration) -> Result<bool>;
    /// Records a worker's verdict (`done`) or its failure to judge (`failed`), exactly once, with
    /// the image it ran in (`None`: the host root).
    async fn complete_job(
        &self,
        id: &str,
        lease: &str,
        state: JobState,
        result: &str,
        image: Option<&JobImage>,
    ) -> Result<Completion>;
    /// Gives a job back at once, as if this claim never happened: the holder of the current lease
    /// stops without a result through no fault of the job (its node shuts down), so the job is
    /// `queued` again and the claim's attempt is not counted. False when the lease is not current
    /// (the job was finished or expired meanwhile): nothing changes.
    async fn release_job(&self, id: &str, lease: &str, why: &str) -> Result<bool>;
    /// Puts jobs whose lease expired back in the queue, or fails them after `max_attempts`.
    async fn expire_leases(&self) -> Result<Expired>;
    /// At the start of server `node`: on a store only one server uses (SQLite), the leases of
    /// other servers' in-process workers end now — that server was killed (a stopped one gave
    /// its jobs back) — so their jobs go back to the queue at once rather than when the lease
    /// runs out, through [`JobStore::expire_leases`] (an attempt counted, as for any expiry).
    /// Remote workers' leases run on. On a shared store (PostgreSQL) nothing is known: none end.
    async fn expire_predecessors_leases(&self, node: &str) -> Result<Expired>;
    /// The audit trail of a job, oldest first.
    async fn job_events(&self, id: &str) -> Result<Vec<JobEvent>>;
    async fn queue_stats(&self) -> Result<QueueStats>;
    /// This owner's jobs that are queued or running.
    async fn pending_jobs_of(&self, owner: &str) -> Result<u64>;
    /// Deletes finished jobs (and their events) that finished before `before_ms`.
    async fn delete_jobs_before(&self, before_ms: i64) -> Result<u64>;

    /// A pending callback whose time has come (or a delivery whose lease expired), now held by
    /// the caller for `lease`; none of `skip_owners`' submissions (the caller delivers as many of
    /// theirs as it will at once).
    async fn claim_callback(
        &self,
        lease: Duration,
        skip_owners: &[String],
    ) -> Result<Option<CallbackClaim>>;
    /// Records a delivery try: delivered, failed for good, or to be tried again at `retry_at_ms`.
    async fn finish_callback(&self, id: &str, outcome: CallbackOutcome, detail: &str)
        -> Result<()>;
    /// Puts a finished job's callback back to `pending`, due now, with its tries counted afresh
    /// (whatever became of it: delivered, given up, waiting for a retry), recording who asked
    /// (`by`) in its audit trail. Nothing changes while a try is under way.
    async fn redeliver_callback(&self, id: &str, by: &str) -> Result<Redelivery>;

    /// Waits until new work may be there (PostgreSQL: a notification) or `timeout` passes; true
    /// when a notification came. Callers poll the queue after it returns either way.
    async fn wait_for_work(&self, timeout: Duration) -> bool;
    /// Tells every node's waiting workers that there is new work (PostgreSQL; nothing to tell on
    /// SQLite, whose one process wakes its own workers).
    async fn notify_work(&self);
    /// Jobs finished by any node from now on, as each commits (PostgreSQL: `LISTEN
    /// corral_finished`). `None` on SQLite: only this process finishes jobs, and it tells its
    /// own waiters.
    fn finished_jobs(&self) -> Option<tokio::sync::broadcast::Receiver<FinishNotice>>;
}

/// A job finished somewhere ([`JobStore::finished_jobs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishNotice {
    /// This job (its id).
    Job(String),
    /// Some may have finished unheard (the listening connection was down, or the subscriber
    /// fell behind): whoever waits should look.
    Missed,
}

/// The result of one callback try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackOutcome {
    Delivered,
    Retry { at_ms: i64 },
    GaveUp,
}

/// A new submission id: 128 bits in hex, shaped as a version-4 UUID (122 random bits), so the
/// Judge0-compatible surface can show it as a UUID token.
pub fn new_job_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
