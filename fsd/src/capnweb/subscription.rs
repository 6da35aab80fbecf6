//! The next line's subscriptions (docs/api.md, RPC: subscriptions): an object we export whose
//! `stream()` opens one pipe over its source, whose `cancel()` stops the source and closes
//! that pipe, and whose release does what `cancel()` does. A source is never started
//! twice, and one released without `stream()` is dropped unread (so it stops).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::protocol::{self as capnweb, Arg};
use super::session::{Session, Settling, Target};

/// What a subscription carries.
pub enum Source {
    /// One event object per write (process logs, port watches, terminal output).
    Objects(BoxStream<'static, Value>),
    /// Bytes (a watch's SSE stream).
    Bytes(BoxStream<'static, Bytes>),
}

pub struct Subscription {
    source: Mutex<Option<Source>>,
    objects: bool,
    opened: AtomicBool,
    cancelled: CancellationToken,
}

impl Subscription {
    pub fn new(source: Source) -> Arc<Self> {
        Arc::new(Self {
            objects: matches!(source, Source::Objects(_)),
            source: Mutex::new(Some(source)),
            opened: AtomicBool::new(false),
            cancelled: CancellationToken::new(),
        })
    }

    async fn stream(&self, session: &Arc<Session>) -> Result<Value, Value> {
        if self.opened.swap(true, Ordering::AcqRel) {
            return Err(capnweb::js_error(
                "Error",
                "Subscription stream already opened",
            ));
        }
        let source = self.source.lock().unwrap_or_else(|p| p.into_inner()).take();
        let stop = self.cancelled.clone();
        // Cancelled before: a stream that is closed at once.
        let pipe = match source {
            Some(Source::Objects(items)) => session.open_object_pipe(items, stop).await?,
            Some(Source::Bytes(chunks)) => session.open_byte_pipe(chunks, stop).await?,
            None if self.objects => {
                let empty = futures_util::stream::empty();
                session.open_object_pipe(empty, stop).await?
            }
            None => {
                let empty = futures_util::stream::empty();
                session.open_byte_pipe(empty, stop).await?
            }
        };
        Ok(capnweb::readable(pipe))
    }

    fn cancel(&self) {
        self.cancelled.cancel();
        // Never streamed: dropped here, which stops it.
        drop(self.source.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

impl Target for Subscription {
    fn call(self: Arc<Self>, session: Arc<Session>, method: String, _args: Vec<Arg>) -> Settling {
        Box::pin(async move {
            match method.as_str() {
                "stream" => self.stream(&session).await,
                "cancel" => {
                    self.cancel();
                    Ok(capnweb::undefined())
                }
                _ => Err(capnweb::js_error(
                    "TypeError",
                    &format!("'{method}' is not a method of a subscription."),
                )),
            }
        })
    }

    fn dispose(&self) {
        self.cancel();
    }
}
