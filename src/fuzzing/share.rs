//! Shares: the names `--share` takes (Redis addresses among them), and
//! the file a share on this machine is kept in, which any process of the
//! user may have written.

use crate::control::ControlDir;
use crate::control::ShareName;
use crate::control::share;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::sync::OnceLock;

/// A name read shows as a name that reads back the same, but that never
/// shows a password.
pub fn names(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(name) = text.parse::<ShareName>() {
        let shown = name.to_string();
        #[cfg(feature = "fleet")]
        if let ShareName::Redis(redis) = &name
            && let Some(password) = &redis.password
        {
            // Where credentials go: between the scheme and the path (a
            // socket's path may hold anything, a password's look too).
            let after = shown.split_once("://").map_or("", |(_, rest)| rest);
            let authority = after.split('/').next().unwrap_or_default();
            assert!(
                password == "***" || !authority.contains(&format!(":{password}@")),
                "{text:?} shows its password: {shown:?}"
            );
        }
        if matches!(name, ShareName::Local(_)) {
            assert_eq!(
                shown.parse::<ShareName>(),
                Ok(name),
                "{text:?} shows as {shown:?}"
            );
        }
    }
}

/// A share file of any contents is opened or refused in one line; one
/// opened is spent from, at any state its atomics hold, without a
/// panic and without waiting.
pub fn file(data: &[u8]) {
    static DIR: OnceLock<ControlDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("shape-fuzz-{}", std::process::id()));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&path);
        ControlDir::open_at(path).expect("a control directory for the fuzz target")
    });
    let path = share::file_path(dir, "fuzzed");
    let _ = std::fs::remove_file(&path);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| file.write_all(data));
    written.expect("the share file is written");
    match share::find(dir, "fuzzed") {
        Ok((bucket, _counting)) => {
            let _ = (bucket.limit(), bucket.burst(), bucket.available());
            for n in [0, 1, 4096, u64::MAX] {
                let _ = bucket.try_acquire(n);
            }
        }
        Err(refused) => {
            let _ = refused.to_string();
        }
    }
}
