//! The open connections as the acceptor sees them, to choose whom to close when the cap is
//! reached. A process in the sandbox can open connections faster than the header timeout
//! closes them; if the cap simply refused newcomers, such a flood would lock out the
//! trusted side (every `GET /api/ping` from it refused while the flood lasts). Instead, at
//! the cap the connection that has shown least makes room: one that never sent a complete
//! request head (the oldest first), else one idle between requests (idle longest). A
//! request being handled, a response still being sent (a stream) and an upgraded
//! connection (WebSocket) are never chosen.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Response, StatusCode};
use http_body::{Frame, SizeHint};
use tokio::sync::Notify;

/// One open connection.
pub struct Conn {
    opened: Instant,
    /// Requests whose head arrived.
    requests: AtomicU64,
    /// Requests still being handled or answered.
    busy: AtomicUsize,
    /// When it last finished answering (ms after `opened`).
    idle_since: AtomicU64,
    upgraded: AtomicBool,
    /// Chosen to make room and not yet closed (so not chosen twice).
    chosen: AtomicBool,
    /// Told when it is chosen to make room; its task then drops the connection.
    close: Notify,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            opened: Instant::now(),
            requests: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            upgraded: AtomicBool::new(false),
            chosen: AtomicBool::new(false),
            close: Notify::new(),
        }
    }

    /// Resolves when the connection is chosen to make room and may still be closed: a
    /// request that arrived since it was chosen keeps it (and it may be chosen again).
    pub async fn closed(&self) {
        loop {
            self.close.notified().await;
            if self.busy.load(Ordering::SeqCst) == 0 {
                return;
            }
            self.chosen.store(false, Ordering::SeqCst);
        }
    }

    /// A request head arrived.
    pub fn request_started(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.busy.fetch_add(1, Ordering::SeqCst);
    }

    /// `response` is what the request is answered with; the request counts as busy until
    /// its body has been sent (or dropped). An upgrade is never made room for.
    pub fn answer(self: &Arc<Self>, response: Response<Body>) -> Response<Body> {
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            self.upgraded.store(true, Ordering::SeqCst);
        }
        let conn = self.clone();
        response.map(|inner| {
            Body::new(Answering {
                inner,
                conn: Some(conn),
            })
        })
    }

    fn request_done(&self) {
        let since = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since.store(since, Ordering::Relaxed);
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether it may be closed to make room, and its place in line: first those that
    /// never sent a complete head in `silence` or more (opened earliest first), then those
    /// idle between requests (idle since earliest first). One opened more recently may be
    /// a caller whose head is on its way.
    fn closable(&self, silence: Duration) -> Option<(u8, Instant)> {
        if self.busy.load(Ordering::SeqCst) > 0
            || self.upgraded.load(Ordering::SeqCst)
            || self.chosen.load(Ordering::SeqCst)
        {
            return None;
        }
        if self.requests.load(Ordering::Relaxed) == 0 {
            return (self.opened.elapsed() >= silence).then_some((0, self.opened));
        }
        let idle_since = Duration::from_millis(self.idle_since.load(Ordering::Relaxed));
        Some((1, self.opened + idle_since))
    }
}

/// Every open connection, by a number of its own.
pub struct Connections {
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    /// How long a connection must have sent no whole head to be closed for it.
    silence: Duration,
}

impl Connections {
    pub fn new(silence: Duration) -> Connections {
        Connections {
            open: Mutex::default(),
            next: AtomicU64::new(0),
            silence,
        }
    }

    /// Registers a new connection; `forget` it when it ends.
    pub fn open(&self) -> (u64, Arc<Conn>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::new());
        if let Ok(mut open) = self.open.lock() {
            open.insert(id, conn.clone());
        }
        (id, conn)
    }

    pub fn forget(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&id);
        }
    }

    /// Tells the connection that has shown least to close; `false` when every one is busy
    /// (or upgraded) and none may be.
    pub fn make_room(&self) -> bool {
        let chosen = self.open.lock().ok().and_then(|open| {
            open.values()
                .filter_map(|conn| {
                    conn.closable(self.silence)
                        .map(|place| (place, conn.clone()))
                })
                .min_by_key(|(rank, _)| *rank)
                .map(|(_, conn)| conn)
        });
        match chosen {
            Some(conn) => {
                conn.chosen.store(true, Ordering::SeqCst);
                conn.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Connections accepted at the cap, each given time to show a whole request head. When as
/// many wait as may, the one that has waited longest (and so had the most time to show
/// one) is let go for the newest: a flood of silent connections cannot fill the line and
/// keep a caller behind it out.
pub struct Waiting {
    line: Mutex<VecDeque<(u64, Arc<Notify>)>>,
    next: AtomicU64,
    limit: usize,
}

impl Waiting {
    pub fn new(limit: usize) -> Waiting {
        Waiting {
            line: Mutex::default(),
            next: AtomicU64::new(0),
            limit: limit.max(1),
        }
    }

    /// Joins the line; the `Notify` says it was let go. `leave` it when done.
    pub fn enter(&self) -> (u64, Arc<Notify>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        if let Ok(mut line) = self.line.lock() {
            if line.len() >= self.limit
                && let Some((_, longest)) = line.pop_front()
            {
                longest.notify_one();
            }
            line.push_back((id, notify.clone()));
        }
        (id, notify)
    }

    pub fn leave(&self, id: u64) {
        if let Ok(mut line) = self.line.lock() {
            line.retain(|(waiting, _)| *waiting != id);
        }
    }
}

/// A response body that marks its request done when it has been sent or dropped.
struct Answering {
    inner: Body,
    conn: Option<Arc<Conn>>,
}

impl Answering {
    fn done(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.request_done();
        }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.done();
    }
}

impl HttpBody for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            self.done();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_that_showed_least_makes_room() {
        let connections = Connections::new(Duration::ZERO);
        let (_, served) = connections.open();
        served.request_started();
        served.request_done();
        let (_, busy) = connections.open();
        busy.request_started();
        let (_, silent) = connections.open();
        assert!(connections.make_room());
        // The one that never sent a head went first, and is not chosen again.
        assert!(silent.chosen.load(Ordering::SeqCst));
        assert!(connections.make_room());
        assert!(served.chosen.load(Ordering::SeqCst));
        // The busy one is never chosen.
        assert!(!connections.make_room());
        assert!(!busy.chosen.load(Ordering::SeqCst));
    }

    #[test]
    fn the_longest_waiting_is_let_go_for_the_newest() {
        let waiting = Waiting::new(2);
        let (first, let_go) = waiting.enter();
        let (_, kept) = waiting.enter();
        let (_, newest) = waiting.enter();
        // Notify stores the wake-up: the first was let go, the others were not.
        assert!(futures_util::FutureExt::now_or_never(let_go.notified()).is_some());
        assert!(futures_util::FutureExt::now_or_never(kept.notified()).is_none());
        assert!(futures_util::FutureExt::now_or_never(newest.notified()).is_none());
        waiting.leave(first);
        assert_eq!(waiting.line.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_connection_just_opened_is_not_taken_for_a_silent_one() {
        let connections = Connections::new(Duration::from_secs(60));
        let (_, fresh) = connections.open();
        assert!(!connections.make_room());
        assert!(!fresh.chosen.load(Ordering::SeqCst));
    }
}
