//! The answers shape gives in the upstream's place (`--http-status
//! '503:try later'`, `--http-header 'Retry-After: 1'`): a status line in
//! the request's version with the status's own reason, the body's
//! Content-Length, the headers asked for, and `Connection` as the
//! exchange needs it.

use crate::framing::RequestHead;
use std::fmt::Write;
use std::str::FromStr;

/// A status to answer with, and its body (`--http-status CODE[:BODY]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerStatus {
    pub code: u16,
    pub body: Vec<u8>,
}

impl FromStr for AnswerStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<AnswerStatus, String> {
        let (code, body) = text.split_once(':').unwrap_or((text, ""));
        let code: u16 = code
            .trim()
            .parse()
            .ok()
            .filter(|code| (200..600).contains(code))
            .ok_or(
                "expected a status from 200 to 599, and the body after ':' if any \
                    (e.g. 503, '429:slow down')",
            )?;
        let status = AnswerStatus {
            code,
            body: body.as_bytes().to_vec(),
        };
        status.check()?;
        Ok(status)
    }
}

/// A gRPC status to answer a call with (`--grpc-status UNAVAILABLE`,
/// `14`, `'UNAVAILABLE:try later'`): its code, and its message if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcStatus {
    pub code: u8,
    pub message: String,
}

/// gRPC's status codes by name, in code order.
const GRPC_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl GrpcStatus {
    /// The code's name: `UNAVAILABLE`.
    pub fn name(&self) -> &'static str {
        GRPC_CODES
            .get(usize::from(self.code))
            .copied()
            .unwrap_or("UNKNOWN")
    }
}

impl FromStr for GrpcStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<GrpcStatus, String> {
        let (code, message) = text.split_once(':').unwrap_or((text, ""));
        let code = code.trim();
        let found = GRPC_CODES
            .iter()
            .position(|name| name.eq_ignore_ascii_case(code))
            .or_else(|| {
                code.parse::<usize>()
                    .ok()
                    .filter(|code| *code < GRPC_CODES.len())
            })
            .filter(|code| *code > 0)
            .ok_or(
                "expected a gRPC status other than OK, by name or code, and the message after \
                 ':' if any (e.g. UNAVAILABLE, 14, 'RESOURCE_EXHAUSTED:slow down')",
            )?;
        if message.chars().any(char::is_control) {
            return Err("a message is one line of text".into());
        }
        Ok(GrpcStatus {
            code: found as u8,
            message: message.to_string(),
        })
    }
}

impl AnswerStatus {
    /// Refuses a body that the status cannot carry (204, 304).
    pub fn check(&self) -> Result<(), String> {
        match (self.code, self.body.is_empty()) {
            (204 | 304, false) => Err(format!("a {} answer has no body", self.code)),
            _ => Ok(()),
        }
    }
}

/// A header field of an answer (`--http-header 'Retry-After: 1'`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub value: String,
}

impl FromStr for Field {
    type Err = String;

    fn from_str(text: &str) -> Result<Field, String> {
        let refused = || {
            "expected 'Name: value', a header's name and its value on one line \
             (e.g. 'Retry-After: 1')"
                .to_string()
        };
        let (name, value) = text.split_once(':').ok_or_else(refused)?;
        let (name, value) = (name.trim(), value.trim());
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        let framing = ["content-length", "transfer-encoding", "connection"];
        if name.is_empty()
            || !name.chars().all(token)
            || value.chars().any(|c| c.is_control() && c != '\t')
        {
            return Err(refused());
        }
        if framing
            .iter()
            .any(|framed| name.eq_ignore_ascii_case(framed))
        {
            return Err(format!(
                "{name} is shape's to set: it frames the answer on the connection"
            ));
        }
        Ok(Field {
            name: name.to_string(),
            value: value.to_string(),
        })
    }
}

/// An answer in the upstream's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedAnswer {
    pub status: AnswerStatus,
    pub fields: Vec<Field>,
}

