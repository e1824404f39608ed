//! Leaf helpers anyone may import: hex, SHA-256, the content key of texts
//! that caches remember, RFC 3339 timestamps, and file change stamps
//! ([`stamp`]).

pub mod stamp;

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    // By table: the `hex` crate's encoder took about 50 instructions a byte,
    // and three SHA-256 digests are written per gated call.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The key a cache remembers a text's reading by (BLAKE3: as collision
/// resistant as SHA-256 is here, and faster on long texts): tool results
/// are hashed again on every turn of a conversation.
pub fn content_key(data: &[u8]) -> [u8; 32] {
    *blake3::hash(data).as_bytes()
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// HMAC-SHA-256 (RFC 2104) of the concatenated `msg` parts.
/// Whether `a` and `b` are equal, compared in full whatever their
/// contents (the time taken says nothing about where they differ).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

pub fn hmac_sha256(key: &[u8], msg: &[&[u8]]) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    // HMAC takes a key of any length (a long one is hashed first), so the
    // `InvalidLength` error `KeyInit` allows for other MACs cannot happen.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => Hmac::<Sha256>::new(&Default::default()),
    };
    for m in msg {
        mac.update(m);
    }
    mac.finalize().into_bytes().into()
}

/// SHA-256 of `parts` one after the other, without joining them first.
pub fn sha256_parts(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part);
    }
    h.finalize().into()
}

/// 64 hex digits → 32 bytes.
pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s.trim(), &mut out).ok()?;
    Some(out)
}

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// The current UTC time as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339_of(SystemTime::now())
}

/// 32 bytes from the OS's random source (else a hash of the time, the
/// process and an address: unique, if not secret).
pub fn random_key() -> [u8; 32] {
    let mut buf = [0u8; 32];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf));
    if random.is_err() {
        let seed = format!("{:?}-{}-{:p}", SystemTime::now(), std::process::id(), &buf);
        buf = sha256(seed.as_bytes());
    }
    buf
}

/// `t` as RFC 3339 with milliseconds (UTC).
pub fn rfc3339_of(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339(d.as_secs() as i64, d.subsec_millis())
}

fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Written digit by digit: `format!` with padding cost more than the rest
    // of an audit record's fields (one per gated call).
    if !(0..=9999).contains(&year) {
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
    }
    let mut out = String::with_capacity(24);
    for (n, width, then) in [
        (year, 4, '-'),
        (month, 2, '-'),
        (day, 2, 'T'),
        (rem / 3600, 2, ':'),
        (rem % 3600 / 60, 2, ':'),
        (rem % 60, 2, '.'),
        (i64::from(millis), 3, 'Z'),
    ] {
        for p in (0..width).rev() {
            // A digit: 0 to 9 (the value is within its width, checked above).
            let d = (n / 10_i64.pow(p)).rem_euclid(10) as u8;
            out.push(char::from(b'0' + d));
        }
        out.push(then);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_321_845, 123), "2026-11-22T04:30:45.123Z");
        assert_eq!(rfc3339(253_402_300_799, 999), "9999-12-31T23:59:59.999Z");
        // Past year 9999 the padded `format!` form takes over.
        assert_eq!(rfc3339(253_402_300_800, 0), "10000-01-01T00:00:00.000Z");
    }

    #[test]
    fn rfc3339_digits_match_the_padded_format() {
        let mut secs = 0_i64;
        while secs < 4_102_444_800 {
            let millis = (secs % 1000) as u32;
            let s = rfc3339(secs, millis);
            let (date, time) = s.split_once('T').unwrap();
            let rem = secs.rem_euclid(86_400);
            let want = format!(
                "{:02}:{:02}:{:02}.{millis:03}Z",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60
            );
            assert_eq!(time, want);
            assert_eq!(date.len(), 10, "{s}");
            secs += 86_399 * 7 + 3_607;
        }
    }

    #[test]
    fn hex_and_sha256() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        let every: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&every), hex::encode(&every));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
