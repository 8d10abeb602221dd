//! shape's container image, as test suites start toxiproxy's: laid out as
//! ghcr.io/shopify/toxiproxy is, reached on a port published on
//! 127.0.0.1, on a network of its own with an upstream named by its
//! container's name (as compose names services).
//!
//! The image is `SHAPE_IMAGE` (`container/build.sh` builds it; `.ci/run`
//! builds it and sets it), run with podman. The same tests run against an
//! image of the real toxiproxy made the same way (its toxiproxy-server as
//! /toxiproxy in a root of its own, from ../shared/toxiproxy/build.sh)
//! when `SHAPE_IMAGE` names that image instead; the layout test is then
//! skipped, as the size and user are shape's.

use crate::harness::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// The image to test, or `None` (said) when there is none to test here.
fn image() -> Option<String> {
    match std::env::var("SHAPE_IMAGE") {
        Ok(image) if !image.is_empty() && installed("podman") => Some(image),
        Ok(_) => None,
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "SHAPE_IMAGE is not set; .ci/run builds the image and sets it"
            );
            skipped("SHAPE_IMAGE names no image (container/build.sh builds one)");
            None
        }
    }
}

/// The image to test if it is shape's, for what the real toxiproxy's
/// has not (`why`, said when it is skipped).
fn shape_s_image(why: &str) -> Option<String> {
    let image = image()?;
    if image.contains("toxiproxy-reference") {
        skipped(why);
        return None;
    }
    Some(image)
}

/// `podman ARGS`, which must succeed: its standard output.
fn podman(args: &[&str]) -> String {
    let ran = Command::new("podman").args(args).output().unwrap();
    assert!(
        ran.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    String::from_utf8_lossy(&ran.stdout).trim().to_string()
}

/// Containers and a network made by a test, removed when it ends.
#[derive(Default)]
struct Made {
    containers: Vec<String>,
    network: Option<String>,
}

impl Made {
    /// Runs `image` detached as `name`, with `args` before the image and
    /// `command` after it.
    fn run(&mut self, name: &str, args: &[&str], image: &str, command: &[&str]) {
        let mut all = vec!["run", "-d", "--name", name];
        all.extend_from_slice(args);
        all.push(image);
        all.extend_from_slice(command);
        podman(&all);
        self.containers.push(name.to_string());
    }

    /// Where on 127.0.0.1 podman published container `name`'s port
    /// `inside`, given as `-p 127.0.0.1::INSIDE` (see [`publish`]).
    fn published(&self, name: &str, inside: u16) -> String {
        let said = podman(&["port", name, &format!("{inside}/tcp")]);
        said.lines()
            .find(|line| line.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("{name}'s port {inside} is not published: {said}"))
            .to_string()
    }

    fn network(&mut self, name: &str) {
        podman(&["network", "create", name]);
        self.network = Some(name.to_string());
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for container in self.containers.iter().rev() {
            let _ = Command::new("podman")
                .args(["rm", "-f", "-t", "0", container])
                .output();
        }
        if let Some(network) = &self.network {
            let _ = Command::new("podman")
                .args(["network", "rm", "-f", network])
                .output();
        }
    }
}

/// A name of this run's own, so that tests in parallel never meet: this
/// process's id and a count, and a number drawn at random, so that a
/// container a killed run left behind never bears it.
fn unique(what: &str) -> String {
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let count = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "shape-test-{what}-{}-{count}-{:x}",
        std::process::id(),
        fastrand::u32(..)
    )
}

/// `-p` publishing the container's port `inside` on 127.0.0.1, on a port
/// that podman chooses (the host port left out) and holds for the
/// container's life: the test asks which ([`Made::published`]) and names
/// none itself, which another program could take before podman binds it.
fn publish(inside: u16) -> String {
    format!("127.0.0.1::{inside}")
}

/// The body of `GET path` at `address`, once it answers (within 20 s).
fn get(address: &str, path: &str) -> String {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let mut body = None;
    let mut failed = String::new();
    let answered = comes_within(Duration::from_secs(20), || {
        match agent.get(&format!("http://{address}{path}")).call() {
            Ok(mut answer) => body = Some(answer.body_mut().read_to_string().unwrap()),
            Err(err) => failed = err.to_string(),
        }
        body.is_some()
    });
    assert!(answered, "GET {path}: {failed}");
    body.unwrap()
}

