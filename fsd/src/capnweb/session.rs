//! One capnweb session over one WebSocket: the export table (the peer's calls, and the
//! pipes it writes to us), the objects we export (negative ids: subscriptions, whose
//! methods the peer calls and which are disposed at their last release), the import table
//! (our pipes' writes and our calls into the peer, awaiting settlement), id allocation in
//! send order, flow control on our pipes, and the limits that keep a connection from
//! holding more than its share. Everything a connection holds ends with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message as Frame, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::protocol::{self as capnweb, Arg, Call, Message};
use crate::wire::sse::sse_frame;

/// Calls, pipes and stream writes the peer may have open on one connection at once.
pub const MAX_EXPORTS: usize = 1024;
/// Pipes of ours a connection may have open at once (a pipe outlives the call that made it).
pub const MAX_PIPES: usize = 256;
/// Bytes the peer may write to one of its pipes ahead of what the pipe's reader took. The
/// peer's window is what pushes back: it grows with the rate our acknowledgements come
/// (each write is acknowledged once the reader has it), so it stays near what the reader
/// takes in a round trip; writes are many or few within it (a stream in 1 KiB chunks is a
/// thousand writes a MiB). A peer this far ahead has its pipe refused alone.
const MAX_QUEUED_BYTES: usize = 256 << 20;
/// What a write counts for at least against [`MAX_QUEUED_BYTES`] (empty writes are not
/// free to keep).
const QUEUED_WRITE_AT_LEAST: usize = 64;
/// Bytes of one of our pipes' writes the peer has not yet acknowledged.
const WINDOW_BYTES: usize = 1 << 20;
/// How long one of our pipes may go without a write before an empty one checks that its
/// reader is still there.
const PROBE_AFTER: Duration = Duration::from_secs(1);
/// The largest chunk one write of our pipes carries.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Objects of ours the peer may hold at once.
pub const MAX_OWN_EXPORTS: usize = 1024;

/// What a call or a write came to: a result, or what it was rejected with.
pub type Settlement = Result<Value, Value>;

/// A future of a settlement, as targets and dispatchers return it.
pub type Settling = std::pin::Pin<Box<dyn Future<Output = Settlement> + Send>>;

/// An object of ours the peer holds (`["export", -k]` in a result): the peer calls its
/// methods, and it is disposed when the peer releases its last reference or the socket ends.
pub trait Target: Send + Sync + 'static {
    /// Serves `method(args)` called on this object (none, unless it says).
    fn call(self: Arc<Self>, session: Arc<Session>, method: String, args: Vec<Arg>) -> Settling {
        let _ = (session, args);
        let error = capnweb::js_error("TypeError", &format!("'{method}' is not a method"));
        Box::pin(async move { Err(error) })
    }
    /// The peer holds it no more: whatever it runs stops.
    fn dispose(&self);
    /// Serves a call as the peer sent it: `path` (empty when the object is a function
    /// called as one) and the arguments' expressions. By default a method called by one
    /// name, with its arguments decoded; an object that forwards calls elsewhere takes them
    /// as they are.
    fn call_raw(
        self: Arc<Self>,
        session: Arc<Session>,
        path: Vec<String>,
        args: Vec<Value>,
    ) -> Settling {
        let decoded = args
            .into_iter()
            .map(capnweb::decode)
            .collect::<Result<Vec<Arg>, _>>();
        let method = <[String; 1]>::try_from(path);
        match (method, decoded) {
            (Ok([method]), Ok(args)) => self.call(session, method, args),
            (Err(path), _) => {
                let error = capnweb::js_error("TypeError", &format!("{path:?} is not a method"));
                Box::pin(async move { Err(error) })
            }
            (_, Err(error)) => {
                let error = capnweb::js_error("TypeError", &error.to_string());
                Box::pin(async move { Err(error) })
            }
        }
    }
}

/// One of our objects and how many references the peer holds.
struct OwnExport {
    target: Arc<dyn Target>,
    references: u64,
    /// What it is, for an object exported again under the same id (see
    /// [`Session::export_keyed`]).
    key: Option<String>,
}

