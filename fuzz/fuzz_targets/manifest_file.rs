//! Fuzz target `manifest_file`: raw bytes into `crilet::fuzzing::manifest_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| crilet::fuzzing::manifest_file(data));
