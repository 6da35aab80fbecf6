//! A request whose body the route did not read to the end (an error answered before the
//! upload was read, a 401) is answered with `Connection: close`. The connection cannot be
//! reused with body bytes still on it, and hyper says so only when it has noticed the
//! unread body before the response head goes out, which under load it does not always do;
//! a client that was not told may send its next request on the connection as it closes.
//! RFC 9112 §9.6: a server that does not read the whole body closes the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// The middleware: tracks whether the body reached its end while the route ran.
pub async fn close_if_unread(request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let flag = finished.clone();
    let request = request.map(|inner| {
        Body::new(Tracked {
            inner,
            finished: flag,
        })
    });
    let mut response = next.run(request).await;
    if !finished.load(Ordering::SeqCst) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that records when it has been read to its end.
struct Tracked {
    inner: Body,
    finished: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.finished.store(true, Ordering::SeqCst),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => {
                self.finished.store(true, Ordering::SeqCst)
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
