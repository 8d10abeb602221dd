//! The command line: every flag, its help text and its value parser
//! ([`values`]), the one-line usage errors ([`usage`]), and the man page
//! and completions generated from the same definition ([`generate`]).
//! Parsing only; what the flags do lives in [`crate::mode`].

pub mod generate;
pub mod http;
pub mod toxiproxy;
mod udp;
pub mod usage;
mod values;

use crate::control::{RateSchedule, ShareName};
use crate::progress::ProgressMode;
use clap::{Parser, ValueEnum};
use shape_bucket::RateSpec;
use shape_bucket::units::Quantity;
use shape_impair::faults::{Change, FaultFlags, Faults, Way, parse_probability};
use shape_impair::profiles::{LinkArg, Profile};
use shape_impair::slowlink::SlowLink;
use shape_impair::trace::Trace;
use shape_leaves::counting::{Counting, Written};
use shape_leaves::share::Fallback;
use shape_net::Address;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use values::{
    parse_burst, parse_interval, parse_max_buffer, parse_origin, parse_seed, parse_trace,
};

/// The command line of this process, as clap reads it, with everything
/// after `--exec` taken as the command to run (flags included), as `nice`
/// and `timeout` take theirs.
pub fn parse() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// [`parse`] on `args`.
pub fn parse_from(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let mut own: Vec<std::ffi::OsString> = args.into_iter().collect();
    let given: Vec<String> = own
        .iter()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let at = own
        .iter()
        .skip(1)
        .position(|arg| arg == "--exec")
        .map(|at| at + 1);
    let command = at.map(|at| own.split_off(at + 1));
    match command {
        // An empty command is clap's to refuse, as a missing value.
        Some(command) if !command.is_empty() => {
            // clap sees the program's name alone, so that what --exec
            // conflicts with is refused as for any flag.
            own.push(command[0].clone());
            let mut cli = Cli::try_parse_from(own)?;
            cli.exec = Some(command);
            cli.given = given;
            Ok(cli)
        }
        _ => Cli::try_parse_from(own).map(|mut cli| {
            cli.given = given;
            cli
        }),
    }
}

const EXAMPLES: &str = "\
Examples:
  cat big.iso | shape --rate 5MiB --burst 1MiB | nc -N host 9000
  shape --rate 40Mbit backup.tar > /mnt/slow/backup.tar
  shape -L 1m < in > out
  curl -s \"$url\" | shape -r 200k --progress json 2>progress.log > page.html
  shape --remote 4242 --rate 10MiB      # speed up the shape running as 4242
  shape --schedule \"0s=1MiB, 30s=100k\" < in > out   # a link that degrades
  shape --listen :8080 --connect localhost:80 --rate 1MiB --delay 50ms   # a slow link
  cat urls.txt | shape --lines --rate 2 | xargs -n1 curl -sO   # two pages a second
  shape --rate 5MiB --exec rsync -a /data backup:/data   # a program's own traffic

Units: K M G T and KiB MiB GiB TiB are powers of 1024; KB MB GB TB are
powers of 1000; kbit Mbit Gbit and kbps Mbps Gbps are bits per second,
powers of 1000. A time may follow a '/' (/s, /min, /h: 100MB/h, 1k/min);
fractions work (1.5MiB). With --lines or --null a plain number is records
(2, 30/min, 1/5s, 0.5).

Signals: SIGHUP rereads --rate-file; SIGUSR1 prints a status line;
SIGUSR2 is how 'shape --remote PID' reaches a running shape; SIGINT and
SIGTERM stop it (what was written stays written).

Exit status: 0 success, 1 an input or output failed (or --remote found no
shape, or no answer), 2 bad usage, 3 --reset-after struck, 141 (SIGPIPE)
when the reader downstream went away, 130 on Ctrl-C (SIGINT), 143 on
SIGTERM; with --exec, the command's own.";

/// What `-h` ends with: where to read more.
const MORE: &str = "'shape --help' says more of each option, with examples, units, signals and \
exit statuses; 'man shape' has it all, with remote control, shares and toxiproxy's API.";

