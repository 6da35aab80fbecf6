//! Catching up: a caller that needs every change made before now reported (a change-token
//! check) asks the engine's thread to read everything the kernel has queued and answers
//! once it has. Without it, a check made a moment after `rm -r root && mkdir root` could be
//! answered from the part of the deletion the thread had read so far.

use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::reconcile::{Reconciler, RecordedEntry};

/// One request waiting for the engine's thread.
pub(crate) enum Waiter {
    /// Answered once what was queued before it has been reported.
    CaughtUp(oneshot::Sender<()>),
    /// The same, with the reconciler's record as those reports leave it (what a daemon
    /// saves of a watch to start it again from).
    Record(oneshot::Sender<Vec<RecordedEntry>>),
    /// The same, once what is recorded below each path has been looked at again
    /// ([`Reconciler::reread_below`]).
    Reread(Vec<std::path::PathBuf>, oneshot::Sender<()>),
}

impl Waiter {
    /// Answers it (the thread's side), everything queued before it reported.
    pub fn answer(self, reconciler: &Reconciler) {
        match self {
            Waiter::CaughtUp(done) | Waiter::Reread(_, done) => {
                let _ = done.send(());
            }
            Waiter::Record(done) => {
                let _ = done.send(reconciler.recorded());
            }
        }
    }
}

/// The requests waiting for the engine's thread, and how to wake it.
pub(crate) struct CatchUp {
    /// `None` once the thread has ended: requests are answered at once.
    waiting: Mutex<Option<Vec<Waiter>>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl CatchUp {
    /// `wake` makes the engine's thread look at its requests soon (it must not block).
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            waiting: Mutex::new(Some(Vec::new())),
            wake: Box::new(wake),
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Option<Vec<Waiter>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once the thread has reported everything queued before this call (or has
    /// ended, having reported all it will).
    pub fn request(&self) -> oneshot::Receiver<()> {
        let (done, answer) = oneshot::channel();
        self.queue(Waiter::CaughtUp(done));
        answer
    }

    /// [`request`](Self::request), answered with the reconciler's record then (an error
    /// once the thread has ended).
    pub fn record(&self) -> oneshot::Receiver<Vec<RecordedEntry>> {
        let (done, answer) = oneshot::channel();
        self.queue(Waiter::Record(done));
        answer
    }

    /// [`request`](Self::request), with what is recorded below `paths` looked at again
    /// first.
    pub fn reread(&self, paths: Vec<std::path::PathBuf>) -> oneshot::Receiver<()> {
        let (done, answer) = oneshot::channel();
        self.queue(Waiter::Reread(paths, done));
        answer
    }

    fn queue(&self, waiter: Waiter) {
        let queued = match self.waiting().as_mut() {
            Some(waiting) => {
                waiting.push(waiter);
                true
            }
            None => false,
        };
        if queued {
            (self.wake)();
        }
    }

    /// The requests to answer once what is queued now has been reported (the thread's side).
    pub fn take(&self) -> Vec<Waiter> {
        self.waiting()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Marks what `waiting` asks to be looked at again, for the reconcile that answers them.
    pub fn mark_rereads(waiting: &[Waiter], reconciler: &mut Reconciler) {
        for waiter in waiting {
            if let Waiter::Reread(paths, _) = waiter {
                paths.iter().for_each(|path| reconciler.reread_below(path));
            }
        }
    }

    /// The thread ends: the requests waiting and every later one resolve at once.
    pub fn end(&self) {
        self.waiting().take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn requests_wake_the_thread_and_resolve_when_answered_or_ended() {
        let woken = Arc::new(AtomicUsize::new(0));
        let counter = woken.clone();
        let catch_up = CatchUp::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let mut first = catch_up.request();
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert!(first.try_recv().is_err(), "not answered yet");
        for waiter in catch_up.take() {
            let Waiter::CaughtUp(done) = waiter else {
                panic!("a catch-up was asked")
            };
            let _ = done.send(());
        }
        assert_eq!(first.try_recv(), Ok(()));

        let mut second = catch_up.request();
        catch_up.end();
        assert!(
            matches!(second.try_recv(), Err(oneshot::error::TryRecvError::Closed)),
            "an ended thread lets its waiters go"
        );
        let mut late = catch_up.request();
        assert!(
            matches!(late.try_recv(), Err(oneshot::error::TryRecvError::Closed)),
            "and every later one"
        );
        assert_eq!(woken.load(Ordering::SeqCst), 2, "no wake after the end");
    }
}
