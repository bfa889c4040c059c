//! Compiles the protos with protox (a pure-Rust protobuf compiler), so a
//! machine without `protoc` builds the crate: our CRI subset (client only)
//! and crilet's own stats and debug APIs (server and client, plus the
//! descriptor set that gRPC reflection serves, holding both).

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cri = "cri/runtime/v1/api.proto";
    let stats = "crilet/stats/v1/stats.proto";
    let debug = "crilet/debug/v1/debug.proto";
    for p in [cri, stats, debug] {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new("proto").join(p).display()
        );
    }
    let fds = protox::compile([cri], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;

    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile([stats, debug], ["proto"])?;
    std::fs::write(
        out.join("crilet_stats_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
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
