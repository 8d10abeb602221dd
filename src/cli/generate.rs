//! The man page and shell completions, generated from the clap definition
//! so they can never disagree with `--help`. Printed by the hidden
//! `--generate WHAT` flag and committed under `man/` and `completions/`; a
//! test fails when the committed files are stale.

use crate::cli::{Cli, Generated};
use clap::CommandFactory;
use clap_complete::Shell;
use std::io::{self, Write};

/// `what`, whole: rendered in memory, so that a failing output is one
/// write's error and never a panic inside a generator.
pub fn render(what: Generated) -> Vec<u8> {
    let mut text = Vec::new();
    write(what, &mut text).expect("writing to memory does not fail");
    text
}

/// Writes `what` to `out`.
fn write(what: Generated, out: &mut dyn Write) -> io::Result<()> {
    let shell = match what {
        Generated::Man => return write_man(out),
        Generated::Bash => Shell::Bash,
        Generated::Zsh => Shell::Zsh,
        Generated::Fish => Shell::Fish,
        Generated::Elvish => Shell::Elvish,
        Generated::Powershell => Shell::PowerShell,
        Generated::Toxics => {
            #[cfg(feature = "serve")]
            for row in shape_toxiproxy::toxics::guide_rows() {
                writeln!(out, "{row}")?;
            }
            return Ok(());
        }
        Generated::Links => {
            for row in shape_impair::profiles::guide_rows() {
                writeln!(out, "{row}")?;
            }
            return Ok(());
        }
    };
    if shell != Shell::Bash {
        clap_complete::generate(shell, &mut command(), "shape", out);
        return Ok(());
    }
    // clap's bash script completes every value hint as a file; --exec's
    // value is a command, as bash's own `compgen -c` completes it.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "shape", &mut script);
    let script = String::from_utf8_lossy(&script).replace(
        "                --exec)\n                    COMPREPLY=($(compgen -f \"${cur}\"))",
        "                --exec)\n                    COMPREPLY=($(compgen -c \"${cur}\"))",
    );
    out.write_all(script.as_bytes())
}

fn write_man(out: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(command()).manual("User Commands");
    man.render_title(out)?;
    man.render_name_section(out)?;
    out.write_all(SYNOPSIS.as_bytes())?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let sections = MAN_SECTIONS
        .replace("@TOXICS@\n", &toxics_for_the_man_page())
        .replace("@LINKS@\n", &shape_impair::profiles::man_rows());
    out.write_all(sections.as_bytes())?;
    man.render_version_section(out)
}

/// The man page's list of `--serve`'s toxics, in a build without it.
#[cfg(not(feature = "serve"))]
pub fn toxics_for_the_man_page() -> String {
    ".PP\nThis build of shape has no \\fB\\-\\-serve\\fR (cargo's `serve` feature).\n".into()
}

/// The man page's list of `--serve`'s toxics, from the one table of them:
/// each kind with its attributes and units, and what shape does with it.
#[cfg(feature = "serve")]
pub fn toxics_for_the_man_page() -> String {
    use shape_toxiproxy::toxics::{TOXICS, signature};
    // The table's Markdown quotes, in bold.
    let roff = |text: String| {
        let mut bold = false;
        text.chars()
            .map(|c| match c {
                '`' => {
                    bold = !bold;
                    if bold { "\\fB" } else { "\\fR" }.to_string()
                }
                '-' => "\\-".to_string(),
                c => c.to_string(),
            })
            .collect::<String>()
    };
    let item = |text: String| format!(".IP \\(bu 2\n{}\n", roff(text));
    let mut man = String::from(
        "The toxics, each per connection and per stream, \\fBtoxicity\\fR drawn once per \
         connection:\n",
    );
    for row in TOXICS.iter().filter(|row| !row.extra) {
        man.push_str(&item(format!("{}: {}.", signature(row), row.does)));
    }
    man.push_str(".PP\nBeyond toxiproxy:\n");
    for row in TOXICS {
        if let Some((does, _)) = row.extras {
            let extras = row.extras_said(|a| format!("`{}` ({})", a.name, a.unit.said()));
            man.push_str(&item(format!(
                "{} on `{}`: {does}.",
                extras.join(", "),
                row.kind.name()
            )));
        }
    }
    for row in TOXICS.iter().filter(|row| row.extra) {
        man.push_str(&item(format!("{}: {}.", signature(row), row.does)));
    }
    man.push_str(&item(
        "`POST /proxies` takes `\"toxics\": [...]`, in force before the first connection."
            .to_string(),
    ));
    man.push_str(".PP\n");
    man
}

/// The command as the generated files describe it: with the package's
/// version alone, not the commit of the checkout that built it, so that
/// the committed files stay the same from commit to commit.
fn command() -> clap::Command {
    Cli::command().version(env!("CARGO_PKG_VERSION"))
}

