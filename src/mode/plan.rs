//! The plans the argument step ([`super::step`]) makes from the command
//! line, one per mode, with every value resolved: the limits and the burst
//! in the units counted, each way's rate, the timetable, the link's
//! conditions at start, the seed, how progress is shown. A mode runs its
//! plan and reads no flag; a bad value was refused before any mode
//! started. What needs the world (a file's bytes, a socket, Redis) is left
//! to the modes.

use super::input::Input;
use crate::cli::{Generated, RemoteTarget};
use crate::control::{Request, ShareName};
use crate::progress::{BarLook, Style};
use shape_bucket::Limit;
use shape_impair::conditions::InForce;
use shape_impair::faults::{Faults, Way};
use shape_impair::slowlink::SlowLink;
use shape_impair::trace::Trace;
use shape_leaves::chunk::default_burst;
use shape_leaves::counting::Counting;
use shape_leaves::share::Fallback;
use shape_net::Address;
use shape_net::udp::QueueDrop;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One thing shape can be asked to do, with its plan.
pub enum Mode {
    Generate(Generated),
    /// `--link list`.
    ListLinks,
    Remote(Box<RemotePlan>),
    ShareStatus(ShareName),
    ShareReset(ShareName),
    Copy(Box<CopyPlan>),
    Proxy(Box<ProxyPlan>),
    Udp(Box<UdpPlan>),
    Serve(ServePlan),
    Exec(Box<ExecPlan>),
}

/// What a run starts with, read as the run counts: the limit, the burst
/// if one was set, and the timetable, in tokens.
pub struct Start {
    pub counting: Counting,
    pub limit: Limit,
    pub burst: Option<u64>,
    pub schedule: Vec<(Duration, Limit)>,
}

impl Start {
    /// The burst to start with: the one set, else the default for the
    /// limit.
    pub fn burst_or_default(&self) -> u64 {
        self.burst
            .unwrap_or_else(|| default_burst(self.limit, self.counting))
    }
}

/// How a run spends and is changed while it runs: where it starts, each
/// way's limit, the share it spends from, and its live controls.
pub struct Pacing {
    pub start: Start,
    /// Each way's limit, up then down (`--rate-up`, `--rate-down`, else
    /// the run's): a proxy's, a UDP link's and a command's.
    pub ways: [Limit; 2],
    pub share: Option<ShareName>,
    pub share_fallback: Fallback,
    /// True if a rate, a burst or a rate file was given: what a share is
    /// offered, else takes from it.
    pub settings_given: bool,
    pub rate_file: Option<PathBuf>,
    /// The traces followed, each with the index of the way it sets.
    pub traces: Vec<(usize, Arc<Trace>)>,
    pub quiet: bool,
}

/// How progress is shown: its style and interval, if at all, and what
/// the bar shows.
pub struct ProgressPlan {
    pub shown: Option<(Style, Duration)>,
    pub look: BarLook,
}

/// What a link does to what crosses it, at start: the delay, jitter and
/// faults of each way, the connections they touch and the seed they draw
/// from.
pub struct ConditionsPlan {
    pub slow_link: SlowLink,
    /// Up, then down.
    pub faults: [Faults; 2],
    /// Up, then down.
    pub delays: [Duration; 2],
    /// The share of connections the faults touch (`--affect`).
    pub affect: f64,
    pub seed: u64,
    /// True if anything is drawn from the seed: then it is said, so that
    /// the run can be replayed.
    pub say_seed: bool,
    pub per_connection: bool,
}

impl ConditionsPlan {
    /// The conditions in force at start.
    pub fn in_force(&self) -> InForce {
        InForce {
            faults: self.faults,
            delay: self.delays,
            jitter: self.slow_link.jitter,
        }
    }
}

/// How a UDP link treats datagrams beyond the stream's conditions.
pub struct DatagramPlan {
    pub counting: Counting,
    /// `--max-buffer`, in the units counted.
    pub queue: Option<u64>,
    /// Each way's trace's average rate, where it follows one: the rate
    /// its queue is sized for.
    pub traced: [Option<Limit>; 2],
    pub queue_drop: QueueDrop,
    pub keep_order: bool,
    pub idle: Duration,
}

