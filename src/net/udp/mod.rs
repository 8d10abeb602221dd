//! UDP links: datagrams passed between clients and an upstream through a
//! link impaired as netem impairs one, in user space and seeded. One
//! direction's link, on any clock, is [`link`]; how it loses datagrams,
//! [`loss`]; the proxy that carries flows through two of them, [`proxy`].

mod link;
mod proxy;

pub use link::{Impairment, Oversize, QueueDrop};
pub use proxy::{LARGEST, Proxy, Route};
