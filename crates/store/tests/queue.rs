//! The submission queue's behaviour, written once against `dyn Store` and run on every backend
//! (`queue_tests!` below instantiates each test per backend): SQLite, and PostgreSQL (a fresh
//! database per test on `CORRAL_TEST_POSTGRES_URL`, or on the private cluster
//! `scripts/pg-test-cluster` starts).

#[macro_use]
mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use corral_store::{
    remote_worker, CallbackOutcome, Completion, Enqueued, IdempotencyKey, JobImage, JobState,
    KeyedJob, NewJob, Redelivery, Role, Store,
};

fn job(owner: &str, n: usize) -> NewJob {
    NewJob {
        owner: owner.to_string(),
        spec: format!("{{\"n\":{n}}}"),
        upload_id: None,
        suite_upload_id: None,
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: None,
    }
}

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(1);

/// Waits long enough for a 1 ms lease to be in the past.
async fn let_expire() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

async fn enqueue_and_read(s: Arc<dyn Store>) {
    let ids = s.enqueue(vec![job("a", 1), job("a", 2)]).await.unwrap();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(ids[0].len(), 32, "128-bit ids");
    let j = s.get_job(&ids[0]).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Queued);
    assert_eq!(j.owner, "a");
    assert_eq!(j.spec, "{\"n\":1}");
    assert_eq!(j.attempts, 0);
    assert_eq!(j.callback_state, "none");
    assert!(s.get_job("nope").await.unwrap().is_none());
    let ev = s.job_events(&ids[0]).await.unwrap();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, "queued");
    let st = s.queue_stats().await.unwrap();
    assert_eq!((st.queued, st.running, st.done, st.failed), (2, 0, 0, 0));
    assert_eq!(st.oldest_queued_ms, Some(j.created_ms));
    // The oldest one claimed: the next is the oldest queued; none queued, none.
    s.claim_job("w1", LONG).await.unwrap().unwrap();
    let second = s.get_job(&ids[1]).await.unwrap().unwrap();
    let st = s.queue_stats().await.unwrap();
    assert_eq!(st.oldest_queued_ms, Some(second.created_ms));
    s.claim_job("w1", LONG).await.unwrap().unwrap();
    assert_eq!(s.queue_stats().await.unwrap().oldest_queued_ms, None);
}

async fn claims_in_order_and_once(s: Arc<dyn Store>) {
    let ids = s
        .enqueue((0..3).map(|n| job("a", n)).collect())
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(c) = s.claim_job("w1", LONG).await.unwrap() {
        assert_eq!(c.job.state, JobState::Running);
        assert_eq!(c.job.attempts, 1);
        assert_eq!(c.job.worker.as_deref(), Some("w1"));
        assert!(c.job.started_ms.is_some());
        assert_eq!(c.lease.len(), 32);
        got.push(c.job.id);
    }
    assert_eq!(got, ids, "one owner's jobs come in arrival order");
    assert_eq!(s.queue_stats().await.unwrap().running, 3);
}

async fn completion_is_recorded_exactly_once(s: Arc<dyn Store>) {
    let ids = s.enqueue(vec![job("a", 1)]).await.unwrap();
    let c = s.claim_job("w1", LONG).await.unwrap().unwrap();
    assert!(s.heartbeat_job(&ids[0], &c.lease, LONG).await.unwrap());
    assert!(!s
        .heartbeat_job(&ids[0], "not-the-lease", LONG)
        .await
        .unwrap());
    assert_eq!(
        s.complete_job(&ids[0], "not-the-lease", JobState::Done, "{}", None)
            .await
            .unwrap(),
        Completion::LeaseLost
    );
    assert_eq!(
        s.complete_job(
            &ids[0],
            &c.lease,
            JobState::Done,
            "{\"verdict\":\"accepted\"}",
            Some(&JobImage {
                name: "python:3.12-slim".into(),
                digest: format!("sha256:{}", "ab".repeat(32)),
            })
        )
        .await
        .unwrap(),
        Completion::Recorded
    );
    // The same request again (a retry after a lost answer) changes nothing.
    assert_eq!(
        s.complete_job(
            &ids[0],
            &c.lease,
            JobState::Done,
            "{\"verdict\":\"other\"}",
            None
        )
        .await
        .unwrap(),
        Completion::AlreadyRecorded
    );
    // The image it ran in is recorded with the verdict, and kept by the retried request.
    let job = s.get_job(&ids[0]).await.unwrap().unwrap();
    assert_eq!(job.image_name.as_deref(), Some("python:3.12-slim"));
    assert_eq!(
        job.image_digest,
        Some(format!("sha256:{}", "ab".repeat(32)))
    );
    let j = s.get_job(&ids[0]).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Done);
    assert_eq!(j.result.as_deref(), Some("{\"verdict\":\"accepted\"}"));
    assert!(j.finished_ms.is_some());
    // A finished job is not claimed again and takes no heartbeats.
    assert!(s.claim_job("w2", LONG).await.unwrap().is_none());
    assert!(!s.heartbeat_job(&ids[0], &c.lease, LONG).await.unwrap());
    let kinds: Vec<String> = s
        .job_events(&ids[0])
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "completed").count(),
        1,
        "{kinds:?}"
    );
    assert!(s
        .complete_job("missing", "x", JobState::Done, "{}", None)
        .await
        .is_err());
}

