//! The commands behind the CLI besides `serve` and `check`: `explain`,
//! `policy scaffold` and `eval sentinel`.

pub mod eval;
pub mod explain;
pub mod scaffold;
