//! Waiting for Ctrl-C or SIGTERM. The handlers are installed by [`Interrupt::listen`], before
//! a command prints that it is ready: a caller that signals it as soon as it reads that line
//! must find it listening (`tokio::signal::ctrl_c` installs its handler only when first
//! polled, so a SIGINT in between killed the process instead).

use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Interrupt {
    interrupt: Signal,
    terminate: Signal,
}

impl Interrupt {
    pub fn listen() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Until SIGINT or SIGTERM arrives; answers the exit status of a program that signal
    /// ended (130, 143), which a command that ends only that way exits with.
    pub async fn wait(mut self) -> u8 {
        tokio::select! {
            _ = self.interrupt.recv() => 128 + 2,
            _ = self.terminate.recv() => 128 + 15,
        }
    }
}
