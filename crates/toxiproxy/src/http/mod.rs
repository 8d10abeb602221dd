//! The HTTP side of `--serve`: hyper's HTTP/1 server on a small runtime of
//! its own, on the API's thread, with a limit on everything a client can
//! make it hold.
//!
//! - At most [`MOST_CONNECTIONS`] connections at once; past that, new ones
//!   wait in the listen backlog (as deep as the system allows) until one
//!   ends. A connection is a task, not a thread.
//! - A request's head at most [`MOST_HEAD`] bytes and [`MOST_HEADERS`]
//!   lines (431 past either), within [`IDLE`] of the connection going
//!   idle (toxiproxy's idle timeout); its body at most [`MOST_BODY`],
//!   refused from its Content-Length before anything is read, and read
//!   within [`BODY_TIME`]; an answer written within [`WRITE_TIME`].
//! - Pipelined requests are answered in order, each carried out before the
//!   next is read.
//! - Running out of descriptors pauses accepting for a moment, said once,
//!   and never ends the server.
//!
//! Requests are answered one at a time, in the order they arrive, by the
//! `answer` function on a thread of its own (the model's), so that a
//! change that waits for the event loop never holds up the runtime.
//! Which requests are answered at all is the [`Guard`]'s to say.

use crate::reply::Reply;
pub mod guard;

use guard::{Asking, Guard};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use shape_leaves::say::Printer;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot};

/// The largest request body read; what is longer is refused as a bad
/// body.
pub const MOST_BODY: usize = 1 << 20;
/// The longest body read and thrown away to refuse it in good order.
const MOST_DRAINED: u64 = 8 << 20;
/// The most connections served at once.
pub const MOST_CONNECTIONS: usize = 1024;
/// The largest request head, in bytes.
const MOST_HEAD: usize = 64 << 10;
/// The most header lines in a request.
const MOST_HEADERS: usize = 100;
/// How long a connection may be idle, or take to send a request's head.
const IDLE: Duration = Duration::from_secs(60);
/// How long a request's body may take to arrive (toxiproxy's read
/// timeout).
const BODY_TIME: Duration = Duration::from_secs(15);
/// How long an answer may wait for the client to take it (toxiproxy's
/// write timeout).
const WRITE_TIME: Duration = Duration::from_secs(30);

/// The API, listening.
pub struct Api {
    listener: std::net::TcpListener,
    guard: Guard,
}

/// One request for the model's thread: what it asks, and where the answer
/// goes.
struct ModelCall {
    method: String,
    path: String,
    body: Bytes,
    answered: oneshot::Sender<Reply>,
}

/// What every connection's tasks share.
struct ApiState {
    guard: Guard,
    jobs: mpsc::Sender<ModelCall>,
    ids: RequestIds,
}

impl Api {
    /// Listens on `at`, with the listen backlog as deep as the system
    /// allows, and answers as `guard` lets it.
    pub fn listen(at: SocketAddr, guard: Guard) -> io::Result<Api> {
        let listener = std::net::TcpListener::bind(at)?;
        shape_net::deepen_backlog(&listener)?;
        Ok(Api { listener, guard })
    }

    /// Where it listens.
    pub fn address(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Answers each request with `answer(method, path, body)`, on a thread
    /// of its own, one at a time; the connections are served on another.
    /// Says on `report` when accepting must pause. Returns a way to put
    /// requests of the server's own in the same line.
    pub fn serve(
        self,
        report: Option<Printer>,
        mut answer: impl FnMut(&str, &str, &[u8]) -> Reply + Send + 'static,
    ) -> io::Result<Requester> {
        let (jobs, taken) = mpsc::channel::<ModelCall>();
        std::thread::Builder::new()
            .name("api-model".into())
            .spawn(move || {
                for job in taken {
                    let answered = answer(&job.method, &job.path, &job.body);
                    let _ = job.answered.send(answered);
                }
            })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        self.listener.set_nonblocking(true)?;
        let shared = Arc::new(ApiState {
            guard: self.guard,
            jobs,
            ids: RequestIds::new(),
        });
        let listener = self.listener;
        let requester = Requester {
            jobs: shared.jobs.clone(),
        };
        std::thread::Builder::new()
            .name("api".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => accept_forever(listener, shared, report).await,
                        Err(err) => eprintln!("shape: the API cannot listen: {err}"),
                    }
                })
            })?;
        Ok(requester)
    }
}

