//! `Runtime::list_briefs` of `CriRuntime`: ListPodSandbox and
//! ListContainers whose replies are kept as bytes and read in brief
//! (`cri::brief`), not decoded whole. The requests are those of the whole
//! calls, so the runtime sees no difference.
//!
//! Invariant: the same deadline, observer and error mapping as every other
//! call (`CriRuntime::call`); a reply that cannot be read is `Malformed`.

use bytes::{Buf, Bytes};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic::transport::Channel;

use super::super::brief;
use super::super::convert::{container_filter_to, sandbox_filter_to};
use super::super::*;
use super::CriRuntime;
use crate::proto::runtime::v1 as pb;

const LIST_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/ListPodSandbox";
const LIST_CONTAINERS: &str = "/runtime.v1.RuntimeService/ListContainers";

/// A plain gRPC client over the runtime's channel, for calls whose reply
/// is read by hand.
pub(super) type RawClient = tonic::client::Grpc<Channel>;

impl CriRuntime {
    pub(super) async fn briefs(
        &self,
        keys: BriefKeys,
    ) -> Result<(Vec<SandboxBrief>, Vec<ContainerBrief>)> {
        let sandboxes = pb::ListPodSandboxRequest {
            filter: Some(sandbox_filter_to(&PodSandboxFilter::default())),
        };
        let containers = pb::ListContainersRequest {
            filter: Some(container_filter_to(&ContainerFilter::default())),
        };
        // Both at once, as `observe_pod` reads its two lists: the relist
        // waits for one round trip, not two.
        tokio::try_join!(
            self.read_call(LIST_POD_SANDBOX, sandboxes, |r| brief::sandboxes(r, keys)),
            self.read_call(LIST_CONTAINERS, containers, |r| brief::containers(r, keys)),
        )
    }

    /// The call of `path`, its reply read by `read`.
    async fn read_call<M, T>(
        &self,
        path: &'static str,
        msg: M,
        read: impl FnOnce(&[u8]) -> std::result::Result<T, brief::WireError>,
    ) -> Result<T>
    where
        M: prost::Message + Send + Sync + 'static,
    {
        // The method's name, for the error, the deadline and the metrics.
        let op = path.rsplit('/').next().unwrap_or(path);
        let reply = self.raw_call(op, path, msg).await?;
        read(&reply).map_err(|e| self.malformed(op, &e.to_string()))
    }

    /// One unary call of `path` whose reply is returned as its bytes.
    async fn raw_call<M>(&self, op: &'static str, path: &'static str, msg: M) -> Result<Bytes>
    where
        M: prost::Message + Send + Sync + 'static,
    {
        let t = self.timeout();
        let req = self.request(msg, t);
        let mut client = self.raw.clone();
        self.call(op, t, async move {
            client
                .ready()
                .await
                .map_err(|e| Status::unknown(format!("Service was not ready: {e}")))?;
            let path = http::uri::PathAndQuery::from_static(path);
            client.unary(req, path, RawCodec::<M>::default()).await
        })
        .await
    }
}

/// Encodes requests with prost; hands replies over as bytes.
struct RawCodec<M>(std::marker::PhantomData<M>);

impl<M> Default for RawCodec<M> {
    fn default() -> Self {
        RawCodec(std::marker::PhantomData)
    }
}

impl<M: prost::Message + Send + 'static> Codec for RawCodec<M> {
    type Encode = M;
    type Decode = Bytes;
    type Encoder = <tonic_prost::ProstCodec<M, ()> as Codec>::Encoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstCodec::<M, ()>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

/// The reply's bytes, without a copy (a slice of the receive buffer).
struct RawDecoder;

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> std::result::Result<Option<Bytes>, Status> {
        Ok(Some(buf.copy_to_bytes(buf.remaining())))
    }
}
