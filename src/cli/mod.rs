//! The command line: its grammar ([`args`]), its dispatch ([`dispatch`],
//! with `serve` and `check`), its logging ([`log`]), and the other commands: `explain`, `policy scaffold`,
//! `eval sentinel`, `certs dev`, `demo`, `health` and `approvals`.

pub mod approvals;
pub mod args;
pub mod certs;
pub mod demo;
mod dispatch;
pub mod eval;
pub mod explain;
pub mod health;
pub mod log;
pub mod mock;
pub mod scaffold;

pub use dispatch::main;
