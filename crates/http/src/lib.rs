//! HTTP as shape's proxies see it pass: where each request and response
//! begins and ends on a connection ([`framing`], heads by httparse,
//! bodies framed by rule), without copying or decoding a body; which
//! requests a rule picks ([`select`], [`rule`]), the answers shape
//! gives in the upstream's place ([`answer`]), and one connection's
//! requests and responses with the rule's faults in their turns
//! ([`exchange`]). It does no I/O and reads no clock,
//! so every rule is tested on made-up bytes and times.

#![forbid(unsafe_code)]

pub mod answer;
pub mod exchange;
pub mod framing;
pub mod fuzzing;
pub mod rule;
pub mod select;
