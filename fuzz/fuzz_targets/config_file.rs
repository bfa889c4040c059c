//! Fuzz target `config_file`: raw bytes into `crilet::fuzzing::config_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| crilet::fuzzing::config_file(data));
