//! Each Pod's own loopback address, 127.x.y.z.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// Hands out 127.`block`.y.z addresses, one per Pod uid, and takes them back.
///
/// The second octet is picked per kubelet so that two dev clusters on one machine rarely meet.
#[derive(Debug)]
pub struct Addresses {
    block: u8,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u16,
    by_pod: BTreeMap<String, Ipv4Addr>,
}

impl Addresses {
    pub fn new(block: u8) -> Self {
        Self {
            block: block.max(1),
            state: Mutex::new(State::default()),
        }
    }

    /// A random block in 10..=250, away from 127.0.0.x.
    pub fn random() -> Self {
        Self::new(rand::random_range(10..=250))
    }

    /// The Pod's address, the same every time it is asked for until released.
    pub fn allocate(&self, pod_uid: &str) -> Ipv4Addr {
        let mut state = self
            .state
            .lock()
            .expect("the address lock is never poisoned");
        if let Some(ip) = state.by_pod.get(pod_uid) {
            return *ip;
        }
        loop {
            // y.z from 0.1 to 255.254, skipping .0 and .255 so no address looks like a network.
            state.next = state.next.wrapping_add(1);
            let [y, z] = state.next.to_be_bytes();
            let ip = Ipv4Addr::new(127, self.block, y, z);
            if z == 0 || z == 255 || state.by_pod.values().any(|used| *used == ip) {
                continue;
            }
            state.by_pod.insert(pod_uid.to_string(), ip);
            return ip;
        }
    }

    /// Gives the Pod's address back.
    pub fn release(&self, pod_uid: &str) {
        let mut state = self
            .state
            .lock()
            .expect("the address lock is never poisoned");
        state.by_pod.remove(pod_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pod_gets_its_own_stable_address() {
        let addresses = Addresses::new(42);
        let a = addresses.allocate("a");
        let b = addresses.allocate("b");
        assert_ne!(a, b);
        assert_eq!(addresses.allocate("a"), a);
        assert_eq!(a.octets()[..2], [127, 42]);
        addresses.release("a");
        assert_ne!(addresses.allocate("c"), b);
    }
}
