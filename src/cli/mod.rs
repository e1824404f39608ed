//! The commands behind the CLI besides `serve` and `check`: `explain`,
//! `policy scaffold`, `eval sentinel`, `certs dev`,
//! `demo` and `health`.

pub mod certs;
pub mod demo;
pub mod eval;
pub mod explain;
pub mod health;
pub mod scaffold;
