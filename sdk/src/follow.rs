//! Following a process's output across broken connections: the stream reconnects from the
//! byte offsets it has seen, so nothing is received twice and nothing is lost while the
//! daemon keeps it.

use std::time::Duration;

use fsd_api::process::ProcessEvent;
use futures_util::{Stream, StreamExt};

use crate::{Sandbox, SdkError};

/// How many reconnects in a row may fail before the stream gives up (with the waits
/// doubling from 100 ms to 2 s, about 20 s of trying).
const RECONNECTS: u32 = 12;
const FIRST_WAIT: Duration = Duration::from_millis(100);
const LONGEST_WAIT: Duration = Duration::from_secs(2);

type Events = std::pin::Pin<Box<dyn Stream<Item = Result<ProcessEvent, SdkError>> + Send>>;

/// Where a follower is: the offsets after what it has received, and whether it has ended.
struct Follower {
    sandbox: Sandbox,
    id: String,
    stdout: u64,
    stderr: u64,
    events: Option<Events>,
    /// The first `process_info` is passed on; those of reconnects are not.
    told_info: bool,
    failures: u32,
    ended: bool,
}

impl Sandbox {
    /// A process's output as [`Sandbox::stream_process`] gives it, that survives broken
    /// connections (a network blip, a daemon restart): it reconnects from the offsets it has
    /// seen, with waits doubling up to 2 s, and gives up after 12 failures in a row. An
    /// answer from the daemon that is an error (the process is unknown) ends it at once.
    /// Over the WebSocket transport it resumes as far as the socket itself does.
    pub fn follow_process(
        &self,
        id: &str,
    ) -> impl Stream<Item = Result<ProcessEvent, SdkError>> + Send + Unpin + use<> {
        let follower = Follower {
            sandbox: self.clone(),
            id: id.to_string(),
            stdout: 0,
            stderr: 0,
            events: None,
            told_info: false,
            failures: 0,
            ended: false,
        };
        Box::pin(futures_util::stream::unfold(
            follower,
            |mut follower| async move {
                let item = follower.next().await?;
                Some((item, follower))
            },
        ))
    }
}

impl Follower {
    async fn next(&mut self) -> Option<Result<ProcessEvent, SdkError>> {
        loop {
            if self.ended {
                return None;
            }
            let Some(events) = self.events.as_mut() else {
                match self
                    .sandbox
                    .stream_process_since(&self.id, self.stdout, self.stderr)
                    .await
                {
                    Ok(events) => self.events = Some(Box::pin(events)),
                    Err(err) => {
                        if let Some(err) = self.failed(err).await {
                            return Some(Err(err));
                        }
                    }
                }
                continue;
            };
            match events.next().await {
                Some(Ok(event)) => {
                    self.failures = 0;
                    match &event {
                        ProcessEvent::ProcessInfo { .. } if self.told_info => continue,
                        ProcessEvent::ProcessInfo { .. } => self.told_info = true,
                        ProcessEvent::Stdout { offset, .. } => {
                            self.stdout = offset.unwrap_or(self.stdout);
                        }
                        ProcessEvent::Stderr { offset, .. } => {
                            self.stderr = offset.unwrap_or(self.stderr);
                        }
                        ProcessEvent::Exit { .. } => self.ended = true,
                    }
                    return Some(Ok(event));
                }
                // The stream broke, or ended without the exit: reconnect from where it was.
                Some(Err(err)) => {
                    self.events = None;
                    if let Some(err) = self.failed(err).await {
                        return Some(Err(err));
                    }
                }
                None => {
                    self.events = None;
                    let cut = SdkError::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                    if let Some(err) = self.failed(cut).await {
                        return Some(Err(err));
                    }
                }
            }
        }
    }

    /// Waits before the next try, or answers the error that ends the stream: an error the
    /// daemon answered, or the last of too many failures.
    async fn failed(&mut self, err: SdkError) -> Option<SdkError> {
        self.failures += 1;
        if matches!(err, SdkError::Api { .. }) || self.failures > RECONNECTS {
            self.ended = true;
            return Some(err);
        }
        let wait = FIRST_WAIT
            .saturating_mul(1 << (self.failures - 1).min(5))
            .min(LONGEST_WAIT);
        tokio::time::sleep(wait).await;
        None
    }
}
