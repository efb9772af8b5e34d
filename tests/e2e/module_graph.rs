//! The daemon's stages import downwards only: no two top-level modules of
//! `acp-bridge` import each other, directly or in a loop (issue 23). A
//! loop is how a stage comes to know another's insides (the policy enums
//! once lived in `config`, which imported the stages that used them); this
//! test reads the sources and names the loop, so a new one fails here
//! rather than in review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
/// Files that are not a stage: the crate root, the binaries.
const NOT_A_MODULE: [&str; 3] = ["lib", "main", "bin"];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`intake` for
/// `src/intake/relay_link.rs`), or `None` for the crate root and binaries.
fn module_of(file: &Path) -> Option<String> {
    let relative = file.strip_prefix(SOURCES).expect("under src");
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first).to_owned();
    (!NOT_A_MODULE.contains(&name.as_str())).then_some(name)
}

/// The top-level modules `code` names through `crate::` paths, in `use`
/// lines (grouped ones included) and inline; comments are skipped.
fn imported_modules(code: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::c}` on one line; a group that spans lines is
                // read line by line below.
                let inside = group.split('}').next().unwrap_or_default();
                named.extend(inside.split(',').filter_map(first_segment));
            } else {
                named.extend(first_segment(rest));
            }
        }
    }
    // Groups spanning lines: `use crate::{` then one item per line.
    let mut in_group = false;
    for line in code.lines().map(str::trim) {
        if line.starts_with("use crate::{") && !line.contains('}') {
            in_group = true;
            continue;
        }
        if in_group {
            if line.starts_with('}') {
                in_group = false;
                continue;
            }
            named.extend(line.split(',').filter_map(first_segment));
        }
    }
    named
}

/// The first path segment of `path`, if it is an identifier.
fn first_segment(path: &str) -> Option<String> {
    let segment: String = path
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!segment.is_empty() && segment.chars().next().is_some_and(|c| !c.is_ascii_digit())).then_some(segment)
}

/// Which top-level module imports which.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(Path::new(SOURCES), &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|file| module_of(file)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = module_of(file) else { continue };
        let code = std::fs::read_to_string(file).expect("read a source file");
        let imports = graph.entry(module.clone()).or_default();
        imports.extend(
            imported_modules(&code)
                .into_iter()
                .filter(|imported| *imported != module && modules.contains(imported)),
        );
    }
    graph
}

/// A loop through `from` back to itself, if there is one.
fn loop_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut path = vec![from.to_owned()];
    let mut visited = BTreeSet::new();
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        visited: &mut BTreeSet<String>,
    ) -> bool {
        let current = path.last().expect("a path").clone();
        for next in graph.get(&current).into_iter().flatten() {
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
    walk(graph, from, &mut path, &mut visited).then_some(path)
}

#[test]
fn no_two_modules_import_each_other_directly_or_in_a_loop() {
    let graph = import_graph();
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    println!("{} modules, {edges} imports between them", graph.len());
    assert!(graph.len() > 20, "the sources were read: {graph:?}");
    assert!(
        graph["daemon"].contains("intake") && graph["daemon"].contains("config"),
        "imports are found: {:?}",
        graph["daemon"]
    );
    let loops: Vec<String> = graph
        .keys()
        .filter_map(|module| loop_through(&graph, module))
        .map(|path| path.join(" → "))
        .collect();
    assert!(
        loops.is_empty(),
        "modules importing each other:\n{}",
        loops.join("\n")
    );
}

#[test]
fn imports_are_read_from_use_lines_groups_and_inline_paths() {
    let code = "use crate::gate::Refusal;\n\
                use crate::{ledger::Ledger, store};\n\
                use crate::{\n    mention::Mention,\n    reply::Replier,\n};\n\
                // use crate::commented_out;\n\
                let x = crate::metrics::count();\n";
    let found: Vec<String> = imported_modules(code).into_iter().collect();
    assert_eq!(found, ["gate", "ledger", "mention", "metrics", "reply", "store"]);
}

#[test]
fn the_stages_below_the_intake_do_not_import_it() {
    let graph = import_graph();
    // What the heart reaches, itself included: the stages an accepted
    // mention goes through. They name the hand-off (`inbound`) and the
    // clock-skew bounds (`clock_skew`), never the intake that makes them.
    let mut below = BTreeSet::from(["heart".to_owned()]);
    let mut next = vec!["heart".to_owned()];
    while let Some(module) = next.pop() {
        for imported in graph.get(&module).into_iter().flatten() {
            if below.insert(imported.clone()) {
                next.push(imported.clone());
            }
        }
    }
    assert!(
        below.contains("inbound"),
        "the heart takes `Inbound` from its own module: {below:?}"
    );
    let importers: Vec<&String> = below
        .iter()
        .filter(|module| graph[*module].contains("intake"))
        .collect();
    assert!(
        importers.is_empty(),
        "stages below the intake that import it: {importers:?}"
    );
}
