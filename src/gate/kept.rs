//! A small remembered map for the gates' memos: looked up under a lock,
//! cleared whole when full (its keys may come from model output, so it is
//! bounded without keeping an order).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

pub struct Kept<K, V> {
    map: Mutex<HashMap<K, V>>,
    max: usize,
}

impl<K: Hash + Eq, V: Clone> Kept<K, V> {
    /// Keeps at most `max` entries.
    pub fn new(max: usize) -> Kept<K, V> {
        Kept {
            map: Mutex::new(HashMap::new()),
            max,
        }
    }

    /// The value kept for `key`, if any.
    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.map.lock().ok()?.get(key).cloned()
    }

    /// Keeps `value` for `key`; everything kept is let go first when full.
    pub fn insert(&self, key: K, value: V) {
        if let Ok(mut m) = self.map.lock() {
            if m.len() >= self.max {
                m.clear();
            }
            m.insert(key, value);
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn keeps_up_to_its_size_then_starts_again() {
        let k: Kept<Box<str>, u32> = Kept::new(2);
        k.insert("a".into(), 1);
        k.insert("b".into(), 2);
        assert_eq!((k.get("a"), k.get("b"), k.len()), (Some(1), Some(2), 2));
        k.insert("c".into(), 3);
        assert_eq!((k.get("a"), k.get("c"), k.len()), (None, Some(3), 1));
    }
}
