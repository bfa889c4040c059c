//! Fuzz target `manifest_url`: raw bytes into `crilet::fuzzing::manifest_url`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| crilet::fuzzing::manifest_url(data));
