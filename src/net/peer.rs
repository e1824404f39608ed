//! The names in a verified TLS client certificate (mutual TLS): its
//! subject's common name and the URIs among its subject alternative names
//! (SPIFFE ids). `[[client]]` entries with `cert_cn` or `cert_uri` match them.

use rustls_pki_types::CertificateDer;

use crate::config::{CertName, Client};
use crate::error::Error;

/// What a connection's client certificate says, read once per connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerNames {
    /// The subject's common name; `None` when it has none, or more than one
    /// (which one would be meant is not clear, so neither is used).
    pub cn: Option<String>,
    pub uris: Vec<String>,
}

impl PeerNames {
    /// The names of the end-entity certificate (the first one presented),
    /// which rustls has verified against `client_ca` by now.
    pub fn of(chain: &[CertificateDer<'_>]) -> Option<PeerNames> {
        let cert = webpki::EndEntityCert::try_from(chain.first()?).ok()?;
        Some(PeerNames {
            cn: common_name(cert.subject()),
            uris: cert.valid_uri_names().map(str::to_string).collect(),
        })
    }

    /// Whether `name` is one of these.
    pub fn carries(&self, name: &CertName) -> bool {
        match name {
            CertName::Cn(cn) => self.cn.as_deref() == Some(cn.as_str()),
            CertName::Uri(uri) => self.uris.iter().any(|u| u == uri),
        }
    }

    /// The one client this certificate names; a generic 401 when it names
    /// two different ones (never guessed between), `Ok(None)` when none.
    pub fn client<'c>(&self, clients: &'c [Client]) -> Result<Option<&'c str>, Error> {
        let mut found: Option<&str> = None;
        for c in clients {
            if !c.cert.as_ref().is_some_and(|n| self.carries(n)) {
                continue;
            }
            match found {
                Some(f) if f != c.name => return Err(Error::Unauthorized),
                _ => found = Some(&c.name),
            }
        }
        Ok(found)
    }
}

/// OID 2.5.4.3 (`commonName`), as its DER content bytes.
const CN_OID: [u8; 3] = [0x55, 0x04, 0x03];

/// The one common name in a DER `Name`'s content (a sequence of sets of
/// attribute type-and-value sequences); `None` when there is none, more
/// than one, or it is not a UTF-8, printable or IA5 string.
fn common_name(name: &[u8]) -> Option<String> {
    let mut found = None;
    let mut rdns = name;
    while !rdns.is_empty() {
        let (0x31, set, rest) = tlv(rdns)? else {
            return None;
        };
        rdns = rest;
        let mut atvs = set;
        while !atvs.is_empty() {
            let (0x30, atv, rest) = tlv(atvs)? else {
                return None;
            };
            atvs = rest;
            let (0x06, oid, value) = tlv(atv)? else {
                return None;
            };
            if oid != CN_OID {
                continue;
            }
            let (tag, text, tail) = tlv(value)?;
            // UTF8String, PrintableString, IA5String.
            if !tail.is_empty() || !matches!(tag, 0x0c | 0x13 | 0x16) {
                return None;
            }
            if found.is_some() {
                return None;
            }
            found = Some(std::str::from_utf8(text).ok()?.to_string());
        }
    }
    found
}

/// One DER tag-length-value: the tag, the value, and what follows it.
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |l, b| (l << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let (value, after) = rest.split_at(len);
    Some((tag, value, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn cert(cns: &[&str], uris: &[&str]) -> CertificateDer<'static> {
        let mut p = CertificateParams::new(vec!["agent.example".to_string()]).unwrap();
        p.distinguished_name = DistinguishedName::new();
        for cn in cns {
            p.distinguished_name.push(DnType::CommonName, *cn);
        }
        p.distinguished_name
            .push(DnType::OrganizationName, "Example Org");
        for u in uris {
            p.subject_alt_names
                .push(SanType::URI((*u).try_into().unwrap()));
        }
        let key = KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().clone()
    }

    fn client(name: &str, cert: CertName) -> Client {
        Client {
            name: name.into(),
            token_sha256: None,
            token: None,
            cert: Some(cert),
        }
    }

    #[test]
    fn reads_the_common_name_and_uri_names() {
        let names = PeerNames::of(&[cert(
            &["billing-agent"],
            &["spiffe://example.org/agent/billing", "https://x.example/id"],
        )])
        .unwrap();
        assert_eq!(names.cn.as_deref(), Some("billing-agent"));
        assert_eq!(
            names.uris,
            ["spiffe://example.org/agent/billing", "https://x.example/id"]
        );
        assert_eq!(PeerNames::of(&[cert(&[], &[])]).unwrap().cn, None);
        assert_eq!(PeerNames::of(&[]), None);
        assert_eq!(
            PeerNames::of(&[CertificateDer::from(vec![0x30, 0x00])]),
            None
        );
    }

    #[test]
    fn a_certificate_names_one_client_or_is_refused() {
        let clients = [
            client(
                "billing",
                CertName::Uri("spiffe://example.org/agent/billing".into()),
            ),
            client("ops", CertName::Cn("ops-agent".into())),
            Client {
                name: "token-user".into(),
                token_sha256: Some([1; 32]),
                token: None,
                cert: None,
            },
        ];
        let by = |cns: &[&str], uris: &[&str]| {
            PeerNames::of(&[cert(cns, uris)])
                .unwrap()
                .client(&clients)
                .map(|c| c.map(str::to_string))
        };
        assert_eq!(
            by(&[], &["spiffe://example.org/agent/billing"]).ok(),
            Some(Some("billing".to_string()))
        );
        assert_eq!(by(&["ops-agent"], &[]).ok(), Some(Some("ops".to_string())));
        // Matching is exact: no prefix, no case folding.
        assert_eq!(
            by(&["OPS-AGENT"], &["spiffe://example.org/agent/billing/x"]).ok(),
            Some(None)
        );
        assert!(matches!(
            by(&["ops-agent"], &["spiffe://example.org/agent/billing"]),
            Err(Error::Unauthorized)
        ));
    }

    #[test]
    fn malformed_names_read_as_none() {
        assert_eq!(tlv(&[0x30, 0x82, 0x01]), None);
        assert_eq!(tlv(&[0x30, 0x05, 0x01]), None);
        assert_eq!(tlv(&[0x30, 0x85, 1, 1, 1, 1, 1]), None);
        // A set holding something other than a sequence.
        assert_eq!(common_name(&[0x31, 0x02, 0x04, 0x00]), None);
        // CN as a BMPString is not read.
        let bmp = [
            0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0x1e, 0x02, 0x00, 0x61,
        ];
        assert_eq!(common_name(&bmp), None);
        let utf8 = [
            0x31, 0x0a, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x01, b'a',
        ];
        assert_eq!(common_name(&utf8).as_deref(), Some("a"));
        // Two common names: neither is used.
        assert_eq!(common_name(&[utf8, utf8].concat()), None);
    }
}
