//! Objects that live in another capnweb session, passed along (docs/api.md, RPC: `extensions`):
//! an extension's sidecar main handed to the object as a stub, the object's callbacks
//! handed to the sidecar, and whatever either returns. A call on a [`Forward`] goes to the
//! session the object lives in, its arguments and its result translated between the two
//! sessions' tables; its release is passed on.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::protocol as capnweb;
use super::session::{Session, Settling, Target};

/// How deep a forwarded expression may nest.
const MAX_DEPTH: usize = 64;

/// An import of `home` (an object the peer there exports), exported in another session.
pub struct Forward {
    home: Arc<Session>,
    import: i64,
    /// Whether the reference is ours to release when the other side lets go (not the
    /// sidecar's main object, which every connection shares).
    owned: bool,
}

impl Forward {
    /// The peer's main object in `home`, shared (never released through this).
    pub fn main(home: Arc<Session>) -> Arc<Self> {
        Arc::new(Self {
            home,
            import: 0,
            owned: false,
        })
    }
}

impl Target for Forward {
    fn call_raw(
        self: Arc<Self>,
        session: Arc<Session>,
        path: Vec<String>,
        args: Vec<Value>,
    ) -> Settling {
        Box::pin(async move {
            if self.home.is_closed() {
                return Err(capnweb::js_error(
                    "Error",
                    "the extension's connection ended",
                ));
            }
            let args = args
                .into_iter()
                .map(|arg| translate(arg, &session, &self.home, 0))
                .collect::<Result<Vec<Value>, Value>>()?;
            match self.home.call_peer(self.import, path, args).await {
                Ok(value) => translate(value, &self.home, &session, 0),
                Err(error) => Err(error),
            }
        })
    }

    fn dispose(&self) {
        if self.owned && !self.home.is_closed() {
            let home = Arc::clone(&self.home);
            let import = self.import;
            tokio::spawn(async move { home.release_peer(import, 1).await });
        }
    }
}

/// An expression `from` sent, as `to` must receive it: each object `from`'s peer exports
/// in it becomes an object of ours exported to `to`'s peer (calls on it come back here and
/// go on to `from`). Values pass as they are; promises, pipelines and pipes do not cross.
pub fn translate(
    expr: Value,
    from: &Arc<Session>,
    to: &Arc<Session>,
    depth: usize,
) -> Result<Value, Value> {
    if depth > MAX_DEPTH {
        return Err(capnweb::js_error(
            "RangeError",
            "the value nests too deeply",
        ));
    }
    match expr {
        Value::Array(items) => {
            if items.len() == 1 && items[0].is_array() {
                let Some(Value::Array(inner)) = items.into_iter().next() else {
                    return Ok(Value::Array(Vec::new()));
                };
                let inner = inner
                    .into_iter()
                    .map(|item| translate(item, from, to, depth + 1))
                    .collect::<Result<Vec<Value>, Value>>()?;
                return Ok(Value::Array(vec![Value::Array(inner)]));
            }
            let tag = items.first().and_then(Value::as_str).map(str::to_string);
            match tag.as_deref() {
                Some("export") => {
                    let import = items
                        .get(1)
                        .and_then(Value::as_i64)
                        .ok_or_else(|| capnweb::js_error("TypeError", "an export without an id"))?;
                    to.export(Arc::new(Forward {
                        home: Arc::clone(from),
                        import,
                        owned: true,
                    }))
                }
                Some(
                    tag @ ("promise" | "pipeline" | "remap" | "import" | "readable" | "writable"),
                ) => Err(capnweb::js_error(
                    "TypeError",
                    &format!("a '{tag}' cannot be passed through an extension's connection"),
                )),
                // Errors keep their properties as sent; other special forms carry no
                // references.
                Some(_) => Ok(Value::Array(items)),
                None => Err(capnweb::js_error("TypeError", "not a capnweb expression")),
            }
        }
        Value::Object(fields) => {
            let mut out = Map::with_capacity(fields.len());
            for (key, value) in fields {
                out.insert(key, translate(value, from, to, depth + 1)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other),
    }
}
