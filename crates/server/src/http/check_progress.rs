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
//! - `{"event":"heartbeat","elapsed_ms":MS}`: every [`HEARTBEAT`], whatever else was said.
//! - `{"event":"report","report":{…}}`: the answer `POST /check` gives without streaming, last.
//! - `{"event":"error","error":CODE,"message":…}`: it failed after streaming began, last.
//!
//! Everything that refuses the request (a bad suite or upload, an image or language the server
//! lacks, a caller at its cap, a full queue) is answered as without streaming: its status and
//! JSON error, no stream. A client that goes away stops the grading: its running checks'
//! programs are killed and the checks not started are not run (`service/checks.rs`). A shutdown ends a waiting check at once and a running one before the
//! grace period does, each with an `error` line `shutting_down`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use corral_checks::{CheckResult, Progress};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::check_answer::Answer;
use super::error::REQUEST_ID;
use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::service::checks::{self, Prepared, Watch};
use crate::service::fair_slots::Place;
use crate::service::runner::Turn;
use crate::state::SharedState;

/// The media type of the progress stream.
pub const NDJSON: &str = "application/x-ndjson";

/// How often a heartbeat line is sent: well under the minute after which common
/// proxies (nginx's `proxy_read_timeout`) close an idle connection.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// How often a waiting check's place in the queue is looked at (a `queued` line says it again
/// when it moved).
const PLACE_EVERY: Duration = Duration::from_millis(500);

/// Whether the request asks for the progress stream: `Accept` names `application/x-ndjson`
/// (a wildcard never does) with a weight above 0 and at least JSON's (`application/json`, else
/// `application/*`, else `*/*`; equal weights stream: the client named it).
pub(super) fn wanted(headers: &HeaderMap) -> bool {
    // (type, weight) of each media range.
    let ranges: Vec<(String, f32)> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|range| {
            let mut parts = range.split(';');
            let media = parts.next()?.trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, v)| v.trim().parse::<f32>().ok())?;
            Some((media, q.clamp(0.0, 1.0)))
        })
        .collect();
    let weight = |media: &str| ranges.iter().find(|(m, _)| m == media).map(|(_, q)| *q);
    let Some(ndjson) = weight(NDJSON) else {
        return false;
    };
    let json = weight("application/json")
        .or_else(|| weight("application/*"))
        .or_else(|| weight("*/*"))
        .unwrap_or(0.0);
    ndjson > 0.0 && ndjson >= json
}

/// Where a grading stands before it runs: its place while it waits, what the stream last said
/// of it, and whether it has started.
#[derive(Default)]
struct Standing {
    place: Option<Place>,
    told: Option<usize>,
    started: bool,
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
    let standing: Arc<Mutex<Standing>> = Arc::default();
    let turn = {
        let (tx, standing) = (tx.clone(), standing.clone());
        let started = json!({"event": "started", "checks": ids});
        Box::new(move |t: Turn| {
            let mut s = standing.lock().unwrap_or_else(|e| e.into_inner());
            let line = match t {
                Turn::Queued(place) => {
                    s.told = place.ahead();
                    s.place = Some(place);
                    json!({"event": "queued", "ahead": s.told})
                }
                Turn::Started => {
                    *s = Standing {
                        started: true,
                        ..Standing::default()
                    };
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
    let grace = st.config.shutdown_grace.duration();
    let mut stopping = st.shutdown.subscribe();
    let task = async move {
        let work = async {
            let report =
                checks::run(&st, &caller, prepared, Some(Watch { turn, progress })).await?;
            answer.of(&st, &caller, &report, view).await
        };
        tokio::pin!(work);
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
        let mut look = tokio::time::interval(PLACE_EVERY);
        // Set when the server starts shutting down with this grading under way: its last word
        // before the grace period ends and the connection with it.
        let mut cut: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        let mut shutting_down = *stopping.borrow();
        let end = loop {
            if shutting_down && cut.is_none() {
                if !standing.lock().unwrap_or_else(|e| e.into_inner()).started {
                    // Still waiting: it leaves the queue now, rather than at the end of the
                    // grace period, so the client can try another server at once.
                    break Err(ApiError::shutting_down());
                }
                cut = Some(Box::pin(tokio::time::sleep(
                    grace.saturating_sub(grace / 4),
                )));
            }
            tokio::select! {
                end = &mut work => break end,
                _ = look.tick() => {
                    let mut s = standing.lock().unwrap_or_else(|e| e.into_inner());
                    let ahead = s.place.as_ref().and_then(Place::ahead);
                    if ahead.is_some() && ahead != s.told {
                        s.told = ahead;
                        let _ = tx.send(Note::Line(json!({"event": "queued", "ahead": ahead})));
                    }
                }
                // The client went away: stop as the handler of an answer without streaming
                // would be stopped (the grading's drop guard cancels it: `service/checks.rs`).
                () = tx.closed() => return,
                _ = beat.tick() => {
                    let ms = since.elapsed().as_millis() as u64;
                    let _ = tx.send(Note::Line(json!({"event": "heartbeat", "elapsed_ms": ms})));
                }
                r = stopping.wait_for(|s| *s), if !shutting_down => {
                    // A dropped sender (the state went first) is a shutdown too.
                    let _ = r;
                    shutting_down = true;
                }
                () = async { cut.as_mut().expect("guarded").await }, if cut.is_some() => {
                    let mut e = ApiError::new(
                        ErrorKind::Unavailable,
                        "shutting_down",
                        "the server is shutting down and stopped before this check ended; \
                         check again in a few seconds",
                    );
                    e.retry_after = Some(crate::error::SHUTTING_DOWN_RETRY);
                    break Err(e);
                }
            }
        };
        let _ = tx.send(Note::End(end));
    };
    // Its log lines keep the request's id.
    tokio::spawn(task.instrument(tracing::Span::current()));
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
    // Ends after the last word: the grading's own senders (its watch) may outlive it, held by
    // a grading that goes on on its thread after a shutdown's cut.
    let ended = matches!(first, Note::End(_));
    let rest = futures_util::stream::unfold((rx, ended), |(mut rx, ended)| async move {
        if ended {
            return None;
        }
        let note = rx.recv().await?;
        let ends = matches!(note, Note::End(_));
        Some((note, (rx, ends)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(values: &[&str]) -> bool {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        }
        wanted(&h)
    }

    #[test]
    fn the_stream_is_what_accept_prefers() {
        assert!(accept(&["application/x-ndjson"]));
        assert!(accept(&["Application/X-NDJSON; charset=utf-8"]));
        assert!(accept(&["application/json, application/x-ndjson"]));
        assert!(accept(&["application/json", "application/x-ndjson"]));
        assert!(accept(&["application/json;q=0.5, application/x-ndjson"]));
        assert!(accept(&["*/*, application/x-ndjson;q=1.0"]));
        // Not named, refused, or weighed below JSON: the plain answer.
        assert!(!accept(&[]));
        assert!(!accept(&["*/*"]));
        assert!(!accept(&["application/*"]));
        assert!(!accept(&["application/json"]));
        assert!(!accept(&["application/x-ndjson;q=0"]));
        assert!(!accept(&["application/x-ndjson; q=0.0"]));
        assert!(!accept(&["application/x-ndjson;q=0.1, application/json"]));
        assert!(!accept(&["application/x-ndjson;q=0.1, */*"]));
        assert!(!accept(&["application/x-ndjson;q=bad"]));
    }
}
