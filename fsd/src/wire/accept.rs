//! Accepting connections: a cap on how many are open, a bound on how long one may take to
//! send a request head or sit idle between requests, and a bounded graceful shutdown.
//!
//! Any process in the sandbox can reach the daemon's port, and a connection costs memory
//! before any request (and so any token) is read. A connection that has not sent a whole
//! request head within `header_timeout`, or has been idle that long after a response, is
//! closed (hyper runs one timer from the moment it waits for a head). A request being
//! handled and a response being streamed (SSE) are never cut by it. At the cap, the open
//! connection that has shown least is closed to make room for the new one
//! ([`Connections::make_room`]); only when every open connection is busy is the new one
//! closed at once, and those refusals are logged once per interval.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};

use super::connections::{Connections, Waiting};
use super::memory::{self, Activity};
use super::quickack::QuickAck;

/// How long requests in flight may go on after a shutdown signal (streams never end).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Refusals past the cap are logged at most this often.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// After accept fails (out of descriptors), wait this long before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a connection accepted at the cap has to send a whole request head.
const HEAD_GRACE: Duration = Duration::from_millis(100);
/// How often a partial head is looked at again during that time.
const HEAD_POLL: Duration = Duration::from_millis(5);
/// How often shutdown looks whether every connection has ended.
const SHUTDOWN_POLL: Duration = Duration::from_millis(10);