/// The synopsis, by hand: one line per way of running shape, with the
/// values each flag takes (a generated one lists every flag bare).
const SYNOPSIS: &str = r#".SH SYNOPSIS
\fBshape\fR [\fB\-r\fR \fIRATE\fR] [\fB\-b\fR \fISIZE\fR] [\fB\-l\fR | \fB\-0\fR] [\fIOPTIONS\fR] [\fIFILE\fR]...
.br
\fBshape\fR \fB\-\-listen\fR \fIADDR\fR [\fB\-\-connect\fR \fIADDR\fR] [\fIOPTIONS\fR]
.br
\fBshape\fR \fB\-\-share\fR \fINAME\fR|\fIURL\fR [\fB\-r\fR \fIRATE\fR] [\fIOPTIONS\fR] [\fIFILE\fR]...
.br
\fBshape\fR \fB\-\-remote\fR \fIPID\fR|\fBshare:\fR\fINAME\fR [\fB\-\-rate\fR \fIRATE\fR] [\fB\-\-burst\fR \fISIZE\fR] [\fB\-\-pause\fR | \fB\-\-resume\fR] [\fB\-\-delay\fR \fIDURATION\fR] [\fIfault flags\fR]
.br
\fBshape\fR \fB\-\-share\fR \fINAME\fR|\fIURL\fR \fB\-\-status\fR | \fB\-\-reset\fR
.br
\fBshape\fR [\fB\-r\fR \fIRATE\fR] [\fB\-\-rate\-up\fR \fIRATE\fR] [\fB\-\-rate\-down\fR \fIRATE\fR] [\fIOPTIONS\fR] \fB\-\-exec\fR \fICOMMAND\fR [\fIARG\fR]...
.br
\fBshape\fR \fB\-\-serve\fR [\fIADDR\fR] [\fB\-\-config\fR \fIFILE\fR] [\fB\-\-seed\fR \fIN\fR] [\fB\-\-serve\-allow\-origin\fR \fIORIGIN\fR]... [\fB\-\-serve\-allow\-unix\fR] [\fB\-q\fR]
"#;

