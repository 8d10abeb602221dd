//! How shares are named: a share of this machine by a plain name, checked
//! here, and a fleet's by a Redis address, told by its scheme. Both kinds
//! read names by these rules, whether fleets are built or not.

/// How a fleet's share is named: a Redis address, by one of these.
pub const REDIS_SCHEMES: [&str; 3] = ["redis://", "rediss://", "redis+unix://"];

/// `name` if it can name a share of this machine (it becomes a file's
/// name), or why not.
pub fn check_name(name: &str) -> Result<String, String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if valid {
        Ok(name.to_string())
    } else {
        Err(
            "a share name is 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        for good in ["backup", "crawl-1", "a.b_c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
