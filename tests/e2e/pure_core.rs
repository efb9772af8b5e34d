//! `acp-bridge-core` stays pure (issue 36 §3): the turn machine and its
//! peers live in a crate that cannot reach an async runtime, a socket or a
//! database, so the compiler, not a convention, keeps them free of I/O.
//! This test walks the core's dependency closure in `Cargo.lock` (every
//! feature any workspace member turns on, so it errs on the side of
//! refusing) and names the crate that would bring I/O in, and the path by
//! which it came.

use std::collections::{BTreeMap, VecDeque};

const LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
const CORE: &str = "acp-bridge-core";
/// Crates that are I/O: a runtime, its poller, sockets, a database, an
/// HTTP stack, a websocket.
const IMPURE: [&str; 6] = ["tokio", "mio", "socket2", "rusqlite", "hyper", "tungstenite"];

/// One locked package: its name, version and what it depends on (as the
/// lock writes them: `name`, or `name version` when several are locked).
struct Package {
    name: String,
    version: String,
    dependencies: Vec<String>,
}

fn locked_packages(lock: &str) -> Vec<Package> {
    let lock: toml::Table = lock.parse().expect("Cargo.lock is TOML");
    let packages = lock["package"].as_array().expect("Cargo.lock lists packages");
    packages
        .iter()
        .map(|package| {
            let field = |key: &str| package[key].as_str().expect("a name and a version").to_owned();
            let dependencies = package
                .get("dependencies")
                .and_then(toml::Value::as_array)
                .map(|list| {
                    list.iter()
                        .map(|dependency| dependency.as_str().expect("a dependency").to_owned())
                        .collect()
                })
                .unwrap_or_default();
            Package {
                name: field("name"),
                version: field("version"),
                dependencies,
            }
        })
        .collect()
}

/// Every package `root` reaches, each with the path it was reached by
/// (`acp-bridge-core -> nostr -> url`).
fn closure(packages: &[Package], root: &str) -> BTreeMap<String, String> {
    let find = |reference: &str| -> &Package {
        let mut words = reference.split(' ');
        let name = words.next().expect("a name");
        let version = words.next();
        packages
            .iter()
            .find(|package| package.name == name && version.is_none_or(|version| package.version == version))
            .unwrap_or_else(|| panic!("{reference} is not in Cargo.lock"))
    };
    let mut reached = BTreeMap::from([(root.to_owned(), root.to_owned())]);
    let mut queue = VecDeque::from([find(root)]);
    while let Some(package) = queue.pop_front() {
        let path = reached[&package.name].clone();
        for reference in &package.dependencies {
            let dependency = find(reference);
            if !reached.contains_key(&dependency.name) {
                reached.insert(dependency.name.clone(), format!("{path} -> {}", dependency.name));
                queue.push_back(dependency);
            }
        }
    }
    reached
}

#[test]
fn the_core_crate_reaches_no_runtime_socket_or_database() {
    let lock = std::fs::read_to_string(LOCK).expect("read Cargo.lock");
    let reached = closure(&locked_packages(&lock), CORE);
    let impure: Vec<&String> = IMPURE.iter().filter_map(|name| reached.get(*name)).collect();
    println!("{CORE} reaches {} crates; none of {IMPURE:?}", reached.len() - 1);
    assert!(
        impure.is_empty(),
        "{CORE} must stay free of I/O, but it reaches: {impure:?}"
    );
    assert!(
        reached.contains_key("nostr") && !reached.contains_key("nostr-sdk"),
        "the core reads nostr's protocol types, never the SDK's relay pool"
    );
}
