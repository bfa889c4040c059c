//! crilet: the node-local half of a kubelet. It runs static pods on a CRI
//! runtime (containerd, CRI-O), mirrors them to the API server, collects
//! unused images and serves pod stats.

pub mod agent;
pub mod app;
pub mod certificate;
pub mod cli;
pub mod cm;
pub mod config;
pub mod cri;
pub mod events;
/// The fuzz targets' entry functions (see `fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod images;
pub mod kubeapi;
pub mod kubemark;
pub mod kuberuntime;
pub mod lifecycle;
pub mod logs;
pub mod mirror;
pub mod nodestatus;
pub mod pleg;
pub mod pod;
pub mod prober;
pub mod server;
pub mod stats;
pub mod units;
pub mod volume;

/// Generated CRI messages and clients. Only `cri::client` and
/// `cri::convert` use them: the rest of the crate speaks domain types.
pub(crate) mod proto {
    pub mod runtime {
        pub mod v1 {
            #![allow(clippy::all, clippy::pedantic)]
            tonic::include_proto!("runtime.v1");
        }
    }
}

/// crilet's own stats API (`proto/crilet/stats/v1/stats.proto`): the server
/// in `stats::grpc`, the client for the CLI and tests; and its debugging
/// API (`proto/crilet/debug/v1/debug.proto`), served by `stats::debug_api`.
pub mod api {
    pub mod debug {
        pub mod v1 {
            #![allow(clippy::all, clippy::pedantic)]
            tonic::include_proto!("crilet.debug.v1");
        }
    }

    pub mod stats {
        pub mod v1 {
            #![allow(clippy::all, clippy::pedantic)]
            tonic::include_proto!("crilet.stats.v1");

            /// The encoded descriptor set that gRPC reflection serves.
            pub const FILE_DESCRIPTOR_SET: &[u8] =
                include_bytes!(concat!(env!("OUT_DIR"), "/crilet_stats_descriptor.bin"));
        }
    }
}
