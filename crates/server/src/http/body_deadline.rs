//! A deadline for request bodies: the whole body must arrive within `http.body_timeout` of the
//! request's head. A client sending a byte a second otherwise holds its connection, and the
//! handler reading it, as long as it likes (tower-http's `RequestBodyTimeout` restarts its clock
//! at every chunk, so it does not stop that). A late body is answered 408 and the connection
//! closed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::error::{ApiError, ErrorKind};

/// Bodies that may take longer: image archives, which only an admin may send (a student's
/// request is refused before its body is read) and which can be gigabytes.
const EXEMPT: &[&str] = &[super::images::IMPORT_PATH];

/// Wraps the request's body in the deadline and answers 408 when the handler met it.
pub async fn limit(State(timeout): State<Duration>, req: Request, next: Next) -> Response {
    if EXEMPT.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(Deadline {
            body,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now() + timeout)),
            expired: expired.clone(),
        })
    });
    let r = next.run(req).await;
    if !expired.load(Ordering::Relaxed) {
        return r;
    }
    // Whatever the handler made of the failed read (a JSON or multipart error), the cause was the
    // clock; the rest of the body is never read, so the connection cannot carry another request.
    let mut r = ApiError::new(
        ErrorKind::TimedOut,
        "body_timeout",
        format!(
            "the request body did not arrive within {} (http.body_timeout)",
            humantime::format_duration(timeout)
        ),
    )
    .into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A body that fails once its deadline has passed while it waits for more.
struct Deadline {
    body: Body,
    sleep: Pin<Box<Sleep>>,
    expired: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct TooSlow;

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        // What has arrived is taken even late; only waiting past the deadline fails.
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(TooSlow))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
