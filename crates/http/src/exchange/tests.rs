use super::*;
use crate::answer::InjectedAnswer;
use crate::rule::{HttpFault, HttpRule};
use crate::select::Selection;
use proptest::prelude::*;
use std::time::Duration;

/// An exchange under a rule doing `fault` to the requests `selection`
/// picks.
fn exchange(selection: Selection, fault: HttpFault) -> Exchange {
    let rule = HttpRule { selection, fault };
    Exchange::new(Arc::new(LiveRule::new(Some(rule), 7, 0)), true)
}

fn answer_503() -> HttpFault {
    HttpFault::Answer(InjectedAnswer {
        status: "503:busy".parse().unwrap(),
        fields: Vec::new(),
    })
}

fn first(n: u64) -> Selection {
    Selection {
        first: Some(n),
        ..Selection::default()
    }
}

/// What `cuts` of `buffer` make of the stream: passed bytes as text,
/// shape's own between `[…]`, the rest as words.
fn said(buffer: &[u8], cuts: &[Cut]) -> String {
    cuts.iter()
        .map(|cut| match cut {
            Cut::Pass(range) => String::from_utf8_lossy(&buffer[range.clone()]).into_owned(),
            Cut::Insert(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                format!("[{}]", text.lines().next().unwrap_or(""))
            }
            Cut::Hold(until) => format!("<hold {until}>"),
            Cut::Reset => "<reset>".into(),
            Cut::End => "<end>".into(),
            Cut::Handoff => "<handoff>".into(),
        })
        .collect()
}

fn up(exchange: &mut Exchange, wire: &[u8]) -> String {
    let (buffer, cuts) = exchange.requests(wire.to_vec(), 0);
    said(&buffer, &cuts)
}

fn down(exchange: &mut Exchange, wire: &[u8]) -> String {
    let (buffer, cuts) = exchange.responses(wire.to_vec());
    said(&buffer, &cuts)
}

