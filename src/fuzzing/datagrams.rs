//! The UDP link, fed arbitrary datagrams at arbitrary times.

/// A link's impairment and a run of datagrams and departures.
pub fn link(data: &[u8]) {
    shape_net::udp::fuzzing::run(data);
}
