//! Token buckets per key: how often each requester may make the hub do costly work for it.
//!
//! Anyone with `create` on CertificateSigningRequests (every cluster agent) can create them as
//! fast as the apiserver takes them, and each one that passes the cheap checks costs the hub an
//! access review, a plugin call or an approval, and the signer a certificate. Keyed by the
//! requester the apiserver recorded (never by a label the requester wrote, which would let one
//! cluster spend another's budget), a flood waits in its own bucket while everyone else's
//! requests go through at once. A request over the rate is not refused: it waits its turn.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Buckets that hold `burst` tokens each and gain one every `refill`.
#[derive(Debug)]
pub struct Buckets {
    burst: u32,
    refill: Duration,
    /// Tokens left and when they were last counted, per key. Keys whose bucket has refilled are
    /// dropped once the map grows past [`PRUNE_AT`], so idle requesters cost nothing.
    buckets: HashMap<String, (u32, Instant)>,
}

/// Keys kept before full buckets are dropped.
const PRUNE_AT: usize = 1024;

impl Buckets {
    /// Buckets of `burst` tokens (at least one) refilled one per `refill`.
    pub fn new(burst: u32, refill: Duration) -> Self {
        Self {
            burst: burst.max(1),
            refill,
            buckets: HashMap::new(),
        }
    }

    /// Takes a token from `key`'s bucket: `Ok` when there was one, else how long until the
    /// next one.
    pub fn take(&mut self, key: &str, now: Instant) -> Result<(), Duration> {
        if self.buckets.len() >= PRUNE_AT {
            let (burst, refill) = (self.burst, self.refill);
            self.buckets
                .retain(|_, (tokens, since)| refilled(*tokens, *since, burst, refill, now).0 < burst);
        }
        let (burst, refill) = (self.burst, self.refill);
        let entry = self.buckets.entry(key.to_owned()).or_insert((burst, now));
        let (tokens, since) = refilled(entry.0, entry.1, burst, refill, now);
        if tokens == 0 {
            *entry = (0, since);
            return Err((since + refill).saturating_duration_since(now));
        }
        *entry = (tokens - 1, since);
        Ok(())
    }
}

/// The tokens of a bucket that held `tokens` at `since`, and the instant they are counted
/// from (a full bucket counts from `now`; a partial one keeps its fraction of a refill).
fn refilled(tokens: u32, since: Instant, burst: u32, refill: Duration, now: Instant) -> (u32, Instant) {
    if refill.is_zero() {
        return (burst, now);
    }
    let elapsed = now.saturating_duration_since(since);
    let gained = u32::try_from(elapsed.as_nanos() / refill.as_nanos()).unwrap_or(u32::MAX);
    let tokens = tokens.saturating_add(gained);
    if tokens >= burst {
        (burst, now)
    } else {
        (tokens, since + refill * gained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_refill() {
        let start = Instant::now();
        let mut buckets = Buckets::new(3, Duration::from_secs(10));
        for _ in 0..3 {
            assert_eq!(buckets.take("a", start), Ok(()));
        }
        assert_eq!(buckets.take("a", start), Err(Duration::from_secs(10)));
        assert_eq!(
            buckets.take("a", start + Duration::from_secs(4)),
            Err(Duration::from_secs(6))
        );
        assert_eq!(buckets.take("a", start + Duration::from_secs(10)), Ok(()));
        assert!(buckets.take("a", start + Duration::from_secs(11)).is_err());
        // Partial refills are kept: 25 s after the last count gives two tokens.
        assert_eq!(buckets.take("a", start + Duration::from_secs(30)), Ok(()));
        assert_eq!(buckets.take("a", start + Duration::from_secs(30)), Ok(()));
        assert!(buckets.take("a", start + Duration::from_secs(30)).is_err());
    }

    #[test]
    fn one_key_emptying_its_bucket_leaves_the_others_full() {
        let now = Instant::now();
        let mut buckets = Buckets::new(2, Duration::from_secs(60));
        while buckets.take("flood", now).is_ok() {}
        assert_eq!(buckets.take("quiet", now), Ok(()));
        assert_eq!(buckets.take("quiet", now), Ok(()));
    }

    #[test]
    fn idle_keys_are_forgotten_and_busy_ones_kept() {
        let now = Instant::now();
        let mut buckets = Buckets::new(2, Duration::from_secs(60));
        buckets.take("busy", now).unwrap();
        for i in 0..PRUNE_AT {
            buckets.take(&format!("k{i}"), now).unwrap();
        }
        let later = now + Duration::from_secs(120);
        buckets.take("new", later).unwrap();
        assert_eq!(buckets.buckets.len(), 1, "every refilled bucket dropped");
        let mut buckets = Buckets::new(2, Duration::from_secs(60));
        buckets.take("busy", now).unwrap();
        buckets.take("busy", now).unwrap();
        for i in 0..PRUNE_AT {
            buckets.take(&format!("k{i}"), now).unwrap();
        }
        buckets.take("new", now + Duration::from_secs(1)).unwrap();
        assert!(
            buckets.take("busy", now + Duration::from_secs(1)).is_err(),
            "an empty bucket is kept"
        );
    }
}
