//! Fuzz target `runtime_labels`: raw bytes into `crilet::fuzzing::runtime_labels`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| crilet::fuzzing::runtime_labels(data));
