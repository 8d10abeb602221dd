//! Ports below 1024 for an unprivileged shape that was given the right
//! to them. The image's binary carries `cap_net_bind_service` in its
//! permitted set only (`setcap cap_net_bind_service=p`), not as
//! effective: a file capability marked effective makes exec fail outright
//! where the capability is not allowed (`--cap-drop ALL`), whereas a
//! permitted one is simply not had there. So shape raises it to effective
//! itself, first thing, while it has one thread: under podman and
//! Kubernetes, which do not lower `ip_unprivileged_port_start` as Docker
//! does, a config that listens on :80 then works as uid 65534, as it does
//! in toxiproxy's image, which runs as root. Nothing else is raised, and a
//! command run by `--exec` does not inherit it (exec clears a non-root
//! process's capabilities).

use rustix::thread::{CapabilitySet, capabilities, set_capabilities};

/// Makes `CAP_NET_BIND_SERVICE` effective if it is permitted and not yet
/// effective; true if it was raised. Must run before any thread starts:
/// capabilities are per thread, and threads take their creator's.
pub fn take_if_given() -> bool {
    let Ok(mut sets) = capabilities(None) else {
        return false;
    };
    let wanted = CapabilitySet::NET_BIND_SERVICE;
    if !sets.permitted.contains(wanted) || sets.effective.contains(wanted) {
        return false;
    }
    sets.effective |= wanted;
    set_capabilities(None, sets).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_raised_that_is_not_permitted_and_nothing_else_changes() {
        let before = capabilities(None).unwrap();
        let raised = take_if_given();
        let after = capabilities(None).unwrap();
        assert_eq!(after.permitted, before.permitted);
        assert_eq!(after.inheritable, before.inheritable);
        let wanted = CapabilitySet::NET_BIND_SERVICE;
        assert_eq!(
            raised,
            before.permitted.contains(wanted) && !before.effective.contains(wanted)
        );
        assert_eq!(
            after.effective,
            match raised {
                true => before.effective | wanted,
                false => before.effective,
            }
        );
    }
}
