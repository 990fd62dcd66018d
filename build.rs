//! Generates Spark Connect's messages and its service's client stubs from the `.proto` files
//! Spark publishes (`proto/`), with the protoc that `protoc-bin-vendored` ships, so a build
//! needs no protoc installed. `exec/spark_connect/client.rs` calls Spark through the stubs.

fn main() -> std::io::Result<()> {
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path().map_err(std::io::Error::other)?);
    let well_known = protoc_bin_vendored::include_path().map_err(std::io::Error::other)?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        // Arrow batches are decoded straight from the response's buffer.
        .bytes(".spark.connect.ExecutePlanResponse.ArrowBatch.data")
        .compile_with_config(
            config,
            &[
                "proto/spark/connect/base.proto",
                "proto/google/rpc/status.proto",
                "proto/google/rpc/error_details.proto",
            ],
            &["proto", well_known.to_str().expect("a UTF-8 path")],
        )
}