/// What serves the calls of a session's main object: `(session, [domain, method],
/// arguments)`, the arguments' expressions as sent (see [`capnweb::decode`]).
pub type Dispatch = Arc<dyn Fn(Arc<Session>, Vec<String>, Vec<Value>) -> Settling + Send + Sync>;

/// One write of one of our pipes: its expression, and what it weighs against the window.
type PipeWrite = (Value, usize);

/// The sending half: ids of what we push, stream or pipe are allocated as it is queued, so
/// they follow send order.
struct Outbox {
    next_import: i64,
    frames: mpsc::Sender<Message>,
}

/// Bytes as pipe writes of at most [`CHUNK_BYTES`] each.
fn byte_writes<S>(chunks: S) -> impl Stream<Item = Result<PipeWrite, String>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, String>> + Send + 'static,
{
    chunks.flat_map(|chunk| {
        let writes: Vec<Result<PipeWrite, String>> = match chunk {
            Ok(chunk) => chunk
                .chunks(CHUNK_BYTES)
                .map(|piece| Ok((capnweb::bytes_expr(piece), piece.len())))
                .collect(),
            Err(reason) => vec![Err(reason)],
        };
        futures_util::stream::iter(writes)
    })
}

/// A peer's entry in our export table.
enum Export {
    /// A call: its settlement once known, whether the peer pulled it, the task running it.
    Call {
        settled: Option<Message>,
        pulled: bool,
        task: Option<AbortHandle>,
    },
    /// A pipe the peer writes: its writes go in order to `ingress`; `readable` is handed
    /// to the call that names it.
    Pipe {
        ingress: mpsc::UnboundedSender<(i64, PipeOp)>,
        /// Bytes written to the pipe and not yet taken by its reader.
        queued: Arc<std::sync::atomic::AtomicUsize>,
        readable: Option<mpsc::Receiver<Result<Bytes, String>>>,
    },
    /// A write to one of the peer's pipes, until it is acknowledged.
    Write,
}

/// What the peer does to a pipe it writes.
enum PipeOp {
    Write(Bytes),
    Close,
    Abort(String),
    /// The peer wrote too far ahead (a write this many bytes): the write is refused and
    /// the pipe ends in an error.
    Overrun(usize),
}

impl PipeOp {
    /// What the op counts for against [`MAX_QUEUED_BYTES`] while it waits.
    fn queued_bytes(&self) -> usize {
        match self {
            PipeOp::Write(bytes) => bytes.len().max(QUEUED_WRITE_AT_LEAST),
            PipeOp::Overrun(counted) => *counted,
            _ => QUEUED_WRITE_AT_LEAST,
        }
    }
}