fn due(exchange: &mut Exchange) -> String {
    said(&[], &exchange.due())
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[test]
fn the_first_two_are_answered_by_shape_and_the_third_goes_on() {
    let mut exchange = exchange(first(2), answer_503());
    for _ in 0..2 {
        assert_eq!(up(&mut exchange, GET), "");
        assert_eq!(due(&mut exchange), "[HTTP/1.1 503 Service Unavailable]");
    }
    assert_eq!(up(&mut exchange, GET), String::from_utf8_lossy(GET));
    assert_eq!(due(&mut exchange), "", "the server's answer is awaited");
    assert_eq!(down(&mut exchange, OK), String::from_utf8_lossy(OK));
    let [(_, tally)] = exchange.rule.tally()[..] else {
        panic!("one rule")
    };
    assert_eq!((tally.seen, tally.matched, tally.picked), (3, 3, 2));
}

#[test]
fn pipelined_answers_keep_the_requests_order() {
    let selection = Selection {
        path: Some("/two".parse().unwrap()),
        ..Selection::default()
    };
    let mut exchange = exchange(selection, answer_503());
    let wire = b"GET /one HTTP/1.1\r\n\r\nGET /two HTTP/1.1\r\n\r\nGET /three HTTP/1.1\r\n\r\n";
    assert_eq!(
        up(&mut exchange, wire),
        "GET /one HTTP/1.1\r\n\r\nGET /three HTTP/1.1\r\n\r\n"
    );
    assert_eq!(due(&mut exchange), "", "the first answer is the server's");
    let ok = String::from_utf8_lossy(OK);
    assert_eq!(
        down(&mut exchange, &[OK, OK].concat()),
        format!("{ok}[HTTP/1.1 503 Service Unavailable]{ok}")
    );
}

#[test]
fn an_answered_requests_body_is_read_to_its_end_and_never_sent_on() {
    let mut exchange = exchange(first(2), answer_503());
    let sized = b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
    let chunked = b"POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let after = b"GET /c HTTP/1.1\r\n\r\n";
    let wire = [&sized[..], chunked, after].concat();
    // In pieces of every size, the split never shows.
    for piece in [1, 3, 7, wire.len()] {
        let mut exchange = self::exchange(first(2), answer_503());
        let passed: String = wire
            .chunks(piece)
            .map(|bytes| up(&mut exchange, bytes))
            .collect();
        assert_eq!(passed, "GET /c HTTP/1.1\r\n\r\n", "in pieces of {piece}");
    }
    assert_eq!(up(&mut exchange, &wire), "GET /c HTTP/1.1\r\n\r\n");
}

#[test]
fn a_delay_holds_the_request_and_what_follows() {
    let mut exchange = exchange(first(1), HttpFault::Delay(Duration::from_nanos(500)));
    let (buffer, cuts) = exchange.requests(GET.to_vec(), 1000);
    assert_eq!(
        said(&buffer, &cuts),
        format!("<hold 1500>{}", String::from_utf8_lossy(GET))
    );
    assert_eq!(up(&mut exchange, GET), String::from_utf8_lossy(GET));
}

#[test]
fn a_cut_answer_ends_after_so_many_bytes_of_its_body() {
    let mut exchange = exchange(first(1), HttpFault::CutAfter(3));
    up(&mut exchange, &[GET, GET].concat());
    let long = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
    assert_eq!(
        down(&mut exchange, long),
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n012<end>"
    );
    assert_eq!(
        exchange.unseen(Messages::Responses),
        0,
        "nothing more passes"
    );
    let mut chunked = self::exchange(first(1), HttpFault::CutAfter(3));
    up(&mut chunked, GET);
    let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n9\r\ncdefghijk\r\n0\r\n\r\n";
    assert_eq!(
        down(&mut chunked, wire),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n9\r\nc<end>",
        "the content is counted, not the chunks' size lines"
    );
    let mut short = self::exchange(first(1), HttpFault::CutAfter(3));
    up(&mut short, GET);
    assert_eq!(down(&mut short, OK), String::from_utf8_lossy(OK));
}

#[test]
fn a_reset_and_a_stall_come_in_their_turn() {
    let mut reset = exchange(
        Selection {
            path: Some("/flaky".parse().unwrap()),
            ..Selection::default()
        },
        HttpFault::Reset,
    );
    let wire = b"GET / HTTP/1.1\r\n\r\nGET /flaky HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    assert_eq!(up(&mut reset, wire), "GET / HTTP/1.1\r\n\r\n");
    assert_eq!(due(&mut reset), "");
    assert_eq!(
        down(&mut reset, OK),
        format!("{}<reset>", String::from_utf8_lossy(OK))
    );
    let mut stall = exchange(first(1), HttpFault::Stall);
    assert_eq!(up(&mut stall, GET), "");
    assert_eq!(up(&mut stall, GET), "", "nothing after it is sent on");
    assert_eq!(due(&mut stall), "", "and nothing answers it");
}

#[test]
fn an_answer_to_a_request_that_closes_ends_the_connection() {
    let mut exchange = exchange(first(1), answer_503());
    let closing = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(up(&mut exchange, closing), "");
    assert_eq!(
        due(&mut exchange),
        "[HTTP/1.1 503 Service Unavailable]<end>"
    );
    assert_eq!(up(&mut exchange, b"abcGET / HTTP/1.1\r\n\r\n"), "");
}

#[test]
fn bodies_that_are_not_there_and_interim_answers_pass() {
    let mut exchange = exchange(
        Selection {
            path: Some("/never".parse().unwrap()),
            ..Selection::default()
        },
        answer_503(),
    );
    let wire = b"HEAD / HTTP/1.1\r\n\r\nPOST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\n\r\n";
    assert_eq!(up(&mut exchange, wire), String::from_utf8_lossy(wire));
    let answers = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n\
HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\
HTTP/1.1 304 Not Modified\r\n\r\n";
    assert_eq!(
        down(&mut exchange, answers),
        String::from_utf8_lossy(answers)
    );
    assert!(exchange.turns.is_empty(), "every request answered");
}

#[test]
fn what_is_not_http_passes_and_is_noted() {
    let mut exchange = exchange(first(9), answer_503());
    let hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    assert_eq!(up(&mut exchange, hello), String::from_utf8_lossy(hello));
    assert_eq!(exchange.opaque(Messages::Requests), Some(Opaque::NotHttp));
    assert_eq!(exchange.unseen(Messages::Requests), u64::MAX);
}

#[test]
fn a_body_of_known_length_may_go_by_unseen() {
    let mut exchange = exchange(first(0), answer_503());
    up(
        &mut exchange,
        b"PUT / HTTP/1.1\r\nContent-Length: 100000\r\n\r\nab",
    );
    assert_eq!(exchange.unseen(Messages::Requests), 99_998);
    exchange.went_by(Messages::Requests, 99_998);
    assert_eq!(up(&mut exchange, GET), String::from_utf8_lossy(GET));
    let mut answered = self::exchange(first(1), answer_503());
    up(
        &mut answered,
        b"PUT / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n",
    );
    assert_eq!(
        answered.unseen(Messages::Requests),
        0,
        "a dropped body is read"
    );
}

#[test]
fn an_http2_client_is_handed_over_with_what_the_server_said_first() {
    let mut exchange = exchange(first(1), answer_503());
    let settings = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64";
    assert_eq!(
        down(&mut exchange, settings),
        "",
        "held until the client speaks"
    );
    assert_eq!(
        up(&mut exchange, &HTTP2_PREFACE[..10]),
        "",
        "a preface begun"
    );
    let (buffer, cuts) = exchange.requests(HTTP2_PREFACE[10..].to_vec(), 0);
    assert_eq!(
        (buffer.as_slice(), cuts),
        (HTTP2_PREFACE, vec![Cut::Handoff])
    );
    assert_eq!(exchange.held_from_server(), settings);
    let mut plain = self::exchange(first(1), answer_503());
    assert_eq!(down(&mut plain, settings), "");
    assert_eq!(up(&mut plain, GET), "", "an HTTP/1.1 client");
    let held = plain.due();
    assert_eq!(
        held,
        [Cut::Insert(settings.to_vec())],
        "what was held goes on"
    );
    assert_eq!(due(&mut plain), "");
    let mut smtp = self::exchange(first(1), answer_503());
    assert_eq!(
        down(&mut smtp, b"220 mail ESMTP\r\n"),
        "220 mail ESMTP\r\n",
        "not held"
    );
}

#[test]
fn a_connection_switches_only_when_its_server_says_so() {
    let mut exchange = exchange(
        Selection {
            path: Some("/refused".parse().unwrap()),
            ..Selection::default()
        },
        answer_503(),
    );
    let websocket = b"GET /chat HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    let refused = b"GET /refused HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    // Answered by shape, then declined by the server: still HTTP.
    assert_eq!(up(&mut exchange, refused), "");
    assert_eq!(due(&mut exchange), "[HTTP/1.1 503 Service Unavailable]");
    assert_eq!(
        up(&mut exchange, websocket),
        String::from_utf8_lossy(websocket)
    );
    assert_eq!(down(&mut exchange, OK), String::from_utf8_lossy(OK));
    assert_eq!(up(&mut exchange, refused), "", "framed as HTTP still");
    assert_eq!(due(&mut exchange), "[HTTP/1.1 503 Service Unavailable]");
    // Switched by the server: a tunnel both ways, whatever comes.
    assert_eq!(
        up(&mut exchange, websocket),
        String::from_utf8_lossy(websocket)
    );
    let switched = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x02hi";
    assert_eq!(
        down(&mut exchange, switched),
        String::from_utf8_lossy(switched)
    );
    assert_eq!(
        up(&mut exchange, refused),
        String::from_utf8_lossy(refused),
        "untouched"
    );
    assert_eq!(exchange.unseen(Messages::Requests), u64::MAX);
}

#[test]
fn an_upgrade_to_h2c_is_declined_and_the_rules_meet_each_request() {
    let mut exchange = exchange(
        Selection {
            path: Some("/two".parse().unwrap()),
            ..Selection::default()
        },
        answer_503(),
    );
    let upgrade = b"GET /one HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n\
Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\nGET /two HTTP/1.1\r\n\r\n";
    assert_eq!(up(&mut exchange, upgrade), "[GET /one HTTP/1.1]");
    let (buffer, cuts) = exchange.requests(Vec::new(), 0);
    assert!(buffer.is_empty() && cuts.is_empty());
    let ok = String::from_utf8_lossy(OK);
    assert_eq!(
        down(&mut exchange, OK),
        format!("{ok}[HTTP/1.1 503 Service Unavailable]"),
        "the second request was framed, not tunnelled"
    );
    let head = match crate::framing::RequestFramer::default().step(upgrade) {
        crate::framing::Framed::Head(head, _) => head,
        step => panic!("{step:?}"),
    };
    assert_eq!(
        String::from_utf8(head.without_upgrade()).unwrap(),
        "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"
    );
}

/// A stream of requests or responses, of the kinds a proxy meets.
fn messages(responses: bool) -> impl Strategy<Value = Vec<u8>> {
    let one =
        (0usize..4, proptest::collection::vec(any::<u8>(), 0..40)).prop_map(move |(kind, body)| {
            let start = match responses {
                true => "HTTP/1.1 200 OK".to_string(),
                false => "POST /x HTTP/1.1".to_string(),
            };
            let mut wire = match kind {
                0 => format!("{start}\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes(),
                1 if !body.is_empty() => {
                    let mut wire = format!(
                        "{start}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
                        body.len()
                    )
                    .into_bytes();
                    wire.extend_from_slice(&body);
                    wire.extend_from_slice(b"\r\n0\r\nTrailer: t\r\n\r\n");
                    return wire;
                }
                _ => format!("{start}\r\nContent-Length: 0\r\n\r\n").into_bytes(),
            };
            if kind == 0 {
                wire.extend_from_slice(&body);
            }
            wire
        });
    proptest::collection::vec(one, 1..6).prop_map(|all| all.concat())
}

/// Hands `wire` to `side` of an exchange whose rule picks nothing, in
/// pieces cut at `splits`, and gathers what passed.
fn passed(side: Messages, wire: &[u8], splits: &[usize]) -> Vec<u8> {
    let mut exchange = exchange(
        Selection {
            method: Some("NONE".into()),
            ..Selection::default()
        },
        answer_503(),
    );
    if side == Messages::Responses {
        exchange.requests(wire.to_vec(), 0);
    }
    let mut bounds: Vec<usize> = splits.iter().map(|at| at % (wire.len() + 1)).collect();
    bounds.extend([0, wire.len()]);
    bounds.sort_unstable();
    let mut out = Vec::new();
    for piece in bounds.windows(2) {
        let bytes = wire[piece[0]..piece[1]].to_vec();
        let (buffer, cuts) = match side {
            Messages::Requests => exchange.requests(bytes, 0),
            Messages::Responses => exchange.responses(bytes),
        };
        gather(&mut out, buffer, cuts);
    }
    let (buffer, cuts) = exchange.flush(side);
    gather(&mut out, buffer, cuts);
    out
}

/// Adds to `out` what `cuts` of `buffer` pass; they must all be passes.
fn gather(out: &mut Vec<u8>, buffer: Vec<u8>, cuts: Vec<Cut>) {
    for cut in cuts {
        match cut {
            Cut::Pass(range) => out.extend_from_slice(&buffer[range]),
            other => panic!("nothing is picked, yet {other:?}"),
        }
    }
}

proptest! {
    /// What a rule does not pick passes byte for byte, however the stream
    /// comes in pieces: requests, responses, and bytes that are not HTTP.
    #[test]
    fn what_is_not_picked_passes_byte_for_byte(
        requests in messages(false),
        responses in messages(true),
        noise in proptest::collection::vec(any::<u8>(), 0..200),
        splits in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        prop_assert_eq!(passed(Messages::Requests, &requests, &splits), requests.clone());
        prop_assert_eq!(passed(Messages::Responses, &responses, &splits), responses.clone());
        prop_assert_eq!(passed(Messages::Requests, &noise, &splits), noise.clone());
    }
}
