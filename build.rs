//! Compiles the protos with protox (a pure-Rust protobuf compiler), so a
//! machine without `protoc` builds the crate: our CRI subset (client only)
//! and crilet's own stats and debug APIs (server and client, plus the
//! descriptor set that gRPC reflection serves, holding both). Also names
//! the git commit the binary is built from, for `crilet --version`.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    git_commit();
    let cri = "cri/runtime/v1/api.proto";
    let stats = "crilet/stats/v1/stats.proto";
    let debug = "crilet/debug/v1/debug.proto";
    for p in [cri, stats, debug] {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new("proto").join(p).display()
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile([cri], ["proto"])?;
    // The parity harness (parity/) decodes the CRI requests it records
    // with these descriptors.
    std::fs::write(
        out.join("cri_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;

    let fds = protox::compile([stats, debug], ["proto"])?;
    // Reflection keeps what it serves decoded for the agent's lifetime: the
    // source locations (spans, no comments) were most of it, and no client
    // reads them. The generated code below still gets its doc comments.
    let mut served = fds.clone();
    for file in &mut served.file {
        file.source_code_info = None;
    }
    std::fs::write(
        out.join("crilet_stats_descriptor.bin"),
        prost::Message::encode_to_vec(&served),
    )?;
    // Serialize: the CLI prints replies as JSON or YAML, in proto3 JSON's
    // lowerCamelCase names.
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .type_attribute(
            ".crilet.stats.v1",
            "#[derive(serde::Serialize)] #[serde(rename_all = \"camelCase\")]",
        )
        .compile_fds(fds)?;
    Ok(())
}

/// Sets CRILET_GIT_COMMIT to the checkout's short commit, or `unknown`
/// outside a git checkout (a crate tarball, a source package). Reruns when
/// HEAD or the branch it names moves, so an incremental build is not stale.
fn git_commit() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CRILET_GIT_COMMIT={commit}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = Path::new(&dir);
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
                .map(PathBuf::from)
                .unwrap_or_else(|| dir.to_path_buf());
            // Only files that exist: cargo reruns a script for a missing one
            // on every build.
            for file in [common.join(branch), common.join("packed-refs")] {
                if file.exists() {
                    println!("cargo:rerun-if-changed={}", file.display());
                }
            }
        }
    }
}