/// Puts requests to the model as a client would, in line with the
/// clients' (SIGHUP's reload is a POST /populate).
pub struct Requester {
    jobs: mpsc::Sender<ModelCall>,
}

impl Requester {
    /// The model's answer to `method path` with `body`, waited for.
    pub fn ask(&self, method: &str, path: &str, body: Vec<u8>) -> Reply {
        let (answered, answer) = oneshot::channel();
        let job = ModelCall {
            method: method.into(),
            path: path.into(),
            body: body.into(),
            answered,
        };
        if self.jobs.send(job).is_err() {
            return stopping();
        }
        answer.blocking_recv().unwrap_or_else(|_| stopping())
    }
}

/// What a request gets once the model has stopped.
fn stopping() -> Reply {
    Reply::error(crate::model::ApiError::new("the server is stopping", 503))
}

/// Accepts connections while fewer than [`MOST_CONNECTIONS`] are open,
/// each served by a task of its own.
async fn accept_forever(
    listener: tokio::net::TcpListener,
    shared: Arc<ApiState>,
    report: Option<Printer>,
) {
    let room = Arc::new(Semaphore::new(MOST_CONNECTIONS));
    let mut short_said = false;
    loop {
        let Ok(place) = room.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) if shape_net::out_of_resources(&err) => {
                if !short_said {
                    if let Some(report) = &report {
                        report.line(&format!(
                            "shape: the API's accept: {}; new connections wait, tried again \
                             every {:?}",
                            shape_leaves::message::one_line(&err),
                            shape_net::ACCEPT_PAUSE
                        ));
                    }
                    short_said = true;
                }
                tokio::time::sleep(shape_net::ACCEPT_PAUSE).await;
                continue;
            }
            // The client gave up before it was accepted, or the like.
            Err(_) => continue,
        };
        short_said = false;
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
            stream.set_write_timeout(Some(WRITE_TIME));
            let stream = TokioIo::new(Box::pin(stream));
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(respond(request, &shared).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(IDLE)
                .max_buf_size(MOST_HEAD)
                .max_header_size(MOST_HEAD)
                .max_headers(MOST_HEADERS)
                .serve_connection(stream, service)
                .await;
            drop(place);
        });
    }
}

/// The answer to `request`: refused by the guard, refused for its body,
/// or the model's.
async fn respond(request: Request<Incoming>, shared: &ApiState) -> Response<Full<Bytes>> {
    let id = shared.ids.next();
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    let page = reads
        .then(|| crate::dashboard::file(request.uri().path()))
        .flatten();
    let asking = Asking {
        user_agent: text(header::USER_AGENT),
        origin: text(header::ORIGIN),
        fetch_site: text(header::HeaderName::from_static("sec-fetch-site")),
        host: text(header::HOST),
        reads,
        page: page.is_some(),
    };
    let cors = match shared.guard.check(&asking) {
        Ok(true) => headers.get(header::ORIGIN).cloned(),
        Ok(false) => None,
        Err(refusal) => {
            let refused = plain(StatusCode::FORBIDDEN, refusal.body());
            return finish(refused, &id, None);
        }
    };
    if request.method() == Method::OPTIONS && cors.is_some() {
        return finish(preflight(), &id, cors);
    }
    if let Some(page) = page {
        return finish(reply(page), &id, cors);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    let answer = match declared {
        Some(length) if length > MOST_BODY as u64 => {
            // A body a little too long is read and thrown away, so that
            // its client, still writing, hears the answer rather than a
            // reset; a longer one is answered at once, and the
            // connection closed.
            if length <= MOST_DRAINED {
                let mut body = request.into_body();
                let drained = async move { while let Some(Ok(_)) = body.frame().await {} };
                let _ = tokio::time::timeout(BODY_TIME, drained).await;
            }
            too_long()
        }
        _ => match read_body(request.into_body()).await {
            Ok(body) => ask(shared, method, path, body).await,
            Err(answer) => answer,
        },
    };
    finish(reply(answer), &id, cors)
}

/// The response that gives `answer`.
fn reply(answer: Reply) -> Response<Full<Bytes>> {
    Response::builder()
        .status(answer.status)
        .header(header::CONTENT_TYPE, answer.content_type)
        .body(Full::new(Bytes::from(answer.body.unwrap_or_default())))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "bad status\n"))
}

