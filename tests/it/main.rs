//! toolgate's one integration-test binary: real toolgate on real ports, an
//! in-process mock provider replaying recorded streams, real HTTP clients.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr
)]

// A reference reader of SSE/JSON answers, independent of toolgate's own.
mod accumulate;
// Mock provider, toolgate launcher, HTTP client.
mod support;
// The released binary as a child process on real ports.
mod bin;
// A case-insensitive JSON reader, as Go's and .NET's decoders are (an oracle).
mod lenient;
// The module layering of src/ against docs/ARCHITECTURE.md.
mod layering;
// A hostile Responses provider judged by real clients (one reading for everyone).
mod hostile_responses;

// Every shared fixture, allowed and with its first tool denied, streaming and not.
mod conformance;
// Google's Gemini API: its own fixtures, keys, paths and errors.
mod gemini;
// MCP servers behind the gates, with the official MCP Python SDK.
mod mcp;
// Bad inputs and provider failures.
mod edge;
// Pass-through, refused endpoints, keys, admin port, h2c, shutdown.
mod routes;
// proptest: any re-chunking of any fixture gives the same output.
mod rechunk;
// The binary's commands and exit codes.
mod cli;
// `toolgate mock`, the scripted provider, in each wire format.
mod mock_provider;
// The provider's errors through the SDKs, redacted; toolgate's own generic.
mod provider_errors;
// Anthropic message threads: the SDK's tool_runner over a thread-keeping provider.
mod threads;
// Codex: its WebSocket transport refused at once, its requests gated over HTTP.
mod codex;
// The admin port: bounded, tokens for state changes, Host checked.
mod admin;
// Policy reload: settled files on every path, drops refused on request.
mod policy_reload;
// The official openai Python SDK as the client.
mod sdk;
// toolgate's own quirk fixtures in tests/fixtures/.
mod quirks;
// Human approval: the ask verdict, its API, the SDK waiting, binding.
mod approval;
// The approval webhook and the approvals CLI.
mod approval_hook;
// Waits that end without an answer; the upstream connection given back.
mod approval_ends;
// ask on Messages (the anthropic SDK) and Responses (the openai SDK).
mod approval_protocols;
// The approvals page in a headless browser.
mod approval_ui;
// A slow gate: text first, keep-alives, concurrent judging.
mod slow_gate;
// The policy engine over HTTP: phase gate, declarations, limits, hidden tools, reload.
mod policy;
// Injection taint: detectors over a corpus, signals and policies.
mod injection;
// The held-out injection corpus through the gates, by attack family.
mod injection_eval;
// Leave-one-family-out over the corpus: each family without the parts only it needs.
mod injection_lofo;
// Domains nobody tuned on, measured per domain and style.
mod injection_domains;
// The same verdict whole or by reference (`previous_response_id`).
mod by_reference;
// The Conversations API: items both ways, the SDKs on it.
mod conversations;
// What the model reads that toolgate never sees: provider-run reads.
mod unseen;
// The words the signals read, extended from a policy directory.
mod words;
// The content fence and redaction of tool results.
mod fence;
// The sentinel: its scenarios, judge failures, injections, cache.
pub mod sentinel;
// The sentinel asked while a turn still streams.
mod sentinel_ahead;
// Replicas sharing rate limits in a real Redis; Redis gone and back.
mod shared_state;
// What a Redis writer cannot make replicas do.
mod shared_forgery;
// Client authentication and the non-loopback refusal.
mod auth;
// The TLS listener, mutual TLS and certificate reload.
mod tls;
// The upstream client: kept connections, closed ones, TLS over h2 and HTTP/1.1.
mod upstream;
// toolgate's own HTTP/1.1 client: odd chunking, interim answers, refused framing.
mod upstream_h1;
// Docker, compose and Kubernetes files, validated offline; the compose agent for real.
mod deploy;
// Output validation: facts, the LLM fact-checker, the trace-to-facts bridge.
mod output;
// The black-box audit's holes, each through the real binary.
mod holes;
// What the second black-box audit found outside shared state.
mod audit_two;
// What the agent and the upstream receive is only what toolgate parsed.
mod differential;
// Slow peers and full limits over real sockets.
mod overload;
// Upstream faults: refused, TLS, reset, idle, statuses, HTTP/2 GOAWAY.
mod faults;
// The audit trail's hash chain and `toolgate audit verify`.
mod audit_chain;
// Property and fuzz tests: arbitrary bytes, any split (`scripts/fuzz.sh` runs them longer).
mod fuzz;
// `rewrite = "resume"`: follow-ups spliced into the agent's response.
/// `POST /v1/messages` (Anthropic) through a real toolgate.
pub mod messages;
/// A strict reference reader of Messages streams.
mod messages_reader;
/// `POST /v1/responses` through a real toolgate.
pub mod responses;
mod resume;
mod resume_messages;
mod resume_responses;
// Structured output: a withheld call's neutral text as a refusal.
mod structured;
// Tool calls written as text in the content.
mod text_calls;
// The log: JSON and text, the access line.
mod logs;
// /metrics: labels, histograms, errors and tokens.
mod metrics;
// OpenTelemetry: a mock OTLP collector decodes the spans toolgate exports.
mod telemetry;
