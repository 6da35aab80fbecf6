//! A session's shell names the file it ran when it reports an error: the command's own
//! (`…/sessions/N/0/command.sh: line 2: foo: command not found`, a background one's
//! `cmd-7.sh`) or the driver's (`driver.sh: eval: line 11:` for a syntax error, which the
//! driver finds by reading the command as a function body). Those are fsd's files, not the
//! user's: stderr says `bash: line 2: foo: command not found` instead, as `bash -c` would,
//! and a syntax error's line is the command's own. Only a line that starts with the
//! session's directory is touched, so a program's own output passes as it was.

use std::path::Path;

/// The line of the driver that `eval`s each command line (see `script::driver`): bash
/// numbers a line inside `eval` from it.
pub const DRIVER_EVAL_LINE: u64 = 11;

/// What bash puts in place of a script's name when it runs a command line itself.
const SHELL: &[u8] = b"bash: ";

/// Digits of a line number, at most.
const LINE_DIGITS: usize = 20;

/// Rewrites the names of a session's scripts at the start of each line of a stream that
/// comes in pieces; a line's start that may still become one is held until it can be
/// told.
pub struct ScriptNames {
    /// The session's directory, with a slash after it.
    dir: Vec<u8>,
    /// The start of a line not yet told apart.
    held: Vec<u8>,
    /// Whether the next byte starts a line.
    at_line_start: bool,
}

/// One of the shapes a script's name takes before a message.
#[derive(Clone, Copy)]
enum Token {
    Text(&'static [u8]),
    Number,
}

/// How the start of a line compares with a shape.
enum Fit {
    /// It is that shape: its length, and the number in it (if any).
    Whole(usize, Option<u64>),
    /// The line so far could still become it.
    Partly,
    No,
}

impl ScriptNames {
    /// For the output files of the session whose directory is `dir`.
    pub fn new(dir: &Path) -> Self {
        let mut dir = dir.as_os_str().as_encoded_bytes().to_vec();
        dir.push(b'/');
        Self {
            dir,
            held: Vec::new(),
            at_line_start: true,
        }
    }

    /// For an output file: its session's directory is where it lies.
    pub fn beside(output: &Path) -> Option<Self> {
        output.parent().map(Self::new)
    }

    /// What the stream says so far, rewritten; a line's start that may still be a script's
    /// name is held back.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let input = match self.held.is_empty() {
            true => bytes.to_vec(),
            false => {
                let mut input = std::mem::take(&mut self.held);
                input.extend_from_slice(bytes);
                input
            }
        };
        let mut out = Vec::with_capacity(input.len());
        let mut at = 0;
        while at < input.len() {
            if self.at_line_start {
                match self.classify(&input[at..]) {
                    LineStart::Rewritten(replacement, taken) => {
                        out.extend_from_slice(&replacement);
                        at += taken;
                    }
                    LineStart::Wait => {
                        self.held = input[at..].to_vec();
                        return out;
                    }
                    LineStart::Pass => {}
                }
            }
            match input[at..].iter().position(|&byte| byte == b'\n') {
                Some(newline) => {
                    out.extend_from_slice(&input[at..at + newline + 1]);
                    at += newline + 1;
                    self.at_line_start = true;
                }
                None => {
                    out.extend_from_slice(&input[at..]);
                    at = input.len();
                    self.at_line_start = false;
                }
            }
        }
        out
    }

    /// What is held back, as it is: the stream has ended.
    pub fn finish(&mut self) -> Vec<u8> {
        self.at_line_start = true;
        std::mem::take(&mut self.held)
    }

    /// A whole output rewritten.
    pub fn rewrite_all(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = self.push(bytes);
        out.extend(self.finish());
        out
    }

    /// What a session's stderr file `stderr` held, read whole, rewritten.
    pub fn rewrite_read(stderr: &Path, bytes: Vec<u8>) -> Vec<u8> {
        match Self::beside(stderr) {
            Some(mut names) => names.rewrite_all(&bytes),
            None => bytes,
        }
    }

    /// What the start of `line` is: a script's name (its replacement and how many bytes
    /// it replaces), the start of one that may still come (no newline yet), or neither.
    fn classify(&self, line: &[u8]) -> LineStart {
        let Some(after) = line.strip_prefix(self.dir.as_slice()) else {
            return match self.dir.starts_with(line) {
                true => LineStart::Wait,
                false => LineStart::Pass,
            };
        };
        for (shape, replaced) in SHAPES {
            // The shapes are tried longest first: one that may still come waits.
            let (taken, number) = match fit(after, shape) {
                Fit::Whole(taken, number) => (taken, number),
                Fit::Partly => return LineStart::Wait,
                Fit::No => continue,
            };
            let replacement = match (replaced, number) {
                // A syntax error's line, counted in the command (the driver's `eval` counts
                // from its own line).
                (Replaced::EvalLine(after), Some(line)) if line >= DRIVER_EVAL_LINE => {
                    format!("bash: line {}: {after}", line - DRIVER_EVAL_LINE + 1).into_bytes()
                }
                (Replaced::EvalLine(_), _) => return LineStart::Pass,
                (Replaced::Shell, _) => SHELL.to_vec(),
            };
            return LineStart::Rewritten(replacement, self.dir.len() + taken);
        }
        LineStart::Pass
    }
}

