//! Carrying toxics out with shape's own machinery, the machinery a pipe
//! uses.
//!
//! - What one toxic asks of the stream it is on ([`Effect`], made by
//!   [`effect`] from the toxic's typed attributes): a limit (the bucket),
//!   a delay (the delay line), or faults as shape's own flags would give
//!   them.
//! - A proxy's toxics added up into the rules of its route on the event
//!   loop ([`shaping`]): for each connection and stream, the toxics that
//!   strike it, as one bucket, one delay and one set of faults; and the
//!   counters of what the proxy passed.
//! - The buckets a proxy's connections spend from together (`shared.rs`):
//!   a shared bandwidth's, or a recorded link's with the thread that
//!   follows its trace, kept from one change of the toxics to the next.
//! - A proxy's `http` toxics as its HTTP rules (`http_toxics.rs`).
//! - A UDP proxy's toxics as the impairments of its datagram link each
//!   way, and that link running on a thread of its own (`datagrams.rs`).
//!
//! Made from the model's plain data alone: nothing here knows of the
//! API's routes, the HTTP server or the dashboard; `proxies/` hands what
//! is made here to the event loops.

pub(crate) mod datagrams;
mod effect;
mod http_toxics;
pub mod shaping;
pub(crate) mod shared;

pub use effect::{Effect, effect, link};
pub use http_toxics::HttpToxics;
