//! The command line: its grammar ([`args`]), its logging ([`log`]), and the
//! commands besides `serve` and `check`: `explain`, `policy scaffold`,
//! `eval sentinel`, `certs dev`, `demo`, `health` and `approvals`.

pub mod approvals;
pub mod args;
pub mod certs;
pub mod demo;
pub mod eval;
pub mod explain;
pub mod health;
pub mod log;
pub mod scaffold;