async fn expired_lease_goes_back_to_the_queue(s: Arc<dyn Store>) {
    let ids = s.enqueue(vec![job("a", 1)]).await.unwrap();
    let first = s.claim_job("w1", SHORT).await.unwrap().unwrap();
    let_expire().await;
    let e = s.expire_leases().await.unwrap();
    assert_eq!(e.requeued, ids);
    assert!(e.failed.is_empty());
    let j = s.get_job(&ids[0]).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Queued);
    // The old holder has lost it: no heartbeat, no result.
    assert!(!s.heartbeat_job(&ids[0], &first.lease, LONG).await.unwrap());
    assert_eq!(
        s.complete_job(&ids[0], &first.lease, JobState::Done, "{}", None)
            .await
            .unwrap(),
        Completion::LeaseLost
    );
    let second = s.claim_job("w2", LONG).await.unwrap().unwrap();
    assert_eq!(second.job.id, ids[0]);
    assert_eq!(second.job.attempts, 2);
    assert_ne!(second.lease, first.lease);
    // A live lease is not expired.
    assert_eq!(s.expire_leases().await.unwrap().requeued.len(), 0);
    assert_eq!(
        s.complete_job(&ids[0], &second.lease, JobState::Done, "{}", None)
            .await
            .unwrap(),
        Completion::Recorded
    );
    // The first holder coming back late still cannot overwrite it.
    assert_eq!(
        s.complete_job(&ids[0], &first.lease, JobState::Done, "{\"late\":1}", None)
            .await
            .unwrap(),
        Completion::LeaseLost
    );
    assert_eq!(
        s.get_job(&ids[0]).await.unwrap().unwrap().result.as_deref(),
        Some("{}")
    );
}

async fn a_job_that_kills_its_workers_fails(s: Arc<dyn Store>) {
    let mut j = job("a", 1);
    j.max_attempts = 2;
    j.callback_url = Some("https://example.invalid/hook".into());
    let ids = s.enqueue(vec![j]).await.unwrap();
    assert_eq!(
        s.get_job(&ids[0]).await.unwrap().unwrap().callback_state,
        "waiting"
    );
    for round in 1..=2 {
        let c = s.claim_job("w", SHORT).await.unwrap().unwrap();
        assert_eq!(c.job.attempts, round);
        let_expire().await;
        let e = s.expire_leases().await.unwrap();
        if round == 1 {
            assert_eq!(e.requeued, ids);
        } else {
            assert_eq!(e.failed, ids);
        }
    }
    let j = s.get_job(&ids[0]).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Failed);
    assert!(
        j.error.as_deref().unwrap().contains("claimed 2 times"),
        "{j:?}"
    );
    assert_eq!(j.callback_state, "pending", "a failure is called back too");
    assert!(s.claim_job("w", LONG).await.unwrap().is_none());
}

/// A job its node gives back (a graceful shutdown abandoning a run) is queued again at once and
/// the abandoned claim uses no attempt: restarts never fail a job. Before, it waited for its lease
/// to expire, and three restarts during one job failed it as `internal_error`.
async fn a_released_job_is_queued_at_once_without_using_an_attempt(s: Arc<dyn Store>) {
    let mut j = job("a", 1);
    j.max_attempts = 2;
    let ids = s.enqueue(vec![j]).await.unwrap();
    for _ in 0..3 {
        let c = s.claim_job("node/w0", LONG).await.unwrap().unwrap();
        assert_eq!(c.job.attempts, 1, "a released claim is not counted");
        assert!(s
            .release_job(&ids[0], &c.lease, "its node shut down")
            .await
            .unwrap());
        // Not twice; and the released lease cannot record a result or keep the job.
        assert!(!s.release_job(&ids[0], &c.lease, "again").await.unwrap());
        assert!(!s.heartbeat_job(&ids[0], &c.lease, LONG).await.unwrap());
        let j = s.get_job(&ids[0]).await.unwrap().unwrap();
        assert_eq!((j.state, j.attempts), (JobState::Queued, 0));
        assert_eq!(
            s.complete_job(&ids[0], &c.lease, JobState::Done, "{}", None)
                .await
                .unwrap(),
            Completion::LeaseLost
        );
    }
    // Nothing for the reaper: the job did not wait for its lease.
    let_expire().await;
    assert_eq!(s.expire_leases().await.unwrap(), Default::default());
    let ev = s.job_events(&ids[0]).await.unwrap();
    let released: Vec<_> = ev.iter().filter(|e| e.kind == "released").collect();
    assert_eq!(released.len(), 3, "{ev:?}");
    assert_eq!(released[0].worker.as_deref(), Some("node/w0"));
    assert_eq!(released[0].detail.as_deref(), Some("its node shut down"));
    // Claimed again, it is the first attempt, and it finishes normally.
    let c = s.claim_job("w", LONG).await.unwrap().unwrap();
    assert_eq!(c.job.attempts, 1);
    assert_eq!(
        s.complete_job(&ids[0], &c.lease, JobState::Done, "{}", None)
            .await
            .unwrap(),
        Completion::Recorded
    );
    // A finished job is not given back.
    assert!(!s.release_job(&ids[0], &c.lease, "late").await.unwrap());
    assert_eq!(
        s.get_job(&ids[0]).await.unwrap().unwrap().state,
        JobState::Done
    );
}

