//! How fsd ends processes: one escalation policy in three strengths, applied by one loop.
//!
//! | strength | when | steps |
//! |---|---|---|
//! | [`Escalation::TIMEOUT`] | a command ran past its timeout | SIGINT 0.3 s → SIGTERM 0.5 s → SIGKILL 1 s |
//! | [`Escalation::REQUESTED`] | a kill asked for through the API | SIGTERM 5 s → SIGKILL 5 s |
//! | [`kill_supervised`] | the owner goes away (a deleted session, shutdown) | SIGKILL, repeated up to 5 s |
//!
//! Each step signals what is still alive, leaves first, then gives it the step's grace.
//! What is alive is asked again at every poll, and a SIGKILL step repeats its signal at
//! every poll, so a process forked between a walk and a signal is found by the next walk.
//! A timeout starts with SIGINT because that is what Ctrl-C sends: bash's INT trap ends a
//! builtin loop, and most programs clean up on it. A requested kill starts with SIGTERM, as
//! `kill(1)` does, and gives the longer grace a server needs to shut down.
//!
//! The last strength has only the SIGKILL step, which needs no waiting between signals:
//! [`kill_until_gone`] runs it without a runtime, for code that cannot await (a `Drop`, a
//! blocking thread, the supervisor process).

use std::collections::HashSet;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::proctree;

/// How often an escalation looks at what is still alive.
const POLL: Duration = Duration::from_millis(10);

/// One signal and how long its target gets to end after it.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub signal: Signal,
    pub grace: Duration,
}

/// The signals that end a target, in order.
#[derive(Debug, Clone, Copy)]
pub struct Escalation {
    steps: &'static [Step],
}

/// What a stop has to end. Its futures need not be `Send`: a stop is awaited where it
/// started, never spawned.
#[allow(async_fn_in_trait)]
pub trait Target {
    /// The processes that are still alive and must end, parents before children.
    fn living(&mut self) -> Vec<u32>;

    /// Called before each step's signal goes to the processes (a session interrupts its
    /// shell first: with the interrupt pending when its child dies of the signal, the shell
    /// runs its trap, not the next command of the line, which it could start before an
    /// interrupt sent after the child's).
    fn signalling(&mut self, _signal: Signal) {}

    /// Waits up to `poll` and says whether the target has ended.
    async fn ended(&mut self, poll: Duration) -> bool {
        tokio::time::sleep(poll).await;
        self.living().is_empty()
    }
}

/// How a stop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The target had ended once this step's signal had been sent.
    By(Signal),
    /// Something outlived every step.
    Survived,
}

impl Stopped {
    /// Whether SIGKILL was needed (or was not enough).
    pub fn needed_kill(self) -> bool {
        !matches!(self, Stopped::By(signal) if signal != Signal::SIGKILL)
    }
}

impl Escalation {
    /// A command that ran past its timeout.
    pub const TIMEOUT: Escalation = Escalation {
        steps: &[
            Step {
                signal: Signal::SIGINT,
                grace: Duration::from_millis(300),
            },
            Step {
                signal: Signal::SIGTERM,
                grace: Duration::from_millis(500),
            },
            Step {
                signal: Signal::SIGKILL,
                grace: Duration::from_secs(1),
            },
        ],
    };

    /// A kill asked for through the API.
    pub const REQUESTED: Escalation = Escalation {
        steps: &[
            Step {
                signal: Signal::SIGTERM,
                grace: Duration::from_secs(5),
            },
            Step {
                signal: Signal::SIGKILL,
                grace: KILL_LIMIT,
            },
        ],
    };

    /// Ends `target`, step by step. A target with nothing alive ends at once, by the
    /// first step's signal (which was sent to nothing).
    pub async fn stop(&self, target: &mut impl Target) -> Stopped {
        for step in self.steps {
            let living = target.living();
            target.signalling(step.signal);
            signal_leaves_first(&living, step.signal);
            let mut signalled: HashSet<u32> = living.into_iter().collect();
            let deadline = tokio::time::Instant::now() + step.grace;
            loop {
                if target.ended(POLL).await {
                    return Stopped::By(step.signal);
                }
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                let living = target.living();
                if step.signal == Signal::SIGKILL {
                    signal_leaves_first(&living, Signal::SIGKILL);
                } else {
                    // A process forked between the walk and the signal (a shell starting its
                    // command as the kill came) gets the step's signal too, not only the next
                    // step's: otherwise a polite kill could need SIGKILL for a process that
                    // never saw SIGTERM.
                    let newcomers: Vec<u32> = living
                        .into_iter()
                        .filter(|pid| signalled.insert(*pid))
                        .collect();
                    signal_leaves_first(&newcomers, step.signal);
                }
            }
        }
        let left = target.living().len();
        tracing::warn!(left, "processes outlived every signal");
        Stopped::Survived
    }
}

/// How long SIGKILL is repeated before a stop gives up (a tree that forks faster than it
/// can be killed; never seen).
const KILL_LIMIT: Duration = Duration::from_secs(5);

/// Everything below a supervisor (a subreaper: what its command started stays below it,
/// whatever it forked or detached). The supervisor itself is left alone.
pub struct Below(pub u32);

impl Target for Below {
    fn living(&mut self) -> Vec<u32> {
        if self.0 <= 1 {
            return Vec::new();
        }
        proctree::living_below(self.0)
    }
}

