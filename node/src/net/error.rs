//! Why the transport, a probe or a request to a node's HTTP API failed: the
//! step, the address or URL, and the error underneath.

use super::PROTOCOL;
use libp2p::Multiaddr;
use std::fmt;
use std::time::Duration;

/// Why the transport or a request to a node failed
/// ([`crate::NodeError::Network`]).
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// The TCP + noise + yamux transport cannot be built.
    #[error("network: transport: {0}")]
    Transport(#[source] libp2p::noise::Error),
    /// The node cannot listen on its address.
    #[error("network: cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: Multiaddr,
        /// Why.
        source: libp2p::TransportError<std::io::Error>,
    },
    /// The node's stream protocol is registered twice.
    #[error("network: protocol {PROTOCOL}: {0}")]
    Protocol(#[source] libp2p_stream::AlreadyRegistered),
    /// A peer cannot be dialled.
    #[error("network: dial: {0}")]
    Dial(#[source] libp2p::swarm::DialError),
    /// A stream to a peer cannot be opened.
    #[error("network: cannot open a stream: {0}")]
    OpenStream(#[source] libp2p_stream::OpenStreamError),
    /// The peer did not acknowledge a stream.
    #[error("network: stream not accepted: {0}")]
    NotAccepted(#[source] std::io::Error),
    /// Writing to, flushing or closing a stream failed.
    #[error("network: {step}: {source}")]
    Stream {
        /// What was done with the stream.
        step: StreamStep,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A probe did not finish in time.
    #[error("network: timed out after {}s", after.as_secs())]
    TimedOut {
        /// The time it had.
        after: Duration,
    },
    /// The transport stopped delivering messages.
    #[error("network: transport stopped")]
    Stopped,
    /// A frame cannot be encoded (over the wire codec's limit).
    #[error("network: encoding a frame: {0}")]
    EncodeFrame(#[source] beacon::Error),
    /// A request to a node's HTTP API got no answer.
    #[error("network: {method} {url}: {source}")]
    Request {
        /// The request's method.
        method: reqwest::Method,
        /// The URL.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// A node's HTTP API answered with a status other than success.
    #[error("network: {method} {url}: {status}{}", with_colon(body))]
    Status {
        /// The request's method.
        method: reqwest::Method,
        /// The URL.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
        /// The answer's text, trimmed.
        body: String,
    },
    /// A node's HTTP API answered with a body that is not the JSON
    /// expected.
    #[error("network: {method} {url}: not the expected JSON: {source}")]
    Json {
        /// The request's method.
        method: reqwest::Method,
        /// The URL.
        url: String,
        /// What the decoder found.
        source: reqwest::Error,
    },
}

/// A step of writing hand-made bytes to a stream ([`NetworkError::Stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStep {
    /// Writing the bytes.
    Write,
    /// Flushing them.
    Flush,
    /// Closing the stream.
    Close,
}

impl fmt::Display for StreamStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamStep::Write => "write",
            StreamStep::Flush => "flush",
            StreamStep::Close => "close",
        })
    }
}

/// `": text"`, or nothing for no text.
fn with_colon(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}
