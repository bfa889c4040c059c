//! Compiles our CRI subset with protox (a pure-Rust protobuf compiler), so a
//! machine without `protoc` builds the crate.

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["cri/runtime/v1/api.proto"];
    for p in &protos {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new("proto").join(p).display()
        );
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
