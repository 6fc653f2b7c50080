//! Leases end by the database's clock, never a node's: a node whose clock runs ahead (or jumps)
//! must not expire the leases other nodes hold, nor give its own short ones. Alone in its test
//! binary: it moves this process's clock (`corral_store::skew_for_tests`).

#[macro_use]
mod support;

use std::sync::Arc;
use std::time::Duration;

use corral_store::{skew_for_tests, NewJob, Store};

/// The two backends' tests share the process clock: one at a time.
static CLOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn a_node_ahead_of_the_database_expires_no_live_lease(s: Arc<dyn Store>) {
    let _one_at_a_time = CLOCK.lock().await;
    s.enqueue(vec![NewJob {
        owner: "me".into(),
        spec: "{}".into(),
        upload_id: None,
        suite_upload_id: None,
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: None,
    }])
    .await
    .unwrap();
    // Claimed by a node whose clock is a minute behind: its 30 s lease still ends 30 s from now.
    skew_for_tests(-60_000);
    let claim = s
        .claim_job("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    // Another node, a minute ahead, sweeps: the lease is live by the database's clock. By the
    // nodes' own clocks it had ended 30 s before it was given, and this sweep requeued the job.
    skew_for_tests(60_000);
    let swept = s.expire_leases().await.unwrap();
    skew_for_tests(0);
    assert!(
        swept.requeued.is_empty() && swept.failed.is_empty(),
        "{swept:?}"
    );
    assert!(s
        .heartbeat_job(&claim.job.id, &claim.lease, Duration::from_secs(30))
        .await
        .unwrap());
    let now = corral_store::now_ms();
    assert!(
        (now + 25_000..=now + 35_000).contains(&claim.lease_expires_ms),
        "a 30 s lease given at {now} ends at {}",
        claim.lease_expires_ms
    );
    // A lease that has ended by the database's clock is still swept.
    assert!(s
        .heartbeat_job(&claim.job.id, &claim.lease, Duration::ZERO)
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let swept = s.expire_leases().await.unwrap();
    assert_eq!(swept.requeued, vec![claim.job.id.clone()]);
}

on_both_backends!(
    threads = 2;
    a_node_ahead_of_the_database_expires_no_live_lease,
);
