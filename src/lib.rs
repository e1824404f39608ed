//! toolgate: a tool-call firewall for AI agents.
//!
//! A sidecar reverse proxy between an agent and its OpenAI-compatible provider.
//! The data flow, one way:
//!
//! ```text
//! agent ─► server ─► proxy (route, size cap, parse, context) ─► upstream ─► provider
//! provider ─► proxy (status, content type) ─► body adapter ─► wire::stream
//!          (SSE decode → text passes at once; tool-call deltas assembled and held)
//!          ─► release (gates decide, audit records) ─► wire rewrite ─► agent
//! side sinks: audit · metrics · tracing
//! ```
//!
//! `wire` and `gate` never touch sockets; only [`body`] and [`proxy`] do.
//! See `docs/ARCHITECTURE.md` for the code map.

pub mod audit;
pub mod auth;
pub mod body;
pub mod budget;
pub mod cli;
pub mod config;
pub mod encoding;
pub mod error;
pub mod facts;
pub mod fold;
pub mod gate;
pub mod gather;
pub mod judge;
pub mod metrics;
pub mod policy;
pub mod proxy;
pub mod release;
pub mod request;
pub mod secrets;
pub mod server;
pub mod stamp;
pub mod state;
pub mod tls;
pub mod upstream;
pub mod wire;

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
