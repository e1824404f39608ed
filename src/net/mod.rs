//! What the data port and the upstream client share about sockets: TLS
//! server configs and PEM reading ([`tls`]), the names in a verified client
//! certificate ([`peer`]), writes that wait one scheduler turn ([`defer`]),
//! and listening sockets with a deep backlog ([`listen`]).

pub mod defer;
pub mod listen;
pub mod peer;
pub mod tls;