/// Passes a byte stream through at a controlled rate.
///
/// shape copies its inputs to standard output, paying one token per byte
/// from a token bucket that refills at RATE and holds at most BURST. Reads
/// are paced by the tokens, so the producer upstream feels the limit too.
// Values may start with '-', so that '--rate -1' is refused as a bad rate
// rather than as an unknown flag that names neither.
// The doc comments below are --help text: brackets in them ('[BURST]',
// '[::1]:port') are literal, not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, Clone, Parser)]
#[command(
    name = "shape",
    version = env!("SHAPE_VERSION"),
    after_help = MORE,
    after_long_help = EXAMPLES,
    max_term_width = 100,
    group(clap::ArgGroup::new("two_ways").args(["listen", "exec", "remote"]).multiple(true)),
    group(clap::ArgGroup::new("delays").args(["delay", "delay_up", "delay_down", "link"]).multiple(true))
)]
pub struct Cli {
    /// Inputs, read in order ('-', or none, is standard input).
    ///
    /// Inputs, read in order; '-' is standard input. None means standard
    /// input. A missing or unreadable file is reported and skipped, and the
    /// exit status is then 1.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Bytes (or records) a second, or 'unlimited'.
    ///
    /// Bytes (or with --lines, --null: records) per second, or 'unlimited'
    /// (the default: shape is then a progress pipe).
    ///
    /// A plain number is bytes, or records; K M G T and KiB MiB GiB TiB are
    /// powers of 1024 (as in pv); KB MB GB TB are powers of 1000; kbit Mbit
    /// Gbit and kbps Mbps Gbps are bits per second, powers of 1000.
    /// Fractions work, and a time may follow a '/': 5MiB, 1.5M/s, 40Mbit,
    /// 100MB/h. With --lines or --null, records: 2, 30/min, 1/5s, 0.5.
    #[arg(
        help_heading = "Rate and burst",
        short,
        long,
        visible_short_alias = 'L',
        value_name = "RATE",
        allow_hyphen_values = true
    )]
    pub rate: Option<Written<RateSpec>>,

    /// The bucket's depth: the most that may pass at once after a pause.
    ///
    /// Defaults to a tenth of a second at the rate, and at least two
    /// packets' worth (3,000 bytes; 200 ms of the rate below 15 KB/s), so
    /// that a slow link moves a packet at a time; to one record with
    /// --lines or --null, so that a crawl does not fire a volley at start.
    /// The bucket starts full.
    #[arg(short, long, value_name = "SIZE", value_parser = parse_burst, allow_hyphen_values = true, help_heading = "Rate and burst")]
    pub burst: Option<Written<Quantity>>,

    /// The expected total, for the percentage and ETA.
    ///
    /// The expected total, for the percentage and ETA when reading standard
    /// input (the size of files is known; records are not counted ahead).
    #[arg(
        short,
        long,
        value_name = "SIZE",
        allow_hyphen_values = true,
        help_heading = "Progress and stats"
    )]
    pub size: Option<Written<Quantity>>,

    /// Forward at most SIZE bytes (or records), then exit successfully.
    #[arg(
        long,
        value_name = "SIZE",
        allow_hyphen_values = true,
        help_heading = "What is counted"
    )]
    pub stop_after: Option<Written<Quantity>>,

    /// Count lines instead of bytes.
    ///
    /// Count lines instead of bytes: the rate, burst, sizes, progress and
    /// stats are in lines, and a line leaves whole, once paid for.
    #[arg(
        short = 'l',
        long,
        conflicts_with = "null",
        help_heading = "What is counted"
    )]
    pub lines: bool,

    /// Count NUL-terminated records instead of bytes.
    ///
    /// Count records ending in a NUL byte (as find -print0 writes them)
    /// instead of bytes, as --lines counts lines.
    #[arg(short = '0', long, help_heading = "What is counted")]
    pub null: bool,

    /// Print nothing on standard error but errors (no progress, no stats).
    #[arg(short, long, help_heading = "Progress and stats")]
    pub quiet: bool,

    /// How progress is shown on standard error.
    ///
    /// How to show progress on standard error. It never touches standard
    /// output and never slows the copy.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = ProgressMode::Auto, help_heading = "Progress and stats")]
    pub progress: ProgressMode,

    /// How often progress is shown.
    ///
    /// How often progress is shown: '500ms', '2s', or plain seconds ('0.5').
    /// Defaults to 1s for json and 0.1s for the bar.
    #[arg(short, long, value_name = "DURATION", value_parser = parse_interval, allow_hyphen_values = true, help_heading = "Progress and stats")]
    pub interval: Option<Duration>,

    /// Print a summary line at the end.
    ///
    /// Print a one-line summary on standard error at the end: bytes,
    /// elapsed time, the average rate since the start, and the limit and
    /// burst (a full bucket at the start lifts a short run's average above
    /// the limit).
    #[arg(long, help_heading = "Progress and stats")]
    pub stats: bool,

    /// Print numbers, as pv -n does.
    ///
    /// Each interval, one line on standard error with the whole percentage
    /// done (with --size, or reading files), else the count so far, as
    /// 'dialog --gauge' reads them. The same as --progress numeric.
    #[arg(short = 'n', long, help_heading = "Progress and stats")]
    pub numeric: bool,

    /// pv's switches that pick the bar's parts, taken as pv takes them:
    /// -p the bar and percentage (with a known size), -t the time, -e the
    /// ETA, -a the average rate; given any, the bar shows the count and
    /// the rate, then those. (pv's -r and -b are shape's --rate and
    /// --burst: its bar always shows the rate and count.)
    #[arg(short = 'p', hide = true)]
    pub pv_percent: bool,
    #[arg(short = 't', hide = true)]
    pub pv_timer: bool,
    #[arg(short = 'e', hide = true)]
    pub pv_eta: bool,
    #[arg(short = 'a', hide = true)]
    pub pv_average: bool,

    /// Name the bar, as pv -N does: 'NAME: ' before it.
    #[arg(
        short = 'N',
        long = "name",
        value_name = "NAME",
        hide_short_help = true,
        help_heading = "Progress and stats"
    )]
    pub name: Option<String>,

    /// Show the bar only once the first byte has passed, as pv -W does.
    #[arg(
        short = 'W',
        long = "wait",
        hide_short_help = true,
        help_heading = "Progress and stats"
    )]
    pub wait: bool,

    /// Draw the bar even where standard error is no terminal, as pv -f
    /// does (the same as --progress bar).
    #[arg(
        short = 'f',
        long = "force",
        hide_short_help = true,
        help_heading = "Progress and stats"
    )]
    pub force: bool,

    /// Read the rate (and burst) from FILE, and again on SIGHUP.
    ///
    /// Read the rate (and optionally the burst) from FILE: 'RATE [BURST]'
    /// on its first line that is not a '#' comment. Read at start and again
    /// on SIGHUP; a bad file then leaves the settings as they were.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rate", "schedule"], help_heading = "Changing a running shape")]
    pub rate_file: Option<PathBuf>,

    /// Follow a timetable of rates.
    ///
    /// Follow a timetable of rates from the start of the transfer, e.g.
    /// "0s=1MiB, 30s=10MiB, 2m=unlimited" (humantime offsets, increasing).
    #[arg(
        help_heading = "Changing a running shape",
        long,
        value_name = "TIMETABLE",
        conflicts_with = "rate",
        allow_hyphen_values = true
    )]
    pub schedule: Option<Written<RateSchedule>>,

    /// Read from a connection on ADDR (with --connect: be a proxy).
    ///
    /// Read from one connection accepted on ADDR instead of standard input:
    /// host:port, :port (every interface), [::1]:port or unix:PATH; port 0
    /// takes any free port. shape says where it listens on standard error
    /// ('shape: listening on 127.0.0.1:41234'), accepts one connection,
    /// reads it to its end, and exits. With --connect too, shape is a
    /// proxy: every connection accepted is forwarded to the --connect
    /// address, both directions shaped.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with = "files",
        help_heading = "Sockets and proxy"
    )]
    pub listen: Option<Address>,

    /// Run COMMAND with its own traffic shaped, children included.
    ///
    /// Run COMMAND (the rest of the command line: put --exec last) with
    /// every byte that it and all its descendants send or receive on IP
    /// sockets (TCP and UDP, IPv4 and IPv6, loopback included) paid for
    /// from shape's bucket; --rate limits each way, --rate-up and
    /// --rate-down set them apart. Unix sockets, pipes and files are
    /// never shaped. With --delay, --jitter, a fault or a UDP link's
    /// option, its connections and datagrams go through a whole link: a
    /// connect takes a round trip, and poll and epoll see data when it is
    /// due. Works for any binary, static ones included, and needs no root
    /// nor any capability: a seccomp filter hands the command's socket
    /// calls to shape (Linux 5.19 or later; Docker's default profile is
    /// enough). The exit status is the command's
    /// (128+N if signal N ended it; 127 if it is not found, 126 if it
    /// cannot be run); SIGINT, SIGTERM and SIGHUP sent to shape reach it.
    #[arg(
        long,
        value_name = "COMMAND",
        num_args = 1..,
        allow_hyphen_values = true,
        value_hint = clap::ValueHint::CommandName,
        conflicts_with_all = ["files", "listen", "connect", "serve", "remote"],
        help_heading = "Shaping a program"
    )]
    pub exec: Option<Vec<std::ffi::OsString>>,

    /// Serve toxiproxy's HTTP API, as a drop-in toxiproxy server.
    ///
    /// Serve toxiproxy's HTTP API on ADDR (default localhost:8474), as a
    /// drop-in toxiproxy server: proxies are created, changed and given
    /// toxics over HTTP, each with its own listener, all on one event
    /// loop. --seed makes every random draw reproducible. Runs until
    /// SIGINT or SIGTERM.
    #[arg(
        help_heading = "toxiproxy's API",
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "localhost:8474",
        conflicts_with_all = ["listen", "connect", "files", "remote", "share"]
    )]
    pub serve: Option<Address>,

    /// With --serve: the proxies of FILE, made at start.
    ///
    /// With --serve: create the proxies of FILE at start, in toxiproxy's
    /// config format (a JSON list of proxies, as POST /populate takes).
    #[arg(
        long,
        value_name = "FILE",
        requires = "serve",
        help_heading = "toxiproxy's API"
    )]
    pub config: Option<PathBuf>,

    /// With --serve: let a browser UI from ORIGIN drive the API.
    ///
    /// With --serve: let a browser UI served from ORIGIN (e.g.
    /// http://localhost:3000) drive the API, with the CORS headers it
    /// needs. Without it, requests from browsers and other sites are
    /// refused (403), so that no web page can drive the API. Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "serve", value_parser = parse_origin, help_heading = "toxiproxy's API")]
    pub serve_allow_origin: Vec<String>,

    /// With --serve: let proxies use Unix sockets.
    ///
    /// With --serve: let proxies listen on or forward to unix:PATH sockets
    /// (a shape extension; toxiproxy has none). Off by default, so that
    /// the API cannot expose a local socket, such as Docker's, on the
    /// network.
    #[arg(
        hide_short_help = true,
        long,
        requires = "serve",
        help_heading = "toxiproxy's API"
    )]
    pub serve_allow_unix: bool,

    /// With --serve: the process's metrics in /metrics too.
    ///
    /// With --serve: /metrics gives the process's own metrics too (the
    /// standard process_* ones: CPU seconds, memory, descriptors, start
    /// time), as toxiproxy's -runtime-metrics does, without its go_* ones.
    #[arg(
        hide_short_help = true,
        long,
        requires = "serve",
        help_heading = "toxiproxy's API"
    )]
    pub runtime_metrics: bool,

    /// Proxy, --exec: the rate of what clients send (default --rate).
    ///
    /// Proxy or --exec: the rate from clients to the server, or of what
    /// the command sends (default: --rate). With --remote PID, changes
    /// that way of a running one.
    #[arg(
        long,
        value_name = "RATE",
        requires = "two_ways",
        allow_hyphen_values = true,
        help_heading = "Sockets and proxy"
    )]
    pub rate_up: Option<Written<RateSpec>>,

    /// Proxy, --exec: the rate of what clients get (default --rate).
    ///
    /// Proxy or --exec: the rate from the server to clients, or of what
    /// the command receives (default: --rate). With --remote PID, changes
    /// that way of a running one.
    #[arg(
        long,
        value_name = "RATE",
        requires = "two_ways",
        allow_hyphen_values = true,
        help_heading = "Sockets and proxy"
    )]
    pub rate_down: Option<Written<RateSpec>>,

    /// Proxy: limits of each connection's own, not shared.
    ///
    /// Proxy: give each connection its own limits instead of all sharing
    /// one per direction. On a UDP link, each flow (client address) gets
    /// its own rate and queue each way.
    #[arg(long, requires_all = ["listen", "connect"], help_heading = "Sockets and proxy")]
    pub per_connection: bool,

    /// Proxy or --serve: event loops, a thread each (default: one per core).
    ///
    /// Proxy or --serve: serve clients on N event loops, each a thread,
    /// all accepting from the one listening socket (each of --serve's
    /// proxies is served by every loop): a loop that is free takes the
    /// next client. The default is one per core, but no more than
    /// one per 64 descriptors the process may open. Shared limits stay
    /// one bucket; a connection's own stay its own; a seed replays the
    /// same draws for clients that come one after another. While
    /// descriptors run short, the loops take turns to admit waiting
    /// clients, one each.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u16).range(1..=1024),
        help_heading = "Sockets and proxy"
    )]
    pub loops: Option<u16>,

    /// Write to a connection to ADDR.
    ///
    /// Write to a connection to ADDR instead of standard output (forms as
    /// for --listen; :port is this machine). At the end of the input shape
    /// shuts down its sending side and waits for the peer to close, so
    /// nothing is cut off.
    #[arg(long, value_name = "ADDR", value_parser = shape_net::parse_connect, help_heading = "Sockets and proxy")]
    pub connect: Option<Address>,

    /// How long --connect keeps trying each address (default 10s).
    #[arg(long, value_name = "DURATION", value_parser = shape_net::parse_timeout, requires = "connect", help_heading = "Sockets and proxy")]
    pub connect_timeout: Option<Duration>,

    /// Hold every byte this long: a slow link.
    ///
    /// Hold every byte for DURATION before it leaves, like a link with that
    /// one-way latency: '100ms', '1.5s', up to 1h. In proxy mode each
    /// direction is delayed, so a round trip takes twice as long.
    #[arg(long, value_name = "DURATION", value_parser = shape_impair::slowlink::parse_delay, allow_hyphen_values = true, help_heading = "Slow links and faults")]
    pub delay: Option<Duration>,

    /// Proxy, UDP link or --exec: the delay from clients to the server
    /// (default: --delay).
    ///
    /// An uplink longer or shorter than the downlink, as a satellite
    /// link's or a mobile one's; with --delay-down, a link whose round
    /// trip is their sum.
    #[arg(long, value_name = "DURATION", value_parser = shape_impair::slowlink::parse_delay, allow_hyphen_values = true, hide_short_help = true, help_heading = "Slow links and faults")]
    pub delay_up: Option<Duration>,

    /// Proxy, UDP link or --exec: the delay from the server to clients
    /// (default: --delay).
    #[arg(long, value_name = "DURATION", value_parser = shape_impair::slowlink::parse_delay, allow_hyphen_values = true, hide_short_help = true, help_heading = "Slow links and faults")]
    pub delay_down: Option<Duration>,

    /// A known link by name: 'slow-3g', 'cable', 'lte'...; 'list' shows
    /// them.
    ///
    /// Sets each way's rate and delay (half the round trip) as the link's
    /// source gives them: Chrome DevTools' and Lighthouse's presets
    /// (slow-3g, slow-4g, also called fast-3g, fast-4g) and WebPageTest's
    /// (cable, dsl, fios, dialup, lte, 3g, 3g-fast, 3g-slow, 2g, edge). A
    /// pipe's data is the way down. --rate, --rate-up, --rate-down,
    /// --delay, --delay-up and --delay-down given too take the place of
    /// the link's.
    #[arg(long, value_name = "NAME", value_parser = shape_impair::profiles::parse_link, hide_short_help = true, help_heading = "Slow links and faults")]
    pub link: Option<LinkArg>,

    /// The arguments as given, after the program's name: what some
    /// checks read beside the parsed values (a unit split from its number,
    /// what follows `--link list`).
    #[arg(skip)]
    pub given: Vec<String>,

    /// Pipe: follow a recorded link (Mahimahi's trace format).
    ///
    /// Each line of FILE is a time in milliseconds at which the link may
    /// deliver a packet of 1,500 bytes; a time repeated is several
    /// packets, and the trace repeats when it ends. Mahimahi's recorded
    /// cellular traces are in its repository, under traces/. Takes the
    /// place of --rate.
    #[arg(long, value_name = "FILE", value_parser = parse_trace, conflicts_with_all = ["rate", "schedule", "rate_file", "share"], hide_short_help = true, help_heading = "Slow links and faults")]
    pub trace: Option<Arc<Trace>>,

    /// Proxy, UDP link or --exec: follow a recorded link from clients to
    /// the server (as --trace).
    #[arg(long, value_name = "FILE", value_parser = parse_trace, conflicts_with_all = ["rate", "rate_up", "schedule", "rate_file", "share"], hide_short_help = true, help_heading = "Slow links and faults")]
    pub trace_up: Option<Arc<Trace>>,

    /// Proxy, UDP link or --exec: follow a recorded link from the server
    /// to clients (as --trace).
    #[arg(long, value_name = "FILE", value_parser = parse_trace, conflicts_with_all = ["rate", "rate_down", "schedule", "rate_file", "share"], hide_short_help = true, help_heading = "Slow links and faults")]
    pub trace_down: Option<Arc<Trace>>,

    /// With --delay: vary it by up to this much.
    ///
    /// Vary the delay of each chunk at random, evenly within DURATION
    /// either way (never below zero). Byte order is kept: a chunk that
    /// would overtake the one before it leaves right after that one.
    #[arg(long, value_name = "DURATION", value_parser = shape_impair::slowlink::parse_delay, requires = "delays", allow_hyphen_values = true, help_heading = "Slow links and faults")]
    pub jitter: Option<Duration>,

    /// The most a slow link holds at once.
    ///
    /// The most shape holds at once (in proxy mode, per direction of each
    /// connection); while it is full, shape stops reading. Defaults to what
    /// flows at the rate during the delay and jitter, plus the burst: from
    /// 1 MiB to 64 MiB, and 64 MiB when unlimited. Without --delay, shape
    /// holds one chunk of at most SIZE. On a UDP link, the queue of
    /// datagrams waiting for the rate (default 100ms of it); with
    /// --packets, a number of datagrams.
    #[arg(long, value_name = "SIZE", value_parser = parse_max_buffer, allow_hyphen_values = true, help_heading = "Slow links and faults")]
    pub max_buffer: Option<Quantity>,

    /// The fault flags, from the one table of faults.
    #[command(flatten, next_help_heading = "Slow links and faults")]
    pub fault_flags: FaultFlags,

    /// What only a UDP link does.
    #[command(flatten)]
    pub udp: udp::UdpFlags,

    /// Faults done to HTTP requests.
    #[command(flatten)]
    pub http: http::HttpFlags,

    /// Proxy: do the faults to this fraction of connections.
    ///
    /// Proxy: do the faults to this fraction of connections only (PROB,
    /// '0.5' or '50%'), the others passing clean; which ones is drawn
    /// from the seed. With an HTTP fault (--http-status and the rest),
    /// the fraction of requests it picks instead.
    #[arg(long, value_name = "PROB", value_parser = parse_probability, allow_hyphen_values = true, help_heading = "Slow links and faults")]
    pub affect: Option<f64>,

    /// The seed of every random draw, to replay them.
    ///
    /// Seed every random choice (jitter, slices, drops, corruption, the
    /// connections affected), so that a run can be replayed. Without it a
    /// seed is drawn; --stats says which, and a proxy with faults or
    /// jitter says it at start.
    #[arg(long, value_name = "N", value_parser = parse_seed, allow_hyphen_values = true, help_heading = "Slow links and faults")]
    pub seed: Option<u64>,

    /// Change a running shape, or a share, instead of copying.
    ///
    /// Change the running shape PID (of this user), or every shape on a
    /// share (share:NAME), instead of copying: with --rate, --burst,
    /// --pause or --resume; for a PID also --delay, --jitter and the fault
    /// flags ('off' turns a fault off). Prints the settings now in force;
    /// for a PID, after the shape has acknowledged, with its delay and
    /// faults. With nothing to change it only asks, and a PID also says
    /// what has passed so far.
    #[arg(long, value_name = "PID|share:NAME", conflicts_with_all = ["files", "rate_file", "schedule", "share", "max_buffer", "affect"], help_heading = "Changing a running shape")]
    pub remote: Option<RemoteTarget>,

    /// Spend from one limit with every shape on the share.
    ///
    /// Spend from the bucket of share NAME, with every shape of this user
    /// that names it: the limit is their total. The first creates it with
    /// its --rate and --burst; while any shape is on it, later ones use the
    /// share's settings (and say so if theirs differ). A share on a fleet
    /// of machines lives in Redis:
    /// redis://[user[:password]@]host[:port][/db]/NAME, rediss://... over
    /// TLS (SHAPE_REDIS_CA_FILE, SHAPE_REDIS_CERT_FILE and
    /// SHAPE_REDIS_KEY_FILE name certificates), or
    /// redis+unix:///path/to/redis.sock/NAME; the password may also come
    /// from SHAPE_REDIS_PASSWORD. Any node of a Redis Cluster will do.
    #[arg(long, value_name = "NAME|URL", help_heading = "Shares and fleets")]
    pub share: Option<ShareName>,

    /// What a fleet's share does while Redis cannot be reached.
    ///
    /// What spending from a share in Redis does while Redis cannot be
    /// reached: go on at the last known rate per shape, hold the data, or
    /// go on without a limit. It is said once, and when Redis is back.
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = Fallback::Last, requires = "share", help_heading = "Shares and fleets")]
    pub share_fallback: Fallback,

    /// With --share: print the share's settings and current use, and exit.
    #[arg(long, requires = "share", help_heading = "Shares and fleets")]
    pub status: bool,

    /// With --share: remove the share, to start it afresh.
    ///
    /// With --share: remove the share's file, whatever it holds (a corrupt
    /// or foreign one too), so that the next shape on it creates it afresh;
    /// refused while a running shape is on it. Then exit.
    #[arg(
        long,
        requires = "share",
        conflicts_with = "status",
        help_heading = "Shares and fleets"
    )]
    pub reset: bool,

    /// With --remote: hold the data; nothing flows until --resume.
    #[arg(
        long,
        requires = "remote",
        conflicts_with = "resume",
        help_heading = "Changing a running shape"
    )]
    pub pause: bool,

    /// With --remote: let data flow again.
    ///
    /// With --remote: let data flow again, with no catch-up beyond the
    /// burst.
    #[arg(long, requires = "remote", help_heading = "Changing a running shape")]
    pub resume: bool,

    /// Print the man page or a shell completion script, and exit.
    #[arg(long, value_name = "WHAT", value_enum, hide = true)]
    pub generate: Option<Generated>,
}

