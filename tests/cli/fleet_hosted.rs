//! A fleet's share on Redis as fleets run it: a three-master Redis Cluster
//! made with `redis-cli --cluster create` on loopback ports, with the
//! share's slot migrated mid-run, and a redis-server that speaks only
//! TLS, with certificates made here (rcgen) that it trusts or not.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: f64 = 1_048_576.0;

/// `redis-cli`, given at most 30 s: a cluster that never forms must fail
/// the test, not hang it.
fn redis_cli() -> Command {
    let mut command = Command::new("timeout");
    command.args(["30", "redis-cli"]);
    command
}

/// `redis-cli -p PORT ARGS` (with `tls` the arguments to reach a TLS
/// port), its output.
fn cli(port: u16, tls: &[String], args: &[&str]) -> String {
    let output = redis_cli()
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(tls)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Starts `redis-server ARGS` (`args` given the port it is to listen
/// on) on a port of its own, and waits until it says it is ready: its
/// port and the server. Redis cannot listen on port 0 (`--port 0` is no
/// TCP at all), so it is started on a port drawn at random, and on
/// another while it says the one it was given, or its cluster bus port
/// (10000 above), is in use.
fn server(dir: &Path, args: impl Fn(u16) -> Vec<String>) -> (u16, Child) {
    on_a_port_of_its_own("redis-server", 10_000, |port| {
        let mut child = Command::new("redis-server")
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .args(args(port))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Its log, on standard output.
        match started_saying(child.stdout.take().unwrap(), "Ready to accept connections") {
            Ok(()) => Some((port, child)),
            Err(said) => {
                let _ = child.wait();
                assert!(
                    said.contains("Address already in use"),
                    "redis-server: {said}"
                );
                None
            }
        }
    })
}

/// A cluster node's arguments for `port`, keeping its cluster
/// configuration in `conf`; speaking TLS only, to clients and to the
/// other nodes, if given certificates.
fn node_args(port: u16, conf: &Path, certificates: Option<&Certificates>) -> Vec<String> {
    let mut args: Vec<String> = match certificates {
        None => vec!["--port".into(), port.to_string()],
        Some(certificates) => {
            let path = |file: &str| certificates.path(file).display().to_string();
            vec![
                "--port".into(),
                "0".into(),
                "--tls-port".into(),
                port.to_string(),
                "--tls-cluster".into(),
                "yes".into(),
                "--tls-replication".into(),
                "yes".into(),
                "--tls-cert-file".into(),
                path("server.pem"),
                "--tls-key-file".into(),
                path("server.key"),
                "--tls-ca-cert-file".into(),
                path("ca.pem"),
                "--tls-auth-clients".into(),
                "no".into(),
            ]
        }
    };
    args.extend([
        "--cluster-enabled".into(),
        "yes".into(),
        "--cluster-config-file".into(),
        conf.display().to_string(),
        // A failed master is replaced within a few seconds.
        "--cluster-node-timeout".into(),
        "1000".into(),
        // Replicas in sync at once, so that they can take over.
        "--repl-diskless-sync-delay".into(),
        "0".into(),
    ]);
    args
}

/// Three masters, every slot covered, each with a replica if asked for;
/// speaking TLS only, among themselves too, if given certificates.
struct Cluster {
    nodes: Vec<(u16, Child)>,
    /// What redis-cli needs to reach a node: TLS and its authority.
    tls: Vec<String>,
    _dir: Scratch,
}

impl Cluster {
    fn start(name: &str, replicas: bool, certificates: Option<&Certificates>) -> Option<Cluster> {
        if !installed("redis-server") || !installed("redis-cli") {
            return None;
        }
        let dir = Scratch::new(name);
        let count = if replicas { 6 } else { 3 };
        let tls: Vec<String> = certificates
            .map(|certificates| {
                [
                    "--tls",
                    "--cacert",
                    &certificates.path("ca.pem").display().to_string(),
                ]
                .map(String::from)
                .to_vec()
            })
            .unwrap_or_default();
        let nodes: Vec<(u16, Child)> = (0..count)
            .map(|i| {
                let conf = dir.path().join(format!("nodes-{i}.conf"));
                // Started again on another port, its cluster
                // configuration (written at start) is made anew.
                let args = |port: u16| {
                    let _ = std::fs::remove_file(&conf);
                    node_args(port, &conf, certificates)
                };
                server(dir.path(), args)
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|(p, _)| format!("127.0.0.1:{p}"))
            .collect();
        let created = redis_cli()
            .args(&tls)
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args([
                "--cluster-replicas",
                if replicas { "1" } else { "0" },
                "--cluster-yes",
            ])
            .output()
            .unwrap();
        assert!(created.status.success(), "{created:?}");
        let cluster = Cluster {
            nodes,
            tls,
            _dir: dir,
        };
        wait_up_to(Duration::from_secs(20), "the cluster to come up", || {
            cluster.ports().iter().all(|&port| {
                let info = cluster.cli(port, &["cluster", "info"]);
                let replication = cluster.cli(port, &["info", "replication"]);
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{count}"))
                    && (!replication.contains("role:slave")
                        || replication.contains("master_link_status:up"))
            })
        });
        Some(cluster)
    }

    fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|(port, _)| *port).collect()
    }

    /// `redis-cli -p PORT ARGS` on a node of this cluster.
    fn cli(&self, port: u16, args: &[&str]) -> String {
        cli(port, &self.tls, args)
    }

    /// The slot of share NAME's keys, which share the hash tag `{NAME}`.
    fn slot_of(&self, name: &str) -> u16 {
        let key = format!("shape:{{{name}}}:settings");
        self.cli(self.ports()[0], &["cluster", "keyslot", &key])
            .trim()
            .parse()
            .unwrap()
    }

    /// True while the nodes (asked through `asked`) still give `slot` to
    /// the node on `port`.
    fn gives(&self, asked: u16, slot: u16, port: u16) -> bool {
        let nodes = self.cli(asked, &["cluster", "nodes"]);
        nodes.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 8
                && fields[1].starts_with(&format!("127.0.0.1:{port}@"))
                && fields[8..].iter().any(|range| in_range(range, slot))
        })
    }

    /// Kills the node on `port` (SIGKILL: gone, as a crashed machine).
    fn kill(&mut self, port: u16) {
        let (_, child) = self.nodes.iter_mut().find(|(p, _)| *p == port).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        self.nodes.retain(|(p, _)| *p != port);
    }

    /// The port of the master that holds `slot` now.
    fn owner(&self, slot: u16) -> u16 {
        let nodes = self.cli(self.ports()[0], &["cluster", "nodes"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let holds = fields.iter().skip(8).any(|range| {
                let (start, end) = range.split_once('-').unwrap_or((range, range));
                match (start.parse::<u16>(), end.parse::<u16>()) {
                    (Ok(start), Ok(end)) => (start..=end).contains(&slot),
                    _ => false,
                }
            });
            if holds {
                // 127.0.0.1:PORT@BUS
                let port = fields[1].split(['@', ':']).nth(1).unwrap();
                return port.parse().unwrap();
            }
        }
        panic!("nobody holds slot {slot}: {nodes}");
    }

    /// Moves `slot`, keys and all, to the master on `to`, as
    /// `redis-cli --cluster reshard` does it.
    fn migrate(&self, slot: u16, to: u16) {
        let from = self.owner(slot);
        let id = |port| self.cli(port, &["cluster", "myid"]).trim().to_string();
        let (source, target) = (id(from), id(to));
        let slot = slot.to_string();
        self.cli(to, &["cluster", "setslot", &slot, "importing", &source]);
        self.cli(from, &["cluster", "setslot", &slot, "migrating", &target]);
        let keys = self.cli(from, &["cluster", "getkeysinslot", &slot, "100"]);
        let keys: Vec<&str> = keys.split_whitespace().collect();
        if !keys.is_empty() {
            let mut args = vec!["migrate", "127.0.0.1"];
            let to_port = to.to_string();
            args.extend([to_port.as_str(), "", "0", "5000", "keys"]);
            args.extend(&keys);
            self.cli(from, &args);
        }
        // In the order Redis's manual gives, the target first, then the
        // source, then the rest: a node asked meanwhile sends a client on
        // towards the target, never back and forth (which on a busy
        // machine could outlast a client's retries).
        let rest = self.ports().into_iter().filter(|&p| p != to && p != from);
        for port in [to, from].into_iter().chain(rest) {
            self.cli(port, &["cluster", "setslot", &slot, "node", &target]);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_share_on_a_cluster_works_from_any_node_and_follows_its_slot_as_it_moves() {
    let Some(cluster) = Cluster::start("cluster-share", false, None) else {
        return;
    };
    let slot = cluster.slot_of("moving");
    let owner = cluster.owner(slot);
    // Each machine knows another node, none the one that holds the slot.
    let others: Vec<u16> = cluster
        .ports()
        .into_iter()
        .filter(|&p| p != owner)
        .collect();
    let share = |port: u16| format!("redis://127.0.0.1:{port}/moving");
    let (a, b) = (Runtime::new("cluster-a"), Runtime::new("cluster-b"));
    let started = Instant::now();
    // About 4.5 s each at an even part, then they leave by themselves.
    let shapes = vec![
        machine(
            &a,
            &[
                "--share",
                &share(others[0]),
                "--rate",
                "4MiB",
                "--stop-after",
                "9MiB",
            ],
        ),
        machine(
            &b,
            &[
                "--share",
                &share(others[1]),
                "--rate",
                "4MiB",
                "--stop-after",
                "9MiB",
            ],
        ),
    ];
    // The slot moves twice within the window the rates are measured over:
    // when is the subject.
    sleep_until(started + Duration::from_millis(1500));
    cluster.migrate(slot, others[0]);
    sleep_until(started + Duration::from_millis(3000));
    cluster.migrate(slot, others[1]);
    let each = rates(
        &shapes,
        started + Duration::from_millis(700),
        Duration::from_secs(3),
    );
    let status = run(
        a.shape(["--share", &share(owner), "--status"]),
        Stdio::null(),
    );
    let said: Vec<String> = shapes
        .into_iter()
        .map(|shape| {
            let (status, _, stderr) = shape.finish();
            assert!(status.success(), "{stderr}");
            stderr
        })
        .collect();
    let total: f64 = each.iter().sum();
    eprintln!(
        "cluster: {:?} MiB/s, total {:.4} of the share",
        each.iter().map(|r| r / MIB).collect::<Vec<_>>(),
        total / (4.0 * MIB)
    );
    assert!((total - 4.0 * MIB).abs() <= 0.1 * 4.0 * MIB, "{each:?}");
    assert!(
        each.iter()
            .all(|r| (r - 2.0 * MIB).abs() <= 0.2 * 2.0 * MIB),
        "{each:?}"
    );
    for stderr in &said {
        assert!(
            stderr.is_empty(),
            "a move of the slot is no trouble: {stderr}"
        );
    }
    assert_eq!(status.code(), 0, "{}", status.stderr);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("2 shapes on it") && status.ends_with("; on a Redis Cluster\n"),
        "{status}"
    );
    // Changed and removed through yet another node.
    let changed = run(
        a.shape([
            "--remote",
            &format!("share:{}", share(others[1])),
            "--rate",
            "8MiB",
        ]),
        Stdio::null(),
    );
    assert_eq!(
        String::from_utf8_lossy(&changed.stdout),
        format!(
            "share redis://127.0.0.1:{}/0/moving: rate 8.00 MiB/s, burst 819.20 KiB\n",
            others[1]
        )
    );
    let reset = run(
        a.shape(["--share", &share(others[0]), "--reset"]),
        Stdio::null(),
    );
    assert_eq!(reset.code(), 0, "{}", reset.stderr);
    let slot_owner = cluster.owner(slot);
    assert_eq!(
        cli(
            slot_owner,
            &[],
            &["cluster", "countkeysinslot", &slot.to_string()]
        )
        .trim(),
        "0"
    );
}

#[test]
fn members_follow_a_failover_of_the_node_they_were_pointed_at_saying_so_each_way() {
    let Some(mut cluster) = Cluster::start("cluster-failover", true, None) else {
        return;
    };
    let slot = cluster.slot_of("failing");
    let owner = cluster.owner(slot);
    let runtime = Runtime::new("cluster-failover");
    // Pointed at the very master that will fail.
    let share = format!("redis://127.0.0.1:{owner}/failing");
    let started = Instant::now();
    let shape = machine(&runtime, &["--share", &share, "--rate", "2MiB"]);
    shape.wait_for_bytes(started, 1 << 20);
    let killed = Instant::now();
    cluster.kill(owner);
    let survivor = cluster.ports()[0];
    wait_up_to(Duration::from_secs(20), "a replica to take over", || {
        !cluster.gives(survivor, slot, owner)
    });
    let promoted = killed.elapsed();
    // Two seconds after the promotion: back on the cluster, and spending.
    // How soon is the subject.
    sleep_for(Duration::from_secs(2));
    let after = shape.rate_over(Instant::now(), Duration::from_secs(1));
    let (_, _, stderr) = shape.stop();
    eprintln!(
        "failover: promoted after {promoted:?}; then {:.3} MiB/s",
        after / MIB
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one line each way: {stderr}");
    assert!(lines[0].contains("Redis is unreachable"), "{stderr}");
    assert!(lines[1].ends_with("Redis is back"), "{stderr}");
    assert!((after - 2.0 * MIB).abs() <= 0.2 * 2.0 * MIB, "{after}");
}

/// True if `range` (`0-5460`, or one slot) holds `slot`.
fn in_range(range: &str, slot: u16) -> bool {
    let (start, end) = range.split_once('-').unwrap_or((range, range));
    matches!((start.parse::<u16>(), end.parse::<u16>()), (Ok(s), Ok(e)) if (s..=e).contains(&slot))
}

#[test]
fn a_share_on_a_cluster_over_tls_works_as_on_any_cluster() {
    if !installed("redis-server") || !installed("redis-cli") {
        return;
    }
    let certificates = Certificates::make("cluster-tls-certificates");
    let Some(cluster) = Cluster::start("cluster-tls", false, Some(&certificates)) else {
        return;
    };
    let slot = cluster.slot_of("sealed");
    let elsewhere = cluster
        .ports()
        .into_iter()
        .find(|&port| port != cluster.owner(slot))
        .unwrap();
    let share = format!("rediss://127.0.0.1:{elsewhere}/sealed");
    let runtime = Runtime::new("cluster-tls");
    let on_it = |args: &[&str]| {
        let mut command = runtime.shape(["--share", &share, "--progress", "none"]);
        command.args(args);
        command.env("SHAPE_REDIS_CA_FILE", certificates.path("ca.pem"));
        run(
            command,
            Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        )
    };
    let copied = on_it(&["--rate", "8MiB", "--stop-after", "2MiB"]);
    assert_eq!(copied.code(), 0, "{}", copied.stderr);
    assert_eq!(copied.stdout.len(), 2 << 20);
    // 2 MiB at 8 MiB/s from a full burst of 819 KiB: about 0.15 s.
    assert!(
        copied.elapsed >= Duration::from_millis(100),
        "{:?}",
        copied.elapsed
    );
    let status = on_it(&["--status"]);
    assert_eq!(status.code(), 0, "{}", status.stderr);
    assert!(
        String::from_utf8_lossy(&status.stdout).ends_with("; on a Redis Cluster\n"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
}

#[test]
fn a_cluster_has_database_0_only() {
    let Some(cluster) = Cluster::start("cluster-db", false, None) else {
        return;
    };
    let runtime = Runtime::new("cluster-db");
    let refused = run(
        runtime.shape([
            "--share",
            &format!("redis://127.0.0.1:{}/3/x", cluster.ports()[0]),
            "--stop-after",
            "1",
        ]),
        Stdio::null(),
    );
    assert_eq!(refused.code(), 1);
    assert!(
        refused
            .stderr
            .ends_with("Redis Cluster has database 0 only: leave /3 out of the address\n"),
        "{}",
        refused.stderr
    );
}

/// Certificates made for one test: an authority, a server certificate for
/// 127.0.0.1 that it signed, a client certificate it signed, and an
/// authority nobody uses, all as PEM files.
struct Certificates {
    dir: Scratch,
}

impl Certificates {
    fn make(name: &str) -> Certificates {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa,
            KeyPair,
        };
        let dir = Scratch::new(name);
        let authority = |name: &str| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
        };
        let ca = authority("shape test authority");
        let stranger = authority("an authority nobody trusts");
        let leaf = |names: Vec<String>, purposes: Vec<ExtendedKeyUsagePurpose>| {
            let mut params = CertificateParams::new(names).unwrap();
            params.extended_key_usages = purposes;
            let key = KeyPair::generate().unwrap();
            let certificate = params.signed_by(&key, &ca).unwrap();
            (certificate.pem(), key.serialize_pem())
        };
        // A node of a TLS cluster is a client of the others too.
        let (server, server_key) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let (client, client_key) = leaf(
            vec!["client".into()],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        );
        for (file, text) in [
            ("ca.pem", ca.pem()),
            ("stranger.pem", stranger.pem()),
            ("server.pem", server),
            ("server.key", server_key),
            ("client.pem", client),
            ("client.key", client_key),
        ] {
            dir.file(file, text.as_bytes());
        }
        Certificates { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }
}

/// A redis-server that speaks TLS only, on a port of its own.
struct TlsRedis {
    port: u16,
    child: Child,
}

impl TlsRedis {
    fn start(certificates: &Certificates, clients_need_certificates: bool) -> TlsRedis {
        let path = |file: &str| certificates.path(file).display().to_string();
        let args = |port: u16| -> Vec<String> {
            [
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--tls-cert-file",
                &path("server.pem"),
                "--tls-key-file",
                &path("server.key"),
                "--tls-ca-cert-file",
                &path("ca.pem"),
                "--tls-auth-clients",
                if clients_need_certificates {
                    "yes"
                } else {
                    "no"
                },
            ]
            .map(String::from)
            .to_vec()
        };
        let (port, child) = server(certificates.dir.path(), args);
        TlsRedis { port, child }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `shape ARGS` with the certificate variables `env` (name, file) set.
fn tls_shape(certificates: &Certificates, env: &[(&str, &str)], args: &[&str]) -> Run {
    let runtime = Runtime::new("tls-shape");
    let mut command = runtime.shape(["--progress", "none"]);
    command.args(args);
    for (variable, file) in env {
        command.env(variable, certificates.path(file));
    }
    run(
        command,
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    )
}

/// A copy of 64 KiB at 8 MiB/s on `share`.
fn copying(share: &str) -> [&str; 6] {
    ["--share", share, "--rate", "8MiB", "--stop-after", "64k"]
}

#[test]
fn tls_verifies_the_server_and_presents_a_client_certificate_when_asked() {
    if !installed("redis-server") || !installed("redis-cli") {
        return;
    }
    let certificates = Certificates::make("tls-certificates");
    let open = TlsRedis::start(&certificates, false);
    let share = format!("rediss://127.0.0.1:{}/secure", open.port);
    let copy = copying(&share);
    let trusted = [("SHAPE_REDIS_CA_FILE", "ca.pem")];

    let ok = tls_shape(&certificates, &trusted, &copy);
    assert_eq!(ok.code(), 0, "{}", ok.stderr);
    assert_eq!(ok.stdout.len(), 64 << 10);
    assert_eq!(ok.stderr, "");

    // Signed by an authority not trusted here (the system's roots, then
    // another bundle): refused in one line that names the server.
    for env in [&[][..], &[("SHAPE_REDIS_CA_FILE", "stranger.pem")][..]] {
        let refused = tls_shape(&certificates, env, &copy);
        assert_eq!(refused.code(), 1, "{}", refused.stderr);
        assert!(refused.stdout.is_empty());
        assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
        assert!(
            refused.stderr.starts_with(&format!(
                "shape: share rediss://127.0.0.1:{}/0/secure: the server's certificate does not verify: UnknownIssuer",
                open.port
            )),
            "{}",
            refused.stderr
        );
    }

    // Asked for, verification is skipped, and said.
    let insecure_share = format!("{share}#insecure");
    let insecure = tls_shape(
        &certificates,
        &[],
        &["--share", &insecure_share, "--stop-after", "1k"],
    );
    assert_eq!(insecure.code(), 0, "{}", insecure.stderr);
    assert!(
        insecure
            .stderr
            .contains("the server's certificate is not verified (#insecure)"),
        "{}",
        insecure.stderr
    );

    // redis:// to a port that speaks TLS only says what may be wrong.
    let plain = tls_shape(
        &certificates,
        &[],
        &[
            "--share",
            &format!("redis://127.0.0.1:{}/secure", open.port),
            "--stop-after",
            "1k",
        ],
    );
    assert_eq!(plain.code(), 1, "{}", plain.stderr);
    assert!(
        plain
            .stderr
            .ends_with("; if the server speaks TLS, write rediss://\n"),
        "{}",
        plain.stderr
    );

    // Redis's default: clients show a certificate too.
    let strict = TlsRedis::start(&certificates, true);
    let share = format!("rediss://127.0.0.1:{}/strict", strict.port);
    let copy = copying(&share);
    let without = tls_shape(&certificates, &trusted, &copy);
    assert_eq!(without.code(), 1, "{}", without.stderr);
    assert!(
        without.stderr.ends_with(
            "the server asks for a client certificate: set SHAPE_REDIS_CERT_FILE and SHAPE_REDIS_KEY_FILE\n"
        ),
        "{}",
        without.stderr
    );
    let with = tls_shape(
        &certificates,
        &[
            ("SHAPE_REDIS_CA_FILE", "ca.pem"),
            ("SHAPE_REDIS_CERT_FILE", "client.pem"),
            ("SHAPE_REDIS_KEY_FILE", "client.key"),
        ],
        &copy,
    );
    assert_eq!(with.code(), 0, "{}", with.stderr);
    assert_eq!(with.stdout.len(), 64 << 10);
    let half = tls_shape(
        &certificates,
        &[("SHAPE_REDIS_CERT_FILE", "client.pem")],
        &copy,
    );
    assert_eq!(half.code(), 1);
    assert!(
        half.stderr
            .ends_with("SHAPE_REDIS_CERT_FILE is set without SHAPE_REDIS_KEY_FILE\n"),
        "{}",
        half.stderr
    );
}

#[test]
fn a_version_1_client_certificate_is_refused_in_words_with_the_way_out() {
    if !installed("openssl") {
        return;
    }
    // What `openssl x509 -req` makes without -extfile, as many guides do.
    let dir = Scratch::new("tls-v1");
    let openssl = |args: &[&str]| {
        let made = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=authority",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "client.key",
        "-out",
        "client.csr",
        "-subj",
        "/CN=client",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-out",
        "client.pem",
        "-days",
        "1",
    ]);
    let (_closed, port) = refusing_port();
    let runtime = Runtime::new("tls-v1-shape");
    let share = format!("rediss://127.0.0.1:{port}/v1");
    let mut command = runtime.shape([
        "--progress",
        "none",
        "--share",
        &share,
        "--stop-after",
        "1k",
    ]);
    command
        .env("SHAPE_REDIS_CERT_FILE", dir.path().join("client.pem"))
        .env("SHAPE_REDIS_KEY_FILE", dir.path().join("client.key"));
    let refused = run(
        command,
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    );
    assert_eq!(refused.code(), 1, "{}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(
            "the client certificate (SHAPE_REDIS_CERT_FILE) cannot be used: it is an X.509 \
             version 1 certificate"
        ) && refused.stderr.contains("-extfile"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("Other("), "{}", refused.stderr);
}
