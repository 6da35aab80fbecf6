//! Which line of the Sandbox SDK a `/rpc` socket speaks, and the next line's handshake and
//! gate (`reference-next.md` §3, §8). A socket is the 0.12 line's until it calls
//! `utils.getRuntimeMetadata` or `utils.activateControlSession`, which only the next line
//! sends; from then on it is the next line's, and every domain but `utils` is refused
//! until `activateControlSession` named this daemon's incarnation. 0.12 sockets are served
//! as before, ungated.

use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

use super::wire::{self, Arg};

/// The wire code of a call the control protocol refuses.
const INCOMPATIBLE: &str = "CONTROL_PROTOCOL_INCOMPATIBLE";

/// The version of the control protocol the next line's object checks for.
const CONTROL_PROTOCOL_VERSION: u64 = 1;

/// This daemon's runtime incarnation: made once per process start and the same for every
/// socket, so a restarted daemon is a new runtime to the object (its old handles are gone)
/// and a reconnect to the same daemon is not.
pub fn incarnation() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(crate::random::uuid_v4)
}

/// What the next line's object reads before every waking operation.
fn metadata() -> Value {
    let version = crate::config::environment()
        .sandbox_version
        .clone()
        .unwrap_or_else(|| "unknown".into());
    json!({
        "runtimeIncarnationID": incarnation(),
        "sandboxVersion": version,
        "controlProtocolVersion": CONTROL_PROTOCOL_VERSION,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Line {
    /// `@cloudflare/sandbox` 0.12: served by the routes, no handshake.
    #[default]
    Current,
    /// The next line, before a successful `activateControlSession`.
    Next,
    /// The next line, activated: its domains may be called.
    NextActive,
}

/// One socket's line and activation.
#[derive(Debug, Default)]
pub struct Control {
    line: Mutex<Line>,
}

impl Control {
    /// Answers `path` here when the control protocol decides it: the handshake's calls,
    /// the gate's refusals, and the next line's domains that are not served yet. `None`
    /// passes the call on to the 0.12 methods.
    pub fn intercept(&self, path: &[String], args: &[Arg]) -> Option<Result<Value, Value>> {
        let [domain, method] = path else {
            return None;
        };
        let mut line = self.line.lock().unwrap_or_else(|p| p.into_inner());
        match (domain.as_str(), method.as_str()) {
            ("utils", "getRuntimeMetadata") => {
                if *line == Line::Current {
                    *line = Line::Next;
                }
                Some(Ok(metadata()))
            }
            ("utils", "activateControlSession") => {
                if *line == Line::Current {
                    *line = Line::Next;
                }
                let expected = match args.first() {
                    Some(Arg::Json(Value::String(id))) => Some(id.as_str()),
                    _ => None,
                };
                if expected != Some(incarnation()) {
                    return Some(Err(refused("Runtime incarnation does not match")));
                }
                *line = Line::NextActive;
                Some(Ok(metadata()))
            }
            ("utils", _) => None,
            _ => match *line {
                Line::Current => None,
                Line::Next => Some(Err(refused("Control session is not activated"))),
                Line::NextActive => Some(Err(wire::js_error(
                    "TypeError",
                    &format!("'{domain}.{method}' is not served on the next line yet."),
                ))),
            },
        }
    }
}

/// The control protocol's refusal: an `Error` with `code` and no details, as the next
/// line's runtime throws it.
fn refused(message: &str) -> Value {
    json!(["error", "Error", message, null, { "code": INCOMPATIBLE }])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(
        control: &Control,
        domain: &str,
        method: &str,
        args: Vec<Arg>,
    ) -> Option<Result<Value, Value>> {
        control.intercept(&[domain.to_string(), method.to_string()], &args)
    }

    fn code(answer: Option<Result<Value, Value>>) -> Value {
        match answer {
            Some(Err(error)) => error[4]["code"].clone(),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_socket_is_the_current_lines_until_it_asks_for_the_handshake() {
        let control = Control::default();
        assert!(call(&control, "files", "readFile", vec![]).is_none());
        assert!(call(&control, "utils", "ping", vec![]).is_none());
        let metadata = call(&control, "utils", "getRuntimeMetadata", vec![])
            .unwrap()
            .unwrap();
        assert_eq!(metadata["runtimeIncarnationID"], incarnation());
        assert_eq!(metadata["controlProtocolVersion"], 1);
        // Now the next line's: gated until activated.
        assert_eq!(
            code(call(&control, "files", "readFile", vec![])),
            INCOMPATIBLE
        );
        assert!(call(&control, "utils", "ping", vec![]).is_none());
    }

    #[test]
    fn activation_names_this_incarnation() {
        let control = Control::default();
        let wrong = Arg::Json(json!("another-runtime"));
        assert_eq!(
            code(call(
                &control,
                "utils",
                "activateControlSession",
                vec![wrong]
            )),
            INCOMPATIBLE
        );
        assert_eq!(
            code(call(&control, "processes", "list", vec![])),
            INCOMPATIBLE
        );
        let right = Arg::Json(json!(incarnation()));
        let metadata = call(&control, "utils", "activateControlSession", vec![right])
            .unwrap()
            .unwrap();
        assert_eq!(metadata["runtimeIncarnationID"], incarnation());
        // The same id on every socket of this process.
        let other = Control::default();
        let again = call(&other, "utils", "getRuntimeMetadata", vec![])
            .unwrap()
            .unwrap();
        assert_eq!(again["runtimeIncarnationID"], incarnation());
        // Activated: past the gate (a domain not served yet says so).
        let past = call(&control, "processes", "list", vec![])
            .unwrap()
            .unwrap_err();
        assert_eq!(past[1], "TypeError");
    }
}
