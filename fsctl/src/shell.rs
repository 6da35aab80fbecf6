//! `fsctl shell`: an interactive terminal in the sandbox, as `docker exec -it` gives one:
//! the local terminal in raw mode (so Ctrl-C and every key reach the remote shell), window
//! size changes forwarded, the remote shell's exit code returned, the local terminal
//! restored however fsctl ends.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::process::ExitCode;

use fsd_sdk::{Sandbox, SdkError, TerminalEvent};
use nix::sys::termios::{self, SetArg, Termios};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

#[derive(Debug, clap::Args)]
pub struct ShellArgs {
    /// The session whose terminal to open (its shell starts from the session's state).
    #[arg(long, default_value = "default")]
    session: String,
}

pub async fn run(sandbox: &Sandbox, args: ShellArgs) -> Result<ExitCode, SdkError> {
    let (cols, rows) = window_size();
    let terminal = sandbox.terminal(&args.session, cols, rows).await?;
    let (mut writer, mut reader) = terminal.split();
    // A shell that already ran keeps its size until told: this window's is the one now.
    writer.resize(cols, rows).await?;
    let _raw = RawMode::enter();
    let mut keys = stdin_chunks(4096);
    let mut resized = signal(SignalKind::window_change())?;
    let mut stdout = std::io::stdout();
    loop {
        tokio::select! {
            event = reader.next() => match event {
                Some(TerminalEvent::Output(bytes)) => {
                    stdout.write_all(&bytes)?;
                    stdout.flush()?;
                }
                Some(TerminalEvent::Exit { code, .. }) => {
                    return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
                }
                Some(TerminalEvent::Error(message)) => {
                    warn(&message);
                }
                None => {
                    return Err(SdkError::Terminal("the connection closed".into()));
                }
            },
            chunk = keys.recv() => match chunk {
                Some(bytes) => writer.write(&bytes).await?,
                // Local input ended (a pipe): the remote shell reads end of file.
                None => writer.write(&[0x04]).await?,
            },
            _ = resized.recv() => {
                let (cols, rows) = window_size();
                writer.resize(cols, rows).await?;
            }
        }
    }
}

/// The local window's size, or 80×24 when stdout is not a terminal.
fn window_size() -> (u16, u16) {
    let mut size = nix::pty::Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills the struct it is given.
    let ok = unsafe { nix::libc::ioctl(1, nix::libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 && size.ws_row > 0 {
        (size.ws_col, size.ws_row)
    } else {
        (80, 24)
    }
}

/// Reads stdin on a thread of its own (a blocked read must not hold the runtime at exit),
/// up to `chunk` bytes a read; the channel closes at end of file.
pub fn stdin_chunks(chunk: usize) -> mpsc::Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel(64);
    let _ = std::thread::Builder::new()
        .name("fsctl-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin();
            let mut buffer = vec![0u8; chunk];
            loop {
                match stdin.read(&mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(read) => {
                        if sender.blocking_send(buffer[..read].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
    receiver
}

/// The local terminal in raw mode while this lives (nothing when stdin is not a terminal).
struct RawMode {
    saved: Option<Termios>,
}

impl RawMode {
    fn enter() -> RawMode {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(saved) = &saved {
            let mut raw = saved.clone();
            termios::cfmakeraw(&mut raw);
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
        }
        RawMode { saved }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: fd 0 is open for the life of the process.
            let stdin = unsafe { BorrowedFd::borrow_raw(0) };
            let _ = termios::tcsetattr(stdin, SetArg::TCSANOW, saved);
        }
    }
}

/// A refused control message: said on stderr, on a line of its own (raw mode needs `\r`).
fn warn(message: &str) {
    let _ = write!(std::io::stderr(), "\r\nfsctl shell: {message}\r\n");
}