/// What `--remote` changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteTarget {
    /// The shape running as this PID.
    Process(u32),
    /// Every shape on this share.
    Share(ShareName),
}

/// What `--generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generated {
    Man,
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
    /// GUIDE.md's table of `--serve`'s toxics, from the one table of them.
    Toxics,
    /// GUIDE.md's table of known links (`--link`), from the one table of
    /// them.
    Links,
}

/// The flags whose values take a unit after a number.
const WITH_UNITS: [&str; 4] = ["--rate", "--burst", "--size", "--stop-after"];

/// The usage error for a unit split from its number by a space
/// (`--rate 5 MiB`), which the command line reads as a rate of 5 and an
/// input file `MiB`: `args` is the command line, `files` the inputs it
/// gave, and a unit that names an existing file is taken as one.
pub fn split_unit(args: &[String], files: &[PathBuf]) -> Option<String> {
    args.windows(3).find_map(|three| {
        let [flag, number, unit] = three else {
            return None;
        };
        let split = WITH_UNITS.contains(&flag.as_str())
            && is_unit(unit)
            && files.iter().any(|file| file.as_os_str() == unit.as_str())
            && !std::path::Path::new(unit).exists();
        split.then(|| {
            format!("did you mean {flag} {number}{unit}? (a space split the number from its unit)")
        })
    })
}