/// The body of a request, at most [`MOST_BODY`] bytes, within
/// [`BODY_TIME`]; or the answer that refuses it.
async fn read_body(body: Incoming) -> Result<Bytes, Reply> {
    let read = tokio::time::timeout(BODY_TIME, Limited::new(body, MOST_BODY).collect()).await;
    match read {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => Err(too_long()),
        Ok(Err(_)) => Err(Reply::error(crate::model::ApiError::bad_body(
            "the body was cut short",
        ))),
        Err(_) => Err(Reply::error(crate::model::ApiError::new(
            "the body took too long to arrive",
            408,
        ))),
    }
}

/// What a body longer than [`MOST_BODY`] gets.
fn too_long() -> Reply {
    Reply::error(crate::model::ApiError::bad_body("longer than 1 MiB"))
}

/// The model's answer to `method path` with `body`.
async fn ask(shared: &ApiState, method: String, path: String, body: Bytes) -> Reply {
    let (answered, answer) = oneshot::channel();
    let job = ModelCall {
        method,
        path,
        body,
        answered,
    };
    if shared.jobs.send(job).is_err() {
        return stopping();
    }
    answer.await.unwrap_or_else(|_| stopping())
}

/// A plain-text answer, as Go's `http.Error` writes one.
fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The answer to a CORS preflight from an origin let in on purpose.
fn preflight() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PATCH, DELETE"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// `response` with the headers every answer carries: the request's id
/// (as toxiproxy's `X-Toxiproxy-Request-Id`), the server's name and
/// version, what keeps the dashboard from loading anything but its own
/// files or being framed by another page, and for an origin let in,
/// CORS's.
fn finish(
    mut response: Response<Full<Bytes>>,
    id: &str,
    cors: Option<HeaderValue>,
) -> Response<Full<Bytes>> {
    let headers: &mut HeaderMap = response.headers_mut();
    if let Ok(id) = HeaderValue::from_str(id) {
        headers.insert("x-toxiproxy-request-id", id);
    }
    headers.insert(
        header::SERVER,
        HeaderValue::from_static(concat!("shape/", env!("CARGO_PKG_VERSION"))),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(origin) = cors {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// Request ids as toxiproxy's are made (xid): 20 characters of base32hex
/// over the time in seconds, the process and a counter, unique within a
/// machine and in the order they were made.
struct RequestIds {
    process: u32,
    count: AtomicU64,
}

impl RequestIds {
    fn new() -> RequestIds {
        RequestIds {
            process: std::process::id(),
            count: AtomicU64::new(fastrand::u64(..)),
        }
    }

    fn next(&self) -> String {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()) as u32;
        let count = self.count.fetch_add(1, Ordering::Relaxed);
        let mut raw = [0u8; 12];
        raw[..4].copy_from_slice(&seconds.to_be_bytes());
        raw[4..8].copy_from_slice(&self.process.to_be_bytes());
        raw[8..].copy_from_slice(&(count as u32).to_be_bytes());
        base32hex(&raw)
    }
}

/// `raw` in lower-case base32hex without padding (12 bytes: 20 characters).
fn base32hex(raw: &[u8; 12]) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let mut bits = 0u32;
    let mut held = 0u32;
    let mut text = String::with_capacity(20);
    for &byte in raw {
        bits = (bits << 8) | u32::from(byte);
        held += 8;
        while held >= 5 {
            held -= 5;
            text.push(DIGITS[((bits >> held) & 31) as usize] as char);
        }
    }
    if held > 0 {
        text.push(DIGITS[((bits << (5 - held)) & 31) as usize] as char);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// An API on a free loopback port that answers with what it was
    /// asked.
    fn echoing() -> SocketAddr {
        let at: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let api = Api::listen(at, Guard::new(at, "127.0.0.1", &[])).unwrap();
        let bound = api.address().unwrap();
        api.serve(None, |method, path, body| {
            Reply::json(
                200,
                &serde_json::json!({"method": method, "path": path, "body": body.len()}),
            )
        })
        .unwrap();
        bound
    }

    /// Writes `raw` on a fresh connection from a thread of its own (so
    /// that a server that answers before reading it all is heard), and
    /// reads until the server closes: for what no client library sends
    /// (malformed heads, lengths that lie, pipelining).
    fn exchange(at: SocketAddr, raw: Vec<u8>) -> String {
        let mut stream = TcpStream::connect(at).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let writing = std::thread::spawn(move || {
            let _ = writer.write_all(&raw);
        });
        let mut reply = Vec::new();
        let _ = stream.read_to_end(&mut reply);
        let _ = writing.join();
        String::from_utf8_lossy(&reply).into_owned()
    }

    fn post(body: &str) -> Vec<u8> {
        format!(
            "POST /proxies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[test]
    fn the_api_answers_over_http_and_refuses_what_is_too_long() {
        let at = echoing();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut answer = agent
            .post(&format!("http://{at}/proxies"))
            .send("12345")
            .unwrap();
        assert_eq!(answer.status(), 200);
        let header = |name: &str| {
            answer
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert!(header("server").unwrap().starts_with("shape/"));
        assert_eq!(header("x-toxiproxy-request-id").unwrap().len(), 20);
        assert_eq!(
            answer.body_mut().read_to_string().unwrap(),
            r#"{"method":"POST","path":"/proxies","body":5}"#
        );
        // Too long: the raw exchange, since the server answers before the
        // body is all sent, which a client library may take as an error.
        let reply = exchange(at, post(&"x".repeat(MOST_BODY + 10)));
        assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
        assert!(reply.contains("longer than 1 MiB"), "{reply}");
    }

    #[test]
    fn a_huge_declared_length_is_refused_before_anything_is_read() {
        let at = echoing();
        let raw = b"POST /proxies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4611686018427387904\r\n\r\n{}";
        let reply = exchange(at, raw.to_vec());
        assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
        // And the server goes on.
        assert!(exchange(at, post("")).starts_with("HTTP/1.1 200 "));
    }

    #[test]
    fn heads_too_large_or_with_too_many_lines_get_431() {
        let at = echoing();
        let mut big = b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
        big.extend(format!("X-Big: {}\r\n\r\n", "y".repeat(MOST_HEAD)).bytes());
        let reply = exchange(at, big);
        assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");
        let mut many = b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
        for n in 0..=MOST_HEADERS {
            many.extend(format!("X-{n}: 1\r\n").bytes());
        }
        many.extend(b"\r\n");
        let reply = exchange(at, many);
        assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");
    }

    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let at = echoing();
        let mut raw = Vec::new();
        for n in 0..50 {
            raw.extend(
                format!("GET /{n} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
                    .bytes(),
            );
        }
        raw.extend(b"GET /last HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let reply = exchange(at, raw);
        let paths: Vec<&str> = reply
            .split(r#""path":""#)
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap())
            .collect();
        let mut expected: Vec<String> = (0..50).map(|n| format!("/{n}")).collect();
        expected.push("/last".into());
        assert_eq!(paths, expected);
    }

    #[test]
    fn browsers_get_toxiproxys_403() {
        let at = echoing();
        let raw = b"POST /proxies HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Mozilla/5.0\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
        let reply = exchange(at, raw.to_vec());
        assert!(reply.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{reply}");
        assert!(
            reply.ends_with("\r\n\r\nUser agent not allowed\n"),
            "{reply}"
        );
    }

    #[test]
    fn request_ids_are_xids_in_order() {
        let ids = RequestIds::new();
        let (a, b) = (ids.next(), ids.next());
        assert_eq!(a.len(), 20);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'v').contains(&c))
        );
        assert_ne!(a, b);
        assert_eq!(base32hex(&[0; 12]), "0".repeat(20));
        assert_eq!(base32hex(&[0xff; 12]), "vvvvvvvvvvvvvvvvvvvg");
    }
}
