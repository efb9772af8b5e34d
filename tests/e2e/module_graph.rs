//! The module map, enforced (issue 36 §4; issue 23 before it). Each crate
//! of the workspace places every top-level module in a wing, and says which
//! other wings each wing may import; this test reads the sources and fails
//! naming the file and the edge when an import leaves the map, when a
//! module is in no wing, when (in acp-bridge, whose wings are directories)
//! a module's file is outside its wing's directory, and when modules import
//! each other in a loop at any level (two top-level modules, or two files
//! of one module's directory). A loop is how a module comes to know another's insides (the
//! policy enums once lived in `config`, which imported the stages that used
//! them); the map is how a reader finds where a new module goes.
//! `docs/architecture.md` ("Wings") draws acp-bridge's map.
//!
//! What counts as an import: a `crate::` path (in a `use`, grouped or
//! nested, or inline) and a `super::` path, resolved to the deepest module
//! it names; comments and `#[cfg(test)]` modules are left out (a test may
//! reach anything of its crate). A module naming its own ancestor or
//! descendant is not an edge: a `mod.rs` is its directory's face.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A group of top-level modules that share a place in the data's way, and
/// the other wings its modules may import.
struct Wing {
    name: &'static str,
    modules: &'static [&'static str],
    imports: &'static [&'static str],
}

/// One crate's map.
struct CrateMap {
    name: &'static str,
    sources: &'static str,
    wings: &'static [Wing],
    /// Whether each wing is a directory of `src/` holding its modules
    /// (`src/edge/transport.rs`), but for the wing named `ROOT_WING`, whose
    /// modules sit in `src/` itself, and a wing that is one module of its
    /// own name (`telemetry`) or hosts its others inside it
    /// (`src/heart/commands/`). Without, wings are a table only.
    wings_are_directories: bool,
}

/// The wing of acp-bridge whose modules sit at the crate root: the ones
/// that wire the others.
const ROOT_WING: &str = "config";

impl CrateMap {
    fn wing(&self, name: &str) -> Option<&Wing> {
        self.wings.iter().find(|wing| wing.name == name)
    }

    /// The name `module` has in the map: for a crate whose wings are
    /// directories, the module under its wing's directory
    /// (`["edge", "transport", "frame"]` is `transport`); else its
    /// top-level module.
    fn name_of<'m>(&self, module: &'m ModPath) -> &'m str {
        if self.wings_are_directories
            && module.len() > 1
            && self
                .wing(&module[0])
                .is_some_and(|wing| wing.modules.contains(&module[1].as_str()) && wing.name != module[1])
        {
            return &module[1];
        }
        &module[0]
    }

    /// The wing `module` is in: the one whose row names it, or, for a
    /// wing's own directory face (`src/edge/mod.rs`), that wing.
    fn wing_of(&self, module: &ModPath) -> Option<&Wing> {
        let name = self.name_of(module);
        self.wings
            .iter()
            .find(|wing| wing.modules.contains(&name))
            .or_else(|| self.wings_are_directories.then(|| self.wing(name)).flatten())
    }
}

const fn wing(
    name: &'static str,
    modules: &'static [&'static str],
    imports: &'static [&'static str],
) -> Wing {
    Wing {
        name,
        modules,
        imports,
    }
}

/// ACP's wire data: words, then what is said with them.
const ACP_PROTOCOL: CrateMap = CrateMap {
    name: "acp-protocol",
    sources: concat!(env!("CARGO_MANIFEST_DIR"), "/../acp-protocol/src"),
    wings_are_directories: false,
    wings: &[
        wing("words", &["methods", "rpc", "session", "content"], &[]),
        wing(
            "payloads",
            &[
                "agent_info",
                "commands",
                "config_options",
                "elicitation",
                "permission",
                "steer",
                "update",
            ],
            &["words"],
        ),
    ],
};

/// One agent process over stdio: frames, the process, the sessions on it,
/// the client that holds them.
const ACP_CLIENT: CrateMap = CrateMap {
    name: "acp-client",
    sources: concat!(env!("CARGO_MANIFEST_DIR"), "/../acp-client/src"),
    wings_are_directories: false,
    wings: &[
        wing("base", &["error", "dropped", "framing", "jsonrpc"], &[]),
        wing(
            "process",
            &[
                "process",
                "forker",
                "isolation",
                "pid_namespace",
                "program",
                "stderr_tail",
            ],
            &["base"],
        ),
        wing(
            "sessions",
            &["connection", "pending", "question", "transcript", "turn"],
            &["base"],
        ),
        wing("client", &["client"], &["base", "process", "sessions"]),
    ],
};