/// True if `word` is a unit alone (`MiB`, `KB`, `Mbit`, `k`, `MiB/s`): no
/// digit in it, and a number before it makes a size or a rate.
fn is_unit(word: &str) -> bool {
    let with_a_number = format!("1{word}");
    !word.is_empty()
        && !word.chars().any(|c| c.is_ascii_digit())
        && (with_a_number.parse::<shape_bucket::units::Size>().is_ok()
            || with_a_number.parse::<RateSpec>().is_ok())
}

impl Cli {
    /// The first argument given with `--link list` that is not part of
    /// it: the table is all `--link list` does, so whatever follows would
    /// be ignored.
    pub fn beside_link_list(&self) -> Option<&str> {
        let words = ["--link", "list", "--link=list"];
        let asks_for_list = self
            .given
            .windows(2)
            .any(|pair| pair[0] == "--link" && pair[1] == "list")
            || self.given.iter().any(|arg| arg == "--link=list");
        if !asks_for_list {
            return None;
        }
        self.given
            .iter()
            .map(String::as_str)
            .find(|arg| !words.contains(arg))
    }

    /// What is counted: bytes, or records with --lines or --null.
    pub fn counting(&self) -> Counting {
        match (self.lines, self.null, self.udp.packets) {
            (true, _, _) => Counting::Lines,
            (_, true, _) => Counting::Nul,
            (_, _, true) => Counting::Datagrams,
            _ => Counting::Bytes,
        }
    }

