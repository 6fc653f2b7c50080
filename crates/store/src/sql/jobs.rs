//! The [`JobStore`] trait's queries: the submission queue (claims under leases, heartbeats,
//! results recorded once, expiry, fair sharing between owners) and waking waiting workers.
//! Callback delivery has its own module.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use super::submissions::{keyed_job, ms, record_event, JOB_COLUMNS};
use crate::clock::now_ms;
use crate::error::{Result, StoreError};
use crate::ids::random_hex;
use crate::jobs::{
    new_job_id, remote_worker_prefix, remote_worker_token, CallbackClaim, CallbackOutcome, Claim,
    Completion, Enqueued, Expired, FinishNotice, Job, JobEvent, JobFilter, JobImage, JobState,
    JobStore, KeyedJob, ListedJob, NewJob, QueueStats, Redelivery, REMOTE_WORKER,
};

#[async_trait::async_trait]
impl<D> JobStore for SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> Option<i64>: Encode<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> Option<&'q str>: Encode<'q, D>,
    for<'q> String: Decode<'q, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    async fn enqueue_within(
        &self,
        jobs: Vec<NewJob>,
        max_pending: Option<u64>,
    ) -> Result<Enqueued> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let mut adding: BTreeMap<&str, u64> = BTreeMap::new();
        for j in &jobs {
            *adding.entry(j.owner.as_str()).or_default() += 1;
        }
        if max_pending.is_some() {
            if let Some(lock) = D::LOCK_KEY {
                // Each owner's count and the inserts in one transaction that excludes every
                // other check of the same owner until it ends: SQLite's write lock (`BEGIN
                // IMMEDIATE`), or PostgreSQL's advisory lock on the owner (taken in one order: no
                // deadlock). Counted outside such a lock, concurrent requests each saw room and
                // all got in.
                for owner in adding.keys() {
                    sqlx::query(lock)
                        .bind(format!("pending:{owner}").as_str())
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        // A key already used answers its job, before the cap: a retry of a queued submission is
        // not refused as one too many.
        for j in &jobs {
            if let Some(k) = &j.idempotency {
                if let Some(found) = keyed_job::<D>(&mut tx, &j.owner, &k.key).await? {
                    return Ok(Enqueued::Existing(found));
                }
            }
        }
        if let Some(cap) = max_pending {
            for (owner, adding) in adding {
                let pending: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM submissions WHERE owner = $1 AND state IN ('queued', 'running')",
                )
                .bind(owner)
                .fetch_one(&mut *tx)
                .await?;
                let pending = pending as u64;
                if pending.saturating_add(adding) > cap {
                    return Ok(Enqueued::Full {
                        owner: owner.to_string(),
                        pending,
                        adding,
                    });
                }
            }
        }
        let mut ids = Vec::with_capacity(jobs.len());
        for j in &jobs {
            let id = new_job_id();
            let inserted = sqlx::query(
                "INSERT INTO submissions (id, owner, state, spec, upload_id, max_attempts, created_ms, \
                 callback_url, callback_state, suite_upload_id, idempotency_key, request_fingerprint, \
                 suite, regrade_of, root_seq, submitted_ms) \
                 VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                 (SELECT COALESCE(o.regrade_of, o.id) FROM submissions o WHERE o.id = $13), \
                 (SELECT COALESCE(o.root_seq, o.seq) FROM submissions o WHERE o.id = $13), \
                 (SELECT COALESCE(o.submitted_ms, o.created_ms) FROM submissions o WHERE o.id = $13))",
            )
            .bind(id.as_str())
            .bind(j.owner.as_str())
            .bind(j.spec.as_str())
            .bind(j.upload_id.as_deref())
            .bind(j.max_attempts.max(1) as i64)
            .bind(now)
            .bind(j.callback_url.as_deref())
            .bind(if j.callback_url.is_some() {
                "waiting"
            } else {
                "none"
            })
            .bind(j.suite_upload_id.as_deref())
            .bind(j.idempotency.as_ref().map(|k| k.key.as_str()))
            .bind(j.idempotency.as_ref().map(|k| k.fingerprint.as_str()))
            .bind(j.suite.as_deref())
            .bind(j.regrade_of.as_deref())
            .execute(&mut *tx)
            .await;
            if let Err(e) = inserted {
                // Another transaction stored the key after the look above (PostgreSQL without the
                // owner's lock): the unique index refused this one, and that job is the answer.
                let unique = e
                    .as_database_error()
                    .is_some_and(|d| d.is_unique_violation());
                if let (true, Some(k)) = (unique, &j.idempotency) {
                    drop(tx);
                    if let Some(found) = self.job_by_key(&j.owner, &k.key).await? {
                        return Ok(Enqueued::Existing(found));
                    }
                }
                return Err(e.into());
            }
            sqlx::query(
                "INSERT INTO submission_events (job_id, at_ms, kind) VALUES ($1, $2, 'queued')",
            )
            .bind(id.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
            ids.push(id);
        }
        if let Some(notify) = D::NOTIFY_WORK {
            // Delivered to every listening node when the transaction commits.
            sqlx::query(notify).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(Enqueued::Queued(ids))
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<ListedJob>> {
        // Each condition is off when its parameter is NULL: one statement for every filter.
        Ok(sqlx::query_as(&format!(
            "SELECT j.*, t.name AS owner_name FROM \
             (SELECT seq, suite, {JOB_COLUMNS} FROM submissions \
              WHERE ($1 IS NULL OR owner = $1) AND ($2 IS NULL OR suite = $2) \
              AND ($3 IS NULL OR state = $3) AND ($4 IS NULL OR seq < $4) \
              AND ($6 IS NULL OR regrade_of = $6) \
              ORDER BY seq DESC LIMIT $5) j \
             LEFT JOIN tokens t ON t.id = j.owner ORDER BY j.seq DESC"
        ))
        .bind(filter.owner.as_deref())
        .bind(filter.suite.as_deref())
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.before)
        .bind(i64::from(filter.limit))
        .bind(filter.regrade_of.as_deref())
        .fetch_all(&self.db)
        .await?)
    }

    async fn gradebook(&self, suite: &str) -> Result<Vec<ListedJob>> {
        // Per owner, the finished job whose original came last, and of that original's judgements
        // the last: a regrade stands where its original stands. One pass over the suite's rows
        // (a correlated "latest of this owner" per row scanned the suite once per row: 15 s for
        // 20,000 submissions). Staff's and admins' own submissions are tries, not grades; a
        // submission a grader refused (`not_gradable`) is not counted, as on PrairieLearn.
        Ok(sqlx::query_as(&format!(
            "SELECT j.*, t.name AS owner_name FROM \
             (SELECT seq, suite, {JOB_COLUMNS}, ROW_NUMBER() OVER \
                (PARTITION BY owner ORDER BY COALESCE(root_seq, seq) DESC, seq DESC) AS latest \
              FROM submissions WHERE suite = $1 AND state IN ('done', 'failed') \
              AND (verdict IS NULL OR verdict <> 'not_gradable')) j \
             LEFT JOIN tokens t ON t.id = j.owner \
             WHERE j.latest = 1 AND COALESCE(t.role, 'student') = 'student' \
             ORDER BY LOWER(COALESCE(t.name, '')), j.owner"
        ))
        .bind(suite)
        .fetch_all(&self.db)
        .await?)
    }

    async fn get_job(&self, id: &str) -> Result<Option<Job>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {JOB_COLUMNS} FROM submissions WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.db)
        .await?)
    }

    async fn job_by_key(&self, owner: &str, key: &str) -> Result<Option<KeyedJob>> {
        let mut conn = self.db.acquire().await?;
        keyed_job::<D>(&mut conn, owner, key).await
    }

    async fn claim_job(&self, worker: &str, lease: Duration) -> Result<Option<Claim>> {
        // Read before the database is reached: a job enqueued while this claim waited for it can
        // be newer than `now`, so a job never starts before it was created (no negative waits).
        let now = now_ms();
        let secret = random_hex(16);
        // One statement: the row is chosen and updated under SQLite's write lock, or chosen and
        // locked on PostgreSQL (rows other claimers hold are skipped, not waited for). The lease
        // ends by the database's clock (`Dialect::NOW_MS`). A remote worker whose token is revoked
        // gets nothing, in the same statement: the jobs its revocation gave back became queued in
        // the transaction that revoked it, so no claim sees them queued and the token live
        // (were it checked by the server alone, the worker's idle long-poll would take them back
        // before that server heard of a revocation made elsewhere, and hold them for a lease).
        // The order: new submissions before regrades (a regrade of a whole suite, started by
        // staff who fixed a test, must not hold back what students hand in meanwhile), then the
        // owner served longest ago, then the oldest.
        let mut tx = self.begin_write().await?;
        let job: Option<Job> = sqlx::query_as(&format!(
            "UPDATE submissions SET state = 'running', attempts = attempts + 1, worker = $1, \
             lease = $2, lease_expires_ms = {} + $3, \
             started_ms = COALESCE(started_ms, CASE WHEN created_ms > $4 THEN created_ms ELSE $4 END) \
             WHERE seq = (SELECT s.seq FROM submissions s LEFT JOIN queue_owners o ON o.owner = s.owner \
                          WHERE s.state = 'queued' AND ($5 IS NULL OR NOT EXISTS \
                            (SELECT 1 FROM tokens t WHERE t.id = $5 AND t.revoked_at IS NOT NULL)) \
                          ORDER BY s.regrade_of IS NOT NULL, COALESCE(o.served, 0), s.seq LIMIT 1{}) \
             AND state = 'queued' \
             RETURNING {JOB_COLUMNS}",
            D::NOW_MS,
            D::SKIP_LOCKED
        ))
        .bind(worker)
        .bind(secret.as_str())
        .bind(ms(lease))
        .bind(now)
        .bind(remote_worker_token(worker))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(job) = job else {
            return Ok(None);
        };
        let expires: i64 =
            sqlx::query_scalar("SELECT lease_expires_ms FROM submissions WHERE id = $1")
                .bind(job.id.as_str())
                .fetch_one(&mut *tx)
                .await?;
        // A regrade staff started does not count as its owner's turn: their next submission
        // keeps its place among the others'.
        if job.regrade_of.is_none() {
            sqlx::query(&format!(
                "INSERT INTO queue_owners (owner, served) VALUES ($1, {}) \
                 ON CONFLICT (owner) DO UPDATE SET served = excluded.served",
                D::NEXT_SERVED
            ))
            .bind(job.owner.as_str())
            .execute(&mut *tx)
            .await?;
        }
        record_event::<D>(
            &mut tx,
            &job.id,
            "claimed",
            Some(worker),
            Some(&format!("attempt {}", job.attempts)),
        )
        .await?;
        tx.commit().await?;
        tracing::debug!(submission = %job.id, worker, attempt = job.attempts, "job claimed");
        Ok(Some(Claim {
            job,
            lease: secret,
            lease_expires_ms: expires,
        }))
    }

    async fn heartbeat_job(&self, id: &str, lease: &str, extend: Duration) -> Result<bool> {
        let r = sqlx::query(&format!(
            "UPDATE submissions SET lease_expires_ms = {} + $1 \
             WHERE id = $2 AND lease = $3 AND state = 'running'",
            D::NOW_MS
        ))
        .bind(ms(extend))
        .bind(id)
        .bind(lease)
        .execute(&self.db)
        .await?;
        Ok(D::rows_affected(&r) == 1)
    }

    async fn complete_job(
        &self,
        id: &str,
        lease: &str,
        state: JobState,
        result: &str,
        image: Option<&JobImage>,
    ) -> Result<Completion> {
        if !state.is_finished() {
            return Err(StoreError::Invalid(
                "a job completes as done or failed".into(),
            ));
        }
        let now = now_ms();
        // Kept beside the result for the gradebook's query (which judgements count).
        let verdict = serde_json::from_str::<serde_json::Value>(result)
            .ok()
            .and_then(|v| v.get("verdict")?.as_str().map(str::to_string));
        // The lease stays on the row after completion: a retried request with the same lease is
        // recognised (AlreadyRecorded) instead of refused.
        let mut tx = self.begin_write().await?;
        let r = sqlx::query(
            "UPDATE submissions SET state = $1, result = $2, finished_ms = $3, lease_expires_ms = NULL, \
             callback_state = CASE WHEN callback_url IS NULL THEN 'none' ELSE 'pending' END, \
             callback_next_ms = $4, image_name = $5, image_digest = $6, verdict = $9 \
             WHERE id = $7 AND lease = $8 AND state = 'running'",
        )
        .bind(state.as_str())
        .bind(result)
        .bind(now)
        .bind(now)
        .bind(image.map(|i| i.name.as_str()))
        .bind(image.map(|i| i.digest.as_str()))
        .bind(id)
        .bind(lease)
        .bind(verdict.as_deref())
        .execute(&mut *tx)
        .await?;
        if D::rows_affected(&r) == 1 {
            let worker: Option<String> =
                sqlx::query_scalar("SELECT worker FROM submissions WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            let kind = if state == JobState::Done {
                "completed"
            } else {
                "failed"
            };
            record_event::<D>(&mut tx, id, kind, worker.as_deref(), None).await?;
            if let Some(notify) = D::NOTIFY_FINISHED {
                sqlx::query(notify).bind(id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            return Ok(Completion::Recorded);
        }
        drop(tx);
        let row: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT state, lease FROM submissions WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.db)
                .await?;
        let Some((st, current)) = row else {
            return Err(StoreError::NotFound(format!("no submission {id:?}")));
        };
        if JobState::parse(&st)?.is_finished() && current.as_deref() == Some(lease) {
            return Ok(Completion::AlreadyRecorded);
        }
        let mut conn = self.db.acquire().await?;
        record_event::<D>(
            &mut conn,
            id,
            "result_refused",
            None,
            Some("the lease is not current"),
        )
        .await?;
        Ok(Completion::LeaseLost)
    }

    async fn release_job(&self, id: &str, lease: &str, why: &str) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let worker: Option<Option<String>> = sqlx::query_scalar(
            "UPDATE submissions SET state = 'queued', \
             attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, \
             lease = NULL, lease_expires_ms = NULL \
             WHERE id = $1 AND lease = $2 AND state = 'running' RETURNING worker",
        )
        .bind(id)
        .bind(lease)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(worker) = worker else {
            return Ok(false);
        };
        record_event::<D>(&mut tx, id, "released", worker.as_deref(), Some(why)).await?;
        if let Some(notify) = D::NOTIFY_WORK {
            sqlx::query(notify).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn expire_predecessors_leases(&self, node: &str) -> Result<Expired> {
        if !D::ONE_SERVER {
            return Ok(Expired::default());
        }
        let mut tx = self.begin_write().await?;
        sqlx::query(&format!(
            "UPDATE submissions SET lease_expires_ms = 0 \
             WHERE state = 'running' AND worker NOT LIKE '{REMOTE_WORKER}%' \
             AND worker NOT LIKE $1 || '/%'"
        ))
        .bind(node)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.expire_leases().await
    }

    async fn expire_leases(&self) -> Result<Expired> {
        let now = now_ms();
        // One statement, whose rows are locked by its sub-select, skipping rows another
        // transaction holds (a completion, a heartbeat, another node's expiry): it never waits, so
        // it takes no part in a deadlock. Two statements (fail, then requeue) each waiting for rows
        // in its own order deadlocked on PostgreSQL: each expiry's second statement wanted the
        // rows the other's first had taken. A skipped row is looked at by the next expiry.
        let mut tx = self.begin_write().await?;
        let expired: Vec<(String, String)> = sqlx::query_as(&format!(
            "UPDATE submissions SET \
             state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
             finished_ms = CASE WHEN attempts >= max_attempts THEN $1 ELSE finished_ms END, \
             error = CASE WHEN attempts >= max_attempts THEN 'the job was claimed ' || attempts || \
               ' times and its worker stopped answering each time' ELSE error END, \
             callback_state = CASE WHEN attempts < max_attempts THEN callback_state \
               WHEN callback_url IS NULL THEN 'none' ELSE 'pending' END, \
             callback_next_ms = CASE WHEN attempts >= max_attempts THEN $2 ELSE callback_next_ms END, \
             lease = NULL, lease_expires_ms = NULL \
             WHERE seq IN (SELECT s.seq FROM submissions s \
                           WHERE s.state = 'running' AND s.lease_expires_ms < {now_db}{}) \
             AND state = 'running' AND lease_expires_ms < {now_db} \
             RETURNING id, state",
            D::SKIP_LOCKED,
            now_db = D::NOW_MS
        ))
        .bind(now)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let (failed, requeued): (Vec<_>, Vec<_>) = expired
            .into_iter()
            .partition(|(_, state)| state == "failed");
        let failed: Vec<String> = failed.into_iter().map(|(id, _)| id).collect();
        let requeued: Vec<String> = requeued.into_iter().map(|(id, _)| id).collect();
        for id in &failed {
            record_event::<D>(
                &mut tx,
                id,
                "expired",
                None,
                Some("lease expired; attempts used up"),
            )
            .await?;
            record_event::<D>(&mut tx, id, "failed", None, Some("lease expired too often")).await?;
            if let Some(notify) = D::NOTIFY_FINISHED {
                sqlx::query(notify)
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for id in &requeued {
            record_event::<D>(
                &mut tx,
                id,
                "expired",
                None,
                Some("lease expired; queued again"),
            )
            .await?;
        }
        tx.commit().await?;
        for id in &requeued {
            tracing::info!(submission = %id, "a job's lease expired; queued again");
        }
        for id in &failed {
            tracing::warn!(submission = %id, "a job's lease expired once too often; it failed");
        }
        if !requeued.is_empty() {
            self.notify_work().await;
        }
        Ok(Expired { requeued, failed })
    }

    async fn job_events(&self, id: &str) -> Result<Vec<JobEvent>> {
        Ok(sqlx::query_as(
            "SELECT at_ms, kind, worker, detail FROM submission_events WHERE job_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.db)
        .await?)
    }

    async fn queue_stats(&self) -> Result<QueueStats> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT state, COUNT(*) AS n FROM submissions GROUP BY state")
                .fetch_all(&self.db)
                .await?;
        let mut s = QueueStats::default();
        for (state, n) in rows {
            let n = n as u64;
            match JobState::parse(&state)? {
                JobState::Queued => s.queued = n,
                JobState::Running => s.running = n,
                JobState::Done => s.done = n,
                JobState::Failed => s.failed = n,
            }
        }
        // The queue's own order (its partial index): the first by seq is the oldest made.
        s.oldest_queued_ms = sqlx::query_scalar(
            "SELECT created_ms FROM submissions WHERE state = 'queued' ORDER BY seq LIMIT 1",
        )
        .fetch_optional(&self.db)
        .await?;
        Ok(s)
    }

    async fn pending_jobs_of(&self, owner: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM submissions WHERE owner = $1 AND state IN ('queued', 'running')",
        )
        .bind(owner)
        .fetch_one(&self.db)
        .await?;
        Ok(n as u64)
    }

    async fn delete_jobs_before(&self, before_ms: i64) -> Result<u64> {
        // The rows are locked first, skipping any another transaction holds (kept until the next
        // pass), and exactly those go with their events: a DELETE of every match would lock them
        // in its plan's order, which two nodes' passes (different cut-offs, different plans) need
        // not share — a deadlock.
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT s.id FROM submissions s WHERE s.state IN ('done', 'failed') AND s.finished_ms < $1 \
             AND s.callback_state NOT IN ('pending', 'delivering'){}",
            D::SKIP_LOCKED
        ))
        .bind(before_ms)
        .fetch_all(&mut *tx)
        .await?;
        let mut deleted = 0;
        for chunk in ids.chunks(DELETE_CHUNK) {
            let list = placeholders(chunk.len());
            // The audit trail first, then the jobs (the count returned is theirs).
            for table in ["submission_events WHERE job_id", "submissions WHERE id"] {
                let q = format!("DELETE FROM {table} IN ({list})");
                let mut del = sqlx::query(&q);
                for id in chunk {
                    del = del.bind(id.as_str());
                }
                let r = del.execute(&mut *tx).await?;
                if table.starts_with("submissions ") {
                    deleted += D::rows_affected(&r);
                }
            }
        }
        tx.commit().await?;
        Ok(deleted)
    }

    async fn claim_callback(
        &self,
        lease: Duration,
        skip_owners: &[String],
    ) -> Result<Option<CallbackClaim>> {
        self.claim_next_callback(lease, skip_owners).await
    }

    async fn finish_callback(
        &self,
        id: &str,
        outcome: CallbackOutcome,
        detail: &str,
    ) -> Result<()> {
        self.record_callback_try(id, outcome, detail).await
    }

    async fn redeliver_callback(&self, id: &str, by: &str) -> Result<Redelivery> {
        self.reset_callback(id, by).await
    }

    async fn wait_for_work(&self, timeout: Duration) -> bool {
        match &self.listener {
            Some(l) => l.wait(timeout).await,
            // SQLite: no other process announces work; the caller polls after the pause.
            None => {
                tokio::time::sleep(timeout).await;
                false
            }
        }
    }

    fn finished_jobs(&self) -> Option<tokio::sync::broadcast::Receiver<FinishNotice>> {
        self.listener.as_ref().map(|l| l.finished())
    }

    async fn notify_work(&self) {
        if let Some(notify) = D::NOTIFY_WORK {
            // Best effort: waiting workers also poll.
            let _ = sqlx::query(notify).execute(&self.db).await;
        }
    }
}