/// The tests' agent: its words, its wire, its MCP client, its state, its
/// turns, the dispatcher on top.
const SCRIPTED_AGENT: CrateMap = CrateMap {
    name: "scripted-agent",
    sources: concat!(env!("CARGO_MANIFEST_DIR"), "/../scripted-agent/src"),
    wings_are_directories: false,
    wings: &[
        wing(
            "base",
            &[
                "options",
                "rpc",
                "ids",
                "elicit",
                "filler",
                "frame_log",
                "permission",
                "mcp_offered",
                "slash",
            ],
            &[],
        ),
        wing("wire", &["wire", "acp", "misbehaviour"], &["base"]),
        wing("mcp", &["mcp_client", "mcp_http", "mcp_stdio", "mcp_tasks"], &[]),
        wing(
            "state",
            &["shared", "session", "controls", "directives"],
            &["base", "wire", "mcp"],
        ),
        wing(
            "turns",
            &["turn", "steering", "goose_steer", "work"],
            &["base", "wire", "mcp", "state"],
        ),
        wing("dispatch", &["agent"], &["base", "wire", "state", "turns"]),
    ],
};

/// The daemon, lowest wings first, each wing a directory of `src/` (see
/// `CrateMap::wings_are_directories`). The imports are today's edges; the
/// one against the data's way is in `UPWARD`: `intake` → `outbound` (the
/// intake tells people through the replier). Issue 36's findings are
/// fixed and their edges no longer allowed: `base` and `telemetry` import
/// no other wing (`process_seal` is handed the secrets' names; the metrics
/// endpoint is `metrics_endpoint`, in `edge`), `state` and `policy` import
/// nothing above them (`mention`, `prompt` and the budget's arithmetic are
/// the pure core's; `housekeeping` is in `config`), `outbound` does not
/// import the heart (`groups` and `thread_context` take `prompt` from the
/// core), the intake does not import the heart (the daemon hands it the
/// commands' `recognise`), and `agents` does not import `tools` (the
/// pool's `McpOffer` trait, which `mcp` implements), while `tools` imports
/// `agents`.
const ACP_BRIDGE: CrateMap = CrateMap {
    name: "acp-bridge",
    sources: concat!(env!("CARGO_MANIFEST_DIR"), "/src"),
    wings_are_directories: true,
    wings: &[
        wing(
            "base",
            &[
                "flags",
                "backoff",
                "deadline",
                "shutdown",
                "clock_skew",
                "isolation",
                "process_seal",
            ],
            &[],
        ),
        wing("telemetry", &["telemetry"], &[]),
        wing(
            "edge",
            &[
                "transport",
                "relay_tap",
                "embedded_relay",
                "http_get",
                "http_server",
                "metrics_endpoint",
                "public_address",
                "signer",
            ],
            &["base", "telemetry"],
        ),
        wing("state", &["store", "ledger", "mls"], &["base"]),
        wing(
            "policy",
            &["gate", "budget", "rate_limit", "loop_guard", "shard"],
            &["base", "telemetry", "state"],
        ),
        wing(
            "intake",
            &["intake", "inbound", "thread_context", "media"],
            &["base", "telemetry", "edge", "state", "policy", "outbound"],
        ),
        wing(
            "outbound",
            &["reply", "routes", "identity", "groups", "marmot"],
            &["base", "telemetry", "edge", "state", "policy", "intake"],
        ),
        wing(
            "agents",
            &["pool", "workspace"],
            &["base", "telemetry", "state", "intake"],
        ),
        wing(
            "tools",
            &["tools", "mcp", "upload"],
            &[
                "base",
                "telemetry",
                "edge",
                "policy",
                "intake",
                "outbound",
                "agents",
            ],
        ),
        wing(
            "heart",
            &["heart", "schedule", "profiles", "commands"],
            &[
                "base",
                "telemetry",
                "state",
                "policy",
                "intake",
                "outbound",
                "tools",
                "agents",
            ],
        ),
        wing(
            "config",
            &["config", "config_file", "daemon", "cli", "housekeeping"],
            &[
                "base",
                "telemetry",
                "edge",
                "state",
                "policy",
                "intake",
                "outbound",
                "tools",
                "agents",
                "heart",
            ],
        ),
    ],
};

