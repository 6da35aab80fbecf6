//! Keeping user commands away from the daemon: each session's shell runs as the first
//! process of its own PID namespace, with its own /proc, so commands can neither see nor
//! name (signal, ptrace) the daemon, and killing the shell kills everything it started.
//! Mount events still propagate in (`--propagation slave`), so later mounts show up.

use std::process::Stdio;

/// How session shells are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// `unshare --pid --fork --mount-proc`: its own PID namespace.
    PidNamespace,
    /// A plain child of the daemon (the host does not allow namespaces).
    None,
}

impl Isolation {
    /// Tries a namespace once; falls back to none if the host refuses.
    pub fn detect(wanted: bool) -> Self {
        if !wanted {
            return Self::None;
        }
        let trial = std::process::Command::new("unshare")
            .args(UNSHARE_ARGS)
            .args(["true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match trial {
            Ok(status) if status.success() => Self::PidNamespace,
            other => {
                tracing::warn!(
                    ?other,
                    "PID namespaces unavailable; user commands can see the daemon"
                );
                Self::None
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::PidNamespace => "pid-namespace",
            Self::None => "none",
        }
    }

    /// The program and leading arguments that run `bash ARGS…` under this isolation.
    pub fn command(self, bash_args: &[&std::ffi::OsStr]) -> tokio::process::Command {
        match self {
            Self::PidNamespace => {
                let mut command = tokio::process::Command::new("unshare");
                command.args(UNSHARE_ARGS).arg("bash").args(bash_args);
                command
            }
            Self::None => {
                let mut command = tokio::process::Command::new("bash");
                command.args(bash_args);
                command
            }
        }
    }
}

/// `--kill-child`: if the unshare process dies, its child (the shell, the namespace's init)
/// goes too, and with it every process in the namespace.
const UNSHARE_ARGS: &[&str] = &[
    "--pid",
    "--fork",
    "--mount-proc",
    "--propagation",
    "slave",
    "--kill-child",
    "--",
];
