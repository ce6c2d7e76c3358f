//! OpenCode's identifiers: `<prefix>_`, then 12 hex digits of
//! `(ms × 4096 + counter) mod 2^48`, then 14 base62 characters. Ascending ids (`msg_`, `prt_`, `tool_`) sort by creation time;
//! session ids use the complement (newest first). Messages and parts are ordered by id, so
//! every id pvisor makes sorts after the ids already in the session.

use std::sync::atomic::{AtomicU64, Ordering};

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

const MASK: u64 = (1 << 48) - 1;

/// The last (ms, counter) handed out, so ids made within one millisecond still ascend.
static LAST: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An ascending id with `prefix` (`tool`, `msg`, `prt`), later than any made before by this
/// process and not earlier than `not_before` (an id already in the session).
pub fn ascending(prefix: &str, not_before: Option<&str>) -> String {
    let floor = not_before.and_then(value_of).unwrap_or(0);
    let mut v;
    loop {
        let last = LAST.load(Ordering::SeqCst);
        v = ((now_ms() * 4096 + 1) & MASK).max(last + 1).max(floor + 1) & MASK;
        if LAST
            .compare_exchange(last, v, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            break;
        }
    }
    let hex = format!("{v:012x}");
    let mut random = [0u8; 14];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut random);
    let tail: String = random
        .iter()
        .map(|b| BASE62[(*b % 62) as usize] as char)
        .collect();
    format!("{prefix}_{hex}{tail}")
}

/// The 48-bit value of an ascending id (`msg_229dd21a1001…` → `0x229dd21a1001`).
pub fn value_of(id: &str) -> Option<u64> {
    let (_, rest) = id.split_once('_')?;
    u64::from_str_radix(rest.get(..12)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_ascend_and_sort_after_existing_ones() {
        let a = ascending("prt", None);
        let b = ascending("prt", Some(&a));
        assert!(b > a, "{b} > {a}");
        assert_eq!(a.len(), 4 + 12 + 14);
        let far = "prt_ffffffffff00AAAAAAAAAAAAAA";
        assert!(ascending("prt", Some(far)).as_str() > far);
        assert_eq!(
            value_of("msg_229dd21a1001svBuzqiNnqbh32"),
            Some(0x229dd21a1001)
        );
    }
}
