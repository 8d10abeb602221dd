//! Known links by name (`--link`): the table, the pipe, the proxy and
//! `--exec` at a link's rate and round trip, flags given too in the
//! place of the link's, and where a link does not apply. Times are loose
//! real-time checks: never early, late only by what a busy machine could
//! explain.

use crate::harness::*;
use crate::proxy::{echo, server};
use crate::slow_link::proxy_round_trips;

use std::process::Stdio;
use std::time::Duration;

#[test]
fn the_table_names_every_link_with_its_figures_and_source() {
    let run = run(shape(["--link", "list"]), Stdio::null());
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let table = String::from_utf8_lossy(&run.stdout).into_owned();
    for row in [
        "slow-3g           500kbit  500kbit  400 ms      0%    Chrome DevTools, nominal",
        "slow-4g, fast-3g  1.6Mbit  750kbit  150 ms      0%    Lighthouse, Chrome DevTools, nominal",
        "dialup            49kbit   30kbit   120 ms      0%    WebPageTest",
        "edge              240kbit  200kbit  840 ms      0%    WebPageTest",
    ] {
        assert!(table.lines().any(|line| line == row), "{row}\n{table}");
    }
    assert_eq!(table.lines().count(), 14, "{table}");
}

#[test]
fn an_unknown_link_is_refused_with_the_known_ones() {
    let unknown = run(shape(["--link", "5g"]), Stdio::null());
    assert_eq!(unknown.code(), 2, "{}", unknown.stderr);
    assert_eq!(unknown.stderr.lines().count(), 1, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("'5g' for '--link"),
        "{}",
        unknown.stderr
    );
    assert!(
        unknown.stderr.contains("slow-3g, slow-4g"),
        "{}",
        unknown.stderr
    );
    for args in [
        &["--link", "dsl", "--remote", "1", "--rate", "1"][..],
        &["--link", "dsl", "--serve", "127.0.0.1:0"],
    ] {
        let refused = run(shape(args), Stdio::null());
        assert_eq!(refused.code(), 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("--link applies"),
            "{}",
            refused.stderr
        );
    }
}

#[test]
fn a_pipe_on_a_link_goes_at_its_rate_down_and_the_rate_given_wins() {
    // Dial-up: 49 kbit/s down (6,125 B/s), 60 ms each way. 12,250 bytes
    // take 1.8 s past the burst of 200 ms.
    let input = vec![7u8; 12_250];
    let run = run_with_input(shape(["--link", "dialup", "--stats"]), input.clone(), 4096);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == input);
    assert!(run.stderr.contains("limit 49kbit"), "{}", run.stderr);
    let took = run.elapsed;
    assert!(
        (Duration::from_millis(1_750)..Duration::from_secs(12)).contains(&took),
        "took {took:?}"
    );
    // A rate given takes the link's place; its delay stays.
    let fast = shape(["--link", "dialup", "--rate", "unlimited"]);
    let run = run_with_input(fast, input, 4096);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(
        run.elapsed < Duration::from_secs(1),
        "took {:?}",
        run.elapsed
    );
}

#[test]
fn a_proxy_on_a_link_takes_its_round_trip_and_a_delay_given_wins() {
    let times = proxy_round_trips(&["--link", "slow-3g"]);
    assert!(times[0] >= Duration::from_millis(400), "{times:?}");
    assert!(times[1] < Duration::from_millis(900), "{times:?}");
    let times = proxy_round_trips(&["--link", "slow-3g", "--delay", "10ms"]);
    assert!(times[0] >= Duration::from_millis(20), "{times:?}");
    assert!(times[1] < Duration::from_millis(300), "{times:?}");
}

#[test]
#[cfg(feature = "exec")]
fn a_command_on_a_link_connects_in_its_round_trip() {
    let upstream = server(echo);
    let port = upstream.rsplit(':').next().unwrap().to_string();
    let script = "import socket, sys, time\n\
                  t = time.monotonic()\n\
                  socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  print((time.monotonic() - t) * 1000)";
    let mut command = shape(["--link", "3g", "--exec", "python3", "-c", script]);
    let output = command.arg(&port).stdin(Stdio::null()).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let connect: f64 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(
        (298.0..1_500.0).contains(&connect),
        "connected in {connect} ms"
    );
}
