//! Fuzz target `cri_log`: raw bytes into `crilet::fuzzing::cri_log`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| crilet::fuzzing::cri_log(data));
