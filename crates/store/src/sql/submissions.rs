//! What the job and callback queries share: a submission's columns, its audit trail, a job found
//! by its idempotency key, lease times.

use std::time::Duration;

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use crate::clock::now_ms;
use crate::error::Result;
use crate::jobs::KeyedJob;

/// The columns a [`Job`](crate::jobs::Job) is read from.
pub const JOB_COLUMNS: &str = "id, owner, state, spec, upload_id, result, error, attempts, \
    max_attempts, created_ms, started_ms, finished_ms, worker, callback_url, callback_state, \
    callback_attempts, callback_error, image_name, image_digest, regrade_of, submitted_ms";

/// Appends to a submission's audit trail (in the caller's transaction).
pub async fn record_event<D>(
    conn: &mut D::Connection,
    job: &str,
    kind: &str,
    worker: Option<&str>,
    detail: Option<&str>,
) -> Result<()>
where
    D: sqlx::Database,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Type<D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
    for<'q> Option<&'q str>: Encode<'q, D>,
{
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

/// The job `owner` made under idempotency key `key` (on the caller's connection or transaction).
pub async fn keyed_job<D>(
    conn: &mut D::Connection,
    owner: &str,
    key: &str,
) -> Result<Option<KeyedJob>>
where
    D: sqlx::Database,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> String: Decode<'q, D> + Type<D>,
{
    Ok(sqlx::query_as(
        "SELECT id, state, COALESCE(request_fingerprint, '') AS fingerprint FROM submissions \
         WHERE owner = $1 AND idempotency_key = $2",
    )
    .bind(owner)
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?)
}

/// A lease's length in milliseconds.
pub fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}
