//! The service: what corral does, as plain Rust functions over the shared state and the store,
//! with no HTTP types. Every adapter (the REST API, the Judge0 surface, the WebSocket, the remote
//! workers' endpoints) and the background workers call it.
//!
//! - [`caller`]: who is calling (a token's id and role) and the role checks.
//! - [`uploads`]: checking files and archives, storing and finding uploads; [`scratch`]:
//!   temporary folders uploads are copied into, removed after the copy, never under it.
//! - [`runs`]: a run request into a sandboxed run (limits, kept sandboxes, admission).
//! - [`runner`]: bounded parallelism for sandbox work (blocking threads, a bounded queue);
//!   [`fair_slots`]: its free slots go to waiting callers by turns.
//! - [`per_caller`]: counting what each caller has under way, for per-caller caps.
//! - [`kept_sandboxes`]: sandboxes kept between runs, and their expiry; [`this_node`]: this
//!   server's node id (the first part of the ids it gives them) and where it answers;
//!   [`nodes`]: the servers sharing the database, and which one keeps a sandbox;
//!   [`shared_blobs`]: whether they share this server's `blobs_dir` too.
//! - [`suites`], [`checks`]: check suites and grading an upload with one; [`runtime_choice`]: a
//!   grading request's runtime may not undo what a suite hides; [`folder_suites`]: a suite of
//!   the suites folder pinned (its files stored) when a submission is accepted;
//!   [`loaded_suites`]: suites loaded at acceptance, kept by their files' content;
//!   [`pinned_folders`]: folder suites pinned a moment ago, by the state of their folder.
//! - [`images`]: the container images requests may name, and staff's image operations.
//! - [`image_builds`]: admins' image builds (`POST /images/build`) as background jobs.
//! - [`image_info`]: how one image is described.
//! - [`tokens`]: API tokens.
//! - [`revocations`]: revoked tokens reaching open connections (WebSockets, long-polls);
//!   [`token_cache`]: tokens authenticated a moment ago, trusted until revoked or a second old.
//! - [`revisions`]: the browser editor's history.
//! - [`submissions`]: the submission queue.
//! - [`housekeeping`]: expiring idle sandboxes and old uploads.
//! - [`store_health`]: whether the store can be written (`/health`), probed at most once a
//!   second.
//! - [`work_requests`]: the requests in flight that do work, which a shutdown waits for.

pub mod caller;
pub mod checks;
pub mod fair_slots;
pub mod folder_suites;
pub mod housekeeping;
pub mod image_builds;
pub mod image_info;
pub mod images;
pub mod kept_sandboxes;
pub mod loaded_suites;
pub mod nodes;
pub mod per_caller;
pub mod pinned_folders;
pub mod revisions;
pub mod revocations;
pub mod runner;
pub mod runs;
pub mod runtime_choice;
pub mod scratch;
pub mod shared_blobs;
pub mod store_health;
pub mod submissions;
pub mod suites;
pub mod this_node;
pub mod token_cache;
pub mod tokens;
pub mod uploads;
pub mod work_requests;
