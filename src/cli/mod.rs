//! The offline commands behind the CLI: `explain` and `policy scaffold`.

pub mod explain;
pub mod scaffold;
