//! toolgate: a tool-call firewall for AI agents.
//!
//! A sidecar reverse proxy between an agent and its OpenAI-compatible provider.
//! The data flow, one way:
//!
//! ```text
//! agent ─► server ─► proxy (route → protocol, size cap, parse, context, fence) ─► upstream
//! provider ─► proxy (status, content type) ─► body adapter ─► protocol rewriter
//!          (SSE decode → text passes at once; calls assembled into canonical Calls, held)
//!          ─► release (gates decide on Call + Context, audit records; `ask` waits for a person)
//!          ─► protocol encoder ─► agent
//! side sinks: audit · metrics · tracing
//! ```
//!
//! [`protocol`] and [`gate`] never touch sockets, and never import each other:
//! they meet at [`call`] and [`context`]. Only [`body`] and [`proxy`] do I/O.
//! See `docs/ARCHITECTURE.md` for the code map.

pub mod access;
pub mod approval;
pub mod audit;
pub mod auth;
pub mod budget;
pub mod call;
pub mod cli;
pub mod config;
pub mod context;
pub mod defer;
pub mod digest;
pub mod encoding;
pub mod error;
pub mod facts;
pub mod fence;
pub mod fold;
pub mod gate;
pub mod gather;
pub mod json;
pub mod judge;
pub mod metrics;
pub mod peer;
pub mod policy;
pub mod protocol;
pub mod proxy;
pub mod scrub;
pub mod server;
pub mod stamp;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod upstream;

pub use config::Config;
pub use error::Error;

/// Starts toolgate and serves until SIGTERM or SIGINT, then drains and exits.
pub async fn run(config: Config) -> Result<(), Error> {
    let running = server::start(config).await?;
    tracing::info!(addr = %running.addr, admin = %running.admin_addr, "toolgate listening");
    server::signal::wait().await;
    running.stop().await;
    Ok(())
}
