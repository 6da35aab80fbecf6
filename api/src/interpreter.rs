//! Code contexts: long-lived interpreters (Python, JavaScript, TypeScript) that keep their
//! state between calls, and the events a call streams.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /api/contexts`. Field names as the reference's (`env_vars` in snake case).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CreateContextRequest {
    /// `python` (also `python3`), `javascript` (`js`, `node`) or `typescript` (`ts`);
    /// default `python`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The interpreter's working directory; default the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Set in the interpreter's environment (and so in what it starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_vars: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateContextResponse {
    pub success: bool,
    pub context_id: String,
    pub language: String,
    pub cwd: String,
    /// fsd's own: when the context was made.
    #[serde(default)]
    pub created_at: String,
    pub timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextInfo {
    pub id: String,
    pub language: String,
    pub cwd: String,
    /// fsd's own: when the context was made, and when a call last started in it.
    #[serde(default, rename = "createdAt")]
    pub created_at: String,
    #[serde(default, rename = "lastUsed")]
    pub last_used: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListContextsResponse {
    pub success: bool,
    pub contexts: Vec<ContextInfo>,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteContextResponse {
    pub success: bool,
    pub context_id: String,
    pub timestamp: String,
}

/// `POST /api/execute/code` (snake-case fields, as the reference's).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExecuteCodeRequest {
    pub context_id: String,
    pub code: String,
    /// Must match the context's language when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// fsd: interrupt the call after this long (the reference ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// One event of a call's SSE stream. Output streams as it is produced; a call ends with
/// exactly one `execution_complete` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CodeEvent {
    Stdout {
        text: String,
    },
    Stderr {
        text: String,
    },
    /// A rich result with one format field: `png`, `jpeg` (base64), `svg`, `html`, `json`
    /// (a JSON value), `latex`, `markdown`, `javascript` or `text`.
    Result {
        #[serde(flatten)]
        data: Map<String, Value>,
    },
    ExecutionComplete {
        execution_count: u64,
    },
    Error {
        ename: String,
        evalue: String,
        traceback: Vec<String>,
    },
}

impl CodeEvent {
    /// A result event of `format` holding `data`.
    pub fn result(format: &str, data: Value) -> Self {
        let mut map = Map::new();
        map.insert(format.to_string(), data);
        Self::Result { data: map }
    }

    /// A result's format and data (the one field besides `type` and `metadata`).
    pub fn result_format(&self) -> Option<(&str, &Value)> {
        match self {
            Self::Result { data } => data
                .iter()
                .find(|(key, _)| key.as_str() != "metadata")
                .map(|(key, value)| (key.as_str(), value)),
            _ => None,
        }
    }
}

/// The body of a failed `POST /api/execute/code`: not the standard envelope, as the
/// reference's (its clients read `error`, `code` and `details`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodeErrorBody {
    pub error: String,
    pub code: crate::ErrorCode,
    #[serde(default)]
    pub details: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_the_reference_shape() {
        let png = CodeEvent::result("png", Value::String("iVBOR".into()));
        assert_eq!(
            serde_json::to_value(&png).unwrap(),
            serde_json::json!({"type": "result", "png": "iVBOR"})
        );
        assert_eq!(
            png.result_format(),
            Some(("png", &Value::String("iVBOR".into())))
        );
        let back: CodeEvent = serde_json::from_value(
            serde_json::json!({"type": "result", "json": {"a": 1}, "metadata": {}}),
        )
        .unwrap();
        assert_eq!(back.result_format().map(|(f, _)| f), Some("json"));
        assert_eq!(
            serde_json::to_value(CodeEvent::ExecutionComplete { execution_count: 1 }).unwrap(),
            serde_json::json!({"type": "execution_complete", "execution_count": 1})
        );
    }
}