    /// The fault flags given, flag by flag, each in the order given.
    pub fn fault_changes(&self) -> Vec<Change> {
        self.fault_flags.changes()
    }

    /// True if and only if the run draws anything at random from its
    /// seed (a fault's draws, jitter, `--affect`'s choice of connections):
    /// then it says its seed, so that it can be replayed.
    pub fn draws_at_random(&self) -> bool {
        Way::BOTH.into_iter().any(|way| self.faults(way).draws())
            || self.jitter.is_some_and(|jitter| !jitter.is_zero())
            || self.affect.is_some_and(|share| share < 1.0)
    }

    /// What the fault flags ask for in `direction` (a pipe's is
    /// [`Way::Down`], where values without a prefix apply too).
    pub fn faults(&self, direction: Way) -> Faults {
        Change::all(&self.fault_changes(), direction)
    }

    /// The delay of each direction, up then down: --delay-up or
    /// --delay-down, else --delay, else none. A pipe's is down.
    pub fn delays(&self) -> [Duration; 2] {
        [self.delay_up, self.delay_down].map(|own| own.or(self.delay).unwrap_or_default())
    }

    /// Each direction's delay as given, for `--remote`: its own flag, else
    /// --delay, else unchanged.
    pub fn delay_changes(&self) -> [Option<Duration>; 2] {
        [self.delay_up, self.delay_down].map(|own| own.or(self.delay))
    }

