//! One request's answer: refused by the guard, refused for its body, a
//! CORS preflight, one of the dashboard's files, or the model's; and the
//! headers every answer carries.

use super::guard::Asking;
use super::{ApiState, BODY_TIME, MOST_BODY, MOST_DRAINED, ModelCall, stopping};
use crate::reply::Reply;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::oneshot;

/// The answer to `request`: refused by the guard, refused for its body,
/// or the model's.
pub(super) async fn respond(
    request: Request<Incoming>,
    shared: &ApiState,
) -> Response<Full<Bytes>> {
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
