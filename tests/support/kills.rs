//! The settings of a kill campaign, shared by the kill harnesses: `PVISOR_KILL_FULL=1` for a
//! campaign, `PVISOR_KILLS` kills, `PVISOR_KILL_SEED` to repeat a sequence.
#![allow(dead_code)]

/// Whether a full campaign was asked for (`PVISOR_KILL_FULL=1`).
pub fn full() -> bool {
    std::env::var("PVISOR_KILL_FULL").is_ok_and(|v| v == "1")
}

/// How many kills: `PVISOR_KILLS` (default `campaign`) in a campaign, `suite` otherwise.
pub fn count(suite: usize, campaign: usize) -> usize {
    if full() {
        std::env::var("PVISOR_KILLS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(campaign)
    } else {
        suite
    }
}

/// A small deterministic PRNG (xorshift), seeded from the clock unless `PVISOR_KILL_SEED` is
/// set.
pub struct Rng(pub u64);

impl Rng {
    pub fn from_env() -> Rng {
        Rng(std::env::var("PVISOR_KILL_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            }))
    }
    pub fn seed(&self) -> u64 {
        self.0
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
