//! Signed callbacks: when a submission with a `callback_url` finishes, its verdict (the body of
//! `GET /submissions/{id}`) is POSTed there with
//! `Corral-Signature: t=UNIX,v1=HEX(HMAC-SHA256(secret, "{t}.{body}"))`, retried with
//! exponential backoff, never following a redirect, and only to the targets
//! [`super::callback_targets`] allows (public addresses, unless the operator allowed a range),
//! several at once ([`super::callback_slots`]).

use std::sync::Arc;
use std::time::Duration;

use corral_judge::signature_header;
use corral_store::{CallbackClaim, CallbackOutcome};

use super::callback_slots::CallbackSlots;
use super::callback_targets::{client, error_chain, TargetPolicy};
use super::view::SubmissionView;
use crate::state::SharedState;

/// A failed try: retry later, or give up now.
enum Failure {
    Retry(String),
    Permanent(String),
}

/// Sends one callback. Literal IP hosts never reach the resolver, so they are checked here (a
/// submission accepted before such hosts were refused at acceptance, or before the operator took
/// a range out of `callback_allow`).
async fn deliver(
    st: &SharedState,
    http: &reqwest::Client,
    policy: &TargetPolicy,
    claim: &CallbackClaim,
) -> Result<String, Failure> {
    let Some(url) = claim.job.callback_url.as_deref() else {
        return Err(Failure::Permanent("no callback URL".into()));
    };
    let parsed = url::Url::parse(url).map_err(|e| Failure::Permanent(format!("bad URL: {e}")))?;
    policy.check_literal(&parsed).map_err(Failure::Permanent)?;
    let body = serde_json::to_vec(&SubmissionView::of(&claim.job)).expect("serialisable");
    let t = corral_store::now();
    let sig = signature_header(&st.queue.callback_secret, t, &body);
    let r = http
        .post(parsed)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("Corral-Signature", sig)
        .header("Corral-Submission", &claim.job.id)
        .header("Corral-Delivery-Attempt", claim.attempt.to_string())
        .body(body)
        .send()
        .await;
    match r {
        Ok(resp) if resp.status().is_success() => Ok(format!("HTTP {}", resp.status().as_u16())),
        Ok(resp) if resp.status().is_redirection() => Err(Failure::Retry(format!(
            "HTTP {} (redirects are not followed)",
            resp.status().as_u16()
        ))),
        Ok(resp) => Err(Failure::Retry(format!("HTTP {}", resp.status().as_u16()))),
        Err(e) => {
            // A refused target stays refused: the resolver said so.
            let text = error_chain(&e);
            if text.contains("refused: ") {
                Err(Failure::Permanent(
                    text[text.find("refused: ").unwrap_or(0)..].to_string(),
                ))
            } else {
                Err(Failure::Retry(text))
            }
        }
    }
}

/// The wait before try `attempt + 1`: the base doubled per try, with up to 25 % jitter so many
/// failing callbacks do not retry in step, never longer than `cap`. (The jitter of the doubling
/// waits already spreads out callbacks that failed together; once capped, they keep that spread.)
pub fn backoff(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    let jitter = exp.mul_f64(u16::from_le_bytes(b) as f64 / u16::MAX as f64 * 0.25);
    (exp + jitter).min(cap)
}