    /// The traces given, each with the index of the way it sets: a
    /// pipe's one way, else up (0) and down (1).
    pub fn traces(&self) -> Vec<(usize, Arc<Trace>)> {
        [(0, &self.trace), (0, &self.trace_up), (1, &self.trace_down)]
            .into_iter()
            .filter_map(|(way, trace)| trace.clone().map(|trace| (way, trace)))
            .collect()
    }

    /// This command line with `profile`'s rates and delays where no flag
    /// gives them: each way's, where there are two, else the way down's.
    pub fn with_profile(&self, profile: &Profile, two_ways: bool) -> Cli {
        let mut cli = self.clone();
        let [up, down] = [profile.up, profile.down].map(|text| Written {
            text: text.to_string(),
            value: text.parse().unwrap_or(RateSpec::Unlimited),
        });
        let one_way = profile.one_way();
        // A link's loss is packet loss, as TCP meets it (`--loss`).
        if profile.loss_percent > 0
            && cli.fault_flags.loss.is_empty()
            && let Ok(loss) = format!("{}%", profile.loss_percent).parse()
        {
            cli.fault_flags.loss.push(loss);
        }
        match two_ways {
            true => {
                // A way that follows a trace takes its rate from it.
                if cli.rate.is_none() && cli.trace_up.is_none() {
                    cli.rate_up.get_or_insert(up);
                }
                if cli.rate.is_none() && cli.trace_down.is_none() {
                    cli.rate_down.get_or_insert(down);
                }
                if cli.delay.is_none() {
                    cli.delay_up.get_or_insert(one_way);
                    cli.delay_down.get_or_insert(one_way);
                }
            }
            false => {
                if cli.trace.is_none() {
                    cli.rate.get_or_insert(down);
                }
                cli.delay.get_or_insert(one_way);
            }
        }
        cli
    }

