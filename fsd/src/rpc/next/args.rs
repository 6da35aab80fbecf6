//! Reading the next line's arguments and shaping its results and errors: positional
//! arguments, option objects whose absent members may be `undefined`, results with every
//! array wrapped, errors as `Error`s with `code` and `details` (docs/api.md, RPC: errors).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::{Session, Target};
use crate::capnweb::subscription::{Source, Subscription};
pub use crate::rpc::api::api_error;
use crate::rpc::api::invalid;

pub type Answer = Result<Value, Value>;

/// The string argument at `index`, or the 0.12 methods' validation error naming it.
pub fn string(args: &[Arg], index: usize, name: &str) -> Result<String, Value> {
    match args.get(index) {
        Some(Arg::Json(Value::String(text))) => Ok(text.clone()),
        _ => Err(invalid(name, "must be a string")),
    }
}

/// The string argument at `index`, taken out of `args` (a file's content is not copied).
pub fn take_string(args: &mut [Arg], index: usize, name: &str) -> Result<String, Value> {
    match args.get_mut(index) {
        Some(Arg::Json(Value::String(text))) => Ok(std::mem::take(text)),
        _ => Err(invalid(name, "must be a string")),
    }
}

/// The options object at `index`: empty when absent or `undefined`; `None` when it is
/// something else.
pub fn options(args: &[Arg], index: usize) -> Option<Map<String, Value>> {
    match args.get(index) {
        None | Some(Arg::Undefined) | Some(Arg::Json(Value::Null)) => Some(Map::new()),
        Some(Arg::Json(Value::Object(options))) => Some(options.clone()),
        Some(_) => None,
    }
}

/// A boolean field of the options object at `index` (absent: false).
pub fn flag(args: &[Arg], index: usize, name: &str) -> bool {
    options(args, index)
        .and_then(|options| options.get(name).and_then(Value::as_bool))
        .unwrap_or(false)
}

/// A result as the wire carries it.
pub fn value(result: impl Serialize) -> Value {
    let json = serde_json::to_value(result).unwrap_or_else(|_| Value::Object(Map::new()));
    capnweb::from_json(json)
}

/// An error with a registry `code` and its `details`.
pub fn coded(code: &str, message: &str, details: Value) -> Value {
    capnweb::sandbox_error(message, code, &details)
}

/// Exports a subscription over `source` and answers with it.
pub fn subscription(session: &Arc<Session>, source: Source) -> Answer {
    let target: Arc<dyn Target> = Subscription::new(source);
    session.export(target)
}