/// The chunks of a pipe the peer writes (an error ends it, as the peer aborted it).
pub type PipeChunks = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// A connection's state, shared by its reader, its calls and its pipes.
pub struct Session {
    outbox: tokio::sync::Mutex<Outbox>,
    exports: Mutex<HashMap<i64, Export>>,
    next_export: Mutex<i64>,
    imports: Mutex<HashMap<i64, oneshot::Sender<Settlement>>>,
    /// Our objects the peer holds, by their (negative) ids, and the next id to give.
    own: Mutex<(i64, HashMap<i64, OwnExport>)>,
    /// Work the connection started for the peer (following tunnel exits), by name; it ends
    /// with the connection.
    tasks: Mutex<HashMap<String, AbortHandle>>,
    /// Pipes of ours still sending.
    pipes: std::sync::atomic::AtomicUsize,
    /// The connection has ended.
    closed: std::sync::atomic::AtomicBool,
    dispatch: Dispatch,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves one socket until it closes, the peer aborts, or it stops reading for `stall`.
pub async fn serve(socket: WebSocket, dispatch: Dispatch, stall: Duration) {
    let (mut sink, mut stream) = socket.split();
    let (session, mut queued) = Session::new(dispatch);
    let writer = tokio::spawn(async move {
        while let Some(message) = queued.recv().await {
            let abort = matches!(message, Message::Abort(_));
            let sent =
                tokio::time::timeout(stall, sink.send(Frame::Text(message.to_text().into())));
            if !matches!(sent.await, Ok(Ok(()))) {
                tracing::debug!("rpc: the peer stopped reading; closing");
                return;
            }
            if abort {
                let close = CloseFrame {
                    code: 3000,
                    reason: "protocol error".into(),
                };
                let _ = sink.send(Frame::Close(Some(close))).await;
                return;
            }
        }
    });
    while let Some(Ok(frame)) = stream.next().await {
        let text = match frame {
            Frame::Text(text) => text,
            Frame::Close(_) => break,
            Frame::Ping(_) | Frame::Pong(_) => continue,
            Frame::Binary(_) => {
                session
                    .abort("binary frames are not capnweb messages")
                    .await;
                break;
            }
        };
        match Message::parse(&text) {
            Ok(message) => {
                if let Err(reason) = session.receive(message).await {
                    session.abort(&reason).await;
                    break;
                }
            }
            Err(error) => {
                session.abort(&error.to_string()).await;
                break;
            }
        }
        if writer.is_finished() {
            break;
        }
    }
    session.close();
    drop(session);
    let _ = writer.await;
}

impl Session {
    /// A session whose messages to the peer come out of the receiver, in order, for a
    /// transport to send.
    pub fn new(dispatch: Dispatch) -> (Arc<Self>, mpsc::Receiver<Message>) {
        let (frames, queued) = mpsc::channel::<Message>(64);
        let session = Arc::new(Session {
            outbox: tokio::sync::Mutex::new(Outbox {
                next_import: 1,
                frames,
            }),
            exports: Mutex::new(HashMap::new()),
            next_export: Mutex::new(1),
            imports: Mutex::new(HashMap::new()),
            own: Mutex::new((-1, HashMap::new())),
            tasks: Mutex::new(HashMap::new()),
            pipes: std::sync::atomic::AtomicUsize::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
            dispatch,
        });
        (session, queued)
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Handles one message from the peer; `Err` is a protocol violation (the session ends).
    pub async fn receive(self: &Arc<Self>, message: Message) -> Result<(), String> {
        match message {
            Message::Push(expr) => {
                let id = self.new_export()?;
                let call = Call::parse(expr).map_err(|error| error.to_string())?;
                self.start_call(id, call);
            }
            Message::Pull(id) => self.pull(id).await,
            Message::Release(id, count) if id < 0 => self.release_own(id, count)?,
            Message::Release(id, _) => self.release(id),
            Message::Resolve(id, value) => self.settle_import(id, Ok(value)),
            Message::Reject(id, value) => self.settle_import(id, Err(value)),
            Message::Pipe => {
                let id = self.new_export()?;
                self.open_incoming_pipe(id);
            }
            Message::Stream(expr) => {
                let id = self.new_export()?;
                let call = Call::parse(expr).map_err(|error| error.to_string())?;
                self.stream_write(id, call).await?;
            }
            Message::Abort(reason) => return Err(format!("the peer aborted: {reason}")),
        }
        Ok(())
    }

    /// The next export id (the peer's n-th push, stream or pipe), within the limit.
    fn new_export(&self) -> Result<i64, String> {
        if lock(&self.exports).len() >= MAX_EXPORTS {
            return Err(format!(
                "more than {MAX_EXPORTS} calls, pipes and writes open"
            ));
        }
        let mut next = lock(&self.next_export);
        let id = *next;
        *next += 1;
        Ok(id)
    }

    fn start_call(self: &Arc<Self>, id: i64, call: Call) {
        lock(&self.exports).insert(
            id,
            Export::Call {
                settled: None,
                pulled: false,
                task: None,
            },
        );
        let session = Arc::clone(self);
        let mut work = Box::pin(async move {
            let result = session.dispatch(call).await;
            let message = match result {
                Ok(value) => Message::Resolve(id, value),
                Err(error) => Message::Reject(id, error),
            };
            session.settle_export(id, message).await;
        });
        // Most calls settle without waiting (a status, a small file read from memory or
        // written on this thread): tried once here, they cost no task of their own and no
        // wake of another worker. One that waits goes on as a task, which polls it again
        // with its own waker.
        let mut once = std::task::Context::from_waker(std::task::Waker::noop());
        if work.as_mut().poll(&mut once).is_ready() {
            return;
        }
        let task = tokio::spawn(work);
        if let Some(Export::Call { task: slot, .. }) = lock(&self.exports).get_mut(&id) {
            *slot = Some(task.abort_handle());
        }
    }

    async fn dispatch(self: &Arc<Self>, call: Call) -> Result<Value, Value> {
        let own = match call.target {
            0 => None,
            id if id < 0 => match lock(&self.own).1.get(&id) {
                Some(export) => Some(Arc::clone(&export.target)),
                None => {
                    let message = format!("no export {id}: it was never given or is released");
                    return Err(capnweb::js_error("RangeError", &message));
                }
            },
            _ => {
                return Err(capnweb::js_error(
                    "TypeError",
                    "calls go to the main object or an object it returned",
                ));
            }
        };
        let Some(args) = call.args else {
            return Err(capnweb::js_error(
                "TypeError",
                "property reads are not served",
            ));
        };
        match own {
            Some(target) => target.call_raw(Arc::clone(self), call.path, args).await,
            None => (self.dispatch)(Arc::clone(self), call.path, args).await,
        }
    }

    /// Exports `target` to the peer: the expression a result carries it as
    /// (`["export", -k]`), or an error past the limit.
    pub fn export(&self, target: Arc<dyn Target>) -> Result<Value, Value> {
        self.export_as(target, None)
    }

    /// Exports the object `key` names: one already exported under that key is given again
    /// under its id (one reference more), as capnweb re-exports a target it has given. An
    /// object the peer asks for on every use and never releases (an extension's stub)
    /// then holds one entry, not one per call.
    pub fn export_keyed(
        &self,
        key: &str,
        make: impl FnOnce() -> Arc<dyn Target>,
    ) -> Result<Value, Value> {
        {
            let mut own = lock(&self.own);
            if let Some((&id, export)) = own
                .1
                .iter_mut()
                .find(|(_, export)| export.key.as_deref() == Some(key))
            {
                export.references += 1;
                return Ok(serde_json::json!(["export", id]));
            }
        }
        self.export_as(make(), Some(key.to_string()))
    }

    fn export_as(&self, target: Arc<dyn Target>, key: Option<String>) -> Result<Value, Value> {
        let mut own = lock(&self.own);
        if own.1.len() >= MAX_OWN_EXPORTS {
            let message =
                format!("more than {MAX_OWN_EXPORTS} objects exported on this connection");
            return Err(capnweb::js_error("RangeError", &message));
        }
        let id = own.0;
        own.0 -= 1;
        own.1.insert(
            id,
            OwnExport {
                target,
                references: 1,
                key,
            },
        );
        Ok(serde_json::json!(["export", id]))
    }

    /// The peer drops `count` references to our object `id`; at none it is disposed. A
    /// release of more than it holds, or of an object it never had, breaks the protocol.
    fn release_own(&self, id: i64, count: u64) -> Result<(), String> {
        let disposed = {
            let mut own = lock(&self.own);
            let Some(export) = own.1.get_mut(&id) else {
                return Err(format!(
                    "release of export {id}, which the peer does not hold"
                ));
            };
            if count > export.references {
                return Err(format!(
                    "release of export {id} more times than it was given"
                ));
            }
            export.references -= count;
            if export.references > 0 {
                return Ok(());
            }
            own.1.remove(&id)
        };
        if let Some(export) = disposed {
            export.target.dispose();
        }
        Ok(())
    }

    /// Sends the settlement of call `id` once the peer has pulled it.
    async fn settle_export(&self, id: i64, message: Message) {
        let send = {
            let mut exports = lock(&self.exports);
            match exports.get_mut(&id) {
                Some(Export::Call {
                    settled, pulled, ..
                }) => {
                    if *pulled {
                        Some(message)
                    } else {
                        // Kept, not copied: a settlement may carry a whole file.
                        *settled = Some(message);
                        None
                    }
                }
                // Released before it settled: the peer no longer wants it.
                _ => None,
            }
        };
        if let Some(message) = send {
            self.send(message).await;
        }
    }

    async fn pull(&self, id: i64) {
        let ready = {
            let mut exports = lock(&self.exports);
            match exports.get_mut(&id) {
                Some(Export::Call {
                    settled, pulled, ..
                }) => {
                    *pulled = true;
                    settled.take()
                }
                _ => None,
            }
        };
        match ready {
            Some(message) => self.send(message).await,
            None if !lock(&self.exports).contains_key(&id) => {
                self.send(Message::Reject(
                    id,
                    capnweb::js_error("RangeError", &format!("no export {id} to pull")),
                ))
                .await;
            }
            None => {}
        }
    }

    /// The peer drops export `id`: a call it no longer wants stops, a pipe without `close`
    /// ends as aborted. Ids never given out are ignored.
    fn release(&self, id: i64) {
        if let Some(Export::Call {
            task: Some(task), ..
        }) = lock(&self.exports).remove(&id)
        {
            task.abort();
        }
    }

    fn settle_import(&self, id: i64, settlement: Settlement) {
        if let Some(waiter) = lock(&self.imports).remove(&id) {
            let _ = waiter.send(settlement);
        }
    }

    /// A pipe the peer will write: its writes are taken in order by a task of its own,
    /// each acknowledged once the reader has it.
    fn open_incoming_pipe(self: &Arc<Self>, id: i64) {
        let (ingress, mut ops) = mpsc::unbounded_channel::<(i64, PipeOp)>();
        let (data, readable) = mpsc::channel::<Result<Bytes, String>>(4);
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        lock(&self.exports).insert(
            id,
            Export::Pipe {
                ingress,
                queued: queued.clone(),
                readable: Some(readable),
            },
        );
        let session = Arc::clone(self);
        tokio::spawn(async move {
            let mut data = Some(data);
            let mut closed = false;
            while let Some((write, op)) = ops.recv().await {
                let counted = op.queued_bytes();
                if let PipeOp::Overrun(_) = op {
                    let overrun = format!(
                        "the pipe's writer ran more than {MAX_QUEUED_BYTES} bytes ahead of its reader"
                    );
                    if let Some(sender) = data.take() {
                        let _ = sender.send(Err(overrun.clone())).await;
                    }
                    queued.fetch_sub(counted, std::sync::atomic::Ordering::SeqCst);
                    lock(&session.exports).remove(&write);
                    let error = capnweb::js_error("RangeError", &overrun);
                    session.send(Message::Reject(write, error)).await;
                    continue;
                }
                let delivered = match (op, &data) {
                    (PipeOp::Overrun(_), _) => false,
                    (PipeOp::Write(chunk), Some(sender)) => sender.send(Ok(chunk)).await.is_ok(),
                    (PipeOp::Close, _) => {
                        closed = true;
                        data = None;
                        true
                    }
                    (PipeOp::Abort(reason), Some(sender)) => {
                        let _ = sender.send(Err(reason)).await;
                        data = None;
                        true
                    }
                    (_, None) => false,
                };
                queued.fetch_sub(counted, std::sync::atomic::Ordering::SeqCst);
                let answer = if delivered {
                    Message::Resolve(write, capnweb::undefined())
                } else {
                    Message::Reject(write, capnweb::undefined())
                };
                lock(&session.exports).remove(&write);
                session.send(answer).await;
            }
            if !closed && let Some(sender) = data {
                let _ = sender
                    .send(Err("the pipe was released without close".into()))
                    .await;
            }
        });
    }

    /// A write, close or abort of a pipe the peer writes (`["pipeline", P, [op], args]`).
    async fn stream_write(&self, id: i64, call: Call) -> Result<(), String> {
        let mut args = call.args.unwrap_or_default();
        let op = match (call.path.first().map(String::as_str), args.len()) {
            (Some("write"), 1) => match args.pop().map(capnweb::decode) {
                Some(Ok(Arg::Bytes(bytes))) => PipeOp::Write(Bytes::from(bytes)),
                Some(Ok(Arg::Json(Value::String(text)))) => PipeOp::Write(Bytes::from(text)),
                _ => return Err("a pipe write carries bytes or a string".into()),
            },
            (Some("close"), _) => PipeOp::Close,
            (Some("abort"), _) => PipeOp::Abort(format!("{args:?}")),
            _ => return Err(format!("{:?} is not a pipe operation", call.path)),
        };
        let pipe = match lock(&self.exports).get(&call.target) {
            Some(Export::Pipe {
                ingress, queued, ..
            }) => Some((ingress.clone(), queued.clone())),
            _ => None,
        };
        let Some((ingress, queued)) = pipe else {
            // Writes to a pipe already gone are refused, as a reader that left refuses them.
            self.send(Message::Reject(id, capnweb::undefined())).await;
            return Ok(());
        };
        lock(&self.exports).insert(id, Export::Write);
        // Too far ahead of the reader: this pipe alone is refused, the connection goes on.
        let counted = op.queued_bytes();
        let before = queued.fetch_add(counted, std::sync::atomic::Ordering::SeqCst);
        let op = if before + counted > MAX_QUEUED_BYTES {
            PipeOp::Overrun(counted)
        } else {
            op
        };
        if ingress.send((id, op)).is_err() {
            // The pipe's task has ended: refused, as a write to a pipe gone.
            queued.fetch_sub(counted, std::sync::atomic::Ordering::SeqCst);
            lock(&self.exports).remove(&id);
            self.send(Message::Reject(id, capnweb::undefined())).await;
        }
        Ok(())
    }

    /// What the peer writes into its pipe `id`, as a stream of chunks, once.
    pub fn take_readable(&self, id: i64) -> Option<PipeChunks> {
        let receiver = match lock(&self.exports).get_mut(&id) {
            Some(Export::Pipe { readable, .. }) => readable.take(),
            _ => None,
        }?;
        Some(Box::pin(crate::channel::receiver_stream(receiver)))
    }

    async fn send(&self, message: Message) {
        let outbox = self.outbox.lock().await;
        let _ = outbox.frames.send(message).await;
    }

    /// Queues a message that takes the next import id (`make` builds it from the id), and
    /// registers a waiter for its settlement when `settles`.
    async fn send_allocating(
        &self,
        make: impl FnOnce(i64) -> Message,
        settles: bool,
    ) -> (i64, Option<oneshot::Receiver<Settlement>>) {
        let mut outbox = self.outbox.lock().await;
        let id = outbox.next_import;
        outbox.next_import += 1;
        let waiter = settles.then(|| {
            let (tx, rx) = oneshot::channel();
            lock(&self.imports).insert(id, tx);
            // A connection that has ended answers nobody: a waiter registered after
            // `close` cleared the table is dropped (its receiver sees the end), not left.
            if self.is_closed() {
                lock(&self.imports).remove(&id);
            }
            rx
        });
        let _ = outbox.frames.send(make(id)).await;
        (id, waiter)
    }

    /// Sends `chunks` to the peer as a new pipe of bytes and returns its id, to be named in
    /// a result as `["readable", id]`. Writes go out within a window of unacknowledged
    /// bytes; a refused write (the reader left) stops the source, and a quiet pipe checks
    /// its reader with an empty write (0.12's byte streams have no other sign of it).
    pub async fn open_outgoing_pipe<S>(self: &Arc<Self>, chunks: S) -> Result<i64, Value>
    where
        S: Stream<Item = Result<Bytes, String>> + Send + 'static,
    {
        self.open_pipe(byte_writes(chunks), true, CancellationToken::new())
            .await
    }

    /// Sends `events` to the peer as a new pipe of SSE bytes, one `data:` frame each (how
    /// 0.12's streams come), and answers the pipe as a result names it.
    pub async fn open_sse_pipe<S>(self: &Arc<Self>, events: S) -> Result<Value, Value>
    where
        S: Stream + Send + 'static,
        S::Item: serde::Serialize,
    {
        let frames = events.map(|event| Ok(sse_frame(None, &event)));
        Ok(capnweb::readable(self.open_outgoing_pipe(frames).await?))
    }

    /// Sends `items` to the peer as a new pipe of values, one write each (event objects:
    /// every write reaches the reader, so there is never a filler write), and returns its
    /// id. The window is counted in the items' JSON size. `stop` closes the pipe at once,
    /// whatever is in flight (a subscription's `cancel()`).
    pub async fn open_object_pipe<S>(
        self: &Arc<Self>,
        items: S,
        stop: CancellationToken,
    ) -> Result<i64, Value>
    where
        S: Stream<Item = Value> + Send + 'static,
    {
        let writes = items.map(|value| {
            let weight = value.to_string().len();
            Ok((value, weight))
        });
        self.open_pipe(writes, false, stop).await
    }

    /// As [`Session::open_object_pipe`], for bytes: a subscription's byte stream, which
    /// (unlike 0.12's) never probes its reader, since `cancel()` and release tell us.
    pub async fn open_byte_pipe<S>(
        self: &Arc<Self>,
        chunks: S,
        stop: CancellationToken,
    ) -> Result<i64, Value>
    where
        S: Stream<Item = Bytes> + Send + 'static,
    {
        self.open_pipe(byte_writes(chunks.map(Ok)), false, stop)
            .await
    }

    async fn open_pipe<S>(
        self: &Arc<Self>,
        writes: S,
        probe: bool,
        stop: CancellationToken,
    ) -> Result<i64, Value>
    where
        S: Stream<Item = Result<PipeWrite, String>> + Send + 'static,
    {
        use std::sync::atomic::Ordering;
        if self.pipes.fetch_add(1, Ordering::AcqRel) >= MAX_PIPES {
            self.pipes.fetch_sub(1, Ordering::AcqRel);
            let message = format!("more than {MAX_PIPES} streams open on this connection");
            return Err(capnweb::js_error("RangeError", &message));
        }
        let (pipe, _) = self.send_allocating(|_| Message::Pipe, false).await;
        let session = Arc::clone(self);
        tokio::spawn(async move {
            session.pump(pipe, writes, probe, stop).await;
            session.send(Message::Release(pipe, 1)).await;
            session.pipes.fetch_sub(1, Ordering::AcqRel);
        });
        Ok(pipe)
    }

    async fn pump<S>(&self, pipe: i64, writes: S, probe: bool, stop: CancellationToken)
    where
        S: Stream<Item = Result<PipeWrite, String>> + Send,
    {
        let mut writes = std::pin::pin!(writes);
        let mut in_flight: std::collections::VecDeque<(usize, oneshot::Receiver<Settlement>)> =
            Default::default();
        let mut unacked = 0;
        let mut end = json!(["close"]);
        let mut end_args = json!([]);
        loop {
            let next = async {
                if probe {
                    tokio::time::timeout(PROBE_AFTER, writes.next()).await
                } else {
                    Ok(writes.next().await)
                }
            };
            let waited = tokio::select! {
                biased;
                () = stop.cancelled() => return self.close_pipe(pipe).await,
                waited = next => waited,
            };
            let next = match waited {
                Ok(Some(next)) => next,
                Ok(None) => break,
                // Quiet: an empty write shows whether the reader is still there (a reader
                // that cancelled refuses the next write, and only that tells us).
                Err(_) => {
                    let probe = Call {
                        target: pipe,
                        path: vec!["write".into()],
                        args: Some(vec![capnweb::bytes_expr(&[])]),
                    };
                    let (_, waiter) = self
                        .send_allocating(|_| Message::Stream(probe.to_expr()), true)
                        .await;
                    let Some(waiter) = waiter else { return };
                    if matches!(waiter.await, Ok(Ok(_))) {
                        continue;
                    }
                    return;
                }
            };
            let (value, weight) = match next {
                Ok(write) => write,
                Err(reason) => {
                    end = json!(["abort"]);
                    end_args = json!([capnweb::js_error("Error", &reason)]);
                    break;
                }
            };
            let write = Call {
                target: pipe,
                path: vec!["write".into()],
                args: Some(vec![value]),
            };
            let (_, waiter) = self
                .send_allocating(|_| Message::Stream(write.to_expr()), true)
                .await;
            if let Some(waiter) = waiter {
                in_flight.push_back((weight, waiter));
                unacked += weight;
            }
            while unacked > WINDOW_BYTES {
                let Some((size, waiter)) = in_flight.pop_front() else {
                    break;
                };
                unacked -= size;
                let acknowledged = tokio::select! {
                    biased;
                    () = stop.cancelled() => return self.close_pipe(pipe).await,
                    answer = waiter => matches!(answer, Ok(Ok(_))),
                };
                if !acknowledged {
                    return;
                }
            }
        }
        for (_, waiter) in in_flight {
            let acknowledged = tokio::select! {
                biased;
                () = stop.cancelled() => return self.close_pipe(pipe).await,
                answer = waiter => matches!(answer, Ok(Ok(_))),
            };
            if !acknowledged {
                return;
            }
        }
        let end = Call {
            target: pipe,
            path: serde_json::from_value(end).unwrap_or_default(),
            args: end_args.as_array().cloned(),
        };
        let (_, waiter) = self
            .send_allocating(|_| Message::Stream(end.to_expr()), true)
            .await;
        if let Some(waiter) = waiter {
            let _ = waiter.await;
        }
    }

    /// Closes our pipe at once, whatever is in flight, and waits for the close's answer (a
    /// reader that has gone rejects it) before the pipe is released, as capnweb does: the
    /// peer may not have taken the readable end yet.
    async fn close_pipe(&self, pipe: i64) {
        let close = Call {
            target: pipe,
            path: vec!["close".into()],
            args: Some(Vec::new()),
        };
        let (_, waiter) = self
            .send_allocating(|_| Message::Stream(close.to_expr()), true)
            .await;
        if let Some(waiter) = waiter {
            let _ = waiter.await;
        }
    }

    /// Runs `work` for as long as the connection lives, once per `key`: `false` if that
    /// work was already started.
    pub fn hold_once(&self, key: &str, work: impl Future<Output = ()> + Send + 'static) -> bool {
        let mut tasks = lock(&self.tasks);
        if tasks.contains_key(key) {
            return false;
        }
        tasks.insert(key.to_string(), tokio::spawn(work).abort_handle());
        true
    }

    /// Calls `path` on the peer's export `target` (a callback it passed, or its main object
    /// at 0) with `args`, and waits for its answer.
    pub async fn call_peer(&self, target: i64, path: Vec<String>, args: Vec<Value>) -> Settlement {
        let call = Call {
            target,
            path,
            args: Some(args),
        };
        let (id, waiter) = self
            .send_allocating(|_| Message::Push(call.to_expr()), true)
            .await;
        self.send(Message::Pull(id)).await;
        let settlement = match waiter {
            Some(waiter) => waiter
                .await
                .unwrap_or_else(|_| Err(capnweb::js_error("Error", "the connection closed"))),
            None => Err(capnweb::undefined()),
        };
        self.send(Message::Release(id, 1)).await;
        settlement
    }

    /// Drops the peer's callback `target`, received `count` times.
    pub async fn release_peer(&self, target: i64, count: u64) {
        self.send(Message::Release(target, count)).await;
    }

    pub async fn abort(&self, reason: &str) {
        tracing::debug!(reason, "rpc: aborting the session");
        self.send(Message::Abort(capnweb::js_error("Error", reason)))
            .await;
    }

    /// Everything the connection held ends with it: running calls, pipes in both
    /// directions, waiters for the peer's answers.
    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        for (_, export) in lock(&self.exports).drain() {
            if let Export::Call {
                task: Some(task), ..
            } = export
            {
                task.abort();
            }
        }
        lock(&self.imports).clear();
        for (_, task) in lock(&self.tasks).drain() {
            task.abort();
        }
        let own: Vec<OwnExport> = lock(&self.own)
            .1
            .drain()
            .map(|(_, export)| export)
            .collect();
        for export in own {
            export.target.dispose();
        }
    }
}