/// Revoking a worker token gives the jobs its remote workers hold back to the queue in the same
/// step, the claims not counted, so another worker takes them now; the revoked worker's leases
/// are void (a late result is refused). Jobs of other workers, and the revoked worker's finished
/// ones, are left alone. Before, they waited for their leases to end (30 s), each counted as an
/// attempt.
async fn revoking_a_worker_token_gives_its_jobs_back_at_once(s: Arc<dyn Store>) {
    let doomed = s
        .create_token(Role::Worker, "doomed")
        .await
        .unwrap()
        .info
        .id;
    let other = s.create_token(Role::Worker, "other").await.unwrap().info.id;
    s.enqueue((0..4).map(|n| job("a", n)).collect())
        .await
        .unwrap();
    let held = s
        .claim_job(&remote_worker(&doomed, "host/0"), LONG)
        .await
        .unwrap()
        .unwrap();
    let done = s
        .claim_job(&remote_worker(&doomed, "host/1"), LONG)
        .await
        .unwrap()
        .unwrap();
    let theirs = s
        .claim_job(&remote_worker(&other, "host/0"), LONG)
        .await
        .unwrap()
        .unwrap();
    let local = s.claim_job("node-1/w0", LONG).await.unwrap().unwrap();
    assert_eq!(
        s.complete_job(&done.job.id, &done.lease, JobState::Done, "{}", None)
            .await
            .unwrap(),
        Completion::Recorded
    );
    assert!(s.revoke_token(&doomed).await.unwrap());
    let j = s.get_job(&held.job.id).await.unwrap().unwrap();
    assert_eq!((j.state, j.attempts), (JobState::Queued, 0), "{j:?}");
    let last = s.job_events(&held.job.id).await.unwrap().pop().unwrap();
    assert_eq!(last.kind, "released");
    assert_eq!(last.worker, Some(remote_worker(&doomed, "host/0")));
    assert_eq!(
        last.detail.as_deref(),
        Some("its worker's token was revoked")
    );
    assert_eq!(
        s.get_job(&done.job.id).await.unwrap().unwrap().state,
        JobState::Done
    );
    for c in [&theirs, &local] {
        let j = s.get_job(&c.job.id).await.unwrap().unwrap();
        assert_eq!((j.state, j.attempts), (JobState::Running, 1), "{j:?}");
    }
    // The revoked worker's lease is void: no heartbeat, no result.
    assert!(!s
        .heartbeat_job(&held.job.id, &held.lease, LONG)
        .await
        .unwrap());
    assert_eq!(
        s.complete_job(&held.job.id, &held.lease, JobState::Done, "{}", None)
            .await
            .unwrap(),
        Completion::LeaseLost
    );
    // The revoked token's other workers get nothing, though the job is queued (one long-polling
    // when the revocation was made elsewhere took it back before its server heard of it).
    assert!(s
        .claim_job(&remote_worker(&doomed, "host/2"), LONG)
        .await
        .unwrap()
        .is_none());
    // Another worker takes it at once, as its first attempt.
    let again = s
        .claim_job(&remote_worker(&other, "host/1"), LONG)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.job.id.as_str(), again.job.attempts),
        (held.job.id.as_str(), 1)
    );
    let kinds: Vec<String> = s
        .job_events(&held.job.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        ["queued", "claimed", "released", "result_refused", "claimed"]
    );
    // Revoked once only; an unknown id gives nothing back.
    assert!(!s.revoke_token(&doomed).await.unwrap());
    assert!(!s.revoke_token("nope").await.unwrap());
    assert_eq!(s.queue_stats().await.unwrap().running, 3);
}

/// Staff put a finished submission's callback back to be delivered anew: pending, due now, its
/// tries counted afresh (the next is try 1), whatever became of it; not a submission still to be
/// judged, one without a callback URL, or one whose try is under way (an expired one's is taken
/// over). Who asked is in the audit trail.
async fn a_callback_is_put_back_to_be_delivered_anew(s: Arc<dyn Store>) {
    let mut j = job("a", 1);
    j.callback_url = Some("https://example.invalid/hook".into());
    let ids = s.enqueue(vec![j, job("a", 2)]).await.unwrap();
    assert_eq!(
        s.redeliver_callback(&ids[0], "staff1").await.unwrap(),
        Redelivery::NotFinished(JobState::Queued)
    );
    assert_eq!(
        s.redeliver_callback("nope", "staff1").await.unwrap(),
        Redelivery::NotFound
    );
    for _ in 0..2 {
        let c = s.claim_job("w", LONG).await.unwrap().unwrap();
        s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
            .await
            .unwrap();
    }
    assert_eq!(
        s.redeliver_callback(&ids[1], "staff1").await.unwrap(),
        Redelivery::NoCallback
    );
    for attempt in 1..=2 {
        let c = s.claim_callback(LONG, &[]).await.unwrap().unwrap();
        assert_eq!(c.attempt, attempt);
        assert_eq!(
            s.redeliver_callback(&ids[0], "staff1").await.unwrap(),
            Redelivery::Delivering,
            "a try under way is left to finish"
        );
        s.finish_callback(&ids[0], CallbackOutcome::Retry { at_ms: 0 }, "HTTP 500")
            .await
            .unwrap();
    }
    let c = s.claim_callback(LONG, &[]).await.unwrap().unwrap();
    s.finish_callback(
        &ids[0],
        CallbackOutcome::GaveUp,
        "HTTP 500; gave up after 3 tries",
    )
    .await
    .unwrap();
    assert_eq!(c.attempt, 3);
    let Redelivery::Pending(j) = s.redeliver_callback(&ids[0], "staff1").await.unwrap() else {
        panic!("not put back");
    };
    assert_eq!(
        (
            j.callback_state.as_str(),
            j.callback_attempts,
            j.callback_error.as_deref()
        ),
        ("pending", 0, None)
    );
    let c = s.claim_callback(LONG, &[]).await.unwrap().unwrap();
    assert_eq!((c.job.id.as_str(), c.attempt), (ids[0].as_str(), 1));
    s.finish_callback(&ids[0], CallbackOutcome::Delivered, "HTTP 200")
        .await
        .unwrap();
    // Delivered, it can be sent again too; a try whose claim expired is taken over.
    assert!(matches!(
        s.redeliver_callback(&ids[0], "staff2").await.unwrap(),
        Redelivery::Pending(_)
    ));
    let c = s.claim_callback(SHORT, &[]).await.unwrap().unwrap();
    assert_eq!(c.attempt, 1);
    let_expire().await;
    assert!(matches!(
        s.redeliver_callback(&ids[0], "staff2").await.unwrap(),
        Redelivery::Pending(_)
    ));
    let asked: Vec<String> = s
        .job_events(&ids[0])
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "redelivery")
        .filter_map(|e| e.detail)
        .collect();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(asked[0].ends_with("asked by staff1"), "{asked:?}");
    assert!(asked[2].ends_with("asked by staff2"), "{asked:?}");
}

