//! Compiles bellwether's .proto files into Rust without `protoc`.
//!
//! `protox` parses the files in pure Rust and produces the same
//! `FileDescriptorSet` that `protoc` would; `tonic-prost-build` turns that set
//! into prost messages plus tonic clients and servers. Building bellwether
//! therefore needs nothing beyond cargo, and no `PROTOC` variable is read.

use std::path::Path;

/// The files compiled, relative to the crate root. Order does not matter:
/// imports are resolved against `PROTO_DIR`.
const PROTO_FILES: [&str; 6] = [
    "proto/auth.proto",
    "proto/kv.proto",
    "proto/lease.proto",
    "proto/rpc.proto",
    "proto/v3election.proto",
    "proto/v3lock.proto",
];

/// Directory that `import "..."` statements are resolved against.
const PROTO_DIR: &str = "proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for file in PROTO_FILES {
        assert!(Path::new(file).is_file(), "missing proto file {file}");
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let descriptors = protox::compile(PROTO_FILES, [PROTO_DIR])?;
    assert_eq!(
        descriptors.file.len(),
        PROTO_FILES.len(),
        "protox should describe exactly our own files; an unexpected import crept in"
    );

    // The same descriptions, for code that needs message and field names at
    // run time (the server's JSON gateway).
    let out = std::env::var("OUT_DIR")?;
    std::fs::write(
        Path::new(&out).join("descriptors.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;

    // Without the `services` feature, only the messages: no tonic code.
    let services = std::env::var_os("CARGO_FEATURE_SERVICES").is_some();
    tonic_prost_build::configure()
        .build_server(services)
        .build_client(services)
        .compile_fds(descriptors)?;
    Ok(())
}