impl<D> SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> Option<&'q str>: Encode<'q, D>,
    for<'q> String: Decode<'q, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    /// Gives back the jobs that token `token`'s remote workers hold, in the caller's transaction
    /// (the one that revokes it): queued at once and the claim not counted, as
    /// [`JobStore::release_job`] does; their leases are void, so a late heartbeat or result of
    /// the revoked worker is refused. Returns their ids.
    pub(super) async fn release_jobs_of_token(
        conn: &mut D::Connection,
        token: &str,
    ) -> Result<Vec<String>> {
        // A prefix compared as text, not a LIKE pattern: nothing in a name is a wildcard.
        let prefix = remote_worker_prefix(token);
        let released: Vec<(String, Option<String>)> = sqlx::query_as(
            "UPDATE submissions SET state = 'queued', \
             attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, \
             lease = NULL, lease_expires_ms = NULL \
             WHERE state = 'running' AND substr(worker, 1, length($1)) = $1 \
             RETURNING id, worker",
        )
        .bind(prefix.as_str())
        .fetch_all(&mut *conn)
        .await?;
        for (id, worker) in &released {
            record_event::<D>(
                conn,
                id,
                "released",
                worker.as_deref(),
                Some("its worker's token was revoked"),
            )
            .await?;
        }
        if !released.is_empty() {
            if let Some(notify) = D::NOTIFY_WORK {
                sqlx::query(notify).execute(&mut *conn).await?;
            }
        }
        Ok(released.into_iter().map(|(id, _)| id).collect())
    }
}

/// Ids bound per statement when many rows go: below SQLite's oldest limit on parameters (999).
const DELETE_CHUNK: usize = 500;

/// `$1, $2, …, $n`: the placeholders of an `IN (…)` list (both databases read `$N`).
fn placeholders(n: usize) -> String {
    (1..=n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}
