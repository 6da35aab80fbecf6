//! Structured logs on stderr: human text by default, one JSON object per line with `json`.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub fn init(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|err| {
        say!("fsd: bad log filter {filter:?} ({err}); using `info`");
        EnvFilter::new("info")
    });
    // Colours only for a terminal, and never with NO_COLOR set: files and container logs
    // get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        // A log line that cannot be written (stderr a pipe whose reader has gone, as after
        // Ctrl-C on `fsd serve 2>&1 | tee log`) is dropped: the default reports it with
        // `eprintln!`, which panics on the same closed stderr.
        .log_internal_errors(false);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