/// The hand-written sections, in roff.
const MAN_SECTIONS: &str = r#".SH UNITS
A plain number is bytes.
\fBK M G T\fR and \fBKiB MiB GiB TiB\fR are powers of 1024, as in pv;
\fBKB MB GB TB\fR are powers of 1000;
\fBkbit Mbit Gbit Tbit\fR and \fBkbps Mbps Gbps Tbps\fR are bits per second, powers of 1000.
Case does not matter, except that a two-letter unit ending in a small b (\fBMb\fR) is refused as ambiguous.
A rate may end in a time after a slash: \fB/s\fR (the default), \fB/min\fR, \fB/h\fR, \fB/d\fR or \fB/ms\fR, with a number or not (\fB30/min\fR, \fB1/5s\fR, \fB100MB/h\fR); fractions work (\fB1.5MiB\fR).
With \fB\-\-lines\fR or \fB\-\-null\fR a plain number counts records, and byte units are refused.
.SH RECORDS
\fB\-\-lines\fR (\fB\-l\fR) counts lines ending in a newline, \fB\-\-null\fR (\fB\-0\fR) records ending in a NUL byte, instead of bytes: the rate, burst, \fB\-\-size\fR, \fB\-\-stop\-after\fR, \fB\-\-remote\fR, \fB\-\-rate\-file\fR, \fB\-\-schedule\fR, progress and \fB\-\-stats\fR are then in records.
A record is paid for before any of it leaves, and leaves whole: shape writes up to and including the terminator of the last record paid for.
A last record without a terminator is written, and counted, when its input ends.
The default burst is one record (ten milliseconds' worth above 100 records a second).
shape holds one buffer of 256 KiB whatever the input: a longer record, such as a 1 GiB line, passes through in pieces as it arrives, paid for once before its first piece, so it goes out at the speed the input gives it and the next record waits its turn.
A share counts one thing: a records shape cannot join a share of bytes, nor the other way round.
.TP
\fBcat urls.txt | shape \-\-lines \-\-rate 2 | xargs \-n1 curl \-sO\fR
Fetch two pages a second.
.TP
\fBfind . \-print0 | shape \-0 \-\-rate 30/min | xargs \-0 \-n1 process\fR
Process thirty files a minute.
.SH EXAMPLES
.TP
\fBcat big.iso | shape \-\-rate 5MiB \-\-burst 1MiB | nc \-N host 9000\fR
Send an image at 5 MiB/s, allowing 20 MiB at once after a pause.
.TP
\fBshape \-\-rate 40Mbit backup.tar > /mnt/slow/backup.tar\fR
Copy a backup at 40 megabits per second.
.TP
\fBshape \-L 1m < in > out\fR
pv's flag for the rate works too.
.TP
\fBfor u in $(cat urls); do curl \-s "$u"; done | shape \-r 200k \-\-stats > pages\fR
Pace a crawl and print a summary at the end.
.TP
\fBshape \-r 100k \-\-progress json 2> progress.log < in > out\fR
Record progress as JSON lines for a script.
.SH SHAPING A PROGRAM
\fBshape\fR [\fIoptions\fR] \fB\-\-exec\fR \fICOMMAND\fR [\fIARG\fR...] runs \fICOMMAND\fR with every byte that it and all its descendants send or receive on IP sockets (TCP and UDP, IPv4 and IPv6, loopback included) paid for from shape's bucket; everything after \fB\-\-exec\fR is the command's.
\fB\-\-rate\fR limits each way, \fB\-\-rate\-up\fR (what the command sends) and \fB\-\-rate\-down\fR (what it receives) set them apart; \fB\-\-burst\fR, \fB\-\-share\fR, \fB\-\-schedule\fR, \fB\-\-rate\-file\fR, \fB\-\-remote\fR, SIGUSR1, progress and \fB\-q\fR work as for a copy, and \fB\-\-stats\fR shows up and down apart.
Unix sockets, pipes and files are never shaped, and cost nothing.
It works for any binary, static ones included, and needs no root: a seccomp filter hands the command's socket calls to shape, which carries each out on its own copy of the socket a chunk at a time and answers with the count (a short read or write); a datagram is paid for whole.
shape makes and accepts the command's IP sockets itself and gives them descriptors of 512 or more (half the limit of open files, if lower), so that reads and writes on lower descriptors are never handed over; a socket moved to a low descriptor, one the command was given, one made in another network namespace, or a limit too low to leave room there, is shaped only in its sends and receives, and shape says so once.
It needs Linux 5.19 or later; without it, or where a profile refuses seccomp, shape says so and exits 1 without running the command. Docker's default seccomp profile is enough, with every capability dropped: where \fBpidfd_getfd\fR and \fBprocess_vm_readv\fR are refused, shape keeps its own copy of each socket it makes for the command and reads its memory through /proc, and says so once. \fBio_uring_setup\fR fails with ENOSYS, so that programs use plain calls; 32-bit programs are ended rather than run unshaped.
With \fB\-\-delay\fR, \fB\-\-delay\-up\fR, \fB\-\-delay\-down\fR, \fB\-\-jitter\fR, a fault or a UDP link's option, the command's connections and datagrams go through a whole link, as the proxy's and the UDP link's do: its TCP sockets are connected to shape's own link on loopback, so a connect completes one round trip late and poll, select and epoll see data only when it is due; each destination of its UDP sockets has a link of its own, with the UDP link's options, and the addresses the command sees are its servers'. \fB\-\-remote\fR changes the link while it runs.
\fBsplice\fR into a socket, \fBsendmmsg\fR, \fBrecvmmsg\fR and messages with control data are paid for and let through whole.
The exit status is the command's (128+N for signal N, 127 if it is not found, 126 if it cannot be run); SIGINT, SIGTERM and SIGHUP sent to shape reach it; when it ends, shape ends, and says so if processes it started still run (no longer shaped: their network calls fail). If shape dies, by any signal, SIGKILL included, the command and every process it started end too.
.TP
\fBshape \-\-rate 5MiB \-\-exec rsync \-a /data backup:/data\fR
A backup over ssh at 5 MiB/s.
.TP
\fBshape \-\-rate 200k \-\-stats \-\-exec ./crawl.sh\fR
A crawl that forks curl for each page: one limit for all.
.TP
\fBshape \-\-delay 150ms \-\-rate\-down 1.6Mbit \-\-rate\-up 750kbit \-\-exec npm test\fR
A test suite on a 3G link: a 300 ms round trip.
.SH SOCKETS AND SLOW LINKS
\fB\-\-listen\fR \fIADDR\fR reads one accepted connection instead of standard input; \fB\-\-connect\fR \fIADDR\fR writes to a connection instead of standard output, and at the end shuts down its sending side and waits for the peer to close.
Listening, shape says where on standard error (\fBshape: listening on 127.0.0.1:41234\fR) unless \fB\-q\fR is given; port 0 takes any free port.
With both, shape is a proxy: every connection accepted is forwarded, both directions shaped, all connections sharing one limit per direction unless \fB\-\-per\-connection\fR is given.
A failure ends that connection only, both sides reset, and is said in one line naming the client; when descriptors run out, new clients wait in the backlog until others end, and that is said once.
.PP
\fB\-\-delay\fR holds every byte for a time after its tokens are paid, as a link's latency does: the rate plays the link's bandwidth, the delay its length.
In proxy mode each direction is delayed, so a round trip takes twice the delay.
\fB\-\-jitter\fR moves the delay of each chunk (2.5 ms worth of data, or a packet\*(Aqs worth below 150 KB/s) at random, evenly within the jitter either way; bytes never overtake each other, so a chunk that would leave before the one ahead of it leaves right after it.
\fB\-\-max\-buffer\fR bounds what is held: when it is full shape stops reading, so the sender feels it as back\-pressure, and a buffer smaller than what flows during the delay caps the throughput at buffer/delay, as a TCP window does.
No root and no traffic control are needed.
.TP
\fBshape \-\-listen :8080 \-\-connect localhost:80 \-\-rate 1MiB \-\-delay 50ms\fR
A slow link in front of a web server: 1 MiB/s each way, 100 ms more per round trip.
.TP
\fBshape \-\-listen :9000 \-\-connect db:5432 \-\-delay 100ms \-\-jitter 30ms \-\-max\-buffer 256KiB\fR
A far, uneven link with little buffering.
.TP
\fBproducer | shape \-\-rate 100kbit \-\-delay 300ms | consumer\fR
The same for a pipe.
.SH LINKS BY NAME
\fB\-\-link\fR \fINAME\fR sets a known link: each way's rate, and each way's delay, half its round trip, as its source gives them (packet\-level figures, not DevTools' request\-level latency).
It works for a pipe (whose data is the way down), a proxy, a UDP link and \fB\-\-exec\fR; \fB\-\-rate\fR, \fB\-\-rate\-up\fR, \fB\-\-rate\-down\fR, \fB\-\-delay\fR, \fB\-\-delay\-up\fR and \fB\-\-delay\-down\fR given too take the place of the link's.
\fBshape \-\-link list\fR prints the table:
@LINKS@
.SH RECORDED LINKS
\fB\-\-trace\fR \fIFILE\fR (a pipe), \fB\-\-trace\-up\fR \fIFILE\fR and \fB\-\-trace\-down\fR \fIFILE\fR (a proxy, a UDP link, \fB\-\-exec\fR) replay a recorded link in Mahimahi's trace format: each line is a time in milliseconds at which the link may deliver a packet of 1,500 bytes, a time repeated is several packets, and the trace repeats when it ends, its last time being its period.
Bytes are counted one by one, and an opportunity with nothing waiting is lost; bytes wait for the link as for any rate.
A trace takes the place of its way's rate: \fB\-\-rate\fR (or that way's), \fB\-\-schedule\fR, \fB\-\-rate\-file\fR and \fB\-\-share\fR are refused with it; it combines with the delay, jitter, loss and faults.
A bad trace is refused in one line naming the file and the line.
Each way's bucket is given, every 10 ms, that window's bytes at its rate (paused in an outage), with a burst of one packet.
Mahimahi's recorded traces are in its repository, under traces/ (GPL-licensed, not shipped with shape).
.SH UDP PROXY
\fB\-\-listen udp:\fR\fIADDR\fR with \fB\-\-connect udp:\fR\fIADDR\fR is a datagram link with netem's model, in user space, without root and seeded.
Each client address is a flow, with a socket of its own toward the server so that replies find their way back; a flow that sends and receives nothing for \fB\-\-udp\-idle\fR (120 s) is forgotten.
A datagram goes through, in netem's order: the MTU (\fB\-\-mtu\fR \fISIZE\fR drops what is larger, \fISIZE\fR\fB:cut\fR cuts it), loss (\fB\-\-loss\fR, or \fB\-\-drop\fR, the same here: random, \fBgemodel:\fR\fIP\fR,\fIR\fR[,\fI1\-H\fR[,\fI1\-K\fR]] bursts, or netem's 4\-state \fBstate:\fR\fIP13\fR[,\fIP31\fR[,\fIP32\fR[,\fIP23\fR[,\fIP14\fR]]]]), a copy (\fB\-\-duplicate\fR), a flipped bit (\fB\-\-corrupt\fR), the queue and the rate, the delay (\fB\-\-delay\fR, \fB\-\-jitter\fR, which reorders unless \fB\-\-jitter\-keeps\-order\fR; \fB\-\-reorder\fR \fIPROB\fR sends that share at once).
The rate counts UDP payload bytes, or datagrams with \fB\-\-packets\fR, and sends each datagram whole; datagrams over it wait in a queue of \fB\-\-max\-buffer\fR (a tenth of a second of the rate by default) and one that does not fit is dropped, the arriving one (\fB\-\-queue\-drop tail\fR) or the oldest (\fBhead\fR).
\fB\-\-rate\-up\fR is toward the server and \fB\-\-rate\-down\fR back; \fB\-\-per\-connection\fR gives each flow a rate and a queue of its own each way.
A new client's datagrams are dropped when no socket can be had for its flow, and that is said once.
SIGUSR1 says what befell the datagrams each way: passed, lost, dropped by the full queue, duplicated, reordered, corrupted, cut, dropped over the MTU, refused by the server.
Like every fault, \fB\-\-loss\fR, \fB\-\-drop\fR, \fB\-\-duplicate\fR, \fB\-\-corrupt\fR, \fB\-\-reorder\fR and \fB\-\-mtu\fR take \fBup:\fR (toward the server) or \fBdown:\fR, and \fBoff\fR; \fB\-\-remote\fR changes them, the rate, the delay and the jitter of a running link, and a stream's faults (\fB\-\-slice\fR, \fB\-\-cut\-after\fR, ...) are refused.
In \fB\-\-serve\fR, a proxy made with \fB"protocol": "udp"\fR is such a link.
.TP
\fBshape \-\-listen udp:127.0.0.1:5353 \-\-connect udp:127.0.0.1:53 \-\-delay 80ms \-\-jitter 20ms \-\-loss 2%\fR
A far, lossy link in front of a DNS server.
.TP
\fBshape \-\-listen udp::8125 \-\-connect udp:statsd:8125 \-\-rate 1000/s \-\-packets\fR
At most a thousand datagrams a second.
.SH FAULTS
For tests, in a pipe or on a socket: \fB\-\-slice\fR \fISIZE\fR[\fB:\fR\fIVARIATION\fR] cuts every write into pieces of about \fISIZE\fR bytes, each written on its own, with \fB\-\-slice\-pause\fR between them (toxiproxy's slicer);
\fB\-\-cut\-after\fR \fISIZE\fR forwards exactly \fISIZE\fR bytes and closes cleanly, \fB\-\-slow\-close\fR holding the close (limit_data, slow_close);
\fB\-\-stall\-after\fR forwards nothing more after that much data or time (a size such as \fB1KiB\fR, or a time such as \fB2s\fR) but keeps the output open, as a server that stops answering;
\fB\-\-reset\-after\fR resets after that much: a socket is closed with a reset (RST), and shape ends with status 3;
\fB\-\-loss\fR \fIPROB\fR is netem's loss as a TCP program meets it, in a proxy and under \fB\-\-exec\fR: each segment of 1448 bytes is lost with that probability, and the stream stalls for its retransmission (a round trip, or the retransmission timeout, the round trip plus 200 ms, at the tail of what was sent) and is bounded at MSS/(RTT\(mu\(sr(2p/3)) (Mathis et al.), the round trip being the link's; no byte is missing. A UDP link's datagrams are lost outright. \fB\-\-drop\fR \fIPROB\fR deletes a block of 1 KiB (or a chunk of data at the starting rate, if that is less), a corrupt transfer, and \fB\-\-corrupt\fR \fIPROB\fR flips one random bit of a byte, with that probability (netem's corrupt); both say at the end how many blocks and bytes they touched.
Every random choice, the jitter's too, is drawn from \fB\-\-seed\fR, or from a seed drawn at start that \fB\-\-stats\fR shows, so that a run can be replayed; the draws follow the bytes' places in the stream, not how the input happened to arrive.
In a proxy (\fB\-\-listen\fR with \fB\-\-connect\fR) each connection has its own faults, counted from its start: a value applies to both directions, or to one with \fBup:\fR (the clients' requests) or \fBdown:\fR (the replies), as in \fB\-\-slice down:7\fR; \fB\-\-cut\-after\fR and \fB\-\-slow\-close\fR end one direction (its reader sees the end of the data), \fB\-\-stall\-after\fR drops what comes after (and holds the connection until both sides have closed their sending), \fB\-\-reset\-after\fR resets both sides. \fB\-\-affect\fR \fIPROB\fR does the faults to that fraction of connections only (toxiproxy's toxicity), the others passing clean. The proxy says its seed after where it listens, and what it dropped and corrupted when each connection closes.
\fBoff\fR turns a fault off (\fB\-\-slice off\fR, \fB\-\-drop up:off\fR). \fBshape \-\-remote\fR \fIPID\fR with fault flags, \fB\-\-delay\fR or \fB\-\-jitter\fR changes them on a running shape: in a proxy, every connection, the open ones too, from that moment (sizes and times count from the change); in a copy, those that alter bytes (\fB\-\-slice\fR, \fB\-\-slice\-pause\fR, \fB\-\-drop\fR, \fB\-\-corrupt\fR), if it started with a fault flag or \fB\-\-delay\fR (\fB\-\-drop 0\fR will do: without one a copy takes a path that does not look for faults), and \fB\-\-delay\fR and \fB\-\-jitter\fR if it started with \fB\-\-delay\fR.
.SH HTTP FAULTS
A proxy, or \fB\-\-exec\fR (its command's own plain\-HTTP requests, rootless), given an HTTP fault follows HTTP/1.x on its connections (heads read by httparse, bodies framed by Content\-Length or chunked) and does the fault to each request it picks, the first two calls of a retry test or every call to one path:
.TP
\fB\-\-http\-status\fR \fICODE\fR[\fB:\fR\fIBODY\fR] [\fB\-\-http\-header\fR \fI'NAME: VALUE'\fR]...
shape answers in the upstream's place, which never sees the request: the status's reason, the body and a Content\-Length, the connection kept alive unless the request closes it (Envoy's abort, toxy's inject, HTTPChaos's abort and replace).
.TP
\fB\-\-grpc\-status\fR \fINAME\fR|\fICODE\fR[\fB:\fR\fIMESSAGE\fR]
a gRPC call is answered with that status (\fBUNAVAILABLE\fR, \fB14\fR), trailers only: HTTP status 200, \fBgrpc\-status\fR and \fBgrpc\-message\fR in the one HEADERS frame that ends the stream (Envoy's abort with a gRPC status); over HTTP/1.x, as gRPC\-Web has it.
.TP
\fB\-\-http\-delay\fR \fIDURATION\fR
the request waits before it goes on, and what follows it on its connection behind it: the time to its first byte (Envoy's and HTTPChaos's delay).
.TP
\fB\-\-http\-stall\fR
the request never goes on and is never answered, nor anything after it on its connection, which stays open until the client closes it (toxy's timeout).
.TP
\fB\-\-http\-reset\fR
the request never goes on; its connection is reset once the answers before it are out (toxy's abort).
.TP
\fB\-\-http\-cut\-after\fR \fISIZE\fR
the request goes on; its answer passes up to \fISIZE\fR bytes of its body's content, then the client's connection closes (toxy's slowRead, cut short).
.PP
Which requests: \fB\-\-first\fR \fIN\fR, \fB\-\-every\fR \fIN\fR (the Nth, 2Nth, ...), \fB\-\-affect\fR \fIPROB\fR (each request with that chance, drawn from the seed: the same seed picks the same requests), \fB\-\-path\fR \fIGLOB\fR (the path without its query; \fB*\fR within a segment, \fB**\fR across), \fB\-\-method\fR \fINAME\fR, \fB\-\-header\fR \fI'NAME[: VALUE]'\fR and \fB\-\-during\fR \fIFROM\fR\fB..\fR\fIUNTIL\fR (after the rule was set), all of them at once: \fB\-\-first 6 \-\-every 2\fR picks the 2nd, 4th and 6th. \fB\-\-first\fR, \fB\-\-every\fR and \fB\-\-affect\fR count the requests that match the others, across every connection of the proxy: a client that retries on a new connection meets the same first two. Beside an HTTP fault, \fB\-\-affect\fR is per request, and the stream's faults touch every connection.
.PP
Requests on a kept\-alive or pipelined connection each meet the rule, and their answers keep the requests' order: an answer of shape's goes out when the answers before it are out. An answered request's body is read to its end before the next request is looked at, so that the upstream never sees half a request. HEAD, 1xx, 204 and 304 answers, \fBExpect: 100\-continue\fR and HTTP/1.0 pass as they are; after an \fBUpgrade\fR (a WebSocket) or \fBCONNECT\fR, the connection passes untouched. What the rule does not pick passes byte for byte, bodies of known length by splice(2).
.PP
A client that speaks HTTP/2 over cleartext with prior knowledge (its first bytes are HTTP/2's preface, as gRPC's are) is handed, with its server, to a relay on the h2 crate: shape is the HTTP/2 server its client meets and an HTTP/2 client of its server, and each stream meets the rule on its own while the connection's other streams go on, flow control included. \fB\-\-http\-reset\fR resets the stream (RST_STREAM, CANCEL), not the connection; \fB\-\-http\-stall\fR leaves the stream unanswered; \fB\-\-http\-cut\-after\fR resets it after so much of its answer's data. What no rule picks is carried as it came: its header fields, data and trailers, not its bytes. The link from shape to the server stays the proxy's, paced, delayed and faulted as any connection's; the h2c upgrade (\fBUpgrade: h2c\fR) is declined, as a server may decline it: the exchange goes on in HTTP/1.1, and each request meets the rule.
Traffic that is not HTTP (TLS, a database's protocol), a head past 64 KiB or 100 fields, a chunk's size line past 8 KiB, or a body whose framing cannot be trusted passes untouched, said once per proxy; a request that does not parse is passed on, not answered.
.PP
\fBshape \-\-remote\fR \fIPID\fR with HTTP flags replaces the running proxy's rule (its counts, and \fB\-\-during\fR's window, start afresh); \fB\-\-http\-status off\fR turns it off. A proxy started without an HTTP fault follows no HTTP, and refuses one. The answer, the status line of SIGUSR1 and \fB\-\-exec\fR's \fB\-\-stats\fR say the rule and how many requests it has seen, matched and picked; \fB\-\-progress json\fR records carry the counts as \fB"http":{"seen":3,"matched":3,"picked":2}\fR.
.SH DROP-IN FOR TOXIPROXY
\fBshape \-\-serve\fR [\fIADDR\fR] serves toxiproxy's HTTP API (version 2) on \fIADDR\fR, by default \fBlocalhost:8474\fR, toxiproxy's port, so that a test suite written for toxiproxy, with any of its clients, drives shape instead by starting another binary.
It says \fBshape: serving the toxiproxy API on 127.0.0.1:8474\fR on standard error (not with \fB\-q\fR); port 0 takes a free port, and the line says which.
\fB\-\-config\fR \fIFILE\fR creates proxies at start from toxiproxy's config format (the JSON list that \fBPOST /populate\fR takes); \fB\-\-seed\fR \fIN\fR makes every random draw reproducible (toxicity, jitter, slice sizes, loss, corruption).
SIGINT and SIGTERM close every listener and connection and end shape with status 0.
.PP
Every route is there: \fB/proxies\fR, \fB/proxies/\fR\fINAME\fR, its \fB/toxics\fR and \fB/toxics/\fR\fINAME\fR (GET, POST, PATCH, DELETE), \fB/populate\fR, \fB/reset\fR, \fB/version\fR and \fB/metrics\fR (Prometheus text, with toxiproxy's \fBtoxiproxy_proxy_received_bytes_total\fR and \fBtoxiproxy_proxy_sent_bytes_total\fR), with toxiproxy's status codes, bodies and error words.
Each proxy has its own listener, all on one event loop; the API answers on a thread of its own, so that no API client holds up the data.
A change is in force when it is answered: a disabled proxy refuses, a toxic added, changed or removed applies to the open connections too.
.PP
@TOXICS@
Each direction of a connection holds at most 4 MiB under latency, so that memory stays bounded with many connections.
A proxy made with \fB"protocol": "udp"\fR (shape's own field), \fBlisten\fR and \fBupstream\fR being host:port, is a UDP link (see \fBUDP PROXY\fR) on a thread of its own: \fBlatency\fR, \fBbandwidth\fR, \fBloss\fR, \fBcorrupt\fR, \fBlimit_data\fR (a flow's datagrams past its bytes are dropped), \fBduplicate\fR and \fBreorder\fR act on its datagrams, and a stream's toxics are refused with 400.
Loss, corrupt, duplicate and reorder strike each datagram with their probability times their toxicity; a latency, a bandwidth or a limit strikes every datagram or none, so its toxicity must be 0 or 1.
.PP
No web page can drive the API: a request is refused (403) if its User-Agent is a browser's (toxiproxy's rule: it begins with \fBMozilla/\fR), if it carries an \fBOrigin\fR other than the API's own, if \fBSec\-Fetch\-Site\fR says \fBcross\-site\fR or \fBsame\-site\fR, or, when the API listens on loopback, if its \fBHost\fR is not a loopback address, \fBlocalhost\fR or the host given to \fB\-\-serve\fR (DNS rebinding).
\fB\-\-serve\-allow\-origin\fR \fIORIGIN\fR lets a browser UI of that origin in, with CORS headers.
Proxies on \fBunix:\fR\fIPATH\fR sockets, a shape extension, need \fB\-\-serve\-allow\-unix\fR.
The API serves at most 1024 connections at once (the rest wait in the listen backlog), heads of at most 64 KiB and 100 lines (431 past either), bodies of at most 1 MiB; a connection idle for 60 s is closed, as toxiproxy's are. \fB/version\fR says toxiproxy's version, 2.12.0, as clients decide from it what the server supports; shape's own is in the \fBServer\fR header of every answer.
.SH SIGNALS
.TP
\fBSIGHUP\fR
With \fB\-\-rate\-file\fR, reread the file; a bad file leaves the settings as they were and prints one line. With \fB\-\-serve\fR, read \fB\-\-config\fR again as \fBPOST /populate\fR takes it (proxies that changed are replaced, new ones made, the rest kept with their toxics), or, without a config, nothing. Otherwise a hangup ends shape as usual.
.TP
\fBSIGUSR1\fR
Print a status line on standard error (bytes, elapsed time, the rate over the last second, each direction's for a proxy, and the settings), as dd does, without breaking the progress bar. With \fB\-\-serve\fR: the proxies, the open connections, and each direction's bytes and rate over the last second, all proxies together.
.TP
\fBSIGUSR2\fR
How \fBshape \-\-remote\fR reaches a running shape; it carries no meaning by itself.
.TP
\fBSIGINT\fR, \fBSIGTERM\fR
Stop at once; what was written stays written. A shape on a fleet\*(Aqs share first gives back what it leased and did not spend (within 200 ms), so that its part is free at once.
.SH REMOTE CONTROL
\fBshape \-\-remote\fR \fIPID\fR [\fB\-\-rate\fR \fIRATE\fR] [\fB\-\-burst\fR \fISIZE\fR] [\fB\-\-pause\fR | \fB\-\-resume\fR] [\fB\-\-delay\fR \fIDURATION\fR [\fB\-\-jitter\fR \fIDURATION\fR]] [fault flags]
changes the shape running as \fIPID\fR, waits for it to acknowledge, and prints the settings now in force, with the delay and faults in force if any; with nothing to change, it only asks, and adds what has passed so far.
\fB\-\-rate unlimited\fR lifts the limit; a paused shape holds its data until resumed, and then sends no more than the burst at once.
A burst never set follows the rate, whoever changes it: it becomes the default burst of the new rate. Once a burst is set, it stays. A share keeps this rule for every shape on it and for \fBshape \-\-remote share:\fR.
Messages travel as files in a directory only the user can enter ($XDG_RUNTIME_DIR/shape, or /tmp/shape\-UID with mode 0700); files are opened without following links and created exclusively, and a message that is malformed, a link, or another user's is refused with a line on standard error.
If \fIPID\fR is not a running shape of this user, or no answer comes within a second, \fBshape \-\-remote\fR says so and exits with status 1.
A proxy (\fB\-\-listen\fR with \fB\-\-connect\fR) answers too, as do \fB\-\-rate\-file\fR, \fB\-\-schedule\fR and SIGUSR1 there: a change applies to both directions and to every connection, including each connection's own limits with \fB\-\-per\-connection\fR; the answer shows the client-to-server direction.
.SH SHARES
\fBshape \-\-share\fR \fINAME\fR spends from one bucket together with every other shape of the user that names \fINAME\fR, so that the limit is their total: eight parallel transfers on one 50 MiB/s share add up to 50 MiB/s.
The first to start creates the share with its \fB\-\-rate\fR and \fB\-\-burst\fR; while any shape is on it, later ones use the share's settings, and say so on standard error if theirs differ. A shape that finds nobody on a share starts it afresh with its own settings.
\fBshape \-\-remote share:\fR\fINAME\fR changes the limit for all of them at once, and \fBshape \-\-share\fR \fINAME\fR \fB\-\-status\fR shows it and what they spend together.
The bucket lives in \fINAME\fR.share (mode 0600) in the private control directory; it is lock-free, so a shape killed at any instant never holds up the others.
A share file that is too short, of another version, corrupt, a link, open to others or another user's is refused with a message naming the file.
\fBshape \-\-share\fR \fINAME\fR \fB\-\-reset\fR removes it, whatever it holds, unless a running shape is on the share; the next shape on it starts it afresh.
.SH ACROSS MACHINES
A share named by an address lives in Redis (or Valkey), and every shape on any machine that names it spends from one bucket:
\fBredis://\fR[\fIuser\fR[\fB:\fR\fIpassword\fR]\fB@\fR]\fIhost\fR[\fB:\fR\fIport\fR][\fB/\fR\fIdb\fR]\fB/\fR\fINAME\fR, \fBrediss://\fR... for the same over TLS, or \fBredis+unix://\fR\fI/path/to/redis.sock\fR\fB/\fR\fINAME\fR (with \fB?db=\fR\fIN\fR).
TLS verifies the server against the system's roots, or against \fBSHAPE_REDIS_CA_FILE\fR; \fB#insecure\fR at the end of the address skips that, with a warning.
A Redis Cluster is found out on connecting: any of its nodes will do, and shapes follow the share's slot as it moves or fails over (a cluster has database 0 only).
A password may also come from \fBSHAPE_REDIS_PASSWORD\fR (for a Unix socket, only from there), which keeps it out of \fBps\fR; it never appears in messages, \fB\-\-status\fR or progress.
\fB\-\-status\fR, \fB\-\-reset\fR and \fB\-\-remote share:\fR\fIaddress\fR work from any machine.
.PP
Each shape spends from a bucket of its own at its part of the rate (max-min fair over what every shape would spend), kept covered by leases: stretches of a timeline of its own at that part, granted by an atomic script on Redis's own clock.
The parts in force never add up to more than the rate, so the fleet never passes more than the rate times the time plus the burst, however far away Redis is.
A shape measures its round trip to Redis and asks for its next lease a round trip before it needs it; a lease lasts a tenth of a second, 5 ms more for every shape on the share past 20 (so that a share sees about 200 calls a second however many shapes are on it: 5 s at 1,000), or two round trips, whichever is longer.
A setting changed with \fB\-\-remote\fR reaches every shape within a lease.
On a share whose leases last over a second, 1% of the rate (or two shapes' parts, if less) is kept out of the parts, so that a shape that joins finds its part free at once.
Unused tokens are given back on exit if Redis takes them within 200 ms.
A burst never set follows the rate, as on a single shape.
.PP
A shape never spends more than its leases allow: while a call to Redis is in flight, it spends what it holds.
When a call fails (no connection, no answer within a second) or Redis refuses it (a user without the rights, a key that holds something else), \fB\-\-share\-fallback\fR says what happens: \fBlast\fR (the default) goes on at the last known rate per shape, \fBblock\fR holds the data, \fBopen\fR goes on without a limit.
shape says so once, naming the cause, tries again on the same connection with a growing pause (up to a quarter of a second), and says when Redis serves the share again; no byte is lost or repeated.
A Redis restarted empty gets the share's latest settings back from the shapes on it.
At start-up, a wrong password, a database that is not there, an unreachable host, a server that does not speak Redis, a user without the rights or a key that holds something else is one line naming the address and the cause, with status 1.
.SH ENVIRONMENT
.TP
\fBXDG_RUNTIME_DIR\fR
Where the control directory is made (\fI$XDG_RUNTIME_DIR/shape\fR); without it, \fI/tmp/shape\-UID\fR.
.TP
\fBSHAPE_REDIS_PASSWORD\fR
The password of a share in Redis, kept out of \fBps\fR.
.TP
\fBSHAPE_REDIS_CA_FILE\fR
A PEM bundle of authorities to verify a \fBrediss://\fR server against, instead of the system's roots.
.TP
\fBSHAPE_REDIS_CERT_FILE\fR, \fBSHAPE_REDIS_KEY_FILE\fR
A client certificate and its private key (PEM) to present to a \fBrediss://\fR server that asks for one, as Redis does by default (\fBtls\-auth\-clients yes\fR).
.SH EXIT STATUS
.TP
\fB0\fR
Everything was copied (or \fB\-\-stop\-after\fR was reached).
.TP
\fB1\fR
An input could not be opened or read (the others were still copied), or writing the output failed; for \fB\-\-remote\fR, no running shape or no answer.
.TP
\fB2\fR
Bad usage: an unknown flag or a malformed value.
.TP
\fB3\fR
\fB\-\-reset\-after\fR struck: the output was reset, as asked.
.TP
\fB141\fR
The reader downstream went away; shape was ended by SIGPIPE, as cat and pv are.
.TP
\fB130\fR
Interrupted with Ctrl\-C (SIGINT); 143 for SIGTERM.
.PP
With \fB\-\-exec\fR, the command's own status.
.SH SEE ALSO
\fBpv\fR(1), \fBcstream\fR(1), \fBmbuffer\fR(1), \fBtc\-tbf\fR(8), \fBtc\-netem\fR(8), \fBtrickle\fR(1)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_completes_a_command_after_exec() {
        let script = String::from_utf8(render(Generated::Bash)).unwrap();
        assert!(script.contains("--exec)\n                    COMPREPLY=($(compgen -c"));
    }

    #[test]
    fn the_man_page_has_the_hand_written_sections() {
        let mut page = Vec::new();
        write(Generated::Man, &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH OPTIONS",
            ".SH EXAMPLES",
            ".SH SOCKETS AND SLOW LINKS",
            ".SH SHAPING A PROGRAM",
            ".SH RECORDS",
            ".SH ACROSS MACHINES",
            ".SH FAULTS",
            ".SH HTTP FAULTS",
            ".SH ENVIRONMENT",
            ".SH EXIT STATUS",
            ".SH SEE ALSO",
        ] {
            assert!(page.contains(section), "{section}");
        }
        assert!(page.contains("\\-\\-rate"));
    }

    #[test]
    fn the_guide_and_the_manual_have_the_tables_as_they_are() {
        let guide = include_str!("../../GUIDE.md");
        let rows = shape_impair::profiles::guide_rows()
            .into_iter()
            .map(|line| (line, "links", "--generate links"));
        #[cfg(feature = "serve")]
        let rows = rows.chain(
            shape_toxiproxy::toxics::guide_rows()
                .into_iter()
                .map(|line| (line, "toxics", "--generate toxics")),
        );
        for (line, table, how) in rows {
            assert!(
                guide.lines().any(|l| l == line),
                "GUIDE.md's table of {table} lacks, or has otherwise:\n{line}\n(cargo run -- {how})"
            );
        }
        #[cfg(feature = "serve")]
        {
            let man = toxics_for_the_man_page();
            for row in shape_toxiproxy::toxics::TOXICS {
                let name = row.kind.name();
                assert!(
                    man.contains(&format!("\\fB{name}\\fR")),
                    "the man page misses {name}"
                );
            }
        }
    }
}
