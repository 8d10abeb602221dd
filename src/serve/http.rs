//! The HTTP side of `--serve`: tiny_http takes requests on a thread of
//! its own, and each request's body (at most [`MOST_BODY`]) is read on a
//! thread of the request's own, answered, and the answer written. A slow
//! or hostile client holds its own thread only: never another client's,
//! nor the event loop that carries the data.

use super::routes::Answer;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use tiny_http::{Header, Response, Server};

/// The largest request body read; what is longer is refused as a bad
/// body.
const MOST_BODY: u64 = 1 << 20;

/// The API, listening.
pub struct Api {
    server: Arc<Server>,
}

impl Api {
    /// Listens on `address` (port 0 takes a free port).
    pub fn listen(address: &str) -> std::io::Result<Api> {
        let server = Server::http(address).map_err(std::io::Error::other)?;
        Ok(Api {
            server: Arc::new(server),
        })
    }

    /// Where it listens.
    pub fn address(&self) -> Option<SocketAddr> {
        self.server.server_addr().to_ip()
    }

    /// Answers each request with `answer(method, path, body)`. Each body
    /// is read on a thread of the request's own, so that a client that
    /// sends slowly holds up nobody else; `answer` is called by one of
    /// them at a time.
    pub fn serve(
        &self,
        answer: impl FnMut(&str, &str, &[u8]) -> Answer + Send + 'static,
    ) -> std::io::Result<()> {
        let server = self.server.clone();
        let answer = Arc::new(std::sync::Mutex::new(answer));
        std::thread::Builder::new()
            .name("api".into())
            .spawn(move || {
                for request in server.incoming_requests() {
                    let answer = answer.clone();
                    let spawned = std::thread::Builder::new()
                        .name("api-request".into())
                        .spawn(move || {
                            respond(request, |method, path, body| {
                                let mut answer = crate::lock::lock(&answer);
                                answer(method, path, body)
                            })
                        });
                    // Out of threads: the request is dropped, and its
                    // client sees the connection close.
                    drop(spawned);
                }
            })?;
        Ok(())
    }
}

/// Reads `request`'s body and writes the answer `answer` gives it.
fn respond(mut request: tiny_http::Request, answer: impl FnOnce(&str, &str, &[u8]) -> Answer) {
    let mut body = Vec::new();
    let read = request
        .as_reader()
        .take(MOST_BODY + 1)
        .read_to_end(&mut body);
    let answered = match read {
        Ok(_) if body.len() as u64 > MOST_BODY => {
            Answer::error(super::model::ApiError::bad_body("longer than 1 MiB"))
        }
        Ok(_) => {
            let method = request.method().as_str().to_string();
            let path = request.url().to_string();
            answer(&method, &path, &body)
        }
        Err(_) => return,
    };
    let kind = Header::from_bytes("Content-Type", answered.content_type).expect("a valid header");
    let response = Response::from_string(answered.body.unwrap_or_default())
        .with_header(kind)
        .with_status_code(answered.status);
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpStream;

    /// One request over a fresh connection: its status line and body. The
    /// body is written from a thread of its own, so that a server that
    /// answers before reading all of it is heard.
    fn request(at: SocketAddr, method: &str, path: &str, body: &str) -> (String, String) {
        let mut stream = TcpStream::connect(at).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let mut writer = stream.try_clone().unwrap();
        let body = body.to_string();
        let writing = std::thread::spawn(move || {
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(body.as_bytes());
        });
        let mut reply = Vec::new();
        let mut buffer = [0; 4096];
        // Up to the end of the answer's body, which says its length.
        while let Ok(n) = stream.read(&mut buffer) {
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&reply);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|line| {
                        line.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_string)
                    })
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    break;
                }
            }
        }
        drop(stream);
        let _ = writing.join();
        let reply = String::from_utf8_lossy(&reply).into_owned();
        let status = reply.lines().next().unwrap_or_default().to_string();
        let body = reply
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        (status, body)
    }

    #[test]
    fn the_api_answers_over_http_and_refuses_what_is_too_long() {
        let api = Api::listen("127.0.0.1:0").unwrap();
        api.serve(|method, path, body| {
            Answer::json(
                200,
                &serde_json::json!({"method": method, "path": path, "body": body.len()}),
            )
        })
        .unwrap();
        let at = api.address().unwrap();
        let (status, body) = request(at, "POST", "/proxies", "12345");
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(body, r#"{"method":"POST","path":"/proxies","body":5}"#);
        let (status, body) = request(at, "POST", "/proxies", &"x".repeat((1 << 20) + 10));
        assert!(status.contains(" 400 "), "{status}");
        assert!(body.contains("longer than 1 MiB"), "{body}");
    }
}
