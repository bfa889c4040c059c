//! crilet's integration tests: one binary, driving real containerd.
//!
//! Tests that need the runtime are `#[ignore]`d so that a plain `cargo test`
//! lists them as ignored instead of passing without running them. The test
//! command (`scripts/test.sh`) starts a private containerd, exports its
//! endpoint as CRILET_TEST_ENDPOINT and runs them with `--include-ignored`.
//! Tests without that need (bad endpoints) always run.

mod agent;
mod agent_cases;
mod apiserver;
mod apiserver_tests;
mod bad_endpoint;
mod cli;
mod cri;
mod events;
mod gc;
mod gc_agent;
mod gc_support;
mod lifecycle;
mod manifest_server;
mod mirror;
mod probes;
mod stats;
mod stats_api;
mod support;
mod url_agent;
mod url_source;