async fn owners_share_fairly(s: Arc<dyn Store>) {
    // A floods first; B and C come later with a few each.
    s.enqueue((0..20).map(|n| job("flood", n)).collect())
        .await
        .unwrap();
    s.enqueue(vec![job("b", 0), job("b", 1)]).await.unwrap();
    s.enqueue(vec![job("c", 0)]).await.unwrap();
    let mut owners = Vec::new();
    for _ in 0..6 {
        owners.push(s.claim_job("w", LONG).await.unwrap().unwrap().job.owner);
    }
    // Round robin over owners: nobody waits behind the flood.
    assert_eq!(owners, ["flood", "b", "c", "flood", "b", "flood"]);
}

/// Staff regrading a whole suite (after fixing a test) queue a regrade per student: what
/// students hand in meanwhile goes first.
async fn submissions_go_before_regrades(s: Arc<dyn Store>) {
    let originals = s.enqueue(vec![job("a", 0), job("b", 0)]).await.unwrap();
    for _ in 0..2 {
        let c = s.claim_job("w", LONG).await.unwrap().unwrap();
        s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
            .await
            .unwrap();
    }
    let regrade = |of_id: &str, owner: &str, n: usize| NewJob {
        regrade_of: Some(of_id.to_string()),
        ..job(owner, n)
    };
    let regrades = s
        .enqueue(vec![
            regrade(&originals[0], "a", 1),
            regrade(&originals[1], "b", 1),
        ])
        .await
        .unwrap();
    let fresh_a = s.enqueue(vec![job("a", 2)]).await.unwrap().remove(0);
    let first = s.claim_job("w", LONG).await.unwrap().unwrap();
    assert_eq!(
        first.job.id, fresh_a,
        "a's new submission waited behind regrades"
    );
    // Among regrades, the owner served longest ago first (b: a was just served).
    let second = s.claim_job("w", LONG).await.unwrap().unwrap();
    assert_eq!(second.job.id, regrades[1]);
    // b and c hand in while a's regrade waits: both go first, c (never served) before b.
    let fresh = s.enqueue(vec![job("b", 3), job("c", 3)]).await.unwrap();
    let mut claimed = Vec::new();
    for _ in 0..3 {
        claimed.push(s.claim_job("w", LONG).await.unwrap().unwrap().job.id);
    }
    assert_eq!(
        claimed,
        [fresh[1].clone(), fresh[0].clone(), regrades[0].clone()]
    );
}

async fn concurrent_claims_never_share_a_job(s: Arc<dyn Store>) {
    let ids = s
        .enqueue((0..60).map(|n| job(&format!("o{}", n % 3), n)).collect())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(c) = s.claim_job(&format!("w{w}"), LONG).await.unwrap() {
                assert_eq!(
                    s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
                        .await
                        .unwrap(),
                    Completion::Recorded
                );
                mine.push(c.job.id);
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), ids.len(), "every job claimed exactly once");
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(unique.len(), ids.len());
    assert_eq!(s.queue_stats().await.unwrap().done, 60);
}

async fn callbacks_are_claimed_retried_and_finished(s: Arc<dyn Store>) {
    let mut j = job("a", 1);
    j.callback_url = Some("https://example.invalid/hook".into());
    let ids = s.enqueue(vec![j, job("a", 2)]).await.unwrap();
    assert!(
        s.claim_callback(LONG, &[]).await.unwrap().is_none(),
        "nothing to call back before the job ends"
    );
    for _ in 0..2 {
        let c = s.claim_job("w", LONG).await.unwrap().unwrap();
        s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
            .await
            .unwrap();
    }
    let c = s.claim_callback(LONG, &[]).await.unwrap().unwrap();
    assert_eq!(c.job.id, ids[0], "only the job with a callback URL");
    assert_eq!(c.attempt, 1);
    assert!(
        s.claim_callback(LONG, &[]).await.unwrap().is_none(),
        "a delivery in progress is not claimed twice"
    );
    let later = corral_store::now_ms() + 60_000;
    s.finish_callback(&ids[0], CallbackOutcome::Retry { at_ms: later }, "HTTP 500")
        .await
        .unwrap();
    assert!(
        s.claim_callback(LONG, &[]).await.unwrap().is_none(),
        "not before its time"
    );
    s.finish_callback(
        &ids[0],
        CallbackOutcome::Retry {
            at_ms: corral_store::now_ms(),
        },
        "ignored: not delivering",
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_job(&ids[0]).await.unwrap().unwrap().callback_state,
        "pending"
    );
    // ... nor is it in the audit trail, which records only the tries that counted.
    let tries: Vec<String> = s
        .job_events(&ids[0])
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "callback")
        .filter_map(|e| e.detail)
        .collect();
    assert_eq!(tries, vec!["pending: HTTP 500".to_string()]);
    // A delivery whose lease ran out is taken over.
    let ids2 = s
        .enqueue(vec![{
            let mut j = job("b", 1);
            j.callback_url = Some("https://example.invalid/2".into());
            j
        }])
        .await
        .unwrap();
    let c = s.claim_job("w", LONG).await.unwrap().unwrap();
    s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
        .await
        .unwrap();
    let first = s.claim_callback(SHORT, &[]).await.unwrap().unwrap();
    assert_eq!(first.job.id, ids2[0]);
    let_expire().await;
    let again = s.claim_callback(LONG, &[]).await.unwrap().unwrap();
    assert_eq!(again.job.id, ids2[0]);
    assert_eq!(again.attempt, 2);
    s.finish_callback(&ids2[0], CallbackOutcome::Delivered, "HTTP 200")
        .await
        .unwrap();
    let j = s.get_job(&ids2[0]).await.unwrap().unwrap();
    assert_eq!(j.callback_state, "delivered");
    assert_eq!(j.callback_attempts, 2);
}

