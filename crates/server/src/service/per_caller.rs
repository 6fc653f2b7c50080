//! How many of one kind of thing (open WebSockets, gradings under way) each caller has now, so
//! that a per-caller cap can refuse one more.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
pub struct PerCaller {
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

/// One of a caller's things: counted until dropped.
pub struct Counted {
    counts: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

fn lock(m: &Mutex<HashMap<String, usize>>) -> MutexGuard<'_, HashMap<String, usize>> {
    // Each update is one statement: a poisoned map is still a consistent one.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut m = lock(&self.counts);
        if let Some(n) = m.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                // Callers with none are forgotten: the map holds only callers with something on.
                m.remove(&self.caller);
            }
        }
    }
}

impl PerCaller {
    /// Counts one more for `caller` unless it has `max` already: then `Err` with how many it has.
    pub fn take(&self, caller: &str, max: usize) -> Result<Counted, usize> {
        let mut m = lock(&self.counts);
        let n = m.entry(caller.to_string()).or_insert(0);
        if *n >= max {
            let has = *n;
            if has == 0 {
                m.remove(caller);
            }
            return Err(has);
        }
        *n += 1;
        Ok(Counted {
            counts: self.counts.clone(),
            caller: caller.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_caller_up_to_the_cap_and_forgets_callers_with_none() {
        let p = PerCaller::default();
        let a1 = p.take("a", 2).unwrap();
        let _a2 = p.take("a", 2).unwrap();
        assert_eq!(p.take("a", 2).err(), Some(2));
        let b = p.take("b", 2).unwrap();
        drop(a1);
        let _a3 = p.take("a", 2).unwrap();
        assert_eq!(lock(&p.counts).get("a"), Some(&2));
        drop(b);
        assert!(!lock(&p.counts).contains_key("b"));
        assert_eq!(p.take("c", 0).err(), Some(0));
        assert!(!lock(&p.counts).contains_key("c"));
    }
}
