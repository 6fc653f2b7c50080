//! `POST /check` with `Accept: application/x-ndjson`: the grading's progress as it goes, one JSON
//! object per line, instead of one answer at the end. On deadline night a class's checks wait
//! for the server's runner slots; a Check button that spins for two minutes with no word looks
//! broken, and proxies cut a silent connection after a minute or so. The lines:
//!
//! - `{"event":"queued","ahead":N}`: every slot is busy with others' work; it waits its turn,
//!   N requests before it (only sent when it does wait; again each time N changes).
//! - `{"event":"started","checks":[ID, …]}`: it has a slot; the suite's checks, in order.
//! - `{"event":"check","done":K,"of":N,"id":ID,"result":true|false|null}`: one check decided
//!   (`null`: skipped, a dependency failed, or it could not be judged), K of the N in all.
//! - `{"event":"heartbeat","elapsed_ms":MS}`: after [`HEARTBEAT`] with nothing else to say.
//! - `{"event":"report","report":{…}}`: the answer `POST /check` gives without streaming, last.
//! - `{"event":"error","error":CODE,"message":…}`: it failed after streaming began, last.
//!
//! Everything that refuses the request (a bad suite or upload, a caller at its cap, a full queue)
//! is answered as without streaming: its status and JSON error, no stream.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use corral_checks::{CheckResult, Progress};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::checks::Answer;
use super::error::REQUEST_ID;
use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::service::checks::{self, Prepared, Watch};
use crate::service::fair_slots::Place;
use crate::service::runner::Turn;
use crate::state::SharedState;

/// The media type of the progress stream.
pub const NDJSON: &str = "application/x-ndjson";

/// Silence after which a heartbeat line is sent: well under the minute after which common
/// proxies (nginx's `proxy_read_timeout`) close an idle connection.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// How often a waiting check's place in the queue is looked at (a `queued` line says it again
/// when it moved).
const PLACE_EVERY: Duration = Duration::from_millis(500);

/// Whether the request asks for the progress stream (`Accept: application/x-ndjson`).
pub(super) fn wanted(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case(NDJSON))
        })
}

/// What the grading's task tells the stream.
enum Note {
    Line(Value),
    End(Result<Value, ApiError>),
}

/// Grades `prepared` on a task of its own and answers its progress as it comes. A refusal
/// before the grading starts (the queue is full) is answered as an error, not streamed.
pub(super) async fn stream(
    st: SharedState,
    caller: Caller,
    prepared: Prepared,
    answer: Answer,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let request_id = headers
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let (tx, mut rx) = mpsc::unbounded_channel::<Note>();
    let view = prepared.view();
    let ids = prepared.check_ids();
    let of = ids.len();
    // While it waits: where it stands, and what the stream last said of it.
    let queue: Arc<Mutex<(Option<Place>, Option<usize>)>> = Arc::default();
    let turn = {
        let (tx, queue) = (tx.clone(), queue.clone());
        let started = json!({"event": "started", "checks": ids});
        Box::new(move |t: Turn| {
            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
            let line = match t {
                Turn::Queued(place) => {
                    let ahead = place.ahead();
                    *q = (Some(place), ahead);
                    json!({"event": "queued", "ahead": ahead})
                }
                Turn::Started => {
                    *q = (None, None);
                    started.clone()
                }
            };
            let _ = tx.send(Note::Line(line));
        })
    };
    let progress = {
        let tx = tx.clone();
        Progress(Arc::new(move |r: &CheckResult, done: usize| {
            let mut line = json!({"event": "check", "done": done, "of": of});
            // A row the view leaves out of the report is not named here either.
            if !r.omitted(view) {
                line["id"] = json!(r.id);
                line["result"] = json!(r.result);
            }
            let _ = tx.send(Note::Line(line));
        }))
    };
    let since = Instant::now();
    tokio::spawn(async move {
        let work = async {
            let report =
                checks::run(&st, &caller, prepared, Some(Watch { turn, progress })).await?;
            answer.of(&st, &caller, &report, view).await
        };
        tokio::pin!(work);
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
        let mut look = tokio::time::interval(PLACE_EVERY);
        let end = loop {
            tokio::select! {
                end = &mut work => break end,
                _ = look.tick() => {
                    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                    let ahead = q.0.as_ref().and_then(Place::ahead);
                    if q.0.is_some() && ahead.is_some() && ahead != q.1 {
                        q.1 = ahead;
                        let _ = tx.send(Note::Line(json!({"event": "queued", "ahead": ahead})));
                    }
                }
                // The client went away: stop as the handler of an answer without streaming
                // would be stopped (a grading already running finishes on its thread).
                () = tx.closed() => return,
                _ = beat.tick() => {
                    let ms = since.elapsed().as_millis() as u64;
                    let _ = tx.send(Note::Line(json!({"event": "heartbeat", "elapsed_ms": ms})));
                }
            }
        };
        let _ = tx.send(Note::End(end));
    });
    // The grading tells its turn before anything else; an error first is a refusal.
    let first = match rx.recv().await {
        Some(Note::End(Err(e))) => return Err(e),
        Some(note) => note,
        None => return Err(ApiError::internal("the check's task ended without a word")),
    };
    let line = move |note: Note| -> Bytes {
        let v = match note {
            Note::Line(v) => v,
            Note::End(Ok(report)) => json!({"event": "report", "report": report}),
            Note::End(Err(e)) => error_line(e, &request_id),
        };
        let mut b = serde_json::to_vec(&v).expect("a JSON value serialises");
        b.push(b'\n');
        Bytes::from(b)
    };
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        let note = rx.recv().await?;
        Some((note, rx))
    });
    let lines = futures_util::StreamExt::map(
        futures_util::StreamExt::chain(futures_util::stream::once(async { first }), rest),
        move |n| Ok::<_, Infallible>(line(n)),
    );
    let mut r = Response::new(Body::from_stream(lines));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // nginx buffers a proxied answer unless told not to, which would hold every line back.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}

/// The last line of a grading that failed: the JSON error body's fields; an internal error's
/// detail is logged and answered as its request id, as a response's would be.
fn error_line(e: ApiError, request_id: &str) -> Value {
    if e.kind == ErrorKind::Internal {
        e.log_detail();
        return json!({
            "event": "error",
            "error": "internal",
            "message": format!("internal error (request id {request_id})"),
        });
    }
    json!({"event": "error", "error": e.code, "message": e.message})
}