async fn callbacks_of_skipped_owners_wait_for_their_turn(s: Arc<dyn Store>) {
    let with_callback = |owner: &str, n| {
        let mut j = job(owner, n);
        j.callback_url = Some(format!("https://example.invalid/{owner}/{n}"));
        j
    };
    // a's callbacks are due first, then b's, then c's.
    let mut ids = Vec::new();
    for (owner, n) in [("a", 1), ("a", 2), ("b", 1), ("c", 1)] {
        ids.extend(s.enqueue(vec![with_callback(owner, n)]).await.unwrap());
        let c = s.claim_job("w", LONG).await.unwrap().unwrap();
        s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let skip = |o: &[&str]| o.iter().map(|o| o.to_string()).collect::<Vec<_>>();
    let c = s
        .claim_callback(LONG, &skip(&["a"]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.job.id, ids[2], "b's, though a's were due before it");
    let c = s
        .claim_callback(LONG, &skip(&["a", "b"]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.job.id, ids[3]);
    assert!(
        s.claim_callback(LONG, &skip(&["a", "b", "c"]))
            .await
            .unwrap()
            .is_none(),
        "every owner left is skipped"
    );
    let c = s.claim_callback(LONG, &[]).await.unwrap().unwrap();
    assert_eq!(c.job.id, ids[0], "a's turn, in order");
    assert_eq!(
        s.get_job(&ids[1]).await.unwrap().unwrap().callback_state,
        "pending"
    );
}

async fn retention_deletes_finished_jobs_only(s: Arc<dyn Store>) {
    let ids = s.enqueue(vec![job("a", 1), job("a", 2)]).await.unwrap();
    let c = s.claim_job("w", LONG).await.unwrap().unwrap();
    s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
        .await
        .unwrap();
    let n = s
        .delete_jobs_before(corral_store::now_ms() + 1000)
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(s.get_job(&ids[0]).await.unwrap().is_none());
    assert!(s.job_events(&ids[0]).await.unwrap().is_empty());
    assert!(
        s.get_job(&ids[1]).await.unwrap().is_some(),
        "a queued job is kept"
    );
}

/// One retention pass removes any number of finished jobs (more than one statement can bind),
/// each with its audit trail, and nothing else.
async fn retention_deletes_many_jobs_in_one_pass(s: Arc<dyn Store>) {
    const N: usize = 1_100;
    let mut jobs: Vec<_> = (0..N).map(|n| job("a", n)).collect();
    for j in &mut jobs {
        j.max_attempts = 1;
    }
    let ids = s.enqueue(jobs).await.unwrap();
    for _ in 0..N {
        s.claim_job("w", SHORT).await.unwrap().unwrap();
    }
    let kept = s.enqueue(vec![job("b", 0)]).await.unwrap();
    let_expire().await;
    assert_eq!(s.expire_leases().await.unwrap().failed.len(), N);
    let n = s
        .delete_jobs_before(corral_store::now_ms() + 1000)
        .await
        .unwrap();
    assert_eq!(n, N as u64);
    for id in [&ids[0], &ids[N / 2], &ids[N - 1]] {
        assert!(s.get_job(id).await.unwrap().is_none());
        assert!(s.job_events(id).await.unwrap().is_empty());
    }
    assert_eq!(s.queue_stats().await.unwrap().failed, 0);
    assert!(s.get_job(&kept[0]).await.unwrap().is_some());
    assert!(!s.job_events(&kept[0]).await.unwrap().is_empty());
}

/// A write cancelled at any point (an HTTP client that hangs up, a long-poll ended by a revoked
/// token) leaves no transaction behind: later writes neither wait for a write lock nobody will
/// release nor land in a transaction nobody will commit. (sqlx 0.8's SQLite `begin_with`, when
/// cancelled between its `BEGIN` and its check, left the pooled connection inside the
/// transaction: every other connection then got "database is locked", and what was written
/// through that one was never committed.)
async fn a_cancelled_write_leaves_no_transaction_behind(s: Arc<dyn Store>) {
    s.enqueue((0..50).map(|n| job("a", n)).collect())
        .await
        .unwrap();
    // A claim dropped after 1, 2, … polls with a pause between them for the database's threads:
    // each step of a claim (pool, BEGIN, its check, the statements, COMMIT) in turn is where it
    // stops. After each, a write must commit and be seen by a read on any connection.
    for pause_us in [200, 1_000] {
        for polls in 1..=8 {
            for _ in 0..2 {
                let mut claim = s.claim_job("w", LONG);
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                for _ in 0..polls {
                    if claim.as_mut().poll(&mut cx).is_ready() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(pause_us));
                }
                drop(claim);
                let t = tokio::time::timeout(
                    Duration::from_secs(5),
                    s.create_token(corral_store::Role::Student, "after"),
                )
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "after a claim dropped at poll {polls}: a write waited 5 s for the \
                         database (a cancelled transaction holds its lock)"
                    )
                })
                .unwrap();
                assert!(
                    s.token_by_secret(&t.secret).await.unwrap().is_some(),
                    "after a claim dropped at poll {polls}: a written token is not seen (the write \
                     went into a transaction nobody commits)"
                );
            }
        }
    }
    let st = s.queue_stats().await.unwrap();
    assert_eq!(st.queued + st.running, 50, "a job was lost or duplicated");
}

