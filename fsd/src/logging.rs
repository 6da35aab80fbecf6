//! Structured logs on stderr: human text by default, one JSON object per line with `json`.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub fn init(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|err| {
        eprintln!("fsd: bad log filter {filter:?} ({err}); using `info`");
        EnvFilter::new("info")
    });
    // Colours only for a terminal, and never with NO_COLOR set: files and container logs
    // get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
