//! egress: the destinations beyond the host a plugin's container reaches, each a DNS name or
//! a CIDR block with its TCP ports. Deny by default: a plugin that lists none reaches only the
//! host (its API and DNS). The owner approves each destination at install, and the
//! controller allows exactly the approved ones in the plugin's NetworkPolicy.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::Value;

use super::Ctx;
use super::read::{field, kind, optional_objects};
use crate::capability::Capability;

/// Destinations a manifest may list.
pub const MAX_DESTINATIONS: usize = 32;
/// Ports one destination may list.
pub const MAX_PORTS: usize = 16;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let p = &mut ctx.problems;
    let items = optional_objects(ctx.doc, "egress", &root, p);
    // Approving the capability approves the list: both or neither.
    if !items.is_empty() && !ctx.declared.contains(&Capability::NetworkEgress) {
        p.add(
            &root.key("egress"),
            format!(
                "destinations need \"{}\" in capabilities",
                Capability::NetworkEgress
            ),
        );
    }
    if items.is_empty() && ctx.declared.contains(&Capability::NetworkEgress) {
        p.add(
            &root.key("capabilities"),
            format!(
                "\"{}\" needs the destinations it stands for, listed in egress",
                Capability::NetworkEgress
            ),
        );
    }
    if items.len() > MAX_DESTINATIONS {
        p.add(
            &root.key("egress"),
            format!(
                "lists {} destinations; at most {MAX_DESTINATIONS} are allowed",
                items.len()
            ),
        );
    }
    let mut seen = BTreeSet::new();
    for (at, item) in items {
        for key in item.keys() {
            if !["host", "cidr", "ports"].contains(&key.as_str()) {
                p.add(
                    &at.key(key),
                    "is not a destination key (the keys are host or cidr, and ports)",
                );
            }
        }
        let place = match (field(item, "host"), field(item, "cidr")) {
            (Some(_), Some(_)) => {
                p.add(
                    &at,
                    "names both a host and a cidr: one destination is one of them",
                );
                None
            }
            (None, None) => {
                p.add(&at, "needs a host (a DNS name) or a cidr (an IP block)");
                None
            }
            (Some(host), None) => place_of(host, &at.key("host"), host_problem, p),
            (None, Some(cidr)) => place_of(cidr, &at.key("cidr"), cidr_problem, p),
        };
        let ports = ports(item.get("ports"), &at.key("ports"), p);
        if let (Some(place), Some(ports)) = (place, ports)
            && !seen.insert((place.clone(), ports))
        {
            p.add(&at, format!("lists {place} with the same ports twice"));
        }
    }
}

/// A destination's host or block as written, when it is a string `problem` finds nothing
/// wrong with; else `None`, with the problem at `at`.
fn place_of(
    value: &Value,
    at: &super::JsonPath,
    problem: fn(&str) -> Option<String>,
    p: &mut super::Problems,
) -> Option<String> {
    let Some(text) = value.as_str() else {
        p.add(at, format!("must be a string, not {}", kind(value)));
        return None;
    };
    match problem(text) {
        Some(why) => {
            p.add(at, why);
            None
        }
        None => Some(text.to_string()),
    }
}

/// The ports of a destination, sorted; `None` (with the problem) when they are not 1 to
/// [`MAX_PORTS`] distinct TCP ports.
fn ports(value: Option<&Value>, at: &super::JsonPath, p: &mut super::Problems) -> Option<Vec<u16>> {
    let Some(value) = value else {
        p.add(at, "is required: the TCP ports the plugin reaches there");
        return None;
    };
    let Some(items) = value.as_array() else {
        p.add(
            at,
            format!("must be an array of ports, not {}", kind(value)),
        );
        return None;
    };
    if items.is_empty() || items.len() > MAX_PORTS {
        p.add(at, format!("must list 1 to {MAX_PORTS} ports"));
        return None;
    }
    let mut ports = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_u64().filter(|n| (1..=65535).contains(n)) {
            Some(n) if !ports.contains(&(n as u16)) => ports.push(n as u16),
            Some(n) => p.add(&at.index(i), format!("lists port {n} twice")),
            None => p.add(
                &at.index(i),
                "must be a port: a whole number from 1 to 65535",
            ),
        }
    }
    ports.sort_unstable();
    (ports.len() == items.len()).then_some(ports)
}

/// Why `host` is not a DNS name a destination may name, if it is not.
fn host_problem(host: &str) -> Option<String> {
    if host.parse::<IpAddr>().is_ok() {
        return Some(format!(
            "{host:?} is an IP address: write it as a cidr ({host}/32 or /128)"
        ));
    }
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.len() > 253 || labels.len() < 2 || !labels.iter().all(label_ok) {
        return Some(format!(
            "{host:?} is not a DNS name: lowercase labels of letters, digits and '-', \
             separated by dots, at least two (no wildcard, no trailing dot)"
        ));
    }
    None
}

