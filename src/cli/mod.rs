//! Command implementations behind the `crilet` binary. Each returns its
//! output as data or text so that tests can drive it without a terminal.
//! On top (beside `main`): it may use the agent and the subsystems it
//! queries (scripts/layers.txt).

pub mod agent_client;
pub mod command;
pub mod debug;
pub mod runtime_info;
pub mod takeover_report;
pub mod validate;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Table,
    Json,
    Yaml,
}