impl InjectedAnswer {
    /// The answer's bytes to `request`; with `close`, it says the
    /// connection closes after it.
    pub fn bytes(&self, request: &RequestHead, close: bool) -> Vec<u8> {
        let code = self.status.code;
        let reason = http::StatusCode::from_u16(code)
            .ok()
            .and_then(|status| status.canonical_reason())
            .unwrap_or("");
        let mut head = format!("HTTP/1.{} {code} {reason}\r\n", request.minor.min(1));
        for (name, value) in self.header_fields() {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        match (close, request.minor) {
            (true, _) => head.push_str("Connection: close\r\n"),
            (false, 0) => head.push_str("Connection: keep-alive\r\n"),
            (false, _) => {}
        }
        head.push_str("\r\n");
        [head.as_bytes(), self.body(request.is_head())].concat()
    }

    /// The answer's header fields in any version of HTTP: those asked
    /// for, a Content-Type for a body that has none, and the body's
    /// Content-Length (a HEAD's answer says the length the body would
    /// have; a 204 or 304 has none).
    pub fn header_fields(&self) -> Vec<(&str, String)> {
        let code = self.status.code;
        let bodiless = code == 204 || code == 304;
        let typed =
            (self.fields.iter()).any(|field| field.name.eq_ignore_ascii_case("content-type"));
        let mut fields = Vec::with_capacity(self.fields.len() + 2);
        if !self.status.body.is_empty() && !typed && !bodiless {
            fields.push(("Content-Type", "text/plain; charset=utf-8".to_string()));
        }
        fields.extend(
            self.fields
                .iter()
                .map(|field| (field.name.as_str(), field.value.clone())),
        );
        if !bodiless {
            fields.push(("Content-Length", self.status.body.len().to_string()));
        }
        fields
    }

    /// The body sent: none to a HEAD (`head_only`).
    pub fn body(&self, head_only: bool) -> &[u8] {
        match head_only {
            true => b"",
            false => &self.status.body,
        }
    }
}

impl GrpcStatus {
    /// The answer's bytes to `request` over HTTP/1.x, as gRPC-Web has
    /// it: 200, and the status in the header fields; with `close`, it
    /// says the connection closes after it.
    pub fn bytes(&self, request: &RequestHead, close: bool) -> Vec<u8> {
        let mut head = format!(
            "HTTP/1.{} 200 OK\r\nContent-Type: application/grpc\r\ngrpc-status: {}\r\n",
            request.minor.min(1),
            self.code
        );
        if !self.message.is_empty() {
            let _ = write!(head, "grpc-message: {}\r\n", grpc_message(&self.message));
        }
        head.push_str("Content-Length: 0\r\n");
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// `message` as grpc-message carries it: percent-encoded but for
/// printable ASCII other than '%'.
pub fn grpc_message(message: &str) -> String {
    let mut encoded = String::with_capacity(message.len());
    for byte in message.bytes() {
        match byte {
            b' '..=b'~' if byte != b'%' => encoded.push(byte as char),
            _ => {
                let _ = write!(encoded, "%{byte:02X}");
            }
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::{Framed, RequestFramer};

    fn request(wire: &[u8]) -> RequestHead {
        match RequestFramer::default().step(wire) {
            Framed::Head(head, _) => head,
            step => panic!("{step:?}"),
        }
    }

    fn answer(status: &str, fields: &[&str]) -> InjectedAnswer {
        InjectedAnswer {
            status: status.parse().unwrap(),
            fields: fields.iter().map(|field| field.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn an_answer_is_framed_for_the_request_it_answers() {
        let get = request(b"GET / HTTP/1.1\r\n\r\n");
        let said = answer("429:slow down", &["Retry-After: 1"]).bytes(&get, false);
        assert_eq!(
            String::from_utf8(said).unwrap(),
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Retry-After: 1\r\nContent-Length: 9\r\n\r\nslow down"
        );
        let head = request(b"HEAD / HTTP/1.0\r\n\r\n");
        let said = answer("503:down", &[]).bytes(&head, true);
        assert!(said.starts_with(b"HTTP/1.0 503 Service Unavailable\r\n"));
        assert!(said.ends_with(b"Content-Length: 4\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn the_answer_parses_as_the_response_a_client_expects() {
        let get = request(b"GET / HTTP/1.1\r\n\r\n");
        let said = answer("503", &["X-Why: test"]).bytes(&get, false);
        let mut fields = [httparse::EMPTY_HEADER; 8];
        let mut response = httparse::Response::new(&mut fields);
        assert!(response.parse(&said).unwrap().is_complete());
        assert_eq!(response.code, Some(503));
    }

    #[test]
    fn a_grpc_status_is_read_by_name_or_code() {
        let unavailable: GrpcStatus = "unavailable".parse().unwrap();
        assert_eq!((unavailable.code, unavailable.name()), (14, "UNAVAILABLE"));
        let said: GrpcStatus = "8:slow down".parse().unwrap();
        assert_eq!(
            (said.name(), said.message.as_str()),
            ("RESOURCE_EXHAUSTED", "slow down")
        );
        assert!("OK".parse::<GrpcStatus>().is_err());
        assert!("17".parse::<GrpcStatus>().is_err());
        assert_eq!(grpc_message("50% off\u{e9}"), "50%25 off%C3%A9");
    }

    #[test]
    fn statuses_and_fields_that_cannot_be_answered_are_refused() {
        assert!("101".parse::<AnswerStatus>().is_err());
        assert!("600".parse::<AnswerStatus>().is_err());
        assert!("abc".parse::<AnswerStatus>().is_err());
        assert_eq!("503:".parse::<AnswerStatus>().unwrap().body, b"");
        assert!(
            "Content-Length: 3"
                .parse::<Field>()
                .unwrap_err()
                .contains("shape's to set")
        );
        assert!("No value".parse::<Field>().is_err());
        assert!("X: a\rb".parse::<Field>().is_err());
    }
}
