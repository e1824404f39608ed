//! Sealing what replicas share that must not be readable in Redis (a
//! conversation's system text): ChaCha20-Poly1305 under a key every replica
//! derives from the shared fence secret, a random nonce per record. A
//! record another key sealed, or one changed in Redis, does not open.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// `plain` sealed under `key`: base64 of the nonce and the sealed bytes.
pub fn seal(key: &[u8; 32], plain: &[u8]) -> Option<String> {
    use base64::Engine;
    let k = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).ok()?);
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new().fill(&mut nonce).ok()?;
    let mut out = plain.to_vec();
    k.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut out)
        .ok()?;
    let mut all = nonce.to_vec();
    all.extend_from_slice(&out);
    Some(base64::engine::general_purpose::STANDARD.encode(all))
}

/// What [`seal`] sealed under the same key; `None` for anything else.
pub fn open(key: &[u8; 32], sealed: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let all = base64::engine::general_purpose::STANDARD
        .decode(sealed)
        .ok()?;
    if all.len() < NONCE_LEN {
        return None;
    }
    let (nonce, body) = all.split_at(NONCE_LEN);
    let k = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).ok()?);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut body = body.to_vec();
    let plain = k.open_in_place(nonce, Aad::empty(), &mut body).ok()?;
    Some(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_record_opens_only_under_its_key_and_unchanged() {
        let (key, other) = ([7u8; 32], [8u8; 32]);
        let sealed = seal(&key, b"You are a billing agent.").unwrap_or_default();
        assert!(!sealed.contains("billing"));
        assert_eq!(
            open(&key, &sealed).as_deref(),
            Some(&b"You are a billing agent."[..])
        );
        assert_eq!(open(&other, &sealed), None);
        let mut bytes = sealed.into_bytes();
        let last = bytes.len() - 3;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            open(&key, &String::from_utf8(bytes).unwrap_or_default()),
            None
        );
        assert_eq!(open(&key, "not base64 !"), None);
        assert_ne!(seal(&key, b"x"), seal(&key, b"x"), "a nonce per record");
    }
}
