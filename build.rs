//! Compiles the protos with protox (a pure-Rust protobuf compiler), so a
//! machine without `protoc` builds the crate: our CRI subset (client only)
//! and crilet's own stats and debug APIs (server and client, plus the
//! descriptor set that gRPC reflection serves, holding both). Also names
//! the git commit the binary is built from, for `crilet --version`, and
//! lays out the release binary's code (`text_order`).

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    git_commit();
    text_order();
    packed_relocations();
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

/// The release binary's functions in the order of `build/text-order.txt`
/// (made by scripts/text-order.sh: the functions an agent runs, first), so
/// the code a running agent touches shares few pages: the kernel maps a
/// binary's code 64 KiB around each page touched, and scattered hot code
/// kept most of the binary resident. Functions the file does not name, or
/// names no longer in the code, follow in the linker's own order. Also
/// writes the link map (`crilet.map` in OUT_DIR), from which the script
/// names the functions. Release builds only: tests and debug builds link
/// as before.
fn text_order() {
    println!("cargo:rerun-if-changed=build/text-order.txt");
    println!("cargo:rerun-if-env-changed=CRILET_TEXT_ORDER");
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    let arg = |a: String| println!("cargo:rustc-link-arg-bin=crilet={a}");
    if let Ok(out) = std::env::var("OUT_DIR") {
        arg(format!(
            "-Wl,-Map={}",
            Path::new(&out).join("crilet.map").display()
        ));
        // The map's names as the ordering file needs them: mangled.
        arg("-Wl,--no-demangle".into());
    }
    // CRILET_TEXT_ORDER=off links without it (to measure what it gives).
    // The manifest directory is read when the script runs, not when it was
    // compiled (`env!`): cargo reuses one compiled script for every checkout
    // that shares a target directory, and a compiled-in path named another
    // checkout, so the list silently went missing.
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let order = Path::new(&dir).join("build/text-order.txt");
    if !order.exists() {
        println!(
            "cargo:warning={} is missing: the release binary is linked in the linker's order",
            order.display()
        );
    } else if std::env::var("CRILET_TEXT_ORDER").as_deref() != Ok("off") {
        arg(format!("-Wl,--symbol-ordering-file={}", order.display()));
        arg("-Wl,--no-warn-symbol-ordering".into());
    }
}

/// The release binary's relative relocations packed (DT_RELR): the loader
/// reads every relocation at start, and the pages it read stay resident.
/// As RELA entries they were 574 KiB of the file; packed, 7 KiB (and 4 KiB
/// of the other relocations). Holding
/// 50 pods (containerd 1.6, no API server, two runs each) the binary's
/// read-only segment went from 1588-1728 to 1088 KiB resident, the RSS
/// from 13.7 to 13.1-13.2 MiB. The loader must know DT_RELR: glibc 2.36
/// (Debian 12) or later, which the package's Depends names (Cargo.toml:
/// dpkg-shlibdeps does not find it). Release builds only, as the function
/// order.
fn packed_relocations() {
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        println!("cargo:rustc-link-arg-bin=crilet=-Wl,-z,pack-relative-relocs");
    }
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
