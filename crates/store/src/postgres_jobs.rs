//! The submission queue on PostgreSQL. A claim locks the chosen row with `FOR UPDATE SKIP LOCKED`
//! inside the same statement that updates it: concurrent claimers on any number of nodes skip
//! each other's rows instead of waiting or colliding. New work is announced with
//! `NOTIFY corral_work` in the transaction that enqueues it.

use std::time::Duration;

use sqlx::Row;

use crate::jobs::{
    now_ms, CallbackClaim, CallbackOutcome, Claim, Completion, Expired, Job, JobEvent, JobState,
    JobStore, NewJob, QueueStats,
};
use crate::{random_hex, PgStore, Result};

const JOB_COLUMNS: &str = "id, owner, state, spec, upload_id, result, error, attempts, \
    max_attempts, created_ms, started_ms, finished_ms, worker, callback_url, callback_state, \
    callback_attempts, callback_error";

fn job_row(r: &sqlx::postgres::PgRow) -> Result<Job> {
    Ok(Job {
        id: r.try_get("id")?,
        owner: r.try_get("owner")?,
        state: JobState::parse(&r.try_get::<String, _>("state")?)?,
        spec: r.try_get("spec")?,
        upload_id: r.try_get("upload_id")?,
        result: r.try_get("result")?,
        error: r.try_get("error")?,
        attempts: r.try_get::<i64, _>("attempts")? as u32,
        max_attempts: r.try_get::<i64, _>("max_attempts")? as u32,
        created_ms: r.try_get("created_ms")?,
        started_ms: r.try_get("started_ms")?,
        finished_ms: r.try_get("finished_ms")?,
        worker: r.try_get("worker")?,
        callback_url: r.try_get("callback_url")?,
        callback_state: r.try_get("callback_state")?,
        callback_attempts: r.try_get::<i64, _>("callback_attempts")? as u32,
        callback_error: r.try_get("callback_error")?,
    })
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl PgStore {
    async fn event(
        conn: &mut sqlx::PgConnection,
        job: &str,
        kind: &str,
        worker: Option<&str>,
        detail: Option<&str>,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO submission_events (job_id, at_ms, kind, worker, detail) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(job)
        .bind(now_ms())
        .bind(kind)
        .bind(worker)
        .bind(detail)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl JobStore for PgStore {
    async fn enqueue(&self, jobs: Vec<NewJob>) -> Result<Vec<String>> {
        let now = now_ms();
        let mut tx = self.db.begin().await?;
        let mut ids = Vec::with_capacity(jobs.len());
        for j in jobs {
            let id = crate::jobs::new_job_id();
            sqlx::query(
                "INSERT INTO submissions (id, owner, state, spec, upload_id, max_attempts, created_ms, \
                 callback_url, callback_state) VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8)",
            )
            .bind(&id)
            .bind(&j.owner)
            .bind(&j.spec)
            .bind(&j.upload_id)
            .bind(j.max_attempts.max(1) as i64)
            .bind(now)
            .bind(&j.callback_url)
            .bind(if j.callback_url.is_some() {
                "waiting"
            } else {
                "none"
            })
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO submission_events (job_id, at_ms, kind) VALUES ($1, $2, 'queued')",
            )
            .bind(&id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            ids.push(id);
        }
        // Delivered to every listening node when the transaction commits.
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(crate::postgres::WORK_CHANNEL)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn get_job(&self, id: &str) -> Result<Option<Job>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM submissions WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.db)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn claim_job(&self, worker: &str, lease: Duration) -> Result<Option<Claim>> {
        let now = now_ms();
        let secret = random_hex(16);
        let expires = now + ms(lease);
        // One statement: the row is chosen and locked (rows other claimers hold are skipped,
        // not waited for), then updated.
        let mut tx = self.db.begin().await?;
        let row = sqlx::query(&format!(
            "WITH next AS (SELECT s.seq FROM submissions s LEFT JOIN queue_owners o ON o.owner = s.owner \
                           WHERE s.state = 'queued' ORDER BY COALESCE(o.served, 0), s.seq LIMIT 1 \
                           FOR UPDATE OF s SKIP LOCKED) \
             UPDATE submissions SET state = 'running', attempts = attempts + 1, worker = $1, \
             lease = $2, lease_expires_ms = $3, started_ms = COALESCE(started_ms, $4) \
             FROM next WHERE submissions.seq = next.seq \
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(worker)
        .bind(&secret)
        .bind(expires)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let job = job_row(&row)?;
        sqlx::query(
            "INSERT INTO queue_owners (owner, served) \
             VALUES ($1, nextval('queue_served')) \
             ON CONFLICT (owner) DO UPDATE SET served = excluded.served",
        )
        .bind(&job.owner)
        .execute(&mut *tx)
        .await?;
        Self::event(
            &mut tx,
            &job.id,
            "claimed",
            Some(worker),
            Some(&format!("attempt {}", job.attempts)),
        )
        .await?;
        tx.commit().await?;
        Ok(Some(Claim {
            job,
            lease: secret,
            lease_expires_ms: expires,
        }))
    }

    async fn heartbeat_job(&self, id: &str, lease: &str, extend: Duration) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE submissions SET lease_expires_ms = $1 WHERE id = $2 AND lease = $3 AND state = 'running'",
        )
        .bind(now_ms() + ms(extend))
        .bind(id)
        .bind(lease)
        .execute(&self.db)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn complete_job(
        &self,
        id: &str,
        lease: &str,
        state: JobState,
        result: &str,
    ) -> Result<Completion> {
        if !state.is_finished() {
            return Err(crate::StoreError::Invalid(
                "a job completes as done or failed".into(),
            ));
        }
        let now = now_ms();
        // The lease stays on the row after completion: a retried request with the same lease is
        // recognised (AlreadyRecorded) instead of refused.
        let mut tx = self.db.begin().await?;
        let r = sqlx::query(
            "UPDATE submissions SET state = $1, result = $2, finished_ms = $3, lease_expires_ms = NULL, \
             callback_state = CASE WHEN callback_url IS NULL THEN 'none' ELSE 'pending' END, \
             callback_next_ms = $4 \
             WHERE id = $5 AND lease = $6 AND state = 'running'",
        )
        .bind(state.as_str())
        .bind(result)
        .bind(now)
        .bind(now)
        .bind(id)
        .bind(lease)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 1 {
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
            Self::event(&mut tx, id, kind, worker.as_deref(), None).await?;
            tx.commit().await?;
            return Ok(Completion::Recorded);
        }
        drop(tx);
        let row = sqlx::query("SELECT state, lease FROM submissions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.db)
            .await?;
        let Some(row) = row else {
            return Err(crate::StoreError::NotFound(format!("no submission {id:?}")));
        };
        let st = JobState::parse(&row.try_get::<String, _>("state")?)?;
        let current: Option<String> = row.try_get("lease")?;
        if st.is_finished() && current.as_deref() == Some(lease) {
            return Ok(Completion::AlreadyRecorded);
        }
        let mut conn = self.db.acquire().await?;
        Self::event(
            &mut conn,
            id,
            "result_refused",
            None,
            Some("the lease is not current"),
        )
        .await?;
        Ok(Completion::LeaseLost)
    }

    async fn expire_leases(&self) -> Result<Expired> {
        let now = now_ms();
        let mut out = Expired::default();
        let mut tx = self.db.begin().await?;
        let failed: Vec<String> = sqlx::query_scalar(
            "UPDATE submissions SET state = 'failed', finished_ms = $1, lease = NULL, lease_expires_ms = NULL, \
             error = 'the job was claimed ' || attempts || ' times and its worker stopped answering each time', \
             callback_state = CASE WHEN callback_url IS NULL THEN 'none' ELSE 'pending' END, \
             callback_next_ms = $2 \
             WHERE state = 'running' AND lease_expires_ms < $3 AND attempts >= max_attempts \
             RETURNING id",
        )
        .bind(now)
        .bind(now)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let requeued: Vec<String> = sqlx::query_scalar(
            "UPDATE submissions SET state = 'queued', lease = NULL, lease_expires_ms = NULL \
             WHERE state = 'running' AND lease_expires_ms < $1 RETURNING id",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        for id in &failed {
            Self::event(
                &mut tx,
                id,
                "expired",
                None,
                Some("lease expired; attempts used up"),
            )
            .await?;
            Self::event(&mut tx, id, "failed", None, Some("lease expired too often")).await?;
        }
        for id in &requeued {
            Self::event(
                &mut tx,
                id,
                "expired",
                None,
                Some("lease expired; queued again"),
            )
            .await?;
        }
        tx.commit().await?;
        if !requeued.is_empty() {
            self.notify_work().await;
        }
        out.failed = failed;
        out.requeued = requeued;
        Ok(out)
    }

    async fn job_events(&self, id: &str) -> Result<Vec<JobEvent>> {
        sqlx::query(
            "SELECT at_ms, kind, worker, detail FROM submission_events WHERE job_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.db)
        .await?
        .iter()
        .map(|r| {
            Ok(JobEvent {
                at_ms: r.try_get("at_ms")?,
                kind: r.try_get("kind")?,
                worker: r.try_get("worker")?,
                detail: r.try_get("detail")?,
            })
        })
        .collect()
    }

    async fn queue_stats(&self) -> Result<QueueStats> {
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM submissions GROUP BY state")
            .fetch_all(&self.db)
            .await?;
        let mut s = QueueStats::default();
        for r in rows {
            let n = r.try_get::<i64, _>("n")? as u64;
            match JobState::parse(&r.try_get::<String, _>("state")?)? {
                JobState::Queued => s.queued = n,
                JobState::Running => s.running = n,
                JobState::Done => s.done = n,
                JobState::Failed => s.failed = n,
            }
        }
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
        let mut tx = self.db.begin().await?;
        sqlx::query(
            "DELETE FROM submission_events WHERE job_id IN (SELECT id FROM submissions \
             WHERE state IN ('done', 'failed') AND finished_ms < $1 \
             AND callback_state NOT IN ('pending', 'delivering'))",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await?;
        let n = sqlx::query(
            "DELETE FROM submissions WHERE state IN ('done', 'failed') AND finished_ms < $1 \
             AND callback_state NOT IN ('pending', 'delivering')",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(n)
    }

    async fn claim_callback(&self, lease: Duration) -> Result<Option<CallbackClaim>> {
        let now = now_ms();
        let row = sqlx::query(&format!(
            "WITH next AS (SELECT seq FROM submissions WHERE callback_state IN ('pending', 'delivering') \
                           AND callback_next_ms <= $2 ORDER BY callback_next_ms LIMIT 1 \
                           FOR UPDATE SKIP LOCKED) \
             UPDATE submissions SET callback_state = 'delivering', callback_attempts = callback_attempts + 1, \
             callback_next_ms = $1 \
             FROM next WHERE submissions.seq = next.seq \
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(now + ms(lease))
        .bind(now)
        .fetch_optional(&self.db)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let job = job_row(&row)?;
        Ok(Some(CallbackClaim {
            attempt: job.callback_attempts,
            job,
        }))
    }

    async fn finish_callback(
        &self,
        id: &str,
        outcome: CallbackOutcome,
        detail: &str,
    ) -> Result<()> {
        let (state, next) = match outcome {
            CallbackOutcome::Delivered => ("delivered", None),
            CallbackOutcome::GaveUp => ("failed", None),
            CallbackOutcome::Retry { at_ms } => ("pending", Some(at_ms)),
        };
        let mut tx = self.db.begin().await?;
        sqlx::query(
            "UPDATE submissions SET callback_state = $1, callback_next_ms = $2, callback_error = $3 \
             WHERE id = $4 AND callback_state = 'delivering'",
        )
        .bind(state)
        .bind(next)
        .bind((outcome != CallbackOutcome::Delivered).then_some(detail))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        Self::event(
            &mut tx,
            id,
            "callback",
            None,
            Some(&format!("{state}: {detail}")),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn wait_for_work(&self, timeout: Duration) -> bool {
        let notified = self.work.notified();
        tokio::time::timeout(timeout, notified).await.is_ok()
    }

    async fn notify_work(&self) {
        let _ = sqlx::query("SELECT pg_notify($1, '')")
            .bind(crate::postgres::WORK_CHANNEL)
            .execute(&self.db)
            .await;
    }
}
