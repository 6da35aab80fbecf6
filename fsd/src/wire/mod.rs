//! HTTP plumbing shared by every route module: accepting connections (and acknowledging
//! what they send at once), the JSON body extractor, SSE responses, and auth.

pub mod accept;
pub mod auth;
pub mod connections;
pub mod json;
pub mod memory;
pub mod quickack;
pub mod sse;
pub mod sse_parse;
pub mod unread;
pub mod upgrade;
