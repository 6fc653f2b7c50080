//! Callback delivery: finished submissions with a callback URL are claimed under a lease (several
//! API nodes never deliver the same try twice at once), skipping the owners the claimer already
//! delivers enough of, and each try is recorded; staff put one back to be delivered anew.

use std::time::Duration;

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use super::submissions::{ms, record_event, JOB_COLUMNS};
use crate::clock::now_ms;
use crate::error::Result;
use crate::jobs::{CallbackClaim, CallbackOutcome, Job, JobStore, Redelivery};

impl<D> SqlStore<D>
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
    pub(super) async fn claim_next_callback(
        &self,
        lease: Duration,
        skip_owners: &[String],
    ) -> Result<Option<CallbackClaim>> {
        let now = now_ms();
        // Owners whose callbacks the caller delivers as many of as it will at once: `$3`, `$4`, …
        let skip = if skip_owners.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = (0..skip_owners.len())
                .map(|i| format!("${}", i + 3))
                .collect();
            format!(" AND s.owner NOT IN ({})", list.join(", "))
        };
        // One statement: the choice and the update (see `Dialect::SKIP_LOCKED`).
        let sql = format!(
            "UPDATE submissions SET callback_state = 'delivering', callback_attempts = callback_attempts + 1, \
             callback_next_ms = $1 \
             WHERE seq = (SELECT s.seq FROM submissions s WHERE s.callback_state IN ('pending', 'delivering') \
                          AND s.callback_next_ms <= $2{skip} ORDER BY s.callback_next_ms LIMIT 1{}) \
             AND callback_state IN ('pending', 'delivering') \
             RETURNING {JOB_COLUMNS}",
            D::SKIP_LOCKED
        );
        let mut q = sqlx::query_as(&sql).bind(now + ms(lease)).bind(now);
        for owner in skip_owners {
            q = q.bind(owner.as_str());
        }
        let job: Option<Job> = q.fetch_optional(&self.db).await?;
        Ok(job.map(|job| CallbackClaim {
            attempt: job.callback_attempts,
            job,
        }))
    }

    pub(super) async fn record_callback_try(
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
        let mut tx = self.begin_write().await?;
        let r = sqlx::query(
            "UPDATE submissions SET callback_state = $1, callback_next_ms = $2, callback_error = $3 \
             WHERE id = $4 AND callback_state = 'delivering'",
        )
        .bind(state)
        .bind(next)
        .bind((outcome != CallbackOutcome::Delivered).then_some(detail))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if D::rows_affected(&r) == 0 {
            // The claim was lost meanwhile (its delivery expired and was taken again, or the
            // submission was deleted): the audit trail records only tries that counted.
            return Ok(());
        }
        record_event::<D>(
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

    pub(super) async fn reset_callback(&self, id: &str, by: &str) -> Result<Redelivery> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        // A try under way (its claim not yet expired) is left to finish: reset under it, its
        // outcome would be recorded over the new tries' count.
        let job: Option<Job> = sqlx::query_as(&format!(
            "UPDATE submissions SET callback_state = 'pending', callback_attempts = 0, \
             callback_next_ms = $1, callback_error = NULL \
             WHERE id = $2 AND state IN ('done', 'failed') AND callback_url IS NOT NULL \
             AND NOT (callback_state = 'delivering' AND callback_next_ms > $3) \
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(now)
        .bind(id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(job) = job else {
            drop(tx);
            let Some(job) = self.get_job(id).await? else {
                return Ok(Redelivery::NotFound);
            };
            return Ok(if !job.state.is_finished() {
                Redelivery::NotFinished(job.state)
            } else if job.callback_url.is_none() {
                Redelivery::NoCallback
            } else {
                Redelivery::Delivering
            });
        };
        record_event::<D>(
            &mut tx,
            id,
            "redelivery",
            None,
            Some(&format!(
                "pending again, its tries counted afresh: asked by {by}"
            )),
        )
        .await?;
        tx.commit().await?;
        Ok(Redelivery::Pending(Box::new(job)))
    }
}
