//! The Gemini API codec (`models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, under `/v1beta` or `/v1`); no I/O.
//!
//! - [`keys`]: Google's JSON reader takes a field in camelCase and in
//!   snake_case alike; toolgate reads both as one key and refuses an object
//!   holding both, or a spelling that only folds to one.
//! - [`request`]: declared functions (`tools[].functionDeclarations`, their
//!   `parametersJsonSchema` or classic `parameters`), provider-run tools,
//!   what the path says, the notice in `systemInstruction`.
//! - [`texts`]: texts from `systemInstruction` and `contents`, tool results
//!   from `functionResponse` parts. [`hide`]: denied tools taken out.
//! - [`response`]: a `GenerateContentResponse` (a whole body, or one stream
//!   event) read for the `functionCall` parts of its candidates, and
//!   written again without the withheld ones, every other byte as it came.
//! - [`stream`]: the streaming rewriter: an event holding calls is held
//!   whole until they are decided. [`complete`]: the same over a whole body.
//!
//! A part whose data field toolgate does not know (a new one, or a spelling
//! that folds to a known one) is held as a call of a kind toolgate rejects;
//! code the provider ran (`executableCode`) passes and is audited.

mod codec;
pub mod complete;
pub mod hide;
pub mod keys;
pub mod request;
pub mod response;
pub mod stream;
#[cfg(test)]
mod tests;
pub mod texts;

pub use codec::Gemini;

use bytes::Bytes;
use serde_json::json;

use crate::error::Error;
use crate::protocol::provider_error::google_status;

/// toolgate's own error in Google's shape.
pub fn error_body(err: &Error) -> Bytes {
    let (_, message) = err.public_message();
    let status = err.status();
    let v = json!({"error": {
        "code": status.as_u16(),
        "message": message,
        "status": google_status(status),
    }});
    Bytes::from(v.to_string())
}
