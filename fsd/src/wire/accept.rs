//! Accepting connections: a cap on how many are open, a bound on how long one may take to
//! send a request head or sit idle between requests, and a bounded graceful shutdown.
//!
//! Any process in the sandbox can reach the daemon's port, and a connection costs memory
//! before any request (and so any token) is read. A connection that has not sent a whole
//! request head within `header_timeout`, or has been idle that long after a response, is
//! closed (hyper runs one timer from the moment it waits for a head). A request being
//! handled and a response being streamed (SSE) are never cut by it. Past the cap, new
//! connections are closed at once and the refusals are logged once per interval.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::memory::{self, Activity};
use super::quickack::QuickAck;

/// How long requests in flight may go on after a shutdown signal (streams never end).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Refusals past the cap are logged at most this often.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// After accept fails (out of descriptors), wait this long before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The connection bounds `fsd serve` was given.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let count = Arc::new(OpenCount::default());
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut refusals = Refusals::default();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let activity = Arc::new(Activity::default());
    memory::release_when_quiet(activity.clone());
    let service = {
        let activity = activity.clone();
        let router = TowerToHyperService::new(router);
        hyper::service::service_fn(move |request| {
            activity.note();
            hyper::service::Service::call(&router, request)
        })
    };
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
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            drop(stream);
            refusals.note(limits.max_connections);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Upgrades (WebSockets) are served too; the permit is held until the connection
        // ends, upgraded or not.
        let connection = builder
            .serve_connection(TokioIo::new(QuickAck(stream)), service.clone())
            .with_upgrades();
        let count = count.clone();
        let activity = activity.clone();
        let mut stopping = stopping.subscribe();
        count.opened();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                _ = stopping.changed() => {
                    // Finish the request in flight, then close.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop(permit);
            count.closed();
            activity.note();
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every permit back means every connection has ended.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::info!("connections still open after the shutdown grace period are dropped");
    }
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

/// Counts connections refused past the cap; logs them once per interval.
#[derive(Default)]
struct Refusals {
    since_log: u64,
    last_log: Option<Instant>,
}

impl Refusals {
    fn note(&mut self, cap: usize) {
        self.since_log += 1;
        let due = self
            .last_log
            .is_none_or(|last| last.elapsed() >= REFUSAL_LOG_INTERVAL);
        if due {
            tracing::warn!(
                refused = self.since_log,
                cap,
                "connection cap reached; new connections are closed at once (--max-connections)"
            );
            self.since_log = 0;
            self.last_log = Some(Instant::now());
        }
    }
}

/// Open connections, and the most open since the memory was last given back.
#[derive(Default)]
struct OpenCount {
    open: AtomicUsize,
    peak: AtomicUsize,
}

/// A peak at least this high is a flood worth giving memory back after.
const FLOOD: usize = 64;

impl OpenCount {
    fn opened(&self) {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(open, Ordering::Relaxed);
    }

    /// When the last connection of a flood closes, the heap it used goes back to the system.
    fn closed(&self) {
        let was = self.open.fetch_sub(1, Ordering::Relaxed);
        if was == 1 && self.peak.load(Ordering::Relaxed) >= FLOOD {
            self.peak.store(0, Ordering::Relaxed);
            tokio::task::spawn_blocking(memory::release_free_memory);
        }
    }
}