/// What the start of a line is (see [`ScriptNames::classify`]).
enum LineStart {
    Rewritten(Vec<u8>, usize),
    Wait,
    Pass,
}

/// What a shape's text becomes.
#[derive(Clone, Copy)]
enum Replaced {
    /// `bash: `.
    Shell,
    /// `bash: line N: ` and this, N the line in the command.
    EvalLine(&'static str),
}

/// The names a session's shell reports, after the session's directory.
const SHAPES: &[(&[Token], Replaced)] = &[
    // A foreground command, sourced.
    (&[Token::Text(b"command.sh: ")], Replaced::Shell),
    // A background command, sourced.
    (
        &[Token::Text(b"cmd-"), Token::Number, Token::Text(b".sh: ")],
        Replaced::Shell,
    ),
    // A syntax error on the command's first line, which bash quotes as the check read it
    // (a function body).
    (
        &[
            Token::Text(b"driver.sh: eval: line "),
            Token::Number,
            Token::Text(b": `__fsd_check() { "),
        ],
        Replaced::EvalLine("`"),
    ),
    // A syntax error, found by the driver's check.
    (
        &[
            Token::Text(b"driver.sh: eval: line "),
            Token::Number,
            Token::Text(b": "),
        ],
        Replaced::EvalLine(""),
    ),
    // The driver's own line (a `cd` to the command's directory): its number says nothing.
    (
        &[
            Token::Text(b"driver.sh: line "),
            Token::Number,
            Token::Text(b": "),
        ],
        Replaced::Shell,
    ),
];

/// How `input` compares with `shape`.
fn fit(input: &[u8], shape: &[Token]) -> Fit {
    let mut at = 0;
    let mut number = None;
    for token in shape {
        let rest = &input[at..];
        match token {
            Token::Text(text) => {
                if rest.len() < text.len() {
                    return match text.starts_with(rest) {
                        true => Fit::Partly,
                        false => Fit::No,
                    };
                }
                if !rest.starts_with(text) {
                    return Fit::No;
                }
                at += text.len();
            }
            Token::Number => {
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                if digits == rest.len() && digits < LINE_DIGITS {
                    return Fit::Partly;
                }
                if digits == 0 || digits >= LINE_DIGITS {
                    return Fit::No;
                }
                number = std::str::from_utf8(&rest[..digits])
                    .ok()
                    .and_then(|text| text.parse().ok());
                at += digits;
            }
        }
    }
    Fit::Whole(at, number)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "/state/sessions/14/0";

    fn names() -> ScriptNames {
        ScriptNames::new(Path::new(DIR))
    }

    #[test]
    fn script_names_read_as_bash() {
        let text = format!(
            "{DIR}/command.sh: line 2: foo: command not found\n\
             {DIR}/cmd-17.sh: line 1: cd: /x: No such file or directory\n\
             {DIR}/driver.sh: eval: line 13: syntax error near unexpected token `;'\n\
             {DIR}/driver.sh: eval: line 11: `__fsd_check() {{ echo hi; if ( ; then'\n\
             {DIR}/driver.sh: line 11: cd: /gone: No such file or directory\n\
             ls: cannot access '{DIR}/command.sh': No such file or directory\n\
             /state/sessions/14/1/command.sh: line 1: another session's\n"
        );
        let out = String::from_utf8(names().rewrite_all(text.as_bytes())).unwrap();
        assert_eq!(
            out,
            format!(
                "bash: line 2: foo: command not found\n\
                 bash: line 1: cd: /x: No such file or directory\n\
                 bash: line 3: syntax error near unexpected token `;'\n\
                 bash: line 1: `echo hi; if ( ; then'\n\
                 bash: cd: /gone: No such file or directory\n\
                 ls: cannot access '{DIR}/command.sh': No such file or directory\n\
                 /state/sessions/14/1/command.sh: line 1: another session's\n"
            )
        );
    }

    #[test]
    fn a_name_cut_between_pieces_is_rewritten_whole() {
        let text = format!(
            "ok\n{DIR}/driver.sh: eval: line 12: `if ( ; then'\n\
             {DIR}/driver.sh: eval: line 11: `__fsd_check() {{ if'\nend"
        );
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut names = names();
            let mut out = names.push(&bytes[..cut]);
            out.extend(names.push(&bytes[cut..]));
            out.extend(names.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "ok\nbash: line 2: `if ( ; then'\nbash: line 1: `if'\nend",
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn what_only_looks_like_a_name_passes_as_it_was() {
        for text in [
            format!("{DIR}/command.shx: no\n"),
            format!("{DIR}/cmd-.sh: no\n"),
            format!("{DIR}/driver.sh: eval: line x: no\n"),
            format!("x{DIR}/command.sh: no\n"),
            format!("{DIR}/comm"),
            DIR[..5].to_string(),
        ] {
            let mut names = names();
            let mut out = names.push(text.as_bytes());
            out.extend(names.finish());
            assert_eq!(String::from_utf8(out).unwrap(), text);
        }
    }

    #[test]
    fn a_line_started_is_not_held() {
        let mut names = names();
        assert_eq!(names.push(b"prompt> "), b"prompt> ");
        assert_eq!(names.push(DIR.as_bytes()), DIR.as_bytes());
        // A prefix of the directory at a line's start waits for what follows it.
        assert_eq!(names.push(b"\n/sta"), b"\n");
        assert_eq!(names.push(b"rt\n"), b"/start\n");
    }
}
