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
//!
//! Here: the listener, its connections and the model's thread. One
//! request's answer, with the headers every answer carries, is
//! `respond.rs`'s; the id each answer carries is made in `ids.rs`.

pub mod guard;
mod ids;
mod respond;

use crate::reply::Reply;
use guard::Guard;
use hyper::body::Bytes;
use hyper_util::rt::{TokioIo, TokioTimer};
use ids::RequestIds;
use respond::respond;
use shape_leaves::say::Printer;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
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
}
