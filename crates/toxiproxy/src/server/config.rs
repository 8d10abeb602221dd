//! `--config`: a file of proxies, read as POST /populate's body when the
//! server starts, and again on SIGHUP.

use super::Refused;
use crate::api;
use crate::http;
use crate::model::{Model, ProxyGiven};
use crate::proxies::Proxies;
use shape_leaves::message::one_line;
use std::path::Path;

/// A config file of proxies, and the flag that named it, for messages.
#[derive(Debug, Clone, Copy)]
pub struct ConfigFile<'a> {
    pub path: &'a Path,
    /// `--config`, or toxiproxy-server's `-config`.
    pub flag: &'static str,
}

impl std::fmt::Display for ConfigFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.flag, self.path.display())
    }
}

/// The most a config file may hold: far more than any list of proxies
/// needs, and a bound on what `--config /dev/zero` reads.
const MOST_CONFIG: u64 = 16 << 20;

/// The text of config `file`, read up to [`MOST_CONFIG`].
fn read_config(file: ConfigFile) -> Result<Vec<u8>, Refused> {
    use std::io::Read;
    let failed = |err: std::io::Error| Refused::Failed(format!("{file}: {}", one_line(&err)));
    let mut text = Vec::new();
    std::fs::File::open(file.path)
        .and_then(|opened| opened.take(MOST_CONFIG + 1).read_to_end(&mut text))
        .map_err(failed)?;
    if text.len() as u64 > MOST_CONFIG {
        return Err(Refused::Usage(format!(
            "{file}: longer than {} MiB; is it a list of proxies?",
            MOST_CONFIG >> 20
        )));
    }
    Ok(text)
}

/// Creates the proxies of config `file`, as POST /populate would.
pub(super) fn populate(
    model: &mut Model,
    proxies: &mut Proxies,
    file: ConfigFile,
) -> Result<(), Refused> {
    let text = read_config(file)?;
    let given: Vec<ProxyGiven> = serde_json::from_slice(&text)
        .map_err(|err| Refused::Usage(format!("{file}: not a list of proxies: {err}")))?;
    api::populate_with(model, proxies, given)
        .map(drop)
        .map_err(|(_, err)| Refused::Usage(format!("{file}: {}", err.error)))
}

/// Reads config `file` again and populates from it, as POST /populate
/// does (SIGHUP): proxies that changed are replaced, new ones made, the
/// rest kept with their toxics. Returns the line that says how it went.
pub(super) fn reload(requester: &http::Requester, file: ConfigFile) -> String {
    let text = match read_config(file) {
        Ok(text) => text,
        Err(Refused::Usage(why) | Refused::Failed(why)) => {
            return format!("shape: SIGHUP: {why}; the proxies are as they were");
        }
    };
    let answer = requester.ask("POST", "/populate", text);
    match answer.status {
        201 => format!("shape: SIGHUP: {file} read again"),
        _ => {
            let why = answer
                .body
                .as_deref()
                .and_then(|body| serde_json::from_str::<serde_json::Value>(body).ok())
                .and_then(|body| body["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("status {}", answer.status));
            format!("shape: SIGHUP: {file}: {why}")
        }
    }
}
