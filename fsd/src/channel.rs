//! Channels read as streams: a task sends what it finds or reads on an `mpsc` channel, and
//! the transport answers the receiving end as a stream (SSE events, a body's chunks, a
//! capnweb stream).

use futures_util::{Stream, stream};
use tokio::sync::mpsc;

/// What a channel receives, as a stream that ends when every sender is gone.
pub fn receiver_stream<T: Send + 'static>(
    receiver: mpsc::Receiver<T>,
) -> impl Stream<Item = T> + Send + 'static {
    stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}
