//! What broke in an exchange with the upstream, read from hyper's error
//! and its causes (an HTTP/2 GOAWAY or reset, an I/O error, broken HTTP,
//! a body hyper could not decode).

use std::error::Error as _;

use crate::error::Fault;

/// The fault behind a hyper client error.
pub fn of(e: &hyper::Error) -> Fault {
    if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() {
        return Fault::Protocol;
    }
    let mut cause = e.source();
    while let Some(c) = cause {
        // A body hyper could not decode (a chunk's size line or its end).
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            ) {
                return Fault::Protocol;
            }
        }
        if let Some(h2) = c.downcast_ref::<h2::Error>() {
            if h2.is_go_away() {
                return Fault::Goaway;
            }
            if h2.is_reset() || h2.is_io() {
                return Fault::Reset;
            }
            return Fault::Protocol;
        }
        cause = c.source();
    }
    Fault::Reset
}