#[test]
fn the_image_is_laid_out_as_toxiproxy_s_and_small() {
    let Some(image) = shape_s_image("the layout is shape's image's") else {
        return;
    };
    let inspect = |format: &str| podman(&["image", "inspect", "--format", format, &image]);
    assert_eq!(inspect("{{json .Config.Entrypoint}}"), r#"["/toxiproxy"]"#);
    assert_eq!(inspect("{{json .Config.Cmd}}"), r#"["-host=0.0.0.0"]"#);
    assert_eq!(inspect("{{.Config.User}}"), "65534:65534");
    assert!(inspect("{{json .Config.ExposedPorts}}").contains("8474/tcp"));
    let size: u64 = inspect("{{.Size}}").parse().unwrap();
    assert!(size < 10_000_000, "{size} bytes");
}

#[test]
fn the_api_answers_on_a_published_port_and_stops_at_once_on_sigterm() {
    let Some(image) = image() else {
        return;
    };
    let mut made = Made::default();
    let name = unique("api");
    made.run(&name, &["-p", &publish(8474)], &image, &[]);
    let version = get(&made.published(&name, 8474), "/version");
    assert!(version.starts_with("{\"version\": \"2."), "{version}");
    let stopping = Instant::now();
    podman(&["stop", "-t", "10", &name]);
    // Loose: podman's own work is in it; a server that ignored SIGTERM
    // would take the whole 10 s.
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopping.elapsed()
    );
    assert_eq!(
        podman(&["inspect", "--format", "{{.State.ExitCode}}", &name]),
        "0"
    );
}

#[test]
fn an_upstream_named_as_compose_names_it_is_reached_after_it_moves() {
    let Some(image) = image() else {
        return;
    };
    let mut made = Made::default();
    let network = unique("net");
    made.network(&network);
    let upstream = unique("upstream");
    let on_network = ["--network", network.as_str()];
    made.run(&upstream, &on_network, &image, &[]);
    let server = unique("server");
    made.run(
        &server,
        &[
            "--network",
            &network,
            "-p",
            &publish(8474),
            "-p",
            &publish(9000),
        ],
        &image,
        &[],
    );
    let (api, proxied) = (made.published(&server, 8474), made.published(&server, 9000));
    get(&api, "/version");
    let body = format!(r#"{{"name":"up","listen":"0.0.0.0:9000","upstream":"{upstream}:8474"}}"#);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let made_proxy = agent
        .post(&format!("http://{api}/proxies"))
        .send(body.as_str())
        .unwrap();
    assert_eq!(made_proxy.status(), 201);
    // Through the proxy, the upstream's own API answers.
    assert!(get(&proxied, "/version").starts_with("{\"version\": "));
    let address = |name: &str| {
        podman(&[
            "inspect",
            "--format",
            &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
            name,
        ])
    };
    let before = address(&upstream);
    // The upstream goes, a container takes its address, and it comes
    // back elsewhere under its name.
    podman(&["rm", "-f", "-t", "0", &upstream]);
    made.containers.retain(|c| *c != upstream);
    made.run(&unique("squatter"), &on_network, &image, &[]);
    made.run(&upstream, &on_network, &image, &[]);
    let after = address(&upstream);
    assert_ne!(before, after, "the upstream did not move");
    assert!(get(&proxied, "/version").starts_with("{\"version\": "));
}

/// `image` run with `config` mounted as compose mounts it and read at
/// start, the API published and each of `ports` inside published too:
/// what keeps it, the API's address and each port's.
fn run_with_config(
    image: &str,
    config: &[u8],
    ports: &[u16],
) -> (Made, Scratch, String, Vec<String>) {
    let dir = Scratch::new("container-config");
    let config = dir.file("toxiproxy.json", config);
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let mut made = Made::default();
    let name = unique("config");
    let mut args = vec![
        "-p".to_string(),
        publish(8474),
        "-v".into(),
        format!("{}:/config/toxiproxy.json:ro,Z", config.display()),
    ];
    for &inside in ports {
        args.extend(["-p".into(), publish(inside)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    made.run(
        &name,
        &args,
        image,
        &["-host=0.0.0.0", "-config=/config/toxiproxy.json"],
    );
    let published = ports
        .iter()
        .map(|&inside| made.published(&name, inside))
        .collect();
    let api = made.published(&name, 8474);
    (made, dir, api, published)
}

#[test]
fn a_config_mounted_as_compose_mounts_it_is_read_at_start() {
    let Some(image) = image() else {
        return;
    };
    let config =
        br#"[{"name": "from_config", "listen": "0.0.0.0:9001", "upstream": "127.0.0.1:8474"}]"#;
    let (_made, _dir, api, _) = run_with_config(&image, config, &[]);
    let proxies = get(&api, "/proxies");
    assert!(proxies.contains("\"from_config\""), "{proxies}");
}

#[test]
fn a_config_listening_on_port_80_serves_there_as_the_unprivileged_user() {
    let Some(image) = image() else {
        return;
    };
    // Under podman, which leaves ports below 1024 privileged: the
    // image's user (65534 in shape's) needs the binary's capability.
    let config = br#"[{"name": "web", "listen": "0.0.0.0:80", "upstream": "127.0.0.1:8474"}]"#;
    let (_made, _dir, api, published) = run_with_config(&image, config, &[80]);
    let proxies = get(&api, "/proxies");
    assert!(proxies.contains("\"0.0.0.0:80\""), "{proxies}");
    // Through port 80, to the API itself.
    let version = get(&published[0], "/version");
    assert!(version.contains("\"version\""), "{version}");
}

#[test]
fn testcontainers_toxiproxy_module_for_node_drives_the_image() {
    let Some(image) = image() else {
        return;
    };
    let modules = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/clients/testcontainers/node_modules");
    if !modules.join("@testcontainers/toxiproxy").exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing; .ci/run installs it with tests/clients/setup",
            modules.display()
        );
        skipped("testcontainers for Node is missing: run tests/clients/setup");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/testcontainers_node.js");
    // DOCKER_HOST names podman's socket, as shared/containers/setup.sh
    // prints it for eval.
    let drive = || {
        Command::new("node")
            .arg(&script)
            .arg(&image)
            .env("NODE_PATH", &modules)
            .output()
            .unwrap()
    };
    let mut ran = drive();
    // Rootless podman on a busy 2-core machine can fail to start a
    // container with the module's 33 published ports, in the engine, before
    // shape runs ("write child: broken pipe" from runc, an HTTP 500): the
    // start is the engine's, so it is tried once more.
    if !ran.status.success()
        && String::from_utf8_lossy(&ran.stderr).contains("write child: broken pipe")
    {
        eprintln!("the engine failed to start the container; trying once more");
        ran = drive();
    }
    assert!(
        ran.status.success() && String::from_utf8_lossy(&ran.stdout).trim() == "ok",
        "{}\n{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
}

/// podman's seccomp profile, made as Docker's default is on the points
/// that matter to `--exec`: pidfd_getfd, process_vm_readv and
/// process_vm_writev only for a container granted CAP_SYS_PTRACE
/// (podman's own allows them to all).
fn profile_as_docker_s(scratch: &Scratch) -> Option<std::path::PathBuf> {
    let podman_s = std::path::Path::new("/usr/share/containers/seccomp.json");
    if !available(
        podman_s.exists(),
        "podman's seccomp profile is not installed",
        "shared/containers/setup.sh installs it with podman",
    ) {
        return None;
    }
    let ptrace_s = ["pidfd_getfd", "process_vm_readv", "process_vm_writev"];
    let mut profile: serde_json::Value =
        serde_json::from_slice(&std::fs::read(podman_s).unwrap()).unwrap();
    let rules = profile["syscalls"].as_array_mut().unwrap();
    for rule in rules.iter_mut() {
        if let Some(names) = rule["names"].as_array_mut() {
            names.retain(|name| !ptrace_s.iter().any(|call| name == call));
        }
    }
    rules.retain(|rule| {
        rule["names"]
            .as_array()
            .is_some_and(|names| !names.is_empty())
    });
    rules.push(serde_json::json!({
        "names": ptrace_s,
        "action": "SCMP_ACT_ALLOW",
        "includes": {"caps": ["CAP_SYS_PTRACE"]}
    }));
    let file = scratch.path().join("seccomp.json");
    std::fs::write(&file, profile.to_string()).unwrap();
    Some(file)
}

#[test]
fn exec_under_docker_s_profile_without_capabilities_shapes_a_slow_link() {
    let Some(image) = shape_s_image("--exec is shape's") else {
        return;
    };
    let scratch = Scratch::new("exec-profile");
    let Some(profile) = profile_as_docker_s(&scratch) else {
        return;
    };
    // A server on loopback, which the container shares (its network is
    // the host's, loopback only here): it counts what comes.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut got).unwrap();
        got
    });
    // The binary under test, run in the image (which has what it links),
    // as an unprivileged user with every capability dropped, shaping a
    // command of its own: itself, sending its input to the server.
    let binary = format!("{}:/shape:ro", env!("CARGO_BIN_EXE_shape"));
    let security = format!("seccomp={}", profile.display());
    let connect = format!("127.0.0.1:{port}");
    let data = random_bytes(512 * 1024, 91);
    let mut podman = Command::new("podman");
    podman.args([
        "run",
        "--rm",
        "-i",
        "--network",
        "host",
        "--cap-drop",
        "all",
    ]);
    podman.args(["--tmpfs", "/tmp:mode=1777"]);
    podman.args(["--user", "65534:65534", "--security-opt", &security]);
    podman.args(["-v", &binary, "--entrypoint", "/shape", &image]);
    podman.args([
        "--rate", "1MiB", "--delay", "50ms", "--exec", "/shape", "-q",
    ]);
    podman.args(["--connect", &connect]);
    let mut child = podman
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &sent));
    let start = Instant::now();
    let output = child.wait_with_output().unwrap();
    let took = start.elapsed();
    writer.join().unwrap().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(server.join().unwrap() == data, "the bytes changed");
    // 512 KiB at 1 MiB/s, less the burst, after a connect's round trip.
    assert!(took >= Duration::from_millis(400), "took {took:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("refuses pidfd_getfd"), "{stderr}");
}
