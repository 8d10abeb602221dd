//! `--serve`'s dashboard in a real browser: headless Chromium from
//! Debian, driven by Selenium (`tests/clients/dashboard.py`), through
//! the page alone. Without the browser, its driver or the venv a test is
//! skipped, except under CI, where `.ci/run` installs them. What a plain
//! client sees of the page (its headers, and who else is refused) is
//! checked here without a browser.

use crate::harness::{available, ours, set_up};
use crate::serve::{Toxiproxy, echo_server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

#[test]
fn the_dashboard_drives_the_server_in_a_real_browser() {
    let python = ours("target/clients/venv/bin/python");
    if !set_up(&python) {
        return;
    }
    for browser in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        let found = std::path::Path::new(browser).exists();
        if !available(
            found,
            &format!("{browser} is missing"),
            ".ci/run installs it",
        ) {
            return;
        }
    }
    let server = Toxiproxy::start(&[]);
    let port = server.api.rsplit(':').next().unwrap().to_string();
    let output = Command::new(python)
        .arg(ours("tests/clients/dashboard.py"))
        .arg(port)
        .arg(echo_server())
        .arg(server.pid().to_string())
        .output()
        .expect("the browser's script runs");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && said.trim() == "ok",
        "{:?}\n{said}\n{}\nshape said: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        server.stderr()
    );
    // What the browser did is what the API holds.
    let (status, proxy) = server.call("GET", "/proxies/web", None);
    assert_eq!(status, 200);
    assert_eq!(proxy["enabled"], false, "{proxy}");
    assert_eq!(proxy["toxics"][0]["attributes"]["latency"], 100, "{proxy}");
}

/// `request` sent whole to `api`, and the whole answer.
fn exchange(api: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(api).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_page_is_its_own_and_only_its_own_requests_pass_for_a_browser() {
    let server = Toxiproxy::start(&[]);
    let api = &server.api;
    let browser = "User-Agent: Mozilla/5.0\r\nConnection: close";
    let page = exchange(
        api,
        &format!("GET / HTTP/1.1\r\nHost: {api}\r\n{browser}\r\n\r\n"),
    );
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    let head = page.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    for header in [
        "content-type: text/html; charset=utf-8",
        "content-security-policy: default-src 'self'; frame-ancestors 'none'",
        "x-frame-options: deny",
        "x-content-type-options: nosniff",
    ] {
        assert!(head.contains(header), "{header} missing from\n{head}");
    }
    assert!(page.contains("<script src=\"/ui/app.js\""), "{page}");
    for asset in ["/ui/app.js", "/ui/style.css"] {
        let answer = exchange(
            api,
            &format!("GET {asset} HTTP/1.1\r\nHost: {api}\r\n{browser}\r\n\r\n"),
        );
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    }
    // The page's own reading, and a change with its own origin, pass.
    let own = format!("Host: {api}\r\nSec-Fetch-Site: same-origin\r\n{browser}");
    let state = exchange(api, &format!("GET /ui/state HTTP/1.1\r\n{own}\r\n\r\n"));
    assert!(state.starts_with("HTTP/1.1 200 OK\r\n"), "{state}");
    assert!(state.contains("\"proxies\":[]"), "{state}");
    let body = format!(
        "{{\"name\": \"mine\", \"upstream\": \"{}\"}}",
        echo_server()
    );
    let create = |headers: &str| {
        exchange(
            api,
            &format!(
                "POST /proxies HTTP/1.1\r\n{headers}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    let made = create(&format!("{own}\r\nOrigin: http://{api}"));
    assert!(made.starts_with("HTTP/1.1 201 Created\r\n"), "{made}");
    // Refused: a change without its origin, another port's page, another
    // site's, and a browser that does not say where it comes from.
    for headers in [
        own.clone(),
        format!(
            "Host: {api}\r\nSec-Fetch-Site: same-site\r\nOrigin: http://127.0.0.1:1\r\n{browser}"
        ),
        format!(
            "Host: {api}\r\nSec-Fetch-Site: cross-site\r\nOrigin: http://evil.example\r\n{browser}"
        ),
        format!("Host: {api}\r\n{browser}"),
    ] {
        let refused = create(&headers);
        assert!(
            refused.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{headers}\n{refused}"
        );
        assert!(refused.ends_with("User agent not allowed\n"), "{refused}");
    }
    // A page rebound to loopback is refused, the page itself too.
    let rebound = exchange(
        api,
        &format!("GET / HTTP/1.1\r\nHost: evil.example\r\n{browser}\r\n\r\n"),
    );
    assert!(
        rebound.starts_with("HTTP/1.1 403 Forbidden\r\n"),
        "{rebound}"
    );
    let (_, proxies) = server.call("GET", "/proxies", None);
    let names: Vec<&String> = proxies.as_object().unwrap().keys().collect();
    assert_eq!(names, ["mine"]);
}
