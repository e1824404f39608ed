//! toolgate: a tool-call firewall for AI agents.
//!
//! A sidecar reverse proxy between an agent and its provider. A request
//! comes in through [`server`], and [`proxy`] takes it through its phases:
//! the client's identity, the route table (which wire format, in
//! [`protocol`], reads it), the body read within the budget, its
//! [`context`], tool results fenced as untrusted text ([`fence`]), denied
//! tools hidden; then it goes to the protocol's [`upstream`]. The answer
//! comes back through the same protocol's rewriter: text passes at once,
//! each tool call is held as a canonical [`call::Call`] until the gates
//! ([`gate`], driven by [`policy`]) decide it, the decision is written to
//! the [`audit`] trail, an `ask` waits for a person ([`approval`]), and
//! only then is the call released as it came, or replaced by a neutral
//! turn. [`metrics`] and [`telemetry`] watch from the side; [`state`]
//! keeps what replicas share (rate-limit buckets in Redis).
//!
//! [`protocol`] and [`gate`] never touch sockets and never import each
//! other: they meet at [`call`] and [`context`]. [`app`] builds everything
//! once; [`cli`] is the command line; [`mock`] is a scripted provider to
//! put behind it. `docs/ARCHITECTURE.md` has the
//! layers (a test checks them) and the code map.

// Leaves.
pub mod call;
pub mod digest;
pub mod error;
pub mod fold;
// Reading and configuration.
pub mod config;
pub mod facts;
pub mod json;
pub mod metrics;
pub mod net;
// The request, in flow order.
pub mod context;
pub mod fence;
pub mod protocol;
pub mod proxy;
pub mod server;
pub mod upstream;
// Deciding.
pub mod approval;
pub mod audit;
pub mod gate;
pub mod policy;
pub mod state;
pub mod telemetry;
// Building and running it.
pub mod app;
pub mod cli;
// The scripted provider, for trying and testing it.
pub mod mock;

pub use app::run;
pub use config::Config;
pub use error::Error;
