//! What Redis answers, as a fuzz target: any bytes, read as a reply of
//! Redis' protocol, then as the lease script's reply and as a share's
//! settings. A server of another version, or one that is not Redis, may
//! send anything; a shape refuses it in one line and goes on.

use crate::store::{read_held, read_lease};
use shape_leaves::counting::Counting;

/// Reads `data` as a reply, then as a lease and as held settings.
pub fn replies(data: &[u8]) {
    let Ok(value) = redis::parse_redis_value(data) else {
        return;
    };
    if let Ok(numbers) = redis::from_redis_value::<Vec<i64>>(value.clone()) {
        match read_lease(&numbers, "fuzz", Counting::Bytes) {
            Ok(lease) => assert!(lease.held.burst > 0 || lease.held.limit.rate().is_none()),
            Err(refused) => one_line(&refused.to_string()),
        }
    }
    if let Ok(fields) = redis::from_redis_value::<Vec<Option<String>>>(value)
        && let Err(refused) = read_held(&fields, "fuzz")
    {
        one_line(&refused.to_string());
    }
}

fn one_line(why: &str) {
    assert!(
        !why.contains('\n'),
        "refused in more than one line: {why:?}"
    );
}
