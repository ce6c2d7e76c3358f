//! Arbitrary bytes as a mini-swe-agent trajectory: the parser must never panic; an error must name
//! the input file.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz-input");
    let adapter = (pvisor::adapters::registry().get("mini-swe-agent").expect("registered").make)();
    if let Err(e) = adapter.parse(path, data) {
        assert_eq!(e.path, path);
    }
});
