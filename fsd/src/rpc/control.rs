//! Which line of the Sandbox SDK a `/rpc` socket speaks, and the next line's handshake and
//! gate (docs/api.md, RPC: the SDK's next line). A socket is the 0.12 line's until it calls
//! `utils.getRuntimeMetadata` or `utils.activateControlSession`, which only the next line
//! sends; from then on it is the next line's, and every domain but `utils` is refused
//! until `activateControlSession` named this daemon's incarnation. 0.12 sockets are served
//! as before, ungated.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::{Value, json};

use crate::capnweb::protocol::Arg;
use crate::capnweb::session::Session;
use crate::system::ops::incarnation;

/// The wire code of a call the control protocol refuses.
const INCOMPATIBLE: &str = "CONTROL_PROTOCOL_INCOMPATIBLE";

/// The version of the control protocol the next line's object checks for.
const CONTROL_PROTOCOL_VERSION: u64 = 1;

/// The latest activated next socket: its object's main is the control callback the daemon
/// tells of tunnel exits (`onTunnelRunExit`). A socket that closes clears it by going.
fn callback() -> &'static Mutex<Weak<Session>> {
    static CALLBACK: OnceLock<Mutex<Weak<Session>>> = OnceLock::new();
    CALLBACK.get_or_init(|| Mutex::new(Weak::new()))
}

/// Makes `session` the control callback (it activated last).
pub fn register_callback(session: &Arc<Session>) {
    *callback().lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(session);
}

/// Calls `method(args)` on the control callback's main object, if a next socket is
/// activated; dropped otherwise, as the reference drops it.
pub async fn call_callback(method: &str, args: Vec<Value>) {
    let session = callback()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .upgrade();
    if let Some(session) = session {
        let _ = session.call_peer(0, vec![method.to_string()], args).await;
    }
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

/// Where a call goes.
#[derive(Debug)]
pub enum Route {
    /// Answered by the control protocol (the handshake, or a refusal).
    Answered(Result<Value, Value>),
    /// Activated: answered with the metadata, and the socket is the control callback now.
    Activated(Value),
    /// To the next line's domains: the socket is activated.
    Next { domain: String, method: String },
    /// To the 0.12 methods.
    Current,
}

/// One socket's line and activation.
#[derive(Debug, Default)]
pub struct Control {
    line: Mutex<Line>,
}

impl Control {
    /// Where `path` goes on this socket: the handshake's calls and the gate's refusals are
    /// answered here; an activated next socket's domains go to the next line's methods;
    /// everything else (every call of a 0.12 socket, `utils.ping`) to the 0.12 methods.
    pub fn route(&self, path: &[String], args: &[Arg]) -> Route {
        let [domain, method] = path else {
            return Route::Current;
        };
        let mut line = self.line.lock().unwrap_or_else(|p| p.into_inner());
        match (domain.as_str(), method.as_str()) {
            ("utils", "getRuntimeMetadata") => {
                if *line == Line::Current {
                    *line = Line::Next;
                }
                Route::Answered(Ok(metadata()))
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
                    return Route::Answered(Err(refused("Runtime incarnation does not match")));
                }
                *line = Line::NextActive;
                Route::Activated(metadata())
            }
            ("utils", _) => Route::Current,
            _ => match *line {
                Line::Current => Route::Current,
                Line::Next => Route::Answered(Err(refused("Control session is not activated"))),
                Line::NextActive => Route::Next {
                    domain: domain.clone(),
                    method: method.clone(),
                },
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

    fn call(control: &Control, domain: &str, method: &str, args: Vec<Arg>) -> Route {
        control.route(&[domain.to_string(), method.to_string()], &args)
    }

    fn answered(route: Route) -> Result<Value, Value> {
        match route {
            Route::Answered(answer) => answer,
            other => panic!("not answered: {other:?}"),
        }
    }

    fn code(route: Route) -> Value {
        match answered(route) {
            Err(error) => error[4]["code"].clone(),
            Ok(value) => panic!("not refused: {value}"),
        }
    }

    #[test]
    fn a_socket_is_the_current_lines_until_it_asks_for_the_handshake() {
        let control = Control::default();
        assert!(matches!(
            call(&control, "files", "readFile", vec![]),
            Route::Current
        ));
        assert!(matches!(
            call(&control, "utils", "ping", vec![]),
            Route::Current
        ));
        let metadata = answered(call(&control, "utils", "getRuntimeMetadata", vec![])).unwrap();
        assert_eq!(metadata["runtimeIncarnationID"], incarnation());
        assert_eq!(metadata["controlProtocolVersion"], 1);
        // Now the next line's: gated until activated.
        assert_eq!(
            code(call(&control, "files", "readFile", vec![])),
            INCOMPATIBLE
        );
        assert!(matches!(
            call(&control, "utils", "ping", vec![]),
            Route::Current
        ));
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
        let Route::Activated(metadata) =
            call(&control, "utils", "activateControlSession", vec![right])
        else {
            panic!("not activated");
        };
        assert_eq!(metadata["runtimeIncarnationID"], incarnation());
        // The same id on every socket of this process.
        let other = Control::default();
        let again = answered(call(&other, "utils", "getRuntimeMetadata", vec![])).unwrap();
        assert_eq!(again["runtimeIncarnationID"], incarnation());
        // Activated: past the gate, to the next line's methods.
        assert!(matches!(
            call(&control, "processes", "list", vec![]),
            Route::Next { .. }
        ));
    }
}