/// `--listen` with `--connect`: a proxy of streams.
pub struct ProxyPlan {
    pub listen: Address,
    pub connect: Address,
    pub pacing: Pacing,
    pub progress: ProgressPlan,
    pub conditions: ConditionsPlan,
    pub loops: usize,
    pub http: Option<HttpPlan>,
}

/// An HTTP fault and the requests it picks (`--http-status` and the
/// rest); only a build with the `http` feature makes one.
#[cfg(feature = "http")]
pub struct HttpPlan {
    pub rule: shape_http::rule::HttpRule,
}

/// No plan has an HTTP fault in a build without the `http` feature.
#[cfg(not(feature = "http"))]
pub enum HttpPlan {}

/// `--listen udp:ADDR` with `--connect udp:ADDR`: a UDP link.
pub struct UdpPlan {
    pub listen: Address,
    pub connect: Address,
    pub pacing: Pacing,
    pub progress: ProgressPlan,
    pub conditions: ConditionsPlan,
    pub datagrams: DatagramPlan,
}

/// `--exec`: a command with its own traffic shaped.
pub struct ExecPlan {
    pub command: Vec<OsString>,
    pub pacing: Pacing,
    pub progress: ProgressPlan,
    pub conditions: ConditionsPlan,
    pub datagrams: DatagramPlan,
    /// True if the command's traffic goes through a link (a delay,
    /// jitter, a fault, an HTTP fault or a UDP link's option given at
    /// start).
    pub linked: bool,
    pub stats: bool,
    pub http: Option<HttpPlan>,
}

/// `--serve`, or shape under toxiproxy-server's name: toxiproxy's API.
pub struct ServePlan {
    pub address: Address,
    /// The config file, and the flag that named it (`--config`, or
    /// toxiproxy-server's `-config`).
    pub config: Option<(PathBuf, &'static str)>,
    /// True if a config that cannot be read is said, and the server
    /// serves without it (as toxiproxy-server does).
    pub config_optional: bool,
    pub seed: u64,
    pub allow_origins: Vec<String>,
    pub allow_unix: bool,
    pub runtime_metrics: bool,
    pub proxy_metrics: bool,
    pub quiet: bool,
    pub loops: usize,
}

/// What shape under toxiproxy-server's name is asked, its command line
/// read as toxiproxy-server reads it.
pub enum ToxiproxyAsk {
    Serve(ServePlan),
    /// The version line.
    Version,
    /// The usage, said with status 0.
    Help(String),
    /// Why the command line was refused, said with status 2.
    Refused(String),
}

/// `--remote`: a change for a running shape or a share.
pub struct RemotePlan {
    pub target: RemoteTarget,
    pub request: Request,
}

/// The default: inputs copied to standard output or a connection.
pub struct CopyPlan {
    pub pacing: Pacing,
    pub progress: ProgressPlan,
    pub inputs: Vec<Input>,
    /// `--connect`, and how long to keep trying it.
    pub connect: Option<(Address, Duration)>,
    /// The faults of the one direction a copy has.
    pub faults: Faults,
    pub slow_link: SlowLink,
    /// True if `--delay` was given: the copy goes through a delay line.
    pub delayed: bool,
    /// True if a fault or `--delay` was given: the copy looks at every
    /// write.
    pub faulty: bool,
    /// `--size`, in the units counted.
    pub size: Option<u64>,
    /// `--stop-after`, or `--cut-after` if that is less.
    pub stop_after: Option<u64>,
    pub seed: u64,
    pub say_seed: bool,
    pub stats: bool,
    /// The rate as the user wrote it, for `--stats`.
    pub rate_written: Option<String>,
}

impl Pacing {
    /// The limit of `way`.
    pub fn way(&self, way: Way) -> Limit {
        self.ways[way as usize]
    }
}
