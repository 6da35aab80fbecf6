//! A log on disk as the next line's object reads one (processes' and terminals'): a
//! subscription from the event after `since` when replaying (every kept event without
//! `since`), or from what comes next; through the end as it is at subscription time, or
//! live through the terminal event when following a source that has not ended.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat};
use fsd_process::seqlog::{Entry, Kind, SequencedLog};
use fsd_process::seqlog::{Until, follow};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::args::{Answer, subscription};
use crate::capnweb::protocol as capnweb;
use crate::capnweb::session::Session;
use crate::capnweb::subscription::Source;

/// `{since, replay = true, follow = false}` over `log`, each entry shaped by `event`;
/// a cursor that is not this log's is refused with `cursor_error(cursor, reason)`.
pub fn subscribe(
    session: &Arc<Session>,
    log: Arc<SequencedLog>,
    options: &Map<String, Value>,
    ended: bool,
    cursor_error: impl Fn(Value, &str) -> Value,
    event: impl Fn(&SequencedLog, Entry) -> Value + Send + 'static,
) -> Answer {
    let replay = options
        .get("replay")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let live = options
        .get("follow")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let since = match options.get("since") {
        None => None,
        Some(Value::String(text)) if !text.is_empty() => Some(
            log.parse_cursor(text)
                .map_err(|error| cursor_error(json!(text), &error.to_string()))?,
        ),
        Some(other) => {
            return Err(cursor_error(
                other.clone(),
                "cursor must be a non-empty string",
            ));
        }
    };
    let end = log.end();
    let from = if replay {
        since.unwrap_or(0) + 1
    } else {
        end + 1
    };
    let until = if live && !ended {
        Until::Terminal
    } else {
        Until::Seq(end)
    };
    let events = follow(Arc::clone(&log), from, until).map(move |entry| event(&log, entry));
    subscription(session, Source::Objects(events.boxed()))
}

/// One log entry as the object's event: `truncated`; an output event typed by `output`
/// (`stdout`/`stderr` for processes, `data` for terminals) with its bytes; or the final
/// `terminal` event with how the source ended. `owner` (the terminal's id) goes in each.
pub fn event(
    log: &SequencedLog,
    entry: Entry,
    output: fn(Kind) -> &'static str,
    owner: Option<(&str, &str)>,
) -> Value {
    let mut event = Map::new();
    let record = match entry {
        Entry::Truncated => {
            event.insert("type".into(), json!("truncated"));
            event.insert("timestamp".into(), json!(crate::time::now_rfc3339()));
            if let Some((key, id)) = owner {
                event.insert(key.into(), json!(id));
            }
            return Value::Object(event);
        }
        Entry::Record(record) => record,
    };
    let timestamp = DateTime::from_timestamp_millis(record.at_ms)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default();
    let kind = record.kind;
    event.insert(
        "type".into(),
        json!(if kind == Kind::Terminal {
            "terminal"
        } else {
            output(kind)
        }),
    );
    if let Some((key, id)) = owner {
        event.insert(key.into(), json!(id));
    }
    event.insert("cursor".into(), json!(log.cursor(record.seq)));
    event.insert("timestamp".into(), json!(timestamp));
    if kind == Kind::Terminal {
        let end: Map<String, Value> = serde_json::from_slice(&record.data).unwrap_or_default();
        for (key, value) in end {
            event.insert(key, capnweb::from_json(value));
        }
    } else {
        event.insert("data".into(), capnweb::bytes_expr(&record.data));
    }
    Value::Object(event)
}