/// The daemon's pure core: plain words, a mention and its prompt, then
/// the machines that decide with them.
const ACP_BRIDGE_CORE: CrateMap = CrateMap {
    name: "acp-bridge-core",
    sources: concat!(env!("CARGO_MANIFEST_DIR"), "/../acp-bridge-core/src"),
    wings_are_directories: false,
    wings: &[
        wing(
            "words",
            &[
                "choice",
                "standing",
                "media_refs",
                "budget",
                "live_sessions",
                "approvals",
            ],
            &[],
        ),
        wing("mention", &["mention", "comment", "prompt", "slash"], &["words"]),
        wing(
            "machines",
            &["mode_gate", "turn", "waiting", "conversations", "work"],
            &["words", "mention"],
        ),
    ],
};

const MAPS: [&CrateMap; 5] = [
    &ACP_PROTOCOL,
    &ACP_CLIENT,
    &SCRIPTED_AGENT,
    &ACP_BRIDGE_CORE,
    &ACP_BRIDGE,
];

/// A module's path in its crate: `["heart", "driver"]` for
/// `src/heart/driver.rs`, `["heart"]` for `src/heart/mod.rs`.
type ModPath = Vec<String>;

/// A crate's modules (each with its file, relative to `src`) and which
/// module names which.
struct Graph {
    files: BTreeMap<ModPath, String>,
    imports: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|error| panic!("read {}: {error}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The module `relative` (a path under `src`) is, or `None` for the crate
/// root and the binaries.
fn module_path(relative: &Path) -> Option<ModPath> {
    let mut path: ModPath = relative
        .with_extension("")
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    let first = path.first()?;
    // A `tests.rs` is a `#[cfg(test)]` module in a file of its own: a test
    // may reach anything of its crate.
    let a_test = path.last().is_some_and(|last| last == "tests");
    (!["lib", "main", "bin"].contains(&first.as_str()) && !a_test).then_some(path)
}

/// `code` without comments and without `#[cfg(test)] mod NAME { … }`
/// blocks (rustfmt closes those with a `}` alone on its line).
fn without_comments_and_tests(code: &str) -> String {
    let mut kept = String::new();
    let mut lines = code.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod ") && next.ends_with('{'))
        {
            lines.by_ref().find(|line| *line == "}");
            continue;
        }
        kept.push_str(line.split("//").next().unwrap_or_default());
        kept.push('\n');
    }
    kept
}

/// The identifier `text` starts with, and the rest.
fn identifier(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    text.split_at(end)
}

/// The paths a use tree at the start of `text` names (`a::b`,
/// `a::{b, c::{d, self}}`, `a::*`), and the text after it. `self` and `*`
/// name the path before them.
fn use_tree(text: &str) -> (Vec<Vec<String>>, &str) {
    let text = text.trim_start();
    if let Some(mut rest) = text.strip_prefix('{') {
        let mut paths = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('}') {
                return (paths, after);
            }
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
                continue;
            }
            let (named, after) = use_tree(rest);
            if after.len() == rest.len() {
                // Not a path (an unbalanced group): stop reading it.
                return (paths, after);
            }
            paths.extend(named);
            rest = after.trim_start();
            if let Some(alias) = rest.strip_prefix("as ") {
                rest = identifier(alias.trim_start()).1;
            }
        }
    }
    let (name, rest) = identifier(text);
    if name.is_empty() {
        return match rest.strip_prefix('*') {
            Some(after) => (vec![Vec::new()], after),
            None => (Vec::new(), rest),
        };
    }
    let head: Vec<String> = if name == "self" {
        Vec::new()
    } else {
        vec![name.to_owned()]
    };
    match rest.strip_prefix("::") {
        Some(tail) => {
            let (tails, after) = use_tree(tail);
            let joined = tails
                .into_iter()
                .map(|tail| head.iter().cloned().chain(tail).collect())
                .collect();
            (joined, after)
        }
        None => (vec![head], rest),
    }
}