/// Kills a supervisor and everything below it at once, without a runtime
/// (a `Drop`, a blocking thread). The supervisor is stopped first, so it cannot exit and
/// let what it holds be reparented away, and orphans of killed processes keep landing on
/// it; it is killed last.
pub fn kill_supervised(root: u32) {
    let Some(supervisor) = supervisor_pid(root) else {
        return;
    };
    let _ = kill(supervisor, Signal::SIGSTOP);
    kill_until_gone(|| proctree::living_below(root), || {});
    let _ = kill(supervisor, Signal::SIGKILL);
}

/// [`Escalation::TIMEOUT`] for a supervisor and everything below it: as
/// [`kill_supervised`], but politely first.
pub async fn stop_supervised(root: u32) {
    let Some(supervisor) = supervisor_pid(root) else {
        return;
    };
    let _ = kill(supervisor, Signal::SIGSTOP);
    Escalation::TIMEOUT.stop(&mut Below(root)).await;
    let _ = kill(supervisor, Signal::SIGKILL);
}

/// `root` as a pid that may be signalled (never 0 or 1).
fn supervisor_pid(root: u32) -> Option<Pid> {
    let raw = i32::try_from(root).ok().filter(|&raw| raw > 1)?;
    Some(Pid::from_raw(raw))
}

/// The SIGKILL step without a runtime: repeats SIGKILL to `living()` until it is empty,
/// calling `between` after each round (a supervisor reaps there), for at most
/// `KILL_LIMIT`. Returns whether everything ended.
pub fn kill_until_gone(mut living: impl FnMut() -> Vec<u32>, mut between: impl FnMut()) -> bool {
    let deadline = std::time::Instant::now() + KILL_LIMIT;
    loop {
        let left = living();
        if left.is_empty() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            tracing::warn!(left = left.len(), "processes survived SIGKILL");
            return false;
        }
        signal_leaves_first(&left, Signal::SIGKILL);
        between();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends `signal` to `pids` (parents before children) in reverse order, so a parent
/// does not see its children die before it is told to end itself.
fn signal_leaves_first(pids: &[u32], signal: Signal) {
    let reversed: Vec<u32> = pids.iter().rev().copied().collect();
    proctree::signal_all(&reversed, signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(script: &str) -> std::process::Child {
        std::process::Command::new("bash")
            .args(["-c", script])
            .spawn()
            .unwrap()
    }

    /// A process and what runs below it.
    struct AndBelow(u32);

    impl Target for AndBelow {
        fn living(&mut self) -> Vec<u32> {
            proctree::alive(self.0)
                .then_some(self.0)
                .into_iter()
                .chain(proctree::living_below(self.0))
                .collect()
        }
    }

    /// Waits until `pid` has `count` living descendants.
    fn wait_for_descendants(pid: u32, count: usize) {
        for _ in 0..300 {
            if proctree::living_below(pid).len() >= count {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{pid} never had {count} descendants");
    }

    #[tokio::test]
    async fn a_polite_tree_ends_by_the_first_signal() {
        let mut parent = spawn("sleep 30 & sleep 30 & wait");
        wait_for_descendants(parent.id(), 2);
        let stopped = Escalation::REQUESTED.stop(&mut Below(parent.id())).await;
        assert_eq!(stopped, Stopped::By(Signal::SIGTERM));
        assert!(!stopped.needed_kill());
        assert!(Below(parent.id()).living().is_empty());
        parent.kill().unwrap();
        parent.wait().unwrap();
    }

    /// A process started after the step's signal went out (here by the parent's TERM
    /// handler) gets that signal too, so a tree that would end politely does.
    #[tokio::test]
    async fn a_process_forked_after_the_signal_gets_it_too() {
        let mut parent = spawn("trap 'sleep 30 &' TERM; sleep 30 & wait; wait");
        wait_for_descendants(parent.id(), 1);
        let stopped = Escalation::REQUESTED.stop(&mut AndBelow(parent.id())).await;
        assert_eq!(stopped, Stopped::By(Signal::SIGTERM));
        let _ = parent.wait();
    }

    #[tokio::test]
    async fn a_tree_that_ignores_int_and_term_ends_by_kill() {
        let mut parent = spawn("bash -c 'trap \"\" INT TERM; sleep 30 & wait' & wait");
        wait_for_descendants(parent.id(), 2);
        let stopped = Escalation::TIMEOUT.stop(&mut Below(parent.id())).await;
        assert_eq!(stopped, Stopped::By(Signal::SIGKILL));
        assert!(stopped.needed_kill());
        assert!(Below(parent.id()).living().is_empty());
        parent.kill().unwrap();
        parent.wait().unwrap();
    }

    #[test]
    fn kill_until_gone_ends_a_tree_without_a_runtime() {
        let mut parent = spawn("trap '' TERM; sleep 30 & sleep 30 & wait");
        wait_for_descendants(parent.id(), 2);
        let root = parent.id();
        assert!(kill_until_gone(|| proctree::living_below(root), || {}));
        parent.kill().unwrap();
        parent.wait().unwrap();
    }

    #[test]
    fn the_strengths_escalate_to_kill() {
        for escalation in [Escalation::TIMEOUT, Escalation::REQUESTED] {
            let last = escalation.steps.last().map(|step| step.signal);
            assert_eq!(last, Some(Signal::SIGKILL));
        }
    }
}
