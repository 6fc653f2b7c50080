//! Request bodies the client did not send whole, and bodies refused by their declared length
//! before any of them is read: one answer for every endpoint, JSON or multipart.

use axum::http::{header, HeaderMap};

use crate::error::{ApiError, ErrorKind};

/// The code of a body that ended before its `Content-Length`, or whose chunked encoding was
/// malformed: the client's transport failed, which is neither bad JSON nor a bad form.
pub const BAD_BODY: &str = "bad_body";

/// The body transport failure in `e`'s chain, if that is what `e` is: hyper's error reading the
/// body from the connection (a body shorter than its `Content-Length` whose client closed, a
/// malformed or unfinished chunked encoding). Every such error is the client's, so a 400, never
/// a 500 (which would page an operator for a flaky network).
pub fn transport_failure(e: &(dyn std::error::Error + 'static)) -> Option<ApiError> {
    let mut cur = Some(e);
    let mut from_hyper = false;
    let mut innermost = e;
    while let Some(err) = cur {
        from_hyper |= err.downcast_ref::<hyper::Error>().is_some();
        innermost = err;
        cur = err.source();
    }
    from_hyper.then(|| incomplete(&innermost.to_string()))
}

/// A body that ended early or was malformed; `cause` is hyper's own word for what went wrong.
pub fn incomplete(cause: &str) -> ApiError {
    ApiError::new(
        ErrorKind::BadRequest,
        BAD_BODY,
        format!(
            "the request body ended early or was malformed ({cause}): send the whole body, as \
             long as its Content-Length says, or a well-formed chunked encoding"
        ),
    )
}

/// The body's declared length (`Content-Length`), when there is a valid one.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Refuses a body whose `Content-Length` is over `cap` before reading any of it: hyper sends
/// `100 Continue` to an `Expect: 100-continue` client only when the body is first read, so
/// such a client gets the 413 at once instead of being invited to send what would be refused.
pub fn refuse_declared_over(
    headers: &HeaderMap,
    cap: u64,
    too_large: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    match declared_length(headers) {
        Some(n) if n > cap => Err(ApiError::too_large(too_large())),
        _ => Ok(()),
    }
}
