//! toxiproxy-server's command line, for shape started under that name (a
//! link named `toxiproxy-server` or `toxiproxy`, as busybox takes its
//! name), so that scripts, compose files and images that start
//! toxiproxy-server change nothing but the binary.
//!
//! Flags are read as Go's `flag` package reads them: `-flag` or
//! `--flag`, the value after `=` or as the next word, a bool alone or
//! `=true`/`=false`; reading stops at the first word that is not a flag,
//! or after `--`. `-h`/`-help` print the usage (status 0); an unknown
//! flag or a bad value prints why and the usage (status 2).

use std::ffi::OsStr;
use std::path::PathBuf;

/// What toxiproxy-server's flags ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToxiproxyFlags {
    pub host: String,
    pub port: String,
    pub config: Option<PathBuf>,
    pub seed: Option<u64>,
    pub proxy_metrics: bool,
    pub runtime_metrics: bool,
}

impl Default for ToxiproxyFlags {
    /// toxiproxy-server's defaults.
    fn default() -> Self {
        ToxiproxyFlags {
            host: "localhost".into(),
            port: "8474".into(),
            config: None,
            seed: None,
            proxy_metrics: false,
            runtime_metrics: false,
        }
    }
}

impl ToxiproxyFlags {
    /// Where the API listens, as Go's `net.JoinHostPort` joins them.
    pub fn address(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// What a command line under toxiproxy-server's name asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerCommand {
    Serve(ToxiproxyFlags),
    Version,
    /// The usage, on standard error, with status 0.
    Help,
    /// Why the command line was refused: said before the usage, with
    /// status 2.
    Refused(String),
}

/// True if and only if the program was started as toxiproxy's server:
/// `argv0`'s file name is `toxiproxy-server` or `toxiproxy`.
pub fn called_so(argv0: &OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .is_some_and(|name| name == "toxiproxy-server" || name == "toxiproxy")
}

/// A flag of toxiproxy-server that is a bool: given alone, or `=true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    ProxyMetrics,
    RuntimeMetrics,
    Version,
}

/// A flag of toxiproxy-server that takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Valued {
    Config,
    Host,
    Port,
    Seed,
}

/// What a flag is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Switch(Switch),
    /// A value, with the type word of the usage.
    Value(Valued, &'static str),
}

/// One of toxiproxy-server's flags, as its usage lists it.
struct Flag {
    name: &'static str,
    takes: Takes,
    help: &'static str,
}

/// The flags of toxiproxy-server, in its usage's order.
const FLAGS: [Flag; 7] = [
    Flag {
        name: "config",
        takes: Takes::Value(Valued::Config, "string"),
        help: "JSON file containing proxies to create on startup",
    },
    Flag {
        name: "host",
        takes: Takes::Value(Valued::Host, "string"),
        help: "Host for toxiproxy's API to listen on (default \"localhost\")",
    },
    Flag {
        name: "port",
        takes: Takes::Value(Valued::Port, "string"),
        help: "Port for toxiproxy's API to listen on (default \"8474\")",
    },
    Flag {
        name: "proxy-metrics",
        takes: Takes::Switch(Switch::ProxyMetrics),
        help: "enable toxiproxy-specific prometheus metrics (default \"false\")",
    },
    Flag {
        name: "runtime-metrics",
        takes: Takes::Switch(Switch::RuntimeMetrics),
        help: "enable runtime-related prometheus metrics (default \"false\")",
    },
    Flag {
        name: "seed",
        takes: Takes::Value(Valued::Seed, "int"),
        help: "Seed for randomizing toxics with (default: drawn at start)",
    },
    Flag {
        name: "version",
        takes: Takes::Switch(Switch::Version),
        help: "print the version (default \"false\")",
    },
];

/// toxiproxy-server's usage, as Go's `flag` package prints it, for
/// `program`.
pub fn usage(program: &str) -> String {
    let mut text = format!("Usage of {program}:\n");
    for flag in &FLAGS {
        let kind = match flag.takes {
            Takes::Switch(_) => String::new(),
            Takes::Value(_, kind) => format!(" {kind}"),
        };
        text.push_str(&format!("  -{}{kind}\n    \t{}\n", flag.name, flag.help));
    }
    text
}

/// Reads `args` (without the program's name) as toxiproxy-server does; a
/// refusal is one line, whatever the words it quotes hold.
pub fn parse(args: &[String]) -> ServerCommand {
    match read_words(args) {
        ServerCommand::Refused(why) => {
            ServerCommand::Refused(shape_leaves::message::escape_controls(&why))
        }
        read => read,
    }
}

