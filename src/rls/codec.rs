//! The protobuf codec of the gRPC service: tonic-prost's, with a smaller
//! encode buffer. An answer's bytes share the buffer they were encoded
//! in, so each answer waiting to be sent holds the whole buffer: with
//! tonic's default of 8 KiB, a client that keeps its flow-control window
//! shut holds 8 KiB a call; with [`ENCODE_BUFFER_BYTES`], that much. A
//! larger answer (64 descriptors, the headers) grows the buffer as it
//! needs.

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::ProstCodec;

/// The encode buffer an answer starts in (a one-descriptor answer is
/// about 50 bytes, 64 descriptors' about 4 KiB).
pub const ENCODE_BUFFER_BYTES: usize = 512;

/// tonic's: the encoder yields its buffer past this many bytes.
const YIELD_THRESHOLD: usize = 32 * 1024;

/// [`ProstCodec`] with an [`ENCODE_BUFFER_BYTES`] encode buffer.
#[derive(Debug, Clone)]
pub struct RlsCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for RlsCodec<T, U> {
    fn default() -> Self {
        RlsCodec(ProstCodec::default())
    }
}

impl<T, U> Codec for RlsCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = <ProstCodec<T, U> as Codec>::Decoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(ENCODE_BUFFER_BYTES, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        self.0.decoder()
    }
}
