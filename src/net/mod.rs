//! What the data port and the upstream client share about sockets: TLS
//! server configs and PEM reading ([`tls`]), the names in a verified client
//! certificate ([`peer`]), and writes that wait one scheduler turn ([`defer`]).

pub mod defer;
pub mod peer;
pub mod tls;
