//! The submission queue: submissions are accepted and stored durably, judged later by a worker
//! (in-process, or `corral worker` on another host, with `corral_judge`), and their verdicts
//! answered, waited for, or called back.
//!
//! - [`accept`]: checking a submission and queueing it; [`idempotency`]: a client's
//!   `Idempotency-Key`, so a retried request makes no second submission.
//! - [`listing`]: submissions by the page (staff: everyone's); [`gradebook`]: a suite's
//!   latest grade per student; [`regrade`]: judging a submission again.
//! - [`view`]: a submission as its owner sees it; waiting for it, woken per job by
//!   [`finished_jobs`].
//! - [`queue`]: the queue's in-process signals, metrics and callback key.
//! - [`workers`]: in-process workers and the lease reaper.
//! - [`remote`]: claims, heartbeats and results of remote workers; [`workers_seen`]: which
//!   of them asked for work lately.
//! - [`callbacks`]: signed callbacks, retried; [`callback_targets`]: only to public addresses;
//!   [`callback_slots`]: how many at once, in all and per owner; [`redelivery`]: staff send a
//!   finished submission's callback again.

pub mod accept;
pub mod callback_slots;
pub mod callback_targets;
pub mod callbacks;
pub mod finished_jobs;
pub mod give_back;
pub mod gradebook;
pub mod idempotency;
pub mod listing;
pub mod queue;
pub mod redelivery;
pub mod regrade;
pub mod remote;
pub mod verdicts;
pub mod view;
pub mod workers;
pub mod workers_seen;
