//! A UDP link's MTU (`--mtu SIZE[:cut]`): the largest datagram that
//! passes, and what becomes of a larger one, dropped or cut to the size.

use std::fmt;

/// The largest datagram UDP carries over IPv4.
pub const LARGEST_DATAGRAM: usize = 65_507;

/// What becomes of a datagram over the MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    Drop,
    Cut,
}

/// The largest datagram that passes, and what becomes of a larger one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mtu {
    pub size: usize,
    pub oversize: Oversize,
}

impl std::str::FromStr for Mtu {
    type Err = String;

    /// `SIZE` or `SIZE:cut`: bytes, from 1 to the largest datagram.
    fn from_str(text: &str) -> Result<Mtu, String> {
        let text = text.trim();
        let (size, oversize) = match text.strip_suffix(":cut") {
            Some(size) => (size, Oversize::Cut),
            None => (text, Oversize::Drop),
        };
        let size: usize = size
            .parse()
            .map_err(|_| format!("'{size}' is not a number of bytes (e.g. 1200, 1200:cut)"))?;
        if !(1..=LARGEST_DATAGRAM).contains(&size) {
            return Err(format!("an MTU is from 1 to {LARGEST_DATAGRAM} bytes"));
        }
        Ok(Mtu { size, oversize })
    }
}

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.oversize {
            Oversize::Drop => write!(f, "{}", self.size),
            Oversize::Cut => write!(f, "{}:cut", self.size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mtu_drops_or_cuts_and_must_fit_a_datagram() {
        let mtu = |text: &str| text.parse::<Mtu>();
        assert_eq!(
            mtu("1200").map(|m| (m.size, m.oversize)),
            Ok((1200, Oversize::Drop))
        );
        assert_eq!(
            mtu("1200:cut").map(|m| (m.size, m.oversize)),
            Ok((1200, Oversize::Cut))
        );
        assert_eq!(mtu("1200:cut").unwrap().to_string(), "1200:cut");
        assert!(mtu("0").is_err());
        assert!(mtu("70000").unwrap_err().contains("65507"));
        assert!(mtu("big").is_err());
    }
}
