//! Arbitrary conversation lists through the bridge's request check of every adapter (first
//! byte: which adapter, and request 1 or a later one): it must never panic, whatever the list.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../common/bridge_cases.rs"]
mod bridge_cases;

use std::sync::OnceLock;

fn validators() -> &'static Vec<bridge_cases::Validator> {
    static V: OnceLock<Vec<bridge_cases::Validator>> = OnceLock::new();
    V.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        (0..bridge_cases::CASES.len())
            .map(|i| bridge_cases::Validator::new(&root, i))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let v = validators();
    let _ = v[sel as usize % v.len()].check_list(body, sel & 0x80 != 0);
});
