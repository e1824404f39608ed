//! `toolgate mcp --name NAME -- COMMAND ARGS…`: a stdio MCP server run
//! behind the same gates, for agents configured with a command. The agent
//! speaks to toolgate on stdin and stdout (one JSON-RPC message a line);
//! toolgate speaks to the server on its own. A `tools/call` is decided
//! before it goes on (a denied one is answered here); the server's answers
//! are read as the HTTP route reads them (pins, fence). An answer to no
//! request the agent has waiting (a late one, after toolgate answered the
//! call for a server that stalled) is dropped: it was never checked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::messages::Answer;
use super::{error_result, gate_call, Asker, FAILED};
use crate::error::Error;
use crate::proxy::state::State;

/// The principal a stdio agent is: the one who started toolgate.
const PRINCIPAL: &str = "local";

/// Requests the agent has waiting, by their id's JSON text.
type Waiting = Arc<Mutex<HashMap<String, Value>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads one line of at most `max` bytes; `None` at the end of input.
pub(super) async fn line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, Error> {
    let mut buf = Vec::new();
    loop {
        let chunk = r.fill_buf().await.map_err(|e| Error::io("stdio", e))?;
        if chunk.is_empty() {
            return Ok((!buf.is_empty()).then_some(buf));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max {
            return Err(Error::BadRequest(
                "An MCP message is over the size limit.".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            return Ok(Some(buf));
        }
    }
}

/// Starts a server: the process, its input and its output.
pub(super) fn spawn(
    command: &[String],
) -> Result<
    (
        tokio::process::Child,
        tokio::process::ChildStdin,
        tokio::process::ChildStdout,
    ),
    Error,
> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Error::BadRequest("No server command was given.".into()))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::io(format!("starting {program}"), e))?;
    match (child.stdin.take(), child.stdout.take()) {
        (Some(i), Some(o)) => Ok((child, i, o)),
        _ => Err(Error::BadRequest(
            "The server's stdio could not be opened.".into(),
        )),
    }
}

/// Runs `command` as the server `name` and relays until either side ends.
pub async fn run(state: Arc<State>, name: &str, command: &[String]) -> Result<(), Error> {
    let (mut child, mut to_server, from_server) = spawn(command)?;
    let timeout = (state.config.mcp.iter())
        .find(|m| m.name == name)
        .map_or(std::time::Duration::from_secs(60), |m| m.timeout);
    let waiting: Waiting = Arc::default();
    // One writer to the agent: answers come from both directions.
    let (out, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut m) = out_rx.recv().await {
            m.push(b'\n');
            if stdout.write_all(&m).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = {
        let (state, waiting, out, name) = (
            state.clone(),
            waiting.clone(),
            out.clone(),
            name.to_string(),
        );
        tokio::spawn(
            async move { from_the_server(&state, &name, from_server, &waiting, &out).await },
        )
    };
    let mut stdin = BufReader::new(tokio::io::stdin());
    let max = state.config.limits.max_request_bytes;
    let headers = http::HeaderMap::new();
    while let Some(raw) = line(&mut stdin, max).await? {
        let Ok(m) = crate::json::strict_value(&raw) else {
            tracing::warn!(
                server = name,
                "an agent's MCP message is not unambiguous JSON; dropped"
            );
            continue;
        };
        if !m.is_object() {
            tracing::warn!(server = name, "an agent's MCP batch is not served; dropped");
            continue;
        }
        let request_id = state.request_id();
        let asker = Asker {
            headers: &headers,
            phase: None,
            principal: PRINCIPAL,
            request_id: &request_id,
        };
        if let Some(denied) = gate_call(&state, &asker, name, &m).await? {
            let _ = out.send(denied.to_string().into_bytes()).await;
            continue;
        }
        if let (Some(id), true) = (m.get("id"), m.get("method").is_some()) {
            let key = id.to_string();
            lock(&waiting).insert(key.clone(), m.clone());
            if m.get("method").and_then(Value::as_str) == Some("tools/call") {
                // A server that stalls gets an error result in its place.
                let (waiting, out, id) = (waiting.clone(), out.clone(), id.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(timeout).await;
                    if lock(&waiting).remove(&key).is_some() {
                        let _ = out
                            .send(error_result(Some(id), FAILED).to_string().into_bytes())
                            .await;
                    }
                });
            }
        }
        let mut sent = serde_json::to_vec(&m).map_err(|_| Error::Overloaded("memory"))?;
        sent.push(b'\n');
        if to_server.write_all(&sent).await.is_err() {
            break;
        }
    }
    // The agent is gone: the server's input ends, and so does the server.
    drop(to_server);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
    answers.abort();
    drop(out);
    let _ = writer.await;
    Ok(())
}

/// Relays the server's messages: an answer is read as its request asks
/// (and dropped when no request waits for it), the rest passes.
async fn from_the_server(
    state: &State,
    name: &str,
    from: tokio::process::ChildStdout,
    waiting: &Waiting,
    out: &mpsc::Sender<Vec<u8>>,
) {
    let mut r = BufReader::new(from);
    let max = state.config.limits.max_response_bytes;
    let gates = state.gates();
    loop {
        let raw = match line(&mut r, max).await {
            Ok(Some(raw)) => raw,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, server = name, "the MCP server's output cannot be read");
                return;
            }
        };
        let Ok(m) = crate::json::strict_value(&raw) else {
            tracing::warn!(
                server = name,
                "an MCP server's message is not unambiguous JSON; dropped"
            );
            continue;
        };
        let is_answer = m.get("method").is_none();
        let asked = match m.get("id") {
            Some(id) if is_answer => match lock(waiting).remove(&id.to_string()) {
                Some(asked) => Some(asked),
                None => {
                    tracing::warn!(
                        server = name,
                        "an MCP answer to no waiting request; dropped"
                    );
                    continue;
                }
            },
            _ => None,
        };
        let request_id = state.request_id();
        let written = match &asked {
            Some(asked) => {
                let answer = Answer::new(state, &gates, name, &request_id, PRINCIPAL, asked);
                answer.whole(&raw).await.map(|b| b.to_vec())
            }
            None => {
                // The server's own requests and notifications: checked as
                // the HTTP route checks them (a request is audited).
                let any = Value::Null;
                let answer = Answer::new(state, &gates, name, &request_id, PRINCIPAL, &any);
                answer.whole(&raw).await.map(|b| b.to_vec())
            }
        };
        match written {
            Ok(w) => {
                if out.send(w).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::warn!(error = %e, server = name, "an MCP server's message dropped"),
        }
    }
}
