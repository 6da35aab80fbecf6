//! The bash text fsd gives a session shell. Pure string building, unit-tested here.
//!
//! The shell runs a small driver script (a file, because bash only runs an INT trap inside
//! a builtin loop when it reads its script from a file, not from a pipe). The driver reads
//! one length-framed line at a time from the commands FIFO (fd 8) and `eval`s it. A
//! foreground command is written to the session's script file (a background one to its
//! own) and run with `builtin source` inside an `if`, in the shell itself, so `cd`,
//! `export`, functions and aliases persist; stdin is `/dev/null` unless the request gave
//! content (a file) or asked for a pipe (a FIFO the daemon writes).
//! Reports go to the control FIFO (fd 9); the command never sees fds 8 and 9.

use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};

pub use fsd_api::exec::quote;

/// The width of the decimal length that precedes each command line on the commands FIFO.
const FRAME_DIGITS: usize = 8;

/// A command line as the driver reads it: its length in `FRAME_DIGITS` digits, then the
/// line. Bash reads a pipe one byte per system call to find a newline, and a command line
/// is hundreds of bytes; with `read -N` it takes two reads whatever its length.
pub fn frame(line: &str) -> String {
    debug_assert!(line.is_ascii());
    format!("{:0width$}{line}", line.len(), width = FRAME_DIGITS)
}

fn quote_path(path: &Path) -> String {
    quote(&path.to_string_lossy())
}

/// Where a command in a session's shell runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workdir {
    pub dir: PathBuf,
    /// Under `--confine`: a root and how many levels below it `dir` (then a real path) is.
    /// Once there, the shell checks that many `..` up from where it stands is the root, by
    /// device and inode: the kernel's answer of where the shell is, so a link swapped in
    /// for a directory on the way, which `cd` would have followed, is caught before the
    /// command runs.
    pub beneath: Option<(PathBuf, usize)>,
}

impl Workdir {
    /// Shell text that enters the directory and succeeds only when it is where it must be;
    /// else it says so on stderr and reports `outside JOB` to the daemon (the shell may
    /// have moved).
    fn enter(&self, job: u64) -> String {
        let dir = quote_path(&self.dir);
        let Some((root, depth)) = &self.beneath else {
            return format!("builtin cd -- {dir}");
        };
        let up = match depth {
            0 => ".".to_string(),
            n => vec![".."; *n].join("/"),
        };
        let refused = quote(&format!(
            "fsd: {}: outside the allowed roots",
            self.dir.display()
        ));
        format!(
            "{{ builtin cd -- {dir} && {{ [[ {up} -ef {root} ]] || {{ builtin printf '%s\\n' {refused} >&2; \
             builtin printf 'outside {job} 0\\n' >>\"$__fsd_ctl\"; false; }}; }}; }}",
            root = quote_path(root),
        )
    }
}

/// Shell text that takes a session's shell back into its directory by name when the name
/// has come to lead elsewhere: a restore mounted on the directory (or on one above it), a
/// release taking one away, a directory put in its place. The shell's own directory is the
/// one it entered, which a mount hides: a command run there would read the files the
/// restore replaced and write where nothing shows them. Run before each command (two
/// `stat`s when nothing moved); a name that leads nowhere leaves the shell where it is.
const REENTER: &str = "{ [[ . -ef $PWD ]] || builtin cd -- \"$PWD\" 2>/dev/null || :; }; ";

