//! capnweb 0.8's messages, as the official Sandbox object speaks it (docs/api.md, RPC): the
//! seven messages, and expressions turned into plain JSON for the methods and back. Pure;
//! the session (`session.rs`) does the I/O.

use base64_simd::STANDARD_NO_PAD;
use serde_json::{Map, Value, json};

use super::text;

/// The key a stub found inside an object is kept under, as `{EXPORT_KEY: id}`.
pub const EXPORT_KEY: &str = "$fsd.export";

/// Deepest expression read (capnweb's own cap is 64).
const MAX_DEPTH: usize = 64;

/// One message, either way.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Evaluate a call; its result is the receiver's next export.
    Push(Value),
    /// Send the settlement of import `id` once known.
    Pull(i64),
    Resolve(i64, Value),
    Reject(i64, Value),
    /// Drop `count` references to import `id`.
    Release(i64, u64),
    /// A push that is pulled at once and released by its receiver once settled (pipe writes).
    Stream(Value),
    /// A new pipe on the receiver: its writable end is the receiver's next export.
    Pipe,
    /// Fatal: the sender closes.
    Abort(Value),
}

/// Why a frame is not a message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    #[error("the frame is not JSON: {0}")]
    NotJson(String),
    #[error("the frame is not a capnweb message: {0}")]
    NotMessage(String),
    #[error("an expression nests deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("an expression is malformed: {0}")]
    BadExpression(String),
}

impl Message {
    pub fn parse(text: &str) -> Result<Message, WireError> {
        let value = text::parse(text).map_err(|error| WireError::NotJson(error.to_string()))?;
        let not_message = || WireError::NotMessage(truncated(text));
        let Value::Array(mut items) = value else {
            return Err(not_message());
        };
        let id = |items: &[Value], index: usize| {
            items
                .get(index)
                .and_then(Value::as_i64)
                .ok_or_else(not_message)
        };
        // Taken, not copied: a push carries a write's whole content.
        let arg = |items: &mut [Value], index: usize| {
            items
                .get_mut(index)
                .map(Value::take)
                .ok_or_else(not_message)
        };
        let tag = match items.first_mut() {
            Some(Value::String(tag)) => std::mem::take(tag),
            _ => return Err(not_message()),
        };
        let message = match (tag.as_str(), items.len()) {
            ("push", 2) => Message::Push(arg(&mut items, 1)?),
            ("pull", 2) => Message::Pull(id(&items, 1)?),
            ("resolve", 3) => Message::Resolve(id(&items, 1)?, arg(&mut items, 2)?),
            ("reject", 3) => Message::Reject(id(&items, 1)?, arg(&mut items, 2)?),
            ("release", 3) => {
                let count = items[2].as_u64().ok_or_else(not_message)?;
                Message::Release(id(&items, 1)?, count)
            }
            ("stream", 2) => Message::Stream(arg(&mut items, 1)?),
            ("pipe", 1) => Message::Pipe,
            ("abort", 2) => Message::Abort(arg(&mut items, 1)?),
            _ => return Err(not_message()),
        };
        Ok(message)
    }

    /// The message as its frame's text. Written where it lies (a `resolve` can carry a
    /// read's whole content), by [`text::array`], which escapes a word at a time.
    pub fn to_text(&self) -> String {
        use text::Part::{Int, Str, Value as Expr};
        match self {
            Message::Push(expr) => text::array(&[Str("push"), Expr(expr)]),
            Message::Pull(id) => text::array(&[Str("pull"), Int((*id).into())]),
            Message::Resolve(id, expr) => {
                text::array(&[Str("resolve"), Int((*id).into()), Expr(expr)])
            }
            Message::Reject(id, expr) => {
                text::array(&[Str("reject"), Int((*id).into()), Expr(expr)])
            }
            Message::Release(id, count) => {
                text::array(&[Str("release"), Int((*id).into()), Int((*count).into())])
            }
            Message::Stream(expr) => text::array(&[Str("stream"), Expr(expr)]),
            Message::Pipe => text::array(&[Str("pipe")]),
            Message::Abort(expr) => text::array(&[Str("abort"), Expr(expr)]),
        }
    }
}

fn truncated(text: &str) -> String {
    text.chars().take(120).collect()
}

/// A call: `["pipeline", target, path, args]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The receiver's export the call goes to (0: the main object).
    pub target: i64,
    pub path: Vec<String>,
    /// Each argument as an expression (`None`: a property get, not a call).
    pub args: Option<Vec<Value>>,
}

