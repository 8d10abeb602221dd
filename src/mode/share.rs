//! The one-off commands on a share: `--share NAME --status` and
//! `--share NAME --reset`.

use crate::control::fleet::{self, RedisShare};
use crate::control::{ControlDir, ShareName, share};
use shape_leaves::bucket::Settings;
use shape_leaves::exit::Exit;

/// The share's settings and what its shapes spend together, measured over
/// half a second.
pub fn status(name: &ShareName) -> anyhow::Result<Exit> {
    let name = match name {
        ShareName::Local(name) => name,
        ShareName::Redis(share) => {
            println!("{}", fleet::commands::status(share)?);
            return Ok(Exit::Success);
        }
    };
    let (bucket, counting) = share::find(&ControlDir::open()?, name)?;
    let spent =
        shape_leaves::throughput::growth(|| Ok::<_, std::convert::Infallible>(bucket.spent()));
    let used = spent.unwrap_or_default() / counting.tokens_per_unit() as f64;
    let in_hand = bucket.available().max(0) as u64;
    println!(
        "share {name}: {}; in use {}; {} in hand",
        Settings::of(&bucket, counting),
        counting.show_rate(used),
        counting.show_tokens(in_hand)
    );
    Ok(Exit::Success)
}

/// Removes the share's file so that the next shape on it starts it afresh.
pub fn reset(name: &ShareName) -> anyhow::Result<Exit> {
    let removed = match name {
        ShareName::Local(name) => share::reset(&ControlDir::open()?, name)?,
        ShareName::Redis(share) => reset_fleet(share)?,
    };
    if removed {
        println!("share {name}: removed; the next shape on it starts it afresh");
    } else {
        println!("share {name}: there was none; the next shape on it starts it");
    }
    Ok(Exit::Success)
}

/// Removes a fleet's share from Redis unless shapes are on it.
fn reset_fleet(share: &RedisShare) -> anyhow::Result<bool> {
    Ok(fleet::commands::reset(share)?)
}