/// The connection bounds `fsd serve` was given.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// What every connection's task shares.
struct Shared {
    builder: http1::Builder,
    router: TowerToHyperService<Router>,
    connections: Connections,
    count: OpenCount,
    /// Connections accepted at the cap, waiting to show a whole request head.
    waiting: Waiting,
    refusals: Refusals,
    cap: usize,
    activity: Arc<Activity>,
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    counts: Arc<ConnectionCounts>,
    shutdown: impl Future<Output = ()>,
) {
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let activity = Arc::new(Activity::default());
    memory::release_when_quiet(activity.clone());
    let shared = Arc::new(Shared {
        builder,
        router: TowerToHyperService::new(router),
        // A connection gets the same time to show a whole head as one accepted at the cap.
        connections: Connections::new(HEAD_GRACE),
        count: OpenCount {
            counts,
            peak: AtomicUsize::new(0),
        },
        waiting: Waiting::new(limits.max_connections),
        refusals: Refusals::default(),
        cap: limits.max_connections,
        activity,
    });
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if shared.count.open() < shared.cap {
            shared.count.opened();
            let (shared, stopping) = (shared.clone(), stopping.subscribe());
            tokio::spawn(async move { serve_one(stream, &shared, stopping).await });
            continue;
        }
        // At the cap, a connection that sends a whole request head within HEAD_GRACE is
        // served, and the open connection that has shown least makes room for it (closed as
        // soon as its task runs); one that does not is closed, having cost a few peeks. The
        // accept loop itself never waits, so it drains a flood of half-open connections as
        // fast as it arrives, and a caller behind the flood in the backlog gets through.
        let (shared, stopping) = (shared.clone(), stopping.subscribe());
        tokio::spawn(async move {
            let (place, let_go) = shared.waiting.enter();
            let shown = tokio::select! {
                shown = whole_head_within(&stream, HEAD_GRACE) => shown,
                () = let_go.notified() => false,
            };
            shared.waiting.leave(place);
            if shown && shared.connections.make_room() {
                shared.count.opened();
                serve_one(stream, &shared, stopping).await;
            } else {
                shared.refusals.note(shared.cap);
            }
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    let closing = async {
        while shared.count.open() > 0 {
            tokio::time::sleep(SHUTDOWN_POLL).await;
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, closing).await.is_err() {
        tracing::info!("connections still open after the shutdown grace period are dropped");
    }
}

/// The most of a request head looked at on a connection accepted at the cap.
const PEEKED_HEAD: usize = 16 * 1024;

/// Whether `stream` shows a whole request head within `grace` (looked at, not read).
async fn whole_head_within(stream: &TcpStream, grace: Duration) -> bool {
    let mut buffer = vec![0u8; PEEKED_HEAD];
    let looked = async {
        loop {
            let Ok(read) = stream.peek(&mut buffer).await else {
                return false;
            };
            if read == 0 {
                return false;
            }
            if buffer[..read]
                .windows(4)
                .any(|window| window == b"\r\n\r\n")
            {
                return true;
            }
            if read == buffer.len() {
                return false;
            }
            // More may come: wait for it rather than peeking the same bytes again.
            tokio::time::sleep(HEAD_POLL).await;
        }
    };
    tokio::time::timeout(grace, looked).await.unwrap_or(false)
}

/// Serves one connection to its end (counted open by the caller; counted closed here).
async fn serve_one(
    stream: TcpStream,
    shared: &Shared,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (id, conn) = shared.connections.open();
    let service = {
        let (activity, router, conn) =
            (shared.activity.clone(), shared.router.clone(), conn.clone());
        hyper::service::service_fn(move |request| {
            activity.note();
            conn.request_started();
            let answered = hyper::service::Service::call(&router, request);
            let conn = conn.clone();
            async move { answered.await.map(|response| conn.answer(response)) }
        })
    };
    // Upgrades (WebSockets) are served too; the permit is held until the connection ends,
    // upgraded or not.
    let connection = shared
        .builder
        .serve_connection(TokioIo::new(QuickAck(stream)), service)
        .with_upgrades();
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = stopping.changed() => {
            // Finish the request in flight, then close.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        // Chosen to make room (it showed least): dropped, which closes it.
        () = conn.closed() => Ok(()),
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
    shared.connections.forget(id);
    shared.count.closed();
    shared.activity.note();
}

/// Connections the kernel may queue before the daemon accepts them (capped by
/// `net.core.somaxconn`). std's 128 overflows under a burst of connects, and every dropped
/// SYN costs its client a one-second retransmit.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds `address` with a backlog that absorbs bursts of connections.
pub fn bind(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Descriptors kept free for files, pipes and watches beside the connections.
const SPARE_DESCRIPTORS: u64 = 1024;

/// Raises the soft limit on open descriptors (up to the hard limit) so the connection cap,
/// not `EMFILE`, is what bounds connections.
pub fn raise_descriptor_limit(limits: &Limits) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let wanted = (limits.max_connections as u64 + SPARE_DESCRIPTORS).min(hard);
    if wanted > soft {
        if let Err(error) = setrlimit(Resource::RLIMIT_NOFILE, wanted, hard) {
            tracing::warn!(%error, soft, wanted, "cannot raise the open-file limit");
        }
    } else if soft < limits.max_connections as u64 + SPARE_DESCRIPTORS {
        tracing::warn!(
            soft,
            hard,
            max_connections = limits.max_connections,
            "the open-file limit is below --max-connections plus room for files"
        );
    }
}

/// Counts connections refused at the cap; logs them once per interval.
#[derive(Default)]
struct Refusals {
    since_log: AtomicU64,
    last_log: std::sync::Mutex<Option<Instant>>,
}

impl Refusals {
    fn note(&self, cap: usize) {
        self.since_log.fetch_add(1, Ordering::Relaxed);
        let Ok(mut last_log) = self.last_log.lock() else {
            return;
        };
        if last_log.is_none_or(|last| last.elapsed() >= REFUSAL_LOG_INTERVAL) {
            tracing::warn!(
                refused = self.since_log.swap(0, Ordering::Relaxed),
                cap,
                "connection cap reached and no open connection could make room; new \
                 connections without a whole request head are closed (--max-connections)"
            );
            *last_log = Some(Instant::now());
        }
    }
}

/// HTTP connections open now and accepted in all, for the resource figures.
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    pub open: AtomicUsize,
    pub accepted: AtomicU64,
}

/// Open connections, and the most open since the memory was last given back.
struct OpenCount {
    counts: Arc<ConnectionCounts>,
    peak: AtomicUsize,
}

/// A peak at least this high is a flood worth giving memory back after.
const FLOOD: usize = 64;

impl OpenCount {
    fn open(&self) -> usize {
        self.counts.open.load(Ordering::Relaxed)
    }

    fn opened(&self) {
        let open = self.counts.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.counts.accepted.fetch_add(1, Ordering::Relaxed);
        self.peak.fetch_max(open, Ordering::Relaxed);
    }

    /// When the last connection of a flood closes, the heap it used goes back to the system.
    fn closed(&self) {
        let was = self.counts.open.fetch_sub(1, Ordering::Relaxed);
        if was == 1 && self.peak.load(Ordering::Relaxed) >= FLOOD {
            self.peak.store(0, Ordering::Relaxed);
            tokio::task::spawn_blocking(memory::release_free_memory);
        }
    }
}