/// Environment variable names bash can export.
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The driver script.
///
/// - The ERR trap turns `set -e` into "stop this command" instead of "kill the session":
///   bash runs the ERR trap before an errexit exit, and `return` there unwinds the sourced
///   file (errtrace makes functions inherit the trap). `$?` is saved first because the
///   test overwrites it.
/// - The INT trap lets the daemon stop a command that runs inside the shell itself (a loop
///   of builtins). Its `return` abandons the rest of the command line, so the trap reports
///   the job done itself, reopening the control FIFO by path (fd 9 is closed for commands).
///   Every command line installs it afresh: once the trap has run while bash waited for a
///   child, bash no longer calls it for the next SIGINT (seen with bash 5.2).
pub fn driver(control: &Path, commands: &Path, start_dir: Option<&Path>) -> String {
    let control = quote_path(control);
    let start = match start_dir {
        Some(dir) => format!(
            "builtin cd -- {} 2>/dev/null || builtin cd\n",
            quote_path(dir)
        ),
        // A line either way: bash numbers the lines of a command's syntax check from the
        // loop's (see `script_names`).
        None => ":\n".to_string(),
    };
    format!(
        "__fsd_nl=$'\\n'\n\
         __fsd_job=0\n\
         exec 9>>{control} 8<{commands} || exit 97\n\
         set -E\n\
         shopt -s expand_aliases\n\
         trap '__fsd_s=$?; [[ $- == *e* ]] && builtin return $__fsd_s 2>/dev/null' ERR\n\
         __fsd_ctl={control}\n\
         __fsd_on_int='[[ $__fsd_job != 0 ]] && builtin printf \"done %s 130\\n\" \"$__fsd_job\" >>{control}; \
         __fsd_job=0; builtin return 130 2>/dev/null'\n\
         {start}\
         builtin printf 'ready\\n' >&9\n\
         while IFS= builtin read -r -N {digits} __fsd_n <&8 && \
         IFS= builtin read -r -N \"$((10#$__fsd_n))\" __fsd_line <&8; do builtin eval \"$__fsd_line\"; done\n",
        digits = FRAME_DIGITS,
        commands = quote_path(commands),
    )
}

/// Where one command's files live.
pub struct JobFiles<'a> {
    pub script: &'a Path,
    pub stdout: &'a Path,
    pub stderr: &'a Path,
    /// What the command reads on stdin (a file of content, or a FIFO the daemon writes);
    /// `/dev/null` when `None`.
    pub stdin: Option<&'a Path>,
}

impl JobFiles<'_> {
    /// The stdin redirection of a command the session's shell execs (a background one's
    /// supervisor): a file the daemon gave is opened read-write on a descriptor of its own
    /// first and that one closed at once. For a FIFO, the read-only open beside it then
    /// never waits for a writer (the daemon may have closed its end already; what it wrote
    /// waits in the pipe), and the command's end of file still comes when the daemon's end
    /// closes (an exec's redirections are not undone, so the shell keeps no copy).
    fn exec_stdin(&self) -> String {
        match self.stdin {
            Some(path) => {
                let path = quote_path(path);
                format!("61<>{path} <{path} 61>&-")
            }
            None => "</dev/null".to_string(),
        }
    }

    /// The same for a command the shell runs itself, in three parts: opened before (the
    /// shell's own descriptor 60, read-only; the read-write one that kept its open from
    /// waiting is closed at once), the command's redirection from it, and closed after. A
    /// redirection on the command itself would keep a copy of the read-write descriptor in
    /// the shell, to restore it afterwards, and the command would never see end of file.
    /// (`command exec`, not `builtin exec`: a builtin's redirections are undone after it,
    /// an exec's are not, and `command` passes over a function named `exec`.)
    fn shell_stdin(&self) -> (String, String, &'static str) {
        match self.stdin {
            Some(path) => {
                let path = quote_path(path);
                (
                    format!("command exec 61<>{path} 60<{path} 61>&-; "),
                    "<&60 60<&-".to_string(),
                    "command exec 60<&-; ",
                )
            }
            None => (String::new(), "</dev/null".to_string(), ""),
        }
    }
}

/// Per-command variables: set before, restored (or unset) after. Names must be valid.
fn env_set(env: &[(String, String)]) -> (String, String) {
    let mut set = String::new();
    let mut restore = String::new();
    for (name, value) in env {
        set.push_str(&format!(
            "__fsd_h_{name}=${{{name}+x}}; __fsd_o_{name}=${{{name}-}}; export {name}={}; ",
            quote(value)
        ));
        restore.push_str(&format!(
            "if [[ -n $__fsd_h_{name} ]]; then {name}=$__fsd_o_{name}; else unset {name}; fi; \
             unset __fsd_h_{name} __fsd_o_{name}; "
        ));
    }
    (set, restore)
}

