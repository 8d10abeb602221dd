//! HTTP as shape's proxies see it pass: where each request and response
//! begins and ends on a connection ([`framing`], heads by httparse,
//! bodies framed by rule), without copying or decoding a body; which
//! requests a rule picks ([`select`]), and the answers shape gives in
//! the upstream's place ([`answer`]). It does no I/O and reads no clock,
//! so every rule is tested on made-up bytes and times.

#![forbid(unsafe_code)]

pub mod answer;
pub mod framing;
pub mod fuzzing;
pub mod select;
