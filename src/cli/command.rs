//! The `crilet` command line as clap sees it: every subcommand and its
//! arguments, and what is generated from them (the completion scripts and
//! the man page). `main` dispatches on [`Command`]; keeping the definition
//! in the library lets tests and the packaging check what an operator types.
//! Invariant: the man page and the completions come from this one
//! definition, so they cannot disagree with the parser.

use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use super::OutputFormat;
use crate::units::parse_duration;

/// crilet's version and the git commit it was built from (`unknown` when
/// built outside a git checkout), as `crilet --version` prints it.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CRILET_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "crilet",
    version = VERSION,
    about = "Runs static pods on a CRI runtime, as the kubelet does"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the agent: static pods from --pod-manifest-path on the CRI runtime.
    Run(Box<crate::agent::config::RunArgs>),
    /// Run N hollow nodes in one process: each joins the cluster with its own
    /// TLS bootstrap and runs the real agent on an in-memory runtime.
    Hollow(Box<crate::kubemark::HollowArgs>),
    /// Show the runtime's name, version, conditions, image filesystem and images.
    RuntimeInfo {
        /// The CRI endpoint (unix socket).
        #[arg(long, env = "CONTAINER_RUNTIME_ENDPOINT", default_value = crate::cri::DEFAULT_ENDPOINT)]
        container_runtime_endpoint: String,
        /// Deadline of each CRI call (Go duration, as the kubelet's flag).
        #[arg(long, default_value = "2m", value_parser = parse_duration)]
        runtime_request_timeout: Duration,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// List the pods the running agent manages, with static and mirror UIDs.
    Pods(AgentArgs),
    /// Show CPU, memory, rootfs and log usage per container, of one pod
    /// (NAMESPACE/NAME, NAME in default, or a static or mirror UID) or all.
    Stats {
        /// The pod; all pods when omitted.
        pod: Option<String>,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Show the node and pod summary (the kubelet Summary API's content).
    Summary(AgentArgs),
    /// List the runtime's images as image GC sees them: size, last used,
    /// in use, pinned.
    Images(AgentArgs),
    /// Print a container's log (as `kubectl logs`), through the agent.
    Logs(super::debug::LogsArgs),
    /// Run a command in a container (as `kubectl exec`, not interactive),
    /// through the agent; exits with the command's status.
    Exec(super::debug::ExecArgs),
    /// Check static pod manifests as `crilet run` reads them (parse,
    /// validation, defaulting, trust); needs no runtime. Exits 1 on any
    /// refused manifest.
    Validate(super::validate::ValidateArgs),
    /// Taking a node over from the kubelet: with --dry-run and the flags
    /// `crilet run` will have, what it would keep of the pods the kubelet
    /// left running (under their UIDs, no container restarted), what it would
    /// replace, and why. Nothing is changed.
    Takeover(Box<super::takeover_report::TakeoverArgs>),
    /// Image garbage collection: with --dry-run, what would be removed now
    /// and why (nothing is removed; the agent collects on its own period).
    Gc {
        /// Show the plan without removing anything (required: the API is read-only).
        #[arg(long, required = true)]
        dry_run: bool,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish or
    /// powershell) for crilet, headed by crilet's version and commit.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page, crilet(1), in roff; with --out-dir, write it
    /// and one page per subcommand (crilet-run(1), ...) there instead, as
    /// the package installs them.
    #[command(hide = true)]
    Man {
        /// Write crilet.1 and crilet-SUBCOMMAND.1 into this directory.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
    },
}

/// How the operator commands reach the agent.
#[derive(clap::Args)]
pub struct AgentArgs {
    /// The agent's socket (`crilet run --socket`).
    #[arg(long, env = "CRILET_SOCKET", default_value = crate::stats::grpc::DEFAULT_SOCKET)]
    pub socket: std::path::PathBuf,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// The completion script for `shell`, headed by a comment naming the
/// version it completes (the script itself is clap_complete's).
pub fn completion(shell: clap_complete::Shell) -> Vec<u8> {
    let mut out = format!("# crilet {VERSION}: {shell} completion\n").into_bytes();
    clap_complete::generate(shell, &mut Cli::command(), "crilet", &mut out);
    out
}

/// crilet(1) in roff, generated from the parser's definition.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    Ok(out)
}

/// Writes crilet.1 and a page per subcommand into `dir`; returns their
/// file names.
pub fn write_man_pages(dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(Cli::command(), dir)?;
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".1"))
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn version_names_the_package_version_and_a_commit() {
        assert!(VERSION.starts_with(env!("CARGO_PKG_VERSION")), "{VERSION}");
        let commit = VERSION
            .split("(commit ")
            .nth(1)
            .unwrap()
            .trim_end_matches(')');
        assert!(
            commit == "unknown"
                || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
            "{VERSION}"
        );
    }

    #[test]
    fn completions_cover_the_subcommands_in_every_shell() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let script = String::from_utf8(completion(shell)).unwrap();
            assert!(
                script.starts_with(&format!("# crilet {VERSION}")),
                "{shell}"
            );
            for sub in ["run", "validate", "pods", "completion"] {
                assert!(script.contains(sub), "{shell} lacks {sub}");
            }
            assert!(script.contains("pod-manifest-path"), "{shell}: run's flags");
        }
    }

    #[test]
    fn the_man_page_documents_the_subcommands() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(
            page.starts_with(".ie \\n(.g .ds Aq"),
            "roff header: {}",
            &page[..40]
        );
        assert!(page.contains(".TH crilet 1"), "{}", &page[..200]);
        assert!(page.contains("crilet\\-run"), "subcommands listed");
        assert!(page.contains(VERSION), "the version is in the page");
    }

    #[test]
    fn man_pages_are_written_per_subcommand_with_its_flags() {
        let dir = tempfile::tempdir().unwrap();
        let names = write_man_pages(&dir.path().join("man1")).unwrap();
        for want in [
            "crilet.1",
            "crilet-run.1",
            "crilet-validate.1",
            "crilet-completion.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n == "crilet-man.1"),
            "hidden: {names:?}"
        );
        let run = std::fs::read_to_string(dir.path().join("man1/crilet-run.1")).unwrap();
        assert!(
            run.contains("pod\\-manifest\\-path"),
            "run's flags are documented"
        );
        // A file where the directory should be is an error naming it.
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(write_man_pages(&file).is_err());
    }

    #[test]
    fn completion_parses_a_shell_and_refuses_another() {
        let cli = Cli::try_parse_from(["crilet", "completion", "zsh"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Completion {
                shell: clap_complete::Shell::Zsh
            }
        ));
        let err = Cli::try_parse_from(["crilet", "completion", "tcsh"])
            .err()
            .unwrap();
        assert!(err.to_string().contains("tcsh"), "{err}");
    }
}