/// A foreground command, run in the shell itself; reports `done <job> <status>`.
///
/// The command is first parsed as a function body (its text comes in the line, which is
/// cheaper for bash than reading the file): a syntax error (an unterminated quote) then
/// fails that `eval` with status 2 instead of killing the shell, and nothing runs.
/// With `set -e` on, bash exits on a parse error even inside `eval`, so then the check runs
/// in a subshell (one fork, only in that case).
/// With `cwd`, the shell changes there for the command and back afterwards, so a `cd`
/// inside the command does not persist (as in the reference).
/// The output files are empty when the line starts (fresh, or kept empty from the command
/// before; see `output`) and are opened without truncating: truncating a file and writing
/// it makes ext4 and XFS flush it at close, 150 µs per command on this machine.
pub fn foreground(
    job: u64,
    command: &str,
    files: &JobFiles<'_>,
    cwd: Option<&Workdir>,
    env: &[(String, String)],
) -> String {
    let script = quote_path(files.script);
    let err = quote_path(files.stderr);
    let text = quote(command);
    let (set, restore) = env_set(env);
    let run =
        format!("{set}if builtin source {script}; then __fsd_r=0; else __fsd_r=$?; fi; {restore}");
    // A refused directory may have been entered (its check comes after the `cd`): the shell
    // goes back either way.
    let run = match cwd {
        Some(dir) => format!(
            "__fsd_p=$PWD; if {enter}; then {run}builtin cd -- \"$__fsd_p\" 2>/dev/null || :; \
             else __fsd_r=1; builtin cd -- \"$__fsd_p\" 2>/dev/null || :; fi; ",
            enter = dir.enter(job),
        ),
        None => run,
    };
    // One set of redirections for the check, the `cd` and the command: bash saves and
    // restores every descriptor a redirection touches (about ten system calls each), and
    // they were most of its system calls per command.
    let (open_stdin, stdin, close_stdin) = files.shell_stdin();
    format!(
        "{REENTER}builtin trap \"$__fsd_on_int\" INT; __fsd_job={job}; __fsd_e=${{-//[^e]/}}; \
         __fsd_c={text}; __fsd_c=\"__fsd_check() {{ $__fsd_c${{__fsd_nl}}}}\"; {open_stdin}\
         {{ if {{ if [[ -n $__fsd_e ]]; then ( builtin eval \"$__fsd_c\" ); else builtin eval \"$__fsd_c\"; fi; }}; \
         then builtin unset -f __fsd_check; builtin unset __fsd_c; {run}else __fsd_r=2; fi; }} \
         {stdin} 1<>{out} 2>>{err} 9>&- 8<&-; {close_stdin}\
         __fsd_job=0; builtin printf 'done {job} %d\\n' \"$__fsd_r\" >&9\n",
        out = quote_path(files.stdout),
    )
}

/// Where a background command's supervisor comes from and reports to.
pub struct Supervision<'a> {
    /// The fsd binary (run as `fsd supervise`).
    pub exe: &'a Path,
    /// The session's control FIFO.
    pub control: &'a Path,
    /// Where the session's state is written for the command's shell to load.
    pub state: &'a Path,
}