/// An owner's cap on waiting jobs holds under concurrent enqueues (singles and batches, on 4
/// runtime threads and the pool's connections): the count and the insert are one step. When they
/// were not, 20 parallel requests with a cap of 3 all got in.
async fn the_pending_cap_holds_under_concurrent_enqueues(s: Arc<dyn Store>) {
    const CAP: u64 = 3;
    // Room for one only: 2 waiting already (one of them running).
    s.enqueue_within(vec![job("a", 0), job("a", 1)], Some(CAP))
        .await
        .unwrap();
    s.claim_job("w", LONG).await.unwrap().unwrap();
    for round in 0..5 {
        let owner = format!("crowd{round}");
        let mut tasks = Vec::new();
        for n in 0..24 {
            let s = s.clone();
            let owner = owner.clone();
            tasks.push(tokio::spawn(async move {
                // A third of the requests are batches of two.
                let jobs: Vec<NewJob> = (0..1 + usize::from(n % 3 == 0))
                    .map(|i| job(&owner, n * 10 + i))
                    .collect();
                let adding = jobs.len() as u64;
                match s.enqueue_within(jobs, Some(CAP)).await.unwrap() {
                    Enqueued::Queued(ids) => ids.len() as u64,
                    Enqueued::Full {
                        owner: o,
                        pending,
                        adding: a,
                    } => {
                        assert_eq!((o.as_str(), a), (owner.as_str(), adding));
                        assert!(pending + a > CAP, "refused with room: {pending} + {a}");
                        0
                    }
                    Enqueued::Existing(j) => panic!("no job here has a key: {j:?}"),
                }
            }));
        }
        let mut queued = 0;
        for t in tasks {
            queued += t.await.unwrap();
        }
        assert!(
            queued <= CAP,
            "round {round}: {queued} queued past a cap of {CAP}"
        );
        let waiting = s.pending_jobs_of(&owner).await.unwrap();
        assert_eq!(waiting, queued, "round {round}");
        assert!(waiting >= CAP - 1, "round {round}: only {waiting} queued");
    }
    // The other owner's cap was its own: one more fits, then a batch of 1 does not.
    assert!(matches!(
        s.enqueue_within(vec![job("a", 2)], Some(CAP))
            .await
            .unwrap(),
        Enqueued::Queued(_)
    ));
    assert_eq!(
        s.enqueue_within(vec![job("a", 3), job("b", 0)], Some(CAP))
            .await
            .unwrap(),
        Enqueued::Full {
            owner: "a".into(),
            pending: 3,
            adding: 1
        }
    );
    assert_eq!(s.pending_jobs_of("b").await.unwrap(), 0, "all or none");
    // No cap: anything goes.
    assert_eq!(s.enqueue(vec![job("a", 4)]).await.unwrap().len(), 1);
}

/// `job(owner, n)` under idempotency key `key`, its request's fingerprint `fingerprint`.
fn keyed(owner: &str, n: usize, key: &str, fingerprint: &str) -> NewJob {
    NewJob {
        suite: None,
        regrade_of: None,
        idempotency: Some(IdempotencyKey {
            key: key.into(),
            fingerprint: fingerprint.into(),
        }),
        ..job(owner, n)
    }
}

/// An owner's idempotency key names one job: the same key again stores nothing and answers that
/// job (with the fingerprint of the request that made it, whatever this one's), before the cap
/// is looked at; another owner's key is another; once retention deleted the job, the key is free.
async fn one_key_of_an_owner_names_one_job(s: Arc<dyn Store>) {
    let Enqueued::Queued(ids) = s
        .enqueue_within(vec![keyed("a", 1, "k1", "f1")], Some(1))
        .await
        .unwrap()
    else {
        panic!("the first request with a key is queued");
    };
    let first = KeyedJob {
        id: ids[0].clone(),
        state: JobState::Queued,
        fingerprint: "f1".into(),
    };
    for again in [keyed("a", 2, "k1", "f1"), keyed("a", 3, "k1", "f2")] {
        assert_eq!(
            s.enqueue_within(vec![again], Some(1)).await.unwrap(),
            Enqueued::Existing(first.clone()),
            "a key already used answers its job, not a full queue"
        );
    }
    assert_eq!(s.pending_jobs_of("a").await.unwrap(), 1);
    assert_eq!(s.job_by_key("a", "k1").await.unwrap(), Some(first.clone()));
    assert_eq!(s.job_by_key("a", "k2").await.unwrap(), None);
    assert_eq!(s.job_by_key("b", "k1").await.unwrap(), None);
    let other = s.enqueue(vec![keyed("b", 1, "k1", "f1")]).await.unwrap();
    assert_ne!(other, ids, "another owner's key is another key");
    // A batch with a used key stores none of its jobs.
    assert!(matches!(
        s.enqueue_within(vec![keyed("a", 4, "k9", "f"), keyed("a", 5, "k1", "f1")], None)
            .await
            .unwrap(),
        Enqueued::Existing(j) if j.id == ids[0]
    ));
    assert_eq!(s.job_by_key("a", "k9").await.unwrap(), None, "all or none");
    // Unkeyed jobs never collide.
    assert_eq!(
        s.enqueue(vec![job("a", 6), job("a", 7)])
            .await
            .unwrap()
            .len(),
        2
    );
    // Finished and deleted by retention: the key names nothing any more.
    let c = s.claim_job("w", LONG).await.unwrap().unwrap();
    assert_eq!(c.job.id, ids[0]);
    s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
        .await
        .unwrap();
    let done = s.job_by_key("a", "k1").await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Done);
    s.delete_jobs_before(corral_store::now_ms() + 1000)
        .await
        .unwrap();
    assert_eq!(s.job_by_key("a", "k1").await.unwrap(), None);
    let again = s.enqueue(vec![keyed("a", 8, "k1", "f1")]).await.unwrap();
    assert_ne!(again, ids);
}

