//! UDP links: datagrams passed between clients and an upstream through a
//! link impaired as netem impairs one, in user space and seeded. One
//! direction, on any clock, is `netem` (it loses datagrams as
//! [`shape_impair::faults::Loss`] says); who the clients are, [`flows`]; the
//! proxy that carries flows through two links, [`proxy`]; how another
//! thread reaches a running one, [`handle`].

mod flows;
mod handle;
mod netem;
mod proxy;

pub use flows::FlowEnds;
pub use handle::Handle;
pub use netem::{Impairment, QueueDrop, default_queue, fuzzing};
pub use proxy::{DatagramProxy, IDLE, Route};