impl Call {
    pub fn parse(expr: Value) -> Result<Call, WireError> {
        let bad = |expr: &Value| WireError::BadExpression(truncated(&expr.to_string()));
        let Value::Array(mut items) = expr else {
            return Err(bad(&expr));
        };
        if items.first().and_then(Value::as_str) != Some("pipeline") || items.len() < 2 {
            return Err(bad(&Value::Array(items)));
        }
        let args = match items.get_mut(3).map(Value::take) {
            None => None,
            Some(Value::Array(args)) => Some(args),
            Some(_) => return Err(bad(&Value::Array(items))),
        };
        let target = items[1].as_i64().ok_or_else(|| bad(&items[1]))?;
        let path = match items.get(2) {
            None => Vec::new(),
            Some(Value::Array(path)) => path
                .iter()
                .map(|part| part.as_str().map(str::to_string).ok_or_else(|| bad(part)))
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(bad(other)),
        };
        Ok(Call { target, path, args })
    }

    pub fn to_expr(&self) -> Value {
        let mut items = vec![json!("pipeline"), json!(self.target), json!(self.path)];
        if let Some(args) = &self.args {
            items.push(Value::Array(args.clone()));
        }
        Value::Array(items)
    }
}

/// A value the methods work with: plain JSON, with what capnweb carries beyond JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Json(Value),
    /// `["undefined"]`: treated as absent.
    Undefined,
    Bytes(Vec<u8>),
    /// The readable end of a pipe the caller made (its export id on our side).
    Readable(i64),
    /// A function or object the caller exports (a negative id of our imports).
    Export(i64),
}

/// An expression as an [`Arg`]: top-level specials kept, everything inside objects and
/// arrays turned into JSON (dates as epoch milliseconds, `undefined` keys dropped).
pub fn decode(expr: Value) -> Result<Arg, WireError> {
    if let Some(items) = expr.as_array()
        && let Some(tag) = items.first().and_then(Value::as_str)
    {
        match tag {
            "undefined" => return Ok(Arg::Undefined),
            "bytes" => {
                let text = items.get(1).and_then(Value::as_str).unwrap_or_default();
                return bytes(text).map(Arg::Bytes);
            }
            "readable" => {
                let id = items.get(1).and_then(Value::as_i64);
                return id
                    .map(Arg::Readable)
                    .ok_or_else(|| WireError::BadExpression(expr.to_string()));
            }
            "export" => {
                let id = items.get(1).and_then(Value::as_i64);
                return id
                    .map(Arg::Export)
                    .ok_or_else(|| WireError::BadExpression(expr.to_string()));
            }
            _ => {}
        }
    }
    to_json(expr, 0).map(|value| value.map_or(Arg::Undefined, Arg::Json))
}

/// Plain JSON for an expression (taken apart, so long strings move rather than copy);
/// `None` for `undefined`.
pub fn to_json(expr: Value, depth: usize) -> Result<Option<Value>, WireError> {
    if depth > MAX_DEPTH {
        return Err(WireError::TooDeep);
    }
    let bad = |expr: &Value| WireError::BadExpression(truncated(&expr.to_string()));
    Ok(Some(match expr {
        Value::Array(mut items) => {
            // `[[e0, e1, …]]`: a literal array.
            if items.len() == 1 && items[0].is_array() {
                let Some(Value::Array(inner)) = items.pop() else {
                    return Err(WireError::TooDeep);
                };
                let mut out = Vec::with_capacity(inner.len());
                for item in inner {
                    out.push(to_json(item, depth + 1)?.unwrap_or(Value::Null));
                }
                Value::Array(out)
            } else {
                let tag = items.first().and_then(Value::as_str).map(str::to_string);
                match tag.as_deref() {
                    Some("undefined") => return Ok(None),
                    Some("date" | "bigint") => {
                        items.get_mut(1).map(Value::take).unwrap_or(Value::Null)
                    }
                    Some("inf" | "-inf" | "nan") => Value::Null,
                    Some("bytes") => {
                        let text = items.get(1).and_then(Value::as_str).unwrap_or_default();
                        Value::String(String::from_utf8_lossy(&bytes(text)?).into_owned())
                    }
                    // A stub inside an object (the callbacks of `runCodeStream`).
                    Some("export") => match items.get(1).and_then(Value::as_i64) {
                        Some(id) => json!({ EXPORT_KEY: id }),
                        None => return Err(bad(&Value::Array(items))),
                    },
                    _ => return Err(bad(&Value::Array(items))),
                }
            }
        }
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, value) in fields {
                if matches!(key.as_str(), "__proto__" | "constructor" | "toJSON") {
                    continue;
                }
                if let Some(value) = to_json(value, depth + 1)? {
                    out.insert(key, value);
                }
            }
            Value::Object(out)
        }
        other => other,
    }))
}

/// Base64 as capnweb's JS writes it (unpadded) or padded.
fn bytes(text: &str) -> Result<Vec<u8>, WireError> {
    base64_simd::forgiving_decode_to_vec(text.as_bytes())
        .map_err(|error| WireError::BadExpression(format!("bytes: {error}")))
}