/// A background command. A subshell of the session (so it starts from the session's state
/// and changes nothing in it) writes that state to a file (variables, functions, aliases,
/// options), then becomes `fsd supervise`, a child subreaper, which starts a fresh bash that
/// loads the state and runs the command. Everything the command starts, even through
/// `setsid` and a double fork, stays below the supervisor, which reports `pid <job> <pid>`
/// and `exit <job> <status>` (128+N when killed by signal N) and stays while anything the
/// command left running is alive. Loading the state drops errors (readonly variables).
pub fn background(
    job: u64,
    files: &JobFiles<'_>,
    cwd: Option<&Workdir>,
    env: &[(String, String)],
    supervision: &Supervision<'_>,
) -> String {
    let err = quote_path(files.stderr);
    let control = quote_path(supervision.control);
    let state = quote_path(supervision.state);
    let cd = match cwd {
        Some(dir) => format!(
            "{enter} 2>>{err} || {{ builtin printf 'exit {job} 1\\n' >>{control}; builtin exit 1; }}; ",
            enter = dir.enter(job),
        ),
        None => String::new(),
    };
    let exports: String = env
        .iter()
        .map(|(name, value)| format!("export {name}={}; ", quote(value)))
        .collect();
    let load = quote(&format!(
        "builtin source \"$1\" 2>/dev/null || :; __fsd_s=$2; __fsd_g=$1{SIGNAL_FLAG}; builtin set --; {}builtin source \"$__fsd_s\"",
        signal_traps()
    ));
    format!(
        "{{ {REENTER}{cd}{exports}\
         {{ builtin declare -p; builtin declare -f; builtin alias -p; builtin shopt -p; builtin set +o; }} >{state} 2>/dev/null; \
         builtin shopt -s execfail; \
         builtin exec {exe} supervise --report {control} --job {job} --on-exit linger -- \
         bash --norc --noprofile -c {load} bash {state} {script} {stdin} >{out} 2>>{err}; \
         builtin printf 'exit {job} 127\\n' >>{control}; }} 8<&- 9>&- &\n",
        exe = quote_path(supervision.exe),
        stdin = files.exec_stdin(),
        script = quote_path(files.script),
        out = quote_path(files.stdout),
    )
}

/// The polite signals the shell that runs a background command traps (see
/// [`signal_traps`]).
pub const TRAPPED_SIGNALS: [(&str, Signal); 6] = [
    ("HUP", Signal::SIGHUP),
    ("INT", Signal::SIGINT),
    ("QUIT", Signal::SIGQUIT),
    ("USR1", Signal::SIGUSR1),
    ("USR2", Signal::SIGUSR2),
    ("TERM", Signal::SIGTERM),
];

/// What is added to a background job's state file's path to name its signal flag.
const SIGNAL_FLAG: &str = ".signalled";

/// The file a background command's shell reads when a trapped signal comes: the number of a
/// signal sent while the shell ran no command, which it is to die of (see
/// [`signal_traps`]).
pub fn signal_flag(state: &Path) -> PathBuf {
    let mut path = state.as_os_str().to_owned();
    path.push(SIGNAL_FLAG);
    PathBuf::from(path)
}

