//! The swarm against a redis-server of its own: one size as a test of the
//! share's bound, every size as the bench (`benches/fleet_swarm.sh`).

use super::*;
use std::process::{Child, Command, Stdio};

/// A redis-server on a Unix socket in a directory of its own, made for
/// it (no TCP port, which a port number chosen here could find taken);
/// stopped, and the directory removed, when dropped.
struct RedisServer {
    child: Child,
    dir: std::path::PathBuf,
}

impl RedisServer {
    /// Starts one, or says why not: under CI a missing redis-server fails
    /// the test, elsewhere it is skipped.
    fn start() -> Option<RedisServer> {
        let made = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("shape-swarm-redis-{}-{made}", std::process::id()));
        std::fs::create_dir(&dir).expect("a directory of its own");
        let socket = dir.join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(err) if std::env::var_os("CI").is_none() => {
                let _ = std::fs::remove_dir_all(&dir);
                eprintln!("skipped: redis-server cannot be started ({err})");
                return None;
            }
            Err(err) => panic!("redis-server cannot be started ({err}), and CI is set"),
        };
        let server = RedisServer { child, dir };
        for _ in 0..100 {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Some(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not listen on {}", socket.display());
    }

    fn share(&self) -> RedisShare {
        format!(
            "redis+unix://{}/swarm",
            self.dir.join("redis.sock").display()
        )
        .parse()
        .expect("a share's address")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How long each part of a run of `members` lasts: several lease times.
fn run(members: usize, share: RedisShare, info: RedisShare) -> SwarmRun {
    let lease = (members as f64 * 0.005).max(0.1);
    let joining = (members as f64 / 500.0).max(1.0);
    SwarmRun {
        members,
        share,
        info,
        joining: Duration::from_secs_f64(joining),
        warm_up: Duration::from_secs_f64(joining + (4.0 * lease).max(8.0)),
        window: Duration::from_secs_f64((4.0 * lease).max(10.0)),
        newcomer_for: Duration::from_secs_f64((2.0 * lease).max(4.0)),
        couriers: 64,
    }
}

/// 300 members, whose leases last 1.5 s: the share sees about 200 calls a
/// second, spends within 2% of its rate, evenly, and a member that joins
/// spends at its part within 2 s.
#[test]
fn a_share_of_300_members_is_exact_and_fair_at_200_calls_a_second() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let report = measure(&run(300, server.share(), server.share()));
    eprintln!("{report:?}");
    assert!(
        report.scripts_per_second < 260.0,
        "{:.0} lease calls a second",
        report.scripts_per_second
    );
    assert!((report.total - 1.0).abs() < 0.02, "{report:?}");
    assert!(report.parts.0 > 0.9 && report.parts.1 < 1.1, "{report:?}");
    let newcomer = report.newcomer.expect("the newcomer reached its part");
    assert!(newcomer < Duration::from_secs(2), "{report:?}");
}

/// The bench: every size of `SHAPE_SWARM_MEMBERS` (10,100,1000,5000 if
/// unset) on the share `SHAPE_SWARM_REDIS`, whose Redis's counters are read
/// at `SHAPE_SWARM_INFO` (the same if unset), printed as table rows.
#[test]
#[ignore = "a bench: benches/fleet_swarm.sh runs it"]
fn bench() {
    let share: RedisShare = std::env::var("SHAPE_SWARM_REDIS")
        .expect("SHAPE_SWARM_REDIS")
        .parse()
        .expect("SHAPE_SWARM_REDIS is a share's address");
    let info = std::env::var("SHAPE_SWARM_INFO").map_or(share.clone(), |info| {
        info.parse().expect("SHAPE_SWARM_INFO")
    });
    let sizes = std::env::var("SHAPE_SWARM_MEMBERS").unwrap_or("10,100,1000,5000".into());
    println!(
        "| members | lease time | total / share | parts / even | scripts a second | Redis commands a second | Redis CPU | newcomer at its part |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for size in sizes.split(',') {
        let members = size.trim().parse().expect("a number of members");
        let report = measure(&run(members, share.clone(), info.clone()));
        println!("{}", report.row());
    }
}