/// Why `cidr` is not an IP block, if it is not.
fn cidr_problem(cidr: &str) -> Option<String> {
    let not_a_block = || {
        Some(format!(
            "{cidr:?} is not an IP block: an address and a prefix length, as 10.20.0.0/16"
        ))
    };
    let Some((address, prefix)) = cidr.split_once('/') else {
        return not_a_block();
    };
    let (Ok(address), Ok(prefix)) = (address.parse::<IpAddr>(), prefix.parse::<u8>()) else {
        return not_a_block();
    };
    let max = if address.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Some(format!("{cidr:?}: a prefix length is at most {max}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn hosts_and_blocks_with_ports_pass_and_read_as_destinations() {
        let m = M::new().caps(&["network.egress"]).set(
            "egress",
            json!([
                { "host": "api.github.com", "ports": [443] },
                { "cidr": "10.20.0.0/16", "ports": [5433, 5432] },
                { "cidr": "fd00::/8", "ports": [8080] },
            ]),
        );
        m.assert_valid();
        let manifest = crate::from_value(&m.0).unwrap();
        let destinations: Vec<String> = manifest.egress.iter().map(|e| e.destination()).collect();
        assert_eq!(
            destinations,
            [
                "api.github.com:443",
                "10.20.0.0/16:5432,5433",
                "fd00::/8:8080"
            ]
        );
    }

    #[test]
    fn the_capability_and_the_list_come_together() {
        let one = json!([{ "host": "api.github.com", "ports": [443] }]);
        M::new()
            .set("egress", one)
            .assert_problem("egress", "need \"network.egress\" in capabilities");
        M::new()
            .caps(&["network.egress"])
            .assert_problem("capabilities", "listed in egress");
    }

    #[test]
    fn a_destination_is_one_host_or_block_with_ports() {
        let m = M::new().caps(&["network.egress"]).set(
            "egress",
            json!([
                { "host": "a.example", "cidr": "10.0.0.0/8", "ports": [1] },
                { "ports": [1] },
                { "host": "api.github.com" },
                { "host": "api.github.com", "ports": [] },
                { "host": "api.github.com", "ports": [0, 70000, "443"] },
                { "host": "api.github.com", "ports": [443, 443] },
                { "host": "api.github.com", "ports": [443], "protocol": "udp" },
            ]),
        );
        m.assert_problem("egress[0]", "both a host and a cidr");
        m.assert_problem("egress[1]", "needs a host");
        m.assert_problem("egress[2].ports", "is required");
        m.assert_problem("egress[3].ports", "1 to 16 ports");
        m.assert_problem("egress[4].ports[0]", "from 1 to 65535");
        m.assert_problem("egress[4].ports[1]", "from 1 to 65535");
        m.assert_problem("egress[4].ports[2]", "from 1 to 65535");
        m.assert_problem("egress[5].ports[1]", "port 443 twice");
        m.assert_problem("egress[6].protocol", "not a destination key");
    }

    #[test]
    fn names_and_blocks_are_checked() {
        for (host, why) in [
            ("10.0.0.1", "write it as a cidr"),
            ("*.github.com", "not a DNS name"),
            ("localhost", "not a DNS name"),
            ("API.github.com", "not a DNS name"),
            ("api.github.com.", "not a DNS name"),
        ] {
            M::new()
                .caps(&["network.egress"])
                .set("egress", json!([{ "host": host, "ports": [443] }]))
                .assert_problem("egress[0].host", why);
        }
        for (cidr, why) in [
            ("10.0.0.0", "not an IP block"),
            ("10.0.0.0/33", "at most 32"),
            ("github.com/24", "not an IP block"),
        ] {
            M::new()
                .caps(&["network.egress"])
                .set("egress", json!([{ "cidr": cidr, "ports": [443] }]))
                .assert_problem("egress[0].cidr", why);
        }
        M::new()
            .caps(&["network.egress"])
            .set(
                "egress",
                json!([{ "host": 5, "ports": [443] }, { "cidr": [], "ports": [1] }]),
            )
            .assert_problem("egress[0].host", "must be a string, not");
        M::new()
            .caps(&["network.egress"])
            .set("egress", json!([{ "cidr": [], "ports": [1] }]))
            .assert_problem("egress[0].cidr", "must be a string, not");
        let twice = json!({ "host": "api.github.com", "ports": [443] });
        M::new()
            .caps(&["network.egress"])
            .set("egress", json!([twice, twice]))
            .assert_problem("egress[1]", "same ports twice");
        M::new()
            .set("egress", json!({ "host": "api.github.com" }))
            .assert_problem("egress", "must be an array");
    }
}
