//! The plan on made-up times.
