//! `toolgate approvals list | approve ID | deny ID`: the approvals API of a
//! running toolgate's admin port, from a terminal.

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::args::{ApprovalsAction, ApprovalsArgs};
use crate::error::Error;

/// Longest argument text printed per call in `list`.
const SHOWN_ARGS: usize = 400;

fn failed(what: String, why: impl std::fmt::Display) -> Error {
    Error::io(what, std::io::Error::other(why.to_string()))
}

async fn call(
    a: &ApprovalsArgs,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, Error> {
    let token = std::env::var(&a.token_env)
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| failed("no approval token".into(), format!("set {}", a.token_env)))?;
    let uri: http::Uri = format!("http://{}{path}", a.addr)
        .parse()
        .map_err(|_| Error::BadRequest(format!("not a host:port: {}", a.addr)))?;
    let payload = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(payload))
        .map_err(|e| Error::BadRequest(e.to_string()))?;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let where_ = format!("toolgate's admin port at {}", a.addr);
    let exchange = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| failed(where_.clone(), e))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(where_.clone(), e))?
            .to_bytes();
        Ok::<_, Error>((status, body))
    };
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| failed(where_.clone(), "no answer in 10 s"))??;
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !status.is_success() {
        let why = v.get("error").and_then(Value::as_str).unwrap_or("");
        return Err(failed(format!("{where_} answered {status}"), why));
    }
    Ok(v)
}

/// Runs the command; what it prints on success.
pub async fn run(a: &ApprovalsArgs) -> Result<String, Error> {
    match &a.action {
        ApprovalsAction::List { json } => {
            let v = call(a, Method::GET, "/approvals", None).await?;
            if *json {
                return Ok(format!(
                    "{}\n",
                    serde_json::to_string_pretty(&v).unwrap_or_default()
                ));
            }
            Ok(listing(&v))
        }
        ApprovalsAction::Approve { id, by, session } => {
            let scope = if *session { "session" } else { "call" };
            answer(a, id, "approve", by.as_deref(), scope).await
        }
        ApprovalsAction::Deny { id, by } => answer(a, id, "deny", by.as_deref(), "call").await,
    }
}

async fn answer(
    a: &ApprovalsArgs,
    id: &str,
    decision: &str,
    by: Option<&str>,
    scope: &str,
) -> Result<String, Error> {
    let by = by
        .map(str::to_string)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "cli".into());
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(Error::BadRequest(format!("not an approval id: {id}")));
    }
    let body = json!({"decision": decision, "by": by, "scope": scope, "channel": "cli"});
    call(a, Method::POST, &format!("/approvals/{id}"), Some(body)).await?;
    Ok(format!("{id}: {decision} ({scope}) by {by}\n"))
}

fn listing(v: &Value) -> String {
    let list = v
        .get("pending")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if list.is_empty() {
        return "nothing is waiting\n".into();
    }
    let s = |q: &Value, k: &str| q.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
    let mut out = String::new();
    for q in &list {
        let args = s(q, "arguments");
        let args: String = args.chars().take(SHOWN_ARGS).collect();
        out.push_str(&format!(
            "{}  {}  rule={}  principal={}  session={}  phase={}  expires={}\n    arguments: {}\n",
            s(q, "id"),
            s(q, "tool"),
            s(q, "rule"),
            s(q, "principal"),
            s(q, "session"),
            s(q, "phase"),
            s(q, "expires"),
            args.escape_debug(),
        ));
    }
    out
}