/// Traps for the polite signals in the shell that runs a background command: a signal sent
/// to the command's tree reaches the shell too, and a shell without a trap dies of it even
/// when the program it waits for handled it and runs on (out of reach of its record). With
/// these, a signal that comes while the shell runs a command is acted on once that command
/// has ended, and only as the command did: when the command died of that same signal, the
/// shell dies of it too (a `while` loop of `sleep`s ends on TERM, as before); otherwise it
/// carries on. One that comes while it runs no command (between two of a loop's commands)
/// it dies of, as any shell does: the daemon, which holds the shell still while it looks,
/// says so in the signal flag first (bash runs the trap at once then, with the status of a
/// command that ended before the signal, which alone would read as handled). A trap the
/// command sets itself replaces these.
fn signal_traps() -> String {
    TRAPPED_SIGNALS
        .iter()
        .map(|&(name, signal)| {
            format!(
                "builtin trap '__fsd_t=$?; __fsd_n=; builtin read -r __fsd_n 2>/dev/null <\"$__fsd_g\"; \
                 if (( __fsd_t == {} )) || [[ $__fsd_n == {} ]]; then builtin trap - {name}; \
                 builtin kill -s {name} $$; fi' {name}; ",
                128 + signal as i32,
                signal as i32
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes_and_newlines() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a\nb'c\\"), r"$'a\nb\'c\\'");
        assert!(!quote("x\u{1}y").contains('\u{1}'));
        assert_eq!(quote("é x"), r"$'\xc3\xa9 x'");
        assert_eq!(frame("true\n"), "00000005true\n");
    }

    #[test]
    fn the_driver_evals_on_its_known_line() {
        for start in [None, Some(Path::new("/w"))] {
            let text = driver(Path::new("/c"), Path::new("/f"), start);
            let line = text
                .lines()
                .position(|line| line.starts_with("while "))
                .unwrap();
            assert_eq!(line as u64 + 1, crate::script_names::DRIVER_EVAL_LINE);
        }
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_x", "PATH_2"] {
            assert!(valid_env_name(ok), "{ok}");
        }
        for bad in ["", "2A", "A-B", "A B", "é", "A=B"] {
            assert!(!valid_env_name(bad), "{bad}");
        }
    }

    #[test]
    fn command_lines_are_one_line_ending_in_a_report() {
        let files = JobFiles {
            script: Path::new("/s/cmd-3.sh"),
            stdout: Path::new("/s/out-3"),
            stderr: Path::new("/s/err-3"),
            stdin: None,
        };
        let env = [("K".to_string(), "v'1\nline".to_string())];
        let cwd = Workdir {
            dir: PathBuf::from("/w d"),
            beneath: None,
        };
        let line = foreground(3, "echo 'é'\nls", &files, Some(&cwd), &env);
        assert!(line.contains(r"__fsd_c=$'echo \'\xc3\xa9\'\nls'"), "{line}");
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(line.ends_with(">&9\n"));
        assert!(line.contains("builtin cd -- '/w d'"));
        assert!(line.contains(r"export K=$'v\'1\nline'"));
        assert!(line.contains("done 3 %d"));
        assert!(line.contains("</dev/null 1<>"), "{line}");
        let supervision = Supervision {
            exe: Path::new("/bin/fsd"),
            control: Path::new("/s/control"),
            state: Path::new("/s/state-4"),
        };
        let piped = JobFiles {
            stdin: Some(Path::new("/s/in-4")),
            ..files
        };
        let line = background(4, &piped, None, &env, &supervision);
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(
            line.contains("61<>'/s/in-4' <'/s/in-4' 61>&- >'/s/out-3'"),
            "{line}"
        );
        assert!(line.contains("--report '/s/control' --job 4"), "{line}");
        assert!(line.contains("exit 4 127"), "{line}");
    }

    /// The confined entry, run by bash: a directory beneath the root is entered; one whose
    /// real path became a link out (a swap after the daemon looked) is refused, as is one
    /// reached through a link inside at the wrong depth.
    #[test]
    fn a_confined_directory_is_entered_only_beneath_its_root() {
        let inside = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(inside.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir(outside.path().join("b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        let run = |dir: PathBuf, depth: usize| {
            let workdir = Workdir {
                dir,
                beneath: Some((root.clone(), depth)),
            };
            std::process::Command::new("bash")
                .args(["--norc", "--noprofile", "-c"])
                .arg(format!(
                    "__fsd_ctl=/dev/null; {} && builtin pwd -P",
                    workdir.enter(7)
                ))
                .output()
                .unwrap()
        };
        let entered = run(root.join("a/b"), 2);
        assert!(entered.status.success(), "{entered:?}");
        assert_eq!(
            String::from_utf8_lossy(&entered.stdout).trim(),
            root.join("a/b").to_string_lossy()
        );
        assert!(run(root.clone(), 0).status.success());
        for (dir, depth) in [(root.join("out/b"), 2), (root.join("out"), 1)] {
            let refused = run(dir, depth);
            assert!(!refused.status.success(), "{refused:?}");
            assert!(refused.stdout.is_empty());
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("outside the allowed roots"),
                "{refused:?}"
            );
        }
    }
}
