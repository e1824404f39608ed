//! The budget of body bytes in flight: every request body, every whole
//! (non-streamed) response body, and what each stream holds back (its held
//! calls) is charged while toolgate holds it. A body that would take the
//! total over `[limits] max_body_bytes_in_flight` is refused with a 503, and
//! a stream that would ends with an error event (its held calls dropped),
//! so a burst of large bodies or slow streams cannot exhaust memory.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::Error;

/// Charged in units of this many bytes.
const UNIT: usize = 1024;

/// The shared budget.
#[derive(Clone)]
pub struct Budget {
    sem: Arc<Semaphore>,
    units: usize,
}

impl Budget {
    pub fn new(max_bytes: usize) -> Budget {
        let units = (max_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Budget {
            sem: Arc::new(Semaphore::new(units)),
            units,
        }
    }

    /// An empty charge against this budget, grown as a body arrives.
    pub fn charge(&self) -> Charge {
        Charge {
            sem: Some(self.sem.clone()),
            units: 0,
            permit: None,
        }
    }

    /// The whole budget, in bytes (a multiple of the unit).
    pub fn capacity_bytes(&self) -> usize {
        self.units * UNIT
    }

    /// Units free now (for tests and metrics).
    pub fn available_bytes(&self) -> usize {
        self.sem.available_permits() * UNIT
    }
}

/// Bytes one body holds of the budget; given back on drop.
pub struct Charge {
    /// `None`: a body too small and capped to be worth counting.
    sem: Option<Arc<Semaphore>>,
    units: usize,
    permit: Option<OwnedSemaphorePermit>,
}

impl Charge {
    /// A charge against no budget (small, capped bodies such as error bodies).
    pub fn uncounted() -> Charge {
        Charge {
            sem: None,
            units: 0,
            permit: None,
        }
    }

    /// Holds enough of the budget for `bytes` in all; `Error::Overloaded`
    /// (nothing more is taken) when the budget has not that much left.
    pub fn grow_to(&mut self, bytes: usize) -> Result<(), Error> {
        let want = bytes.div_ceil(UNIT);
        let Some(sem) = &self.sem else {
            return Ok(());
        };
        if want <= self.units {
            return Ok(());
        }
        let more = u32::try_from(want - self.units).map_err(|_| Error::Overloaded("body_bytes"))?;
        let p = sem
            .clone()
            .try_acquire_many_owned(more)
            .map_err(|_| Error::Overloaded("body_bytes"))?;
        match &mut self.permit {
            Some(held) => held.merge(p),
            None => self.permit = Some(p),
        }
        self.units = want;
        Ok(())
    }

    /// Holds the budget for `bytes` held now: grown as they grow, and all
    /// of it given back once nothing is held (a stream's held calls,
    /// released or dropped together).
    pub fn hold(&mut self, bytes: usize) -> Result<(), Error> {
        if bytes == 0 {
            self.permit = None;
            self.units = 0;
            return Ok(());
        }
        self.grow_to(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_bounded_and_given_back() {
        let b = Budget::new(10 * UNIT);
        let mut a = b.charge();
        a.grow_to(6 * UNIT).unwrap();
        a.grow_to(3 * UNIT).unwrap();
        let mut c = b.charge();
        assert!(matches!(c.grow_to(5 * UNIT), Err(Error::Overloaded(_))));
        c.grow_to(4 * UNIT).unwrap();
        assert_eq!(b.available_bytes(), 0);
        drop(a);
        assert_eq!(b.available_bytes(), 6 * UNIT);
    }

    #[test]
    fn a_hold_grows_and_is_given_back_when_nothing_is_held() {
        let b = Budget::new(10 * UNIT);
        let mut h = b.charge();
        h.hold(3 * UNIT).unwrap();
        h.hold(UNIT).unwrap();
        assert_eq!(b.available_bytes(), 7 * UNIT, "kept while anything is held");
        assert!(matches!(h.hold(11 * UNIT), Err(Error::Overloaded(_))));
        h.hold(0).unwrap();
        assert_eq!(b.available_bytes(), 10 * UNIT);
        h.hold(10 * UNIT).unwrap();
        assert_eq!(b.available_bytes(), 0);
    }
}
