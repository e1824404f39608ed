//! A JSON reader that matches keys without regard to case, last one winning:
//! the model of Go's `encoding/json` and Newtonsoft, which agents use. Used
//! as an oracle: what such a client reads from what toolgate released.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

pub enum L {
    Obj(Vec<(String, L)>),
    Arr(Vec<L>),
    Str(String),
    Other(String),
}

/// Simple case folding as Go's `strings.EqualFold` does it.
fn fold(s: &str) -> String {
    s.chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == 'ſ' { 's' } else { c })
        .collect()
}

pub fn parse(s: &str) -> Option<L> {
    serde_json::from_str(s).ok()
}

impl L {
    /// The last member whose key folds to `key`'s fold.
    pub fn get(&self, key: &str) -> Option<&L> {
        let L::Obj(m) = self else { return None };
        let k = fold(key);
        m.iter().rev().find(|(n, _)| fold(n) == k).map(|(_, v)| v)
    }

    pub fn items(&self) -> Vec<&L> {
        match self {
            L::Arr(a) => a.iter().collect(),
            _ => Vec::new(),
        }
    }

    pub fn str(&self) -> Option<String> {
        match self {
            L::Str(s) => Some(s.clone()),
            _ => None,
        }
    }

    pub fn to_text(&self) -> String {
        match self {
            L::Str(s) | L::Other(s) => s.clone(),
            _ => String::new(),
        }
    }
}

impl<'de> Deserialize<'de> for L {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<L, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = L;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, b: bool) -> Result<L, E> {
                Ok(L::Other(b.to_string()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<L, E> {
                Ok(L::Other(n.to_string()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<L, E> {
                Ok(L::Other(n.to_string()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<L, E> {
                Ok(L::Other(n.to_string()))
            }
            fn visit_str<E>(self, s: &str) -> Result<L, E> {
                Ok(L::Str(s.to_string()))
            }
            fn visit_unit<E>(self) -> Result<L, E> {
                Ok(L::Other("null".into()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<L, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = s.next_element()? {
                    v.push(x);
                }
                Ok(L::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<L, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = m.next_entry::<String, L>()? {
                    v.push((k, x));
                }
                Ok(L::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}
