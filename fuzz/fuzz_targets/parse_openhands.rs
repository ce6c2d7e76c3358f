//! Arbitrary bytes as the canonical form of an OpenHands conversation store (`base_state.json`
//! then one event per line): the parser must never panic; an error must name the input file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz-input");
    let adapter = (pvisor::adapters::registry().get("openhands").expect("registered").make)();
    if let Err(e) = adapter.parse(path, data) {
        assert_eq!(e.path, path);
    }
});