/// The paths `code` names from the crate root: its `crate::` paths, and its
/// `super::` paths resolved from `module`.
fn named_paths(code: &str, module: &[String]) -> BTreeSet<Vec<String>> {
    let code = without_comments_and_tests(code);
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue; // `acp_crate::`, or the second `super::` of a run.
        }
        let mut rest = &code[at..];
        let base: Vec<String> = if let Some(after) = rest.strip_prefix("crate::") {
            rest = after;
            Vec::new()
        } else {
            let mut up = 0;
            while let Some(after) = rest.strip_prefix("super::") {
                rest = after;
                up += 1;
            }
            let Some(kept) = module.len().checked_sub(up) else {
                continue;
            };
            module[..kept].to_vec()
        };
        for path in use_tree(rest).0 {
            named.insert(base.iter().cloned().chain(path).collect());
        }
    }
    named
}

impl Graph {
    fn read(map: &CrateMap) -> Graph {
        let sources = Path::new(map.sources);
        let mut found = Vec::new();
        rust_files(sources, &mut found);
        let files: BTreeMap<ModPath, String> = found
            .iter()
            .filter_map(|file| {
                let relative = file.strip_prefix(sources).expect("under src");
                Some((module_path(relative)?, relative.display().to_string()))
            })
            .collect();
        let mut imports: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (module, file) in &files {
            let code = std::fs::read_to_string(sources.join(file)).expect("read a source file");
            let targets = named_paths(&code, module)
                .into_iter()
                .filter_map(|path| {
                    (1..=path.len())
                        .rev()
                        .map(|len| path[..len].to_vec())
                        .find(|prefix| files.contains_key(prefix))
                })
                .filter(|target| !target.starts_with(module) && !module.starts_with(target));
            imports.entry(module.clone()).or_default().extend(targets);
        }
        Graph { files, imports }
    }

    /// Every (importer, imported) pair.
    fn edges(&self) -> impl Iterator<Item = (&ModPath, &ModPath)> {
        self.imports
            .iter()
            .flat_map(|(from, targets)| targets.iter().map(move |to| (from, to)))
    }

    /// The module directories (`[]` for `src/`) that hold more than one
    /// module.
    fn parents(&self) -> BTreeSet<ModPath> {
        self.files
            .keys()
            .map(|module| module[..module.len() - 1].to_vec())
            .collect()
    }

    /// Which child of `parent` imports which, each child standing for every
    /// module beneath it, with a file that makes each edge.
    fn children_of(&self, parent: &[String]) -> BTreeMap<String, BTreeMap<String, String>> {
        let child = |module: &ModPath| {
            (module.len() > parent.len() && module.starts_with(parent)).then(|| module[parent.len()].clone())
        };
        let mut children: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (from, to) in self.edges() {
            if let (Some(a), Some(b)) = (child(from), child(to))
                && a != b
            {
                children
                    .entry(a)
                    .or_default()
                    .entry(b)
                    .or_insert_with(|| self.files[from].clone());
            }
        }
        children
    }
}

/// A loop through `from` back to itself in `graph`, if there is one.
fn loop_through(graph: &BTreeMap<String, BTreeMap<String, String>>, from: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        start: &str,
        path: &mut Vec<String>,
        visited: &mut BTreeSet<String>,
    ) -> bool {
        let current = path.last().expect("a path").clone();
        for next in graph.get(&current).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if visited.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, path, visited) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![from.to_owned()];
    walk(graph, from, &mut path, &mut BTreeSet::new()).then_some(path)
}

/// The modules `from` reaches, itself included.
fn reachable(graph: &BTreeMap<String, BTreeMap<String, String>>, from: &str) -> BTreeSet<String> {
    let mut reached = BTreeSet::from([from.to_owned()]);
    let mut next = vec![from.to_owned()];
    while let Some(module) = next.pop() {
        for imported in graph.get(&module).into_iter().flat_map(BTreeMap::keys) {
            if reached.insert(imported.clone()) {
                next.push(imported.clone());
            }
        }
    }
    reached
}