fn read_words(args: &[String]) -> ServerCommand {
    let mut flags = ToxiproxyFlags::default();
    let mut version = false;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" || !word.starts_with('-') || word == "-" {
            break;
        }
        let bare = word.strip_prefix("--").unwrap_or(&word[1..]);
        if bare.is_empty() || bare.starts_with('-') || bare.starts_with('=') {
            return ServerCommand::Refused(format!("bad flag syntax: {word}"));
        }
        let (name, given) = match bare.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (bare, None),
        };
        let Some(flag) = FLAGS.iter().find(|flag| flag.name == name) else {
            if name == "help" || name == "h" {
                return ServerCommand::Help;
            }
            return ServerCommand::Refused(format!("flag provided but not defined: -{name}"));
        };
        match flag.takes {
            Takes::Switch(switch) => {
                let value = match given.as_deref().map(go_bool) {
                    None => true,
                    Some(Some(value)) => value,
                    Some(None) => {
                        return ServerCommand::Refused(format!(
                            "invalid boolean value {:?} for -{name}: parse error",
                            given.unwrap_or_default()
                        ));
                    }
                };
                match switch {
                    Switch::ProxyMetrics => flags.proxy_metrics = value,
                    Switch::RuntimeMetrics => flags.runtime_metrics = value,
                    Switch::Version => version = value,
                }
            }
            Takes::Value(valued, _) => {
                let Some(value) = given.or_else(|| words.next().cloned()) else {
                    return ServerCommand::Refused(format!("flag needs an argument: -{name}"));
                };
                if let Err(why) = set(&mut flags, valued, value) {
                    return ServerCommand::Refused(why);
                }
            }
        }
    }
    match version {
        true => ServerCommand::Version,
        false => ServerCommand::Serve(flags),
    }
}

/// Sets the flag `valued` to `value`, or says why it cannot be.
fn set(flags: &mut ToxiproxyFlags, valued: Valued, value: String) -> Result<(), String> {
    match valued {
        Valued::Config => flags.config = Some(PathBuf::from(value)),
        Valued::Host => flags.host = value,
        Valued::Port => flags.port = value,
        // Go's seed is an int64: shape draws from its bits.
        Valued::Seed => match value.parse::<i64>() {
            Ok(seed) => flags.seed = Some(seed as u64),
            Err(_) => {
                return Err(format!(
                    "invalid value {value:?} for flag -seed: parse error"
                ));
            }
        },
    }
    Ok(())
}

/// A bool as Go's `strconv.ParseBool` reads it.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> ServerCommand {
        parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn toxiproxy_s_defaults_and_every_spelling_go_takes() {
        assert_eq!(parsed(&[]), ServerCommand::Serve(ToxiproxyFlags::default()));
        let expected = ToxiproxyFlags {
            host: "0.0.0.0".into(),
            port: "9000".into(),
            config: Some("/config/toxiproxy.json".into()),
            seed: Some(42),
            proxy_metrics: true,
            runtime_metrics: false,
        };
        for args in [
            &[
                "-host=0.0.0.0",
                "-port",
                "9000",
                "-config=/config/toxiproxy.json",
                "-seed",
                "42",
                "-proxy-metrics",
            ][..],
            &[
                "--host",
                "0.0.0.0",
                "--port=9000",
                "--config",
                "/config/toxiproxy.json",
                "--seed=42",
                "--proxy-metrics=true",
                "-runtime-metrics=false",
            ],
        ] {
            assert_eq!(
                parsed(args),
                ServerCommand::Serve(expected.clone()),
                "{args:?}"
            );
        }
        assert_eq!(parsed(&["-version"]), ServerCommand::Version);
        assert_eq!(parsed(&["--version=1"]), ServerCommand::Version);
        assert_eq!(parsed(&["-help"]), ServerCommand::Help);
        assert_eq!(parsed(&["-h"]), ServerCommand::Help);
        // Reading stops at the first word that is not a flag.
        assert_eq!(
            parsed(&["stray", "-bogus"]),
            ServerCommand::Serve(ToxiproxyFlags::default())
        );
        assert_eq!(
            parsed(&["--", "-bogus"]),
            ServerCommand::Serve(ToxiproxyFlags::default())
        );
    }

    #[test]
    fn what_go_refuses_is_refused_in_go_s_words() {
        for (args, why) in [
            (&["-bogus"][..], "flag provided but not defined: -bogus"),
            (&["-port"], "flag needs an argument: -port"),
            (
                &["-seed", "x"],
                "invalid value \"x\" for flag -seed: parse error",
            ),
            (
                &["-proxy-metrics=maybe"],
                "invalid boolean value \"maybe\" for -proxy-metrics: parse error",
            ),
            (&["---port=1"], "bad flag syntax: ---port=1"),
            // A newline in a word does not break the line (found by
            // fuzzing).
            (&["-\n"], "flag provided but not defined: -\\n"),
        ] {
            assert_eq!(parsed(args), ServerCommand::Refused(why.into()), "{args:?}");
        }
    }

    #[test]
    fn the_usage_is_go_s_and_the_name_is_told_by_argv0() {
        let text = usage("toxiproxy-server");
        assert!(text.starts_with("Usage of toxiproxy-server:\n  -config string\n"));
        assert!(text.contains(
            "  -port string\n    \tPort for toxiproxy's API to listen on (default \"8474\")\n"
        ));
        assert!(text.contains("  -proxy-metrics\n"));
        assert!(called_so(OsStr::new("/usr/local/bin/toxiproxy-server")));
        assert!(called_so(OsStr::new("/toxiproxy")));
        assert!(!called_so(OsStr::new("/usr/bin/shape")));
        let flags = ToxiproxyFlags {
            host: "::1".into(),
            ..ToxiproxyFlags::default()
        };
        assert_eq!(flags.address(), "[::1]:8474");
    }
}
