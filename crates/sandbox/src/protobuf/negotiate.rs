//! Content negotiation, as kube-apiserver does it: a protobuf body is read only for
//! built-in kinds (415 otherwise, and clients fall back to JSON); an answer is protobuf
//! when the first media type of `Accept` the server can produce for that resource is
//! protobuf, so a custom resource asked for "protobuf, then JSON" gets JSON.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;

use super::{MEDIA_TYPE, ProtobufError};

/// The format of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Protobuf,
}

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct Range {
    media_type: String,
    /// `as=Table` and friends: a different object, which the sandbox writes in JSON.
    conversion: bool,
    quality: f32,
}

/// The media ranges a client accepts, best first.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Accept {
    ranges: Vec<Range>,
}

impl Accept {
    pub(crate) fn from_headers(headers: &HeaderMap) -> Accept {
        let mut ranges: Vec<Range> = headers
            .get_all(http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media_type = parts.next().filter(|m| !m.is_empty())?.to_ascii_lowercase();
                let mut conversion = false;
                let mut quality = 1.0;
                for param in parts {
                    match param.split_once('=') {
                        Some(("as", _)) => conversion = true,
                        Some(("q", q)) => quality = q.parse().unwrap_or(0.0),
                        _ => {}
                    }
                }
                Some(Range {
                    media_type,
                    conversion,
                    quality,
                })
            })
            .filter(|r| r.quality > 0.0)
            .collect();
        // Stable: ranges of equal quality keep the client's order.
        ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality));
        Accept { ranges }
    }

    /// Whether protobuf is among the media types at all: only then is it worth asking
    /// whether the resource has a protobuf form.
    pub(crate) fn mentions_protobuf(&self) -> bool {
        self.ranges.iter().any(|r| r.media_type == MEDIA_TYPE)
    }

    /// Whether the sandbox can answer in any of the media types asked for, for a resource
    /// that has a protobuf form or not. No `Accept` at all takes anything; a custom
    /// resource asked only for protobuf cannot be answered (kube-apiserver's 406).
    pub(crate) fn acceptable(&self, protobuf_available: bool) -> bool {
        self.ranges.is_empty()
            || self
                .ranges
                .iter()
                .any(|range| match range.media_type.as_str() {
                    // A conversion (a Table) is written in JSON whatever the resource.
                    MEDIA_TYPE => protobuf_available || range.conversion,
                    media_type => ANSWERED_AS_JSON.contains(&media_type),
                })
    }

    /// The format to answer in, for a resource that has a protobuf form or not. No
    /// `Accept`, or none the sandbox can produce, answers JSON as before.
    pub(crate) fn choose(&self, protobuf_available: bool) -> Format {
        for range in &self.ranges {
            match range.media_type.as_str() {
                MEDIA_TYPE if protobuf_available && !range.conversion => {
                    return Format::Protobuf;
                }
                MEDIA_TYPE => continue,
                media_type if ANSWERED_AS_JSON.contains(&media_type) => {
                    return Format::Json;
                }
                _ => continue,
            }
        }
        Format::Json
    }
}

/// Media ranges the sandbox answers in JSON.
const ANSWERED_AS_JSON: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/*",
    "*/*",
];

/// What kube-apiserver lists in a 406 for a resource: every serializer of its codec
/// factory, protobuf included even for custom resources, whose handlers only refuse it.
pub(crate) const SERVED_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Whether a request's body is protobuf.
pub(crate) fn is_protobuf_body(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// One JSON watch line (`{"type":…,"object":…}`) as a protobuf frame; a line that
/// cannot be carried becomes an `ERROR` event, as a watch cannot switch formats.
pub(crate) fn watch_frame_of_line(line: &[u8]) -> Bytes {
    let event: Result<Value, _> = serde_json::from_slice(line);
    let framed = event.map_err(ProtobufError::Json).and_then(|event| {
        super::watch_frame(event["type"].as_str().unwrap_or_default(), &event["object"])
    });
    match framed {
        Ok(frame) => Bytes::from(frame),
        Err(err) => {
            let status = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("cannot encode the event in protobuf: {err}"),
                "reason": "InternalError", "code": 500,
            });
            Bytes::from(super::watch_frame("ERROR", &status).unwrap_or_default())
        }
    }
}