/// Modules whose file is not where their wing says: in the wing's
/// directory (`src/edge/transport.rs`), or in `src/` for the root wing and
/// a wing that is a module of its own name.
fn misplaced(map: &CrateMap, graph: &Graph) -> Vec<String> {
    let mut wrong = BTreeSet::new();
    for module in graph.files.keys() {
        let name = map.name_of(module);
        let Some(wing) = map.wings.iter().find(|wing| wing.modules.contains(&name)) else {
            continue;
        };
        let at_root = module[0] == name;
        let home = if wing.name == ROOT_WING || wing.name == name {
            at_root
        } else {
            !at_root && module[0] == wing.name
        };
        if !home {
            let place = if wing.name == ROOT_WING {
                "src/".to_owned()
            } else {
                format!("src/{}/", wing.name)
            };
            wrong.insert(format!(
                "{}: `{name}` is in wing `{}`: its file belongs in {place} (found src/{})",
                map.name, wing.name, graph.files[module]
            ));
        }
    }
    wrong.into_iter().collect()
}

/// Everything wrong with `graph` against `map`, one line each.
fn violations(map: &CrateMap, graph: &Graph) -> Vec<String> {
    let mut wrong = Vec::new();
    let wing_of: BTreeMap<&str, &Wing> = map
        .wings
        .iter()
        .flat_map(|wing| wing.modules.iter().map(move |module| (*module, wing)))
        .collect();
    let named: BTreeSet<&str> = graph.files.keys().map(|module| map.name_of(module)).collect();
    for module in graph.files.keys() {
        if map.wing_of(module).is_none() {
            wrong.push(format!("{}: put `{}` in a wing", map.name, map.name_of(module)));
        }
    }
    if map.wings_are_directories {
        wrong.extend(misplaced(map, graph));
    }
    for (module, wing) in &wing_of {
        if !named.contains(module) {
            wrong.push(format!(
                "{}: wing `{}` names `{module}`, which is not a module of the crate",
                map.name, wing.name
            ));
        }
    }
    for (from, to) in graph.edges() {
        let (Some(from_wing), Some(to_wing)) = (map.wing_of(from), map.wing_of(to)) else {
            continue;
        };
        if from_wing.name != to_wing.name && !from_wing.imports.contains(&to_wing.name) {
            wrong.push(format!(
                "{}: src/{} imports `{}` ({} → {}), which the map does not allow",
                map.name,
                graph.files[from],
                to.join("::"),
                from_wing.name,
                to_wing.name
            ));
        }
    }
    for parent in graph.parents() {
        let children = graph.children_of(&parent);
        let mut in_a_loop = BTreeSet::new();
        for child in children.keys() {
            if in_a_loop.contains(child) {
                continue;
            }
            let Some(cycle) = loop_through(&children, child) else {
                continue;
            };
            // Every module on some loop through `child`, reported once.
            let tangle: BTreeSet<String> = reachable(&children, child)
                .into_iter()
                .filter(|other| reachable(&children, other).contains(child))
                .collect();
            in_a_loop.extend(tangle.iter().cloned());
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|step| format!("{} → {} (src/{})", step[0], step[1], children[&step[0]][&step[1]]))
                .collect();
            let place = if parent.is_empty() {
                "src/".to_owned()
            } else {
                format!("src/{}/", parent.join("/"))
            };
            let tangle: Vec<String> = tangle.into_iter().collect();
            wrong.push(format!(
                "{}: modules in {place} import each other in a loop: {} (tied in it: {})",
                map.name,
                steps.join(", "),
                tangle.join(", ")
            ));
        }
    }
    wrong
}

