//! Per-token rate limits: a token bucket per caller (refilled continuously).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::config::Rate;

#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// Takes one request from `key`'s bucket; `Err(seconds)` says when the next is allowed.
    pub fn check(&self, key: &str, rate: Rate) -> Result<(), u64> {
        if rate.per_minute == 0 {
            return Ok(());
        }
        let per_sec = f64::from(rate.per_minute) / 60.0;
        let burst = f64::from(rate.burst.max(1));
        let now = Instant::now();
        let Ok(mut map) = self.buckets.lock() else {
            return Ok(());
        };
        if map.len() > 100_000 {
            // Forget full buckets (idle callers) so the map cannot grow without bound.
            map.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * per_sec < burst
            });
        }
        let (tokens, at) = map.entry(key.to_string()).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * per_sec).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / per_sec).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refuse() {
        let r = RateLimiter::default();
        let rate = Rate {
            per_minute: 60,
            burst: 3,
        };
        for _ in 0..3 {
            r.check("a", rate).unwrap();
        }
        let wait = r.check("a", rate).unwrap_err();
        assert!((1..=2).contains(&wait));
        r.check("b", rate).unwrap();
        for _ in 0..100 {
            r.check(
                "c",
                Rate {
                    per_minute: 0,
                    burst: 0,
                },
            )
            .unwrap();
        }
    }
}
