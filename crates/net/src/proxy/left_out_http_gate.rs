//! Stands in for `http_gate.rs` in a build without the `http` feature:
//! no route has an HTTP rule, so no connection has a gate, and these
//! types have no values.

use super::connection::Piece;
use shape_impair::faults::Way;

/// The HTTP rule of a route: none in this build.
#[derive(Clone)]
pub enum HttpRules {}

impl HttpRules {
    pub(super) fn gate(&self, _: bool) -> HttpGate {
        match *self {}
    }

    pub fn describe(&self) -> String {
        match *self {}
    }
}

/// One connection's HTTP exchange: none in this build.
pub(in crate::proxy) enum HttpGate {}

impl HttpGate {
    pub(in crate::proxy) fn unseen(&self, _: Way) -> u64 {
        match *self {}
    }

    pub(in crate::proxy) fn went_by(&mut self, _: Way, _: usize) {
        match *self {}
    }

    pub(in crate::proxy) fn take(&mut self, _: Way, _: Vec<u8>, _: u64) -> Vec<Piece> {
        match *self {}
    }

    pub(in crate::proxy) fn flush(&mut self, _: Way) -> Vec<Piece> {
        match *self {}
    }

    pub(in crate::proxy) fn due(&mut self) -> Vec<Piece> {
        match *self {}
    }

    pub(in crate::proxy) fn first_opaque(&self) -> Option<String> {
        match *self {}
    }

    pub(in crate::proxy) fn http2(
        &mut self,
    ) -> Option<(std::sync::Arc<dyn super::handoff::Handoff>, Vec<u8>)> {
        match *self {}
    }
}