#[test]
fn every_crate_keeps_its_map_and_has_no_import_loop() {
    let mut wrong = Vec::new();
    for map in MAPS {
        let graph = Graph::read(map);
        println!(
            "{}: {} modules in {} wings, {} imports between them",
            map.name,
            graph.files.len(),
            map.wings.len(),
            graph.edges().count()
        );
        assert!(
            graph.edges().count() >= map.wings.len(),
            "{}: the sources were read: {:?}",
            map.name,
            graph.imports
        );
        wrong.extend(violations(map, &graph));
    }
    assert!(
        wrong.is_empty(),
        "the module map is broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn imports_are_read_from_use_lines_groups_nested_groups_super_and_inline_paths() {
    let code = "use crate::gate::Refusal;\n\
                use crate::{ledger::Ledger, store as kept};\n\
                use crate::{\n    mention::{self, Mention},\n    reply::{Replier, routes::*},\n};\n\
                use super::sibling::Thing;\n\
                // use crate::commented_out;\n\
                let x = crate::metrics::count();\n\
                #[cfg(test)]\n\
                mod tests {\n    use crate::only_in_tests;\n}\n";
    let found: Vec<String> = named_paths(code, &["heart".to_owned(), "driver".to_owned()])
        .into_iter()
        .map(|path| path.join("::"))
        .collect();
    assert_eq!(
        found,
        [
            "gate::Refusal",
            "heart::sibling::Thing",
            "ledger::Ledger",
            "mention",
            "mention::Mention",
            "metrics::count",
            "reply::Replier",
            "reply::routes",
            "store",
        ]
    );
}

/// The map catches what it is for: a loop between two files of one
/// directory, an edge the map does not allow, a module in no wing.
#[test]
fn a_loop_a_forbidden_edge_and_a_module_in_no_wing_are_named() {
    let module = |path: &str| path.split('/').map(str::to_owned).collect::<ModPath>();
    let files = ["low", "high", "high/a", "high/b", "stray"]
        .into_iter()
        .map(|path| (module(path), format!("{path}.rs")))
        .collect();
    let imports = [("low", "high"), ("high/a", "high/b"), ("high/b", "high/a")]
        .into_iter()
        .fold(
            BTreeMap::<ModPath, BTreeSet<ModPath>>::new(),
            |mut imports, (from, to)| {
                imports.entry(module(from)).or_default().insert(module(to));
                imports
            },
        );
    const MAP: CrateMap = CrateMap {
        name: "example",
        sources: "",
        wings: &[wing("low", &["low"], &[]), wing("high", &["high"], &["low"])],
        wings_are_directories: false,
    };
    let wrong = violations(&MAP, &Graph { files, imports });
    assert_eq!(
        wrong,
        [
            "example: put `stray` in a wing",
            "example: src/low.rs imports `high` (low → high), which the map does not allow",
            "example: modules in src/high/ import each other in a loop: a → b (src/high/a.rs), b → a (src/high/b.rs) (tied in it: a, b)",
        ]
    );
}

/// The edges of `ACP_BRIDGE` that go up its list of wings: `intake` →
/// `outbound`, the intake telling people through the replier. A fixed finding leaves
/// this list and its edge the table, so that allowing it again means
/// editing both.
const UPWARD: [(&str, &str); 1] = [("intake", "outbound")];

#[test]
fn the_daemons_wings_import_downwards_but_for_the_open_findings() {
    let order: Vec<&str> = ACP_BRIDGE.wings.iter().map(|wing| wing.name).collect();
    let upward: Vec<(&str, &str)> = ACP_BRIDGE
        .wings
        .iter()
        .enumerate()
        .flat_map(|(at, wing)| {
            let order = &order;
            wing.imports.iter().filter_map(move |import| {
                let to = order.iter().position(|name| name == import).expect("a wing");
                (to > at).then_some((wing.name, *import))
            })
        })
        .collect();
    let unknown: Vec<&(&str, &str)> = upward.iter().filter(|edge| !UPWARD.contains(edge)).collect();
    assert!(
        unknown.is_empty(),
        "wings allowed to import a wing above them: {unknown:?}"
    );
}

#[test]
fn the_stages_below_the_intake_do_not_import_it() {
    let graph = Graph::read(&ACP_BRIDGE);
    // Modules by their names in the map (`inbound`, not the `intake` wing
    // that holds it), each standing for every module beneath it.
    let mut top: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (from, to) in graph.edges() {
        let (a, b) = (ACP_BRIDGE.name_of(from), ACP_BRIDGE.name_of(to));
        if a != b {
            top.entry(a.to_owned())
                .or_default()
                .entry(b.to_owned())
                .or_insert_with(|| graph.files[from].clone());
        }
    }
    // What the heart reaches, itself included: the stages an accepted
    // mention goes through. They name the hand-off (`inbound`) and the
    // clock-skew bounds (`clock_skew`), never the intake that makes them.
    let below = reachable(&top, "heart");
    assert!(
        below.contains("inbound"),
        "the heart takes `Inbound` from its own module: {below:?}"
    );
    let importers: Vec<&String> = below
        .iter()
        .filter(|module| {
            top.get(*module)
                .is_some_and(|imports| imports.contains_key("intake"))
        })
        .collect();
    assert!(
        importers.is_empty(),
        "stages below the intake that import it: {importers:?}"
    );
}