    /// What --delay, --jitter and --max-buffer ask of the link, with the
    /// longer of the two directions' delays, which bounds what either
    /// holds ([`Cli::delays`] gives each direction's).
    pub fn slow_link(&self) -> SlowLink {
        SlowLink {
            delay: self.delays().into_iter().max().unwrap_or_default(),
            jitter: self.jitter.unwrap_or_default(),
            max_buffer: self
                .max_buffer
                .map(|(Quantity::Plain(n) | Quantity::Bytes(n))| n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn pv_users_short_flag_sets_the_rate() {
        let cli = Cli::try_parse_from(["shape", "-L", "1m"]).unwrap();
        let rate = cli.rate.unwrap();
        assert_eq!(rate.value.in_bytes(), "1MiB".parse());
        assert_eq!(rate.text, "1m");
    }

    #[test]
    fn files_and_dash_are_inputs_in_order() {
        let cli = Cli::try_parse_from(["shape", "a", "-", "b"]).unwrap();
        assert_eq!(
            cli.files,
            [PathBuf::from("a"), PathBuf::from("-"), PathBuf::from("b")]
        );
    }

    #[test]
    fn jitter_needs_a_delay() {
        assert!(Cli::try_parse_from(["shape", "--jitter", "10ms"]).is_err());
        let cli = Cli::try_parse_from(["shape", "--delay", "1s", "--jitter", "10ms"]).unwrap();
        assert_eq!(cli.slow_link().jitter, Duration::from_millis(10));
        assert_eq!(cli.slow_link().max_buffer, None);
    }

    #[test]
    fn a_zero_burst_is_refused() {
        assert!(Cli::try_parse_from(["shape", "--burst", "0"]).is_err());
        assert!(Cli::try_parse_from(["shape", "--burst", "1"]).is_ok());
    }

    #[test]
    fn bytes_lines_nul_records_or_datagrams_one_at_a_time() {
        let counting = |args: &[&str]| Cli::try_parse_from(args).map(|cli| cli.counting());
        assert_eq!(counting(&["shape"]).unwrap(), Counting::Bytes);
        assert_eq!(counting(&["shape", "-l"]).unwrap(), Counting::Lines);
        assert_eq!(counting(&["shape", "--null"]).unwrap(), Counting::Nul);
        assert_eq!(counting(&["shape", "-0"]).unwrap(), Counting::Nul);
        assert_eq!(
            counting(&["shape", "--packets"]).unwrap(),
            Counting::Datagrams
        );
        assert!(counting(&["shape", "--packets", "--lines"]).is_err());
        assert!(counting(&["shape", "--lines", "--null"]).is_err());
    }
}
