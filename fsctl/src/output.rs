//! Human and JSON output, and how errors are shown.

use fsd_sdk::SdkError;
use fsd_sdk::api::files::{FileInfo, FileStat};
use serde::Serialize;

pub fn json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(err) => say!("fsctl: cannot encode output: {err}"),
    }
}

/// One event of a stream as one line of JSON (`--json` on commands that stream).
pub fn json_line<T: Serialize>(value: &T) {
    match serde_json::to_string(value) {
        Ok(line) => println!("{line}"),
        Err(err) => say!("fsctl: {err}"),
    }
}

/// Errors go to stderr as `fsctl: CODE: message`; with `--json`, the daemon's error envelope
/// (or `{code, message}`) goes to stdout as well, for scripts.
pub fn error(err: &SdkError, as_json: bool) {
    if as_json {
        match err {
            SdkError::Api { body, .. } => json(body),
            other => {
                json(&serde_json::json!({"code": "CLIENT_ERROR", "message": other.to_string()}))
            }
        }
    }
    match err {
        SdkError::Api { body, .. } => say!("fsctl: {}: {}", body.code, body.message),
        SdkError::Transport(transport) if transport.is_connect() => say!(
            "fsctl: connection refused at {}: no daemon answers there; start one with \
             `fsctl up` (or `fsd serve`), or give its address with --url or FSD_URL",
            transport
                .url()
                .map(|url| url.origin().ascii_serialization())
                .unwrap_or_default()
        ),
        other => say!("fsctl: {other}"),
    }
}

/// `ls -l`-like lines: type and mode, size, modification time, name.
pub fn listing(files: &[FileInfo], recursive: bool) {
    for file in files {
        let kind = match file.file_type {
            fsd_sdk::api::files::FileType::Directory => 'd',
            fsd_sdk::api::files::FileType::Symlink => 'l',
            fsd_sdk::api::files::FileType::File => '-',
            fsd_sdk::api::files::FileType::Other => '?',
        };
        let name = if recursive {
            &file.relative_path
        } else {
            &file.name
        };
        let when = file
            .modified_at
            .get(..19)
            .unwrap_or(&file.modified_at)
            .replace('T', " ");
        println!("{kind}{} {:>12} {when} {name}", file.mode, file.size);
    }
}

pub fn stat(path: &str, stat: &FileStat) {
    println!("  path: {path}");
    println!("  type: {:?}", stat.file_type);
    println!("  size: {}", stat.size);
    println!("  mode: {} ({})", stat.mode, stat.mode_octal);
    println!(" owner: {}:{}", stat.uid, stat.gid);
    println!(" inode: {} (links: {})", stat.inode, stat.nlink);
    println!("modify: {}", stat.modified_at);
    println!("access: {}", stat.accessed_at);
    println!("change: {}", stat.changed_at);
    if let Some(target) = &stat.symlink_target {
        println!("target: {target}");
    }
}
