//! The commands behind the CLI besides `serve` and `check`: `explain`,
//! `policy scaffold`, `eval sentinel` and `certs dev`.

pub mod certs;
pub mod eval;
pub mod explain;
pub mod scaffold;
