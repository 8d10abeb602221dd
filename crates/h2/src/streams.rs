//! One stream of a relayed HTTP/2 connection: its request put to the
//! rules, then answered by shape, held, never answered, reset, or carried
//! to the upstream and back (its answer cut if a rule says so), data and
//! trailers both ways as they come, each way waiting for the other side's
//! flow control before it takes more in.

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderValue, Request, Response, StatusCode};
use shape_bucket::Clock;
use shape_http::answer::{GrpcStatus, InjectedAnswer, grpc_message};
use shape_http::framing::{Framing, RequestHead};
use shape_http::rule::{HttpFault, LiveRule};
use std::future::poll_fn;

/// Carries one stream under `rule`, on `upstream` unless a rule answers
/// it.
pub async fn carry_stream(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    upstream: h2::client::SendRequest<Bytes>,
    rule: &LiveRule,
) -> Result<(), h2::Error> {
    let now = shape_bucket::MonotonicClock.now();
    let head = head_of(&request);
    let (parts, body) = request.into_parts();
    match rule.pick(&head, now) {
        None => carry(Request::from_parts(parts, body), respond, upstream, None).await,
        Some(HttpFault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            carry(Request::from_parts(parts, body), respond, upstream, None).await
        }
        Some(HttpFault::CutAfter(after)) => {
            carry(
                Request::from_parts(parts, body),
                respond,
                upstream,
                Some(after),
            )
            .await
        }
        Some(HttpFault::Reset) => {
            respond.send_reset(Reason::CANCEL);
            Ok(())
        }
        Some(HttpFault::Stall) => {
            // Never answered: the stream stays open until the client
            // gives up on it or the connection ends; what it sends is
            // taken in and dropped, so that the others are not held.
            tokio::spawn(drain(body));
            let _ = poll_fn(|cx| respond.poll_reset(cx)).await;
            Ok(())
        }
        Some(HttpFault::Answer(answer)) => {
            let head_only = parts.method == http::Method::HEAD;
            answer_with(&answer, head_only, respond).await
        }
        Some(HttpFault::Grpc(status)) => {
            respond.send_response(trailers_only(&status), true)?;
            Ok(())
        }
    }
}

/// The request's head as the rules read it.
fn head_of(request: &Request<RecvStream>) -> RequestHead {
    RequestHead {
        method: request.method().as_str().to_string(),
        target: request
            .uri()
            .path_and_query()
            .map_or("/", |path| path.as_str())
            .to_string(),
        minor: 1,
        headers: request
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_string(), value.as_bytes().to_vec()))
            .collect(),
        framing: Framing::Empty,
        close: false,
        expects_continue: false,
    }
}

/// Carries `request` to `upstream` and its answer back, the answer's
/// data cut after `cut_after` bytes if given (the stream is then reset).
async fn carry(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    upstream: h2::client::SendRequest<Bytes>,
    cut_after: Option<u64>,
) -> Result<(), h2::Error> {
    let (parts, mut body) = request.into_parts();
    let ended = body.is_end_stream();
    let mut upstream = upstream.ready().await?;
    let (answer, mut sending) = upstream.send_request(Request::from_parts(parts, ()), ended)?;
    let up = async {
        match ended {
            true => Ok(()),
            false => pass(&mut body, &mut sending, None).await.map(|_| ()),
        }
    };
    let down = async {
        let (parts, mut body) = answer.await?.into_parts();
        let ended = body.is_end_stream();
        let mut sending = respond.send_response(Response::from_parts(parts, ()), ended)?;
        if ended {
            return Ok(());
        }
        if !pass(&mut body, &mut sending, cut_after).await? {
            sending.send_reset(Reason::CANCEL);
        }
        Ok(())
    };
    let (up, down): (Result<(), h2::Error>, Result<(), h2::Error>) = tokio::join!(up, down);
    down.and(up)
}

/// Passes `from`'s data and trailers on to `to`, taking more in only as
/// `to` takes it; stops after `most` bytes of data if given. Returns
/// false if it stopped there before the end.
async fn pass(
    from: &mut RecvStream,
    to: &mut SendStream<Bytes>,
    most: Option<u64>,
) -> Result<bool, h2::Error> {
    let mut left = most.unwrap_or(u64::MAX);
    while let Some(data) = from.data().await {
        let mut data = data?;
        let len = data.len();
        let whole = (len as u64) <= left;
        if !whole {
            data.truncate(left as usize);
        }
        left -= data.len() as u64;
        send_all(to, data).await?;
        from.flow_control().release_capacity(len)?;
        if !whole {
            return Ok(false);
        }
    }
    match from.trailers().await? {
        Some(trailers) => to.send_trailers(trailers)?,
        None => to.send_data(Bytes::new(), true)?,
    }
    Ok(true)
}

/// Sends `data` on `to` as the other side's flow control lets it.
async fn send_all(to: &mut SendStream<Bytes>, mut data: Bytes) -> Result<(), h2::Error> {
    while !data.is_empty() {
        to.reserve_capacity(data.len());
        let room = match poll_fn(|cx| to.poll_capacity(cx)).await {
            Some(room) => room?,
            None => return Err(h2::Error::from(Reason::CANCEL)),
        };
        let piece = data.split_to(room.min(data.len()));
        to.send_data(piece, false)?;
    }
    Ok(())
}

/// Takes in and drops what `body` brings, releasing its flow control.
async fn drain(mut body: RecvStream) {
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
    }
}

/// Answers with `answer` in the upstream's place: its status, header
/// fields, and body (none to a HEAD).
async fn answer_with(
    answer: &InjectedAnswer,
    head_only: bool,
    mut respond: SendResponse<Bytes>,
) -> Result<(), h2::Error> {
    let body = answer.body(head_only);
    let mut response = Response::new(());
    *response.status_mut() =
        StatusCode::from_u16(answer.status.code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let fields = response.headers_mut();
    for (name, value) in answer.header_fields() {
        let name = http::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes());
        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_str(&value)) {
            fields.append(name, value);
        }
    }
    let ended = body.is_empty();
    let mut sending = respond.send_response(response, ended)?;
    if !ended {
        send_all(&mut sending, Bytes::copy_from_slice(body)).await?;
        sending.send_data(Bytes::new(), true)?;
    }
    Ok(())
}

/// A gRPC answer of `status` alone, trailers only: HTTP status 200, and
/// grpc-status and grpc-message in the one HEADERS frame that ends the
/// stream.
fn trailers_only(status: &GrpcStatus) -> Response<()> {
    let mut response = Response::new(());
    let fields = response.headers_mut();
    fields.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    fields.insert("grpc-status", HeaderValue::from(u16::from(status.code)));
    if let Ok(message) = HeaderValue::from_str(&grpc_message(&status.message)) {
        if !status.message.is_empty() {
            fields.insert("grpc-message", message);
        }
    }
    response
}