/// Requests racing with one key store one job between them, with the owner's cap (its lock) and
/// without one (the unique index alone): every other one is answered that job.
async fn concurrent_enqueues_with_one_key_store_one_job(s: Arc<dyn Store>) {
    for (round, cap) in [Some(1000), None, Some(1000), None].into_iter().enumerate() {
        let owner = format!("o{round}");
        let tasks: Vec<_> = (0..16)
            .map(|n| {
                let (s, owner) = (s.clone(), owner.clone());
                tokio::spawn(async move {
                    s.enqueue_within(vec![keyed(&owner, n, "retry-me", "f")], cap)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let (mut queued, mut existing) = (Vec::new(), Vec::new());
        for t in tasks {
            match t.await.unwrap() {
                Enqueued::Queued(ids) => queued.extend(ids),
                Enqueued::Existing(j) => existing.push(j.id),
                full => panic!("round {round}: {full:?}"),
            }
        }
        assert_eq!(queued.len(), 1, "round {round} (cap {cap:?}): {queued:?}");
        assert!(existing.iter().all(|id| *id == queued[0]), "{existing:?}");
        assert_eq!(s.pending_jobs_of(&owner).await.unwrap(), 1);
    }
}

/// Suite `s1`'s gradebook: each row's owner name and job.
async fn book(s: &Arc<dyn Store>) -> Vec<(Option<String>, String)> {
    s.gradebook("s1")
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.owner_name, l.job.id))
        .collect()
}

/// Staff's view of the queue: a list newest first, paged by position, filtered by owner, suite
/// and state (each with the owner's token name); and a suite's gradebook, each owner's latest
/// finished submission (a later one still running does not replace it; a failed one does).
async fn jobs_are_listed_by_page_and_filter_and_graded_per_owner(s: Arc<dyn Store>) {
    use corral_store::{JobFilter, Role};
    let ada = s.create_token(Role::Student, "ada").await.unwrap().info.id;
    let bob = s.create_token(Role::Student, "bob").await.unwrap().info.id;
    let of = |owner: &str, n: usize, suite: Option<&str>| NewJob {
        suite: suite.map(str::to_string),
        ..job(owner, n)
    };
    let mut ids = Vec::new();
    for j in [
        of(&ada, 0, Some("s1")),
        of(&ada, 1, Some("s1")),
        of(&bob, 2, Some("s1")),
        of(&ada, 3, Some("s2")),
        of(&bob, 4, None),
        of(&ada, 5, Some("s1")),
    ] {
        ids.extend(s.enqueue(vec![j]).await.unwrap());
    }
    // Every job, two a page, newest first.
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = s
            .list_jobs(&JobFilter {
                before,
                limit: 2,
                ..JobFilter::default()
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        before = Some(page.last().unwrap().seq);
        seen.extend(page.into_iter().map(|l| l.job.id));
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);
    let listed = |f: JobFilter| {
        let s = s.clone();
        async move {
            s.list_jobs(&JobFilter { limit: 100, ..f })
                .await
                .unwrap()
                .into_iter()
                .map(|l| l.job.id)
                .collect::<Vec<_>>()
        }
    };
    let s1 = Some("s1".to_string());
    assert_eq!(
        listed(JobFilter {
            suite: s1.clone(),
            ..JobFilter::default()
        })
        .await,
        [
            ids[5].clone(),
            ids[2].clone(),
            ids[1].clone(),
            ids[0].clone()
        ]
    );
    assert_eq!(
        listed(JobFilter {
            suite: s1.clone(),
            owner: Some(ada.clone()),
            ..JobFilter::default()
        })
        .await,
        [ids[5].clone(), ids[1].clone(), ids[0].clone()]
    );
    let one = s
        .list_jobs(&JobFilter {
            limit: 1,
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (one[0].owner_name.as_deref(), one[0].suite.as_deref()),
        (Some("ada"), Some("s1"))
    );

    // Judge: ada's first s1 job passes, her second fails, her third stays running; bob's passes.
    let mut leases = std::collections::HashMap::new();
    while let Some(c) = s.claim_job("w", LONG).await.unwrap() {
        leases.insert(c.job.id.clone(), c.lease);
    }
    for (i, state) in [
        (0, JobState::Done),
        (1, JobState::Failed),
        (2, JobState::Done),
    ] {
        let r = s
            .complete_job(&ids[i], &leases[&ids[i]], state, "{}", None)
            .await
            .unwrap();
        assert_eq!(r, Completion::Recorded);
    }
    assert_eq!(
        listed(JobFilter {
            state: Some(JobState::Running),
            ..JobFilter::default()
        })
        .await,
        [ids[5].clone(), ids[4].clone(), ids[3].clone()]
    );
    assert_eq!(
        book(&s).await,
        [
            (Some("ada".to_string()), ids[1].clone()),
            (Some("bob".to_string()), ids[2].clone())
        ]
    );
    assert!(s.gradebook("nobody").await.unwrap().is_empty());

    // Regrades: of ada's older job, of her latest judged one, and of that regrade; and a staff
    // token's try of the suite.
    let regrade = |of_id: &str, n: usize| NewJob {
        regrade_of: Some(of_id.to_string()),
        ..of(&ada, n, Some("s1"))
    };
    let r_old = s
        .enqueue(vec![regrade(&ids[0], 6)])
        .await
        .unwrap()
        .remove(0);
    let r_new = s
        .enqueue(vec![regrade(&ids[1], 7)])
        .await
        .unwrap()
        .remove(0);
    let r_again = s.enqueue(vec![regrade(&r_new, 8)]).await.unwrap().remove(0);
    let ann = s.create_token(Role::Staff, "Ann").await.unwrap().info.id;
    let tried = s
        .enqueue(vec![of(&ann, 9, Some("s1"))])
        .await
        .unwrap()
        .remove(0);
    let original = s.get_job(&ids[1]).await.unwrap().unwrap();
    let again = s.get_job(&r_again).await.unwrap().unwrap();
    assert_eq!(
        (again.regrade_of.as_deref(), again.submitted_ms),
        (Some(ids[1].as_str()), Some(original.created_ms)),
        "a regrade of a regrade names the original"
    );
    assert_eq!(original.regrade_of, None);
    // Judged in this order: the regrade of ada's latest, then the one of her older job.
    while let Some(c) = s.claim_job("w", LONG).await.unwrap() {
        leases.insert(c.job.id.clone(), c.lease);
    }
    for id in [&r_new, &r_old, &tried] {
        let r = s
            .complete_job(id, &leases[id], JobState::Done, "{}", None)
            .await
            .unwrap();
        assert_eq!(r, Completion::Recorded);
    }
    assert_eq!(
        book(&s).await,
        [
            (Some("ada".to_string()), r_new.clone()),
            (Some("bob".to_string()), ids[2].clone())
        ],
        "the older job's regrade stands where that job does; staff's try is no grade"
    );

    // Ada's latest submission, still running, is refused by its grader: not counted (as on
    // PrairieLearn), so her standing stays the regrade's.
    let r = s
        .complete_job(
            &ids[5],
            &leases[&ids[5]],
            JobState::Done,
            r#"{"verdict":"not_gradable","score":0.0,"max_score":1.0}"#,
            None,
        )
        .await
        .unwrap();
    assert_eq!(r, Completion::Recorded);
    assert_eq!(
        book(&s).await,
        [
            (Some("ada".to_string()), r_new.clone()),
            (Some("bob".to_string()), ids[2].clone())
        ],
        "a not-gradable submission does not replace a grade"
    );
}

on_both_backends!(
    threads = 4;
    jobs_are_listed_by_page_and_filter_and_graded_per_owner,
    one_key_of_an_owner_names_one_job,
    concurrent_enqueues_with_one_key_store_one_job,
    the_pending_cap_holds_under_concurrent_enqueues,
    a_released_job_is_queued_at_once_without_using_an_attempt,
    revoking_a_worker_token_gives_its_jobs_back_at_once,
    a_callback_is_put_back_to_be_delivered_anew,
    a_cancelled_write_leaves_no_transaction_behind,
    enqueue_and_read,
    claims_in_order_and_once,
    completion_is_recorded_exactly_once,
    expired_lease_goes_back_to_the_queue,
    a_job_that_kills_its_workers_fails,
    owners_share_fairly,
    submissions_go_before_regrades,
    concurrent_claims_never_share_a_job,
    callbacks_are_claimed_retried_and_finished,
    callbacks_of_skipped_owners_wait_for_their_turn,
    retention_deletes_finished_jobs_only,
    retention_deletes_many_jobs_in_one_pass,
);

#[tokio::test]
async fn sqlite_queue_survives_reopening() {
    let d = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", d.path().join("q.db").display());
    let s = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let ids = s.enqueue(vec![job("a", 1)]).await.unwrap();
    let c = s.claim_job("w", SHORT).await.unwrap().unwrap();
    drop(c);
    s.close().await;
    drop(s);
    let s = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let_expire().await;
    assert_eq!(s.expire_leases().await.unwrap().requeued, ids);
    assert_eq!(
        s.claim_job("w", LONG).await.unwrap().unwrap().job.id,
        ids[0]
    );
}

/// The jobs `old/w0` holds, `new/w0` holds and a remote worker holds, each claimed with a long
/// lease; then what a server `new` starting on the store ends.
async fn predecessors_leases(s: &Arc<dyn Store>) -> (Vec<String>, corral_store::Expired) {
    let ids = s
        .enqueue(vec![job("a", 0), job("b", 0), job("c", 0)])
        .await
        .unwrap();
    let remote = corral_store::remote_worker_prefix("t1");
    for w in ["old/w0", "new/w0", &format!("{remote}judge1")] {
        s.claim_job(w, LONG).await.unwrap().unwrap();
    }
    (ids, s.expire_predecessors_leases("new").await.unwrap())
}

/// A SQLite store is one server's: at its start, the jobs an earlier server's workers held
/// (it was killed: `kill -9`) go back to the queue at once, an attempt counted, instead of
/// when their 30 s leases run out; its own workers' and remote workers' leases run on.
#[tokio::test]
async fn sqlite_a_starting_server_requeues_its_predecessors_jobs() {
    let b = support::Backend::sqlite().await;
    let (ids, e) = predecessors_leases(&b.store).await;
    assert_eq!((e.requeued, e.failed), (vec![ids[0].clone()], vec![]));
    let again = b.store.claim_job("new/w1", LONG).await.unwrap().unwrap();
    assert_eq!(
        (again.job.id.as_str(), again.job.attempts),
        (ids[0].as_str(), 2)
    );
    b.finish().await;
}

/// On PostgreSQL other servers may be alive: a starting server ends no lease.
#[tokio::test]
async fn postgres_a_starting_server_ends_no_other_servers_lease() {
    let b = support::Backend::postgres().await;
    let (_, e) = predecessors_leases(&b.store).await;
    assert_eq!(e, corral_store::Expired::default());
    b.finish().await;
}