/// Plain JSON as an expression: every literal array wrapped (`[1,2]` → `[[1,2]]`).
pub fn from_json(value: Value) -> Value {
    // Taken apart, so long strings (a read's content) move rather than copy.
    match value {
        Value::Array(items) => Value::Array(vec![Value::Array(
            items.into_iter().map(from_json).collect(),
        )]),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key, from_json(value)))
                .collect(),
        ),
        other => other,
    }
}

pub fn undefined() -> Value {
    json!(["undefined"])
}

pub fn bytes_expr(data: &[u8]) -> Value {
    json!(["bytes", STANDARD_NO_PAD.encode_to_string(data)])
}

pub fn readable(pipe: i64) -> Value {
    json!(["readable", pipe])
}

pub fn date(epoch_ms: i64) -> Value {
    json!(["date", epoch_ms])
}

/// An Error as the Sandbox object maps it to its typed errors (docs/api.md, RPC: errors):
/// name `Error`, and the code and details as properties.
pub fn sandbox_error(message: &str, code: &str, details: &Value) -> Value {
    json!(["error", "Error", message, null, { "code": code, "details": from_json(details.clone()) }])
}

/// A plain JS error of `name` (`TypeError` for calls that name no method).
pub fn js_error(name: &str, message: &str) -> Value {
    json!(["error", name, message])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seven_messages_round_trip() {
        for text in [
            r#"["push",["pipeline",0,["commands","execute"],["echo hi","s",["undefined"]]]]"#,
            r#"["pull",1]"#,
            r#"["resolve",1,{"success":true}]"#,
            r#"["reject",2,["error","Error","no"]]"#,
            r#"["release",1,1]"#,
            r#"["stream",["pipeline",4,["write"],[["bytes","AQID"]]]]"#,
            r#"["pipe"]"#,
            r#"["abort",["error","Error","bye"]]"#,
        ] {
            let message = Message::parse(text).unwrap();
            assert_eq!(
                Message::parse(&message.to_text()).unwrap(),
                message,
                "{text}"
            );
        }
        for bad in [
            "{}",
            "[]",
            r#"["push"]"#,
            r#"["pull","x"]"#,
            r#"["nope",1]"#,
            "[1",
        ] {
            assert!(Message::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn calls_and_arguments_decode_to_plain_json() {
        let message = Message::parse(
            r#"["push",["pipeline",0,["files","listFiles"],["/w",["undefined"],{"recursive":true,"x":["undefined"],"a":[[1,[[2]]]],"when":["date",5]}]]]"#,
        )
        .unwrap();
        let Message::Push(expr) = message else {
            panic!()
        };
        let call = Call::parse(expr).unwrap();
        assert_eq!(call.target, 0);
        assert_eq!(call.path, ["files", "listFiles"]);
        let args: Vec<Arg> = call
            .args
            .unwrap()
            .iter()
            .map(|a| decode(a.clone()).unwrap())
            .collect();
        assert_eq!(args[0], Arg::Json(json!("/w")));
        assert_eq!(args[1], Arg::Undefined);
        assert_eq!(
            args[2],
            Arg::Json(json!({"recursive": true, "a": [1, [2]], "when": 5}))
        );
        assert_eq!(
            decode(json!(["bytes", "AQID"])).unwrap(),
            Arg::Bytes(vec![1, 2, 3])
        );
        assert_eq!(
            decode(json!(["bytes", "BA=="])).unwrap(),
            Arg::Bytes(vec![4])
        );
        assert_eq!(decode(json!(["readable", 4])).unwrap(), Arg::Readable(4));
        assert_eq!(decode(json!(["export", -1])).unwrap(), Arg::Export(-1));
        assert!(decode(json!(["remap", 1])).is_err());
        assert_eq!(
            decode(json!({"onStdout": ["export", -1]})).unwrap(),
            Arg::Json(json!({"onStdout": {EXPORT_KEY: -1}}))
        );
        let mut deep = json!(1);
        for _ in 0..70 {
            deep = json!({ "a": deep });
        }
        assert_eq!(decode(deep), Err(WireError::TooDeep));
    }

    #[test]
    fn results_wrap_every_array() {
        assert_eq!(
            from_json(json!({"files": [{"n": [1]}], "count": 1})),
            json!({"files": [[{"n": [[1]]}]], "count": 1})
        );
        assert_eq!(from_json(json!([])), json!([[]]));
        assert_eq!(
            sandbox_error("gone", "FILE_NOT_FOUND", &json!({"path": "/x"})),
            json!(["error", "Error", "gone", null, {"code": "FILE_NOT_FOUND", "details": {"path": "/x"}}])
        );
    }
}