/// Delivers due callbacks until shutdown, several at once (`callback_concurrency`), at most
/// `callback_per_owner` of one token's: a target that never answers holds one slot for
/// `callback_timeout`, not the whole node. Every API node runs one; claims keep them apart.
pub async fn delivery_loop(st: SharedState) {
    let cfg = &st.config.submissions;
    let policy = st.queue.callback_policy.clone();
    let timeout = cfg.callback_timeout.duration();
    let http = client(policy.clone(), timeout);
    let mut slots = CallbackSlots::new(cfg.callback_concurrency, cfg.callback_per_owner);
    let mut stop = st.shutdown.subscribe();
    loop {
        if *stop.borrow() {
            break;
        }
        slots.reap();
        if slots.full() {
            tokio::select! {
                _ = slots.one_finished() => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        let claim = match st
            .store
            .claim_callback(timeout + Duration::from_secs(5), &slots.owners_at_limit())
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claiming a callback failed");
                None
            }
        };
        let Some(claim) = claim else {
            tokio::select! {
                _ = st.queue.finished.any_finished() => {}
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                _ = slots.one_finished() => {}
                _ = stop.changed() => {}
            }
            continue;
        };
        let owner = claim.job.owner.clone();
        slots.spawn(
            &owner,
            deliver_and_record(st.clone(), http.clone(), policy.clone(), claim),
        );
    }
    // At shutdown, the tries under way finish while the node drains; those still going when it
    // aborts this task are aborted with it, and their claims expire to be tried again.
    slots.finish_all().await;
}

/// One try of a claimed callback, recorded in the store: delivered, to be retried after a
/// backoff, or given up.
async fn deliver_and_record(
    st: SharedState,
    http: reqwest::Client,
    policy: Arc<TargetPolicy>,
    claim: CallbackClaim,
) {
    let cfg = &st.config.submissions;
    let id = claim.job.id.clone();
    let (outcome, detail) = match deliver(&st, &http, &policy, &claim).await {
        Ok(d) => (CallbackOutcome::Delivered, d),
        Err(Failure::Permanent(why)) => (CallbackOutcome::GaveUp, why),
        Err(Failure::Retry(why)) if claim.attempt >= cfg.callback_max_attempts => (
            CallbackOutcome::GaveUp,
            format!("{why}; gave up after {} tries", claim.attempt),
        ),
        Err(Failure::Retry(why)) => {
            let wait = backoff(
                cfg.callback_backoff.duration(),
                cfg.callback_backoff_max.duration(),
                claim.attempt,
            );
            (
                CallbackOutcome::Retry {
                    at_ms: corral_store::now_ms() + wait.as_millis() as i64,
                },
                why,
            )
        }
    };
    let label = match outcome {
        CallbackOutcome::Delivered => "delivered",
        CallbackOutcome::Retry { .. } => "retry",
        CallbackOutcome::GaveUp => "gave_up",
    };
    st.queue.metrics.callbacks.with_label_values(&[label]).inc();
    tracing::info!(submission = %id, attempt = claim.attempt, outcome = ?outcome, detail = %detail, "callback");
    if let Err(e) = st.store.finish_callback(&id, outcome, &detail).await {
        tracing::warn!(submission = %id, error = %e, "recording a callback try failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let (b, cap) = (Duration::from_secs(1), Duration::from_secs(3600));
        assert!(backoff(b, cap, 1) >= b && backoff(b, cap, 1) <= b.mul_f64(1.25));
        assert!(backoff(b, cap, 4) >= Duration::from_secs(8));
        assert_eq!(backoff(b, cap, 40), cap);
        // The defaults (2 s doubling, capped at 10 minutes, 20 tries): 9 doubling waits
        // (17 to 21 minutes in all), then 10 waits of the cap; about two hours from first try
        // to last.
        let d = crate::config::QueueConfig::default();
        let (base, cap) = (
            d.callback_backoff.duration(),
            d.callback_backoff_max.duration(),
        );
        let waits: Vec<Duration> = (1..d.callback_max_attempts)
            .map(|a| backoff(base, cap, a))
            .collect();
        assert!(waits.iter().all(|w| *w <= cap));
        // (The ninth, 512 s with its jitter, may reach the cap too.)
        assert!(
            waits.iter().filter(|w| **w == cap).count() >= 10,
            "{waits:?}"
        );
        let window: Duration = waits.iter().sum();
        assert!(
            window >= Duration::from_secs(7000) && window <= Duration::from_secs(7300),
            "{window:?}"
        );
    }
}
