//! crilet's integration tests: one binary, driving real containerd and a
//! real kube-apiserver.
//!
//! Tests that need the runtime or the API server are `#[ignore]`d so that a
//! plain `cargo test` lists them as ignored instead of passing without
//! running them. The test command (`scripts/test.sh`) starts private
//! containerds and the API server (`scripts/apiserver-env.sh`), exports
//! where they are (CRILET_TEST_ENDPOINT, CRILET_KUBE_ADMIN_KUBECONFIG, ...)
//! and runs them with `--ignored`, once per runtime; a test whose variable
//! is missing fails, naming it. Tests without that need (bad endpoints, the
//! API server double's own tests) always run, and `scripts/test.sh` runs
//! them once, before the runtimes: so none of them may read a per-runtime
//! variable (CRILET_TEST_RUNTIME, CRILET_*_ENDPOINT, ...).

mod agent;
mod agent_cases;
mod apiserver;
mod apiserver_tests;
mod bad_endpoint;
mod cli;
mod cli_debug;
mod cri;
mod cri_config;
mod crictl;
mod events;
mod gc;
mod gc_agent;
mod gc_support;
mod kube;
mod kube_events;
mod kubectl;
mod kubelet_server;
mod kubelet_server_client;
mod kubelet_server_logs;
mod lifecycle;
mod log_rotation;
mod log_shipper;
mod log_symlinks;
mod manifest_server;
mod mirror;
mod mirror_client;
mod mirror_faults;
mod mirror_forbidden;
mod mirror_status;
mod node_admission;
mod node_status;
mod probes;
mod sd_notify;
mod services;
mod sidecars;
mod stats;
mod stats_api;
mod support;
mod tls_bootstrap;
mod url_agent;
mod url_source;
mod validate;
mod volumes;
