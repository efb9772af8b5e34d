//! The README and `docs/` stay true to the binary and the repository
//! (issues 26 and 36): the flag tables of `docs/flags.md` have a row for every
//! flag of `acp-bridge run --help-long`, with its variable and default, one row each,
//! and no row for a flag that does not exist; every `--flag` the docs name
//! is one of acp-bridge's or of a program they show next to it; every
//! repository path and every relative link (with its `#anchor`) they give
//! exists; their config examples are read by the binary. A renamed flag, a
//! moved file or a new flag without a row fails here rather than in a
//! newcomer's terminal.
//!
//! Facts, not headings: a table or an example is found by what it is (the
//! table whose header row is [`FLAG_TABLE_HEADER`], the first ```toml block
//! of a page), so the pages can be reorganised without editing this file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BRIDGE: &str = env!("CARGO_BIN_EXE_acp-bridge");
const REPOSITORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
/// The page that holds the flag table.
const FLAG_PAGE: &str = "docs/flags.md";
/// The header row of the flag table, which is how it is found on its page.
const FLAG_TABLE_HEADER: &str = "| Flag | Environment | Default | Meaning |";
/// The page whose first ```toml block is the config file example a
/// newcomer copies.
const CONFIG_EXAMPLE_PAGE: &str = "README.md";
/// The page whose first ```toml block shows profiles, budgets and schedules.
const PAID_AGENTS_PAGE: &str = "docs/several-agents.md";
/// The README is a newcomer's page (issue 36): what acp-bridge is, the two
/// commands, the path to a first reply, one config example and links. The
/// reference lives in `docs/`; this bound keeps it from growing back there.
const README_MAX_LINES: usize = 300;
/// Subcommands whose flags the docs may name besides the daemon's.
const SUBCOMMANDS: [&str; 4] = ["check", "keygen", "demo", "scripted-agent"];
/// Flags of other programs the docs show: cargo and its test harness, the
/// agents' own, kubectl, and the aionostr client of the walk-through.
const OTHER_PROGRAMS_FLAGS: [&str; 18] = [
    "--lib",
    "--with-builtin",
    "--release",
    "--workspace",
    "--locked",
    "--bins",
    "--test",
    "--check",
    "--nocapture",
    "--acp",
    "--experimental-acp",
    "--rm",
    "--restart",
    "--from-file",
    "--content",
    "--tags",
    "--kind",
    "--authors",
];
/// Where a path written in the docs is taken to be in the repository.
const REPOSITORY_ROOTS: [&str; 6] = ["crates/", "deploy/", "tests/", "fuzz/", "docs/", ".ci/"];
/// A relative path (with a `/`) and one of these endings names a
/// repository file too
/// (`src/loop_guard.rs` once did, from no directory where it exists).
const REPOSITORY_FILE_ENDINGS: [&str; 6] = [".rs", ".sh", ".yaml", ".toml", ".md", ".py"];

/// One option of a `--help` page.
#[derive(Debug)]
struct HelpFlag {
    name: String,
    env: Option<String>,
    default: Option<String>,
}

fn help_page(subcommand: Option<&str>) -> String {
    let mut command = Command::new(BRIDGE);
    command.args(subcommand).arg("--help-long");
    let output = command.output().expect("run acp-bridge --help-long");
    assert!(output.status.success(), "{subcommand:?} --help-long failed");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The options of a clap help page: each starts on a line of its own
/// (`  --name <VALUE>` or `  -h, --help`), its `[env: …]` and `[default: …]`
/// on the lines that follow.
fn help_flags(page: &str) -> Vec<HelpFlag> {
    let mut flags: Vec<HelpFlag> = Vec::new();
    for line in page.lines() {
        let trimmed = line.trim_start();
        let option = trimmed
            .strip_prefix("-h, ")
            .or_else(|| trimmed.strip_prefix("-V, "))
            .unwrap_or(trimmed);
        if line.starts_with("  ") && option.starts_with("--") {
            let name = option.split([' ', '=']).next().unwrap_or_default().to_owned();
            flags.push(HelpFlag {
                name,
                env: None,
                default: None,
            });
        }
        let Some(flag) = flags.last_mut() else { continue };
        if let Some(env) = bracketed(line, "[env: ") {
            flag.env = Some(env.split('=').next().unwrap_or_default().to_owned());
        }
        if let Some(default) = bracketed(line, "[default: ") {
            flag.default = Some(default.to_owned());
        }
    }
    flags
}

fn bracketed<'a>(line: &'a str, opening: &str) -> Option<&'a str> {
    let start = line.find(opening)? + opening.len();
    let end = line[start..].find(']')?;
    Some(&line[start..start + end])
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(REPOSITORY).join(relative))
        .unwrap_or_else(|error| panic!("{relative}: {error}"))
}

/// README.md and every page under docs/, as (repository path, text).
fn documents() -> Vec<(String, String)> {
    let mut pages = vec![("README.md".to_owned(), read("README.md"))];
    let mut names: Vec<PathBuf> = std::fs::read_dir(Path::new(REPOSITORY).join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    names.sort();
    for path in names {
        let name = format!("docs/{}", path.file_name().unwrap_or_default().to_string_lossy());
        let text = read(&name);
        pages.push((name, text));
    }
    pages
}

/// The rows of a page's flag tables (one per heading, each under
/// [`FLAG_TABLE_HEADER`]): (flag, variable, default) cells.
fn flag_table(page: &str) -> Vec<[String; 3]> {
    let tables: Vec<&str> = page.split(&format!("\n{FLAG_TABLE_HEADER}\n")).skip(1).collect();
    assert!(tables.len() > 10, "{FLAG_PAGE} has a flag table per heading");
    tables
        .into_iter()
        .flat_map(|after| after.lines().take_while(|line| line.starts_with('|')).skip(1))
        .map(|row| {
            let cells: Vec<String> = row
                .split(" | ")
                .map(|cell| cell.trim_matches(['|', ' ']).to_owned())
                .collect();
            assert!(cells.len() >= 4, "a flag row has four cells: {row}");
            [cells[0].clone(), cells[1].clone(), cells[2].clone()]
        })
        .collect()
}

/// Every `--flag` token of a text.
fn named_flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices("--") {
        let before = at.checked_sub(1).map(|index| bytes[index]);
        if before.is_some_and(|byte| byte.is_ascii_alphanumeric() || byte == b'-') {
            continue;
        }
        let name: String = text[at + 2..]
            .chars()
            .take_while(|char| char.is_ascii_lowercase() || char.is_ascii_digit() || *char == '-')
            .collect();
        if name.starts_with(|char: char| char.is_ascii_lowercase()) {
            found.insert(format!("--{name}"));
        }
    }
    found
}

/// The `code spans` of a text, outside its fenced code blocks.
fn code_spans(text: &str) -> Vec<String> {
    let mut in_code_block = false;
    let mut prose = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
        } else if !in_code_block {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The targets of the relative links `[text](target)` of a text.
fn relative_links(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("](").filter_map(|(at, _)| {
        let rest = &text[at + 2..];
        let target = &rest[..rest.find(')')?];
        (!target.contains("://")).then_some(target)
    })
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
/// turned into hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|char| char.is_alphanumeric() || matches!(char, ' ' | '-' | '_'))
        .map(|char| if char == ' ' { '-' } else { char })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code_block = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
        } else if !in_code_block && line.starts_with('#') {
            found.insert(anchor(line));
        }
    }
    found
}

#[test]
fn the_flag_table_has_a_row_for_every_flag_with_its_variable_and_default_and_no_other() {
    let flags = help_flags(&help_page(Some("run")));
    assert!(flags.len() > 50, "parsed the daemon's help: {flags:?}");
    let rows = flag_table(&read(FLAG_PAGE));
    assert!(rows.len() > 50, "parsed {FLAG_PAGE}'s flag table: {rows:?}");
    let mut problems = Vec::new();
    for flag in flags
        .iter()
        .filter(|flag| !matches!(flag.name.as_str(), "--help" | "--help-long" | "--version"))
    {
        let Some([_, env, default]) = rows.iter().find(|row| row[0] == format!("`{}`", flag.name)) else {
            problems.push(format!("{} has no row in {FLAG_PAGE}'s flag table", flag.name));
            continue;
        };
        if let Some(expected) = &flag.env
            && *env != format!("`{expected}`")
        {
            problems.push(format!(
                "{}: the row says {env}, --help says {expected}",
                flag.name
            ));
        }
        if let Some(expected) = &flag.default
            && !default.contains(&format!("`{expected}`"))
        {
            problems.push(format!(
                "{}: the row's default is {default}, --help says {expected}",
                flag.name
            ));
        }
    }
    let mut named = BTreeSet::new();
    for [name, ..] in &rows {
        if !flags.iter().any(|flag| format!("`{}`", flag.name) == *name) {
            problems.push(format!(
                "{FLAG_PAGE}'s flag table has a row for {name}, which --help does not know"
            ));
        }
        if !named.insert(name) {
            problems.push(format!("{FLAG_PAGE}'s flag table has two rows for {name}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_flag_the_docs_name_exists() {
    // The top-level page's own (`--version`), then each command's.
    let mut known: BTreeSet<String> = help_flags(&help_page(None))
        .into_iter()
        .map(|flag| flag.name)
        .collect();
    for subcommand in std::iter::once("run").chain(SUBCOMMANDS) {
        known.extend(
            help_flags(&help_page(Some(subcommand)))
                .into_iter()
                .map(|flag| flag.name),
        );
    }
    known.extend(OTHER_PROGRAMS_FLAGS.map(str::to_owned));
    let mut problems = Vec::new();
    for (page, text) in documents() {
        for flag in named_flags(&text).difference(&known) {
            problems.push(format!(
                "{page} names {flag}, which no `acp-bridge … --help` knows"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_path_and_link_the_docs_give_exists() {
    let repository = Path::new(REPOSITORY);
    let mut problems = Vec::new();
    for (page, text) in documents() {
        for span in code_spans(&text) {
            let is_a_path = REPOSITORY_ROOTS.iter().any(|root| span.starts_with(root))
                || (span.contains('/')
                    && !span.starts_with(['/', '~', '$', '.'])
                    && REPOSITORY_FILE_ENDINGS
                        .iter()
                        .any(|ending| span.ends_with(ending)));
            let is_a_pattern = span.contains(['<', '*', '…', ' ']);
            if is_a_path && !is_a_pattern && !repository.join(&span).exists() {
                problems.push(format!("{page} names {span}, which does not exist"));
            }
        }
        let here = Path::new(&page).parent().unwrap_or(Path::new(""));
        for target in relative_links(&text) {
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let linked = if file.is_empty() {
                page.clone()
            } else {
                here.join(file).to_string_lossy().into_owned()
            };
            let Ok(linked_text) = std::fs::read_to_string(repository.join(&linked)) else {
                problems.push(format!("{page} links to {target}, which does not exist"));
                continue;
            };
            if !fragment.is_empty() && !anchors(&linked_text).contains(fragment) {
                problems.push(format!("{page} links to {target}: {linked} has no such heading"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The first ```toml block of a page.
fn toml_example(page: &str) -> String {
    read(page)
        .split("```toml\n")
        .nth(1)
        .and_then(|block| block.split("\n```").next())
        .unwrap_or_else(|| panic!("{page} holds a ```toml block"))
        .to_owned()
}

/// `acp-bridge config` on `example` as a config file: it must read it
/// without a refusal; what it prints.
fn config_reads(example: &str, name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("acp-bridge-docs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("acp-bridge.toml");
    std::fs::write(&file, example).expect("write the example");
    let output = Command::new(BRIDGE)
        .arg("config")
        .arg("--config")
        .arg(&file)
        .env_clear()
        .output()
        .expect("run acp-bridge config");
    std::fs::remove_dir_all(&dir).ok();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the example `{name}` is refused: {stderr}"
    );
    String::from_utf8(output.stdout).expect("config prints UTF-8")
}

/// The README's config file example, as a newcomer copies it: `acp-bridge
/// config` reads it without a refusal (a renamed key, a key in the wrong
/// table or a value of the wrong type would stop it) and reports every key
/// it sets as set by the file.
#[test]
fn the_readmes_config_file_example_is_read_key_by_key() {
    let example = toml_example(CONFIG_EXAMPLE_PAGE);
    let example = example.as_str();
    let printed = config_reads(example, "config");
    let keys_set: Vec<&str> = example
        .lines()
        .filter_map(|line| line.split_once(" = ").map(|(key, _)| key))
        .collect();
    assert!(
        keys_set.len() >= 10,
        "the example sets a handful of keys: {keys_set:?}"
    );
    for key in keys_set {
        let from_file = printed
            .lines()
            .any(|line| line.starts_with(&format!("{key} = ")) && line.ends_with("# file"));
        assert!(
            from_file,
            "`{key}` of {CONFIG_EXAMPLE_PAGE}'s example is not reported as set by the file:\n{printed}"
        );
    }
}

/// The example of profiles, budgets and schedules is a config file the
/// daemon reads: its `[agents.*]`, `[budget.*]` and `[[schedule]]` keys
/// and values are all accepted, and its budget tables set the budget flags.
#[test]
fn the_profiles_budgets_and_schedules_example_is_read() {
    let example = toml_example(PAID_AGENTS_PAGE);
    for table in ["[agents.", "[budget.bot]", "[[schedule]]"] {
        assert!(example.contains(table), "the example shows {table}");
    }
    let printed = config_reads(&example, "paid-agents");
    let bot_budget = printed
        .split("\n[budget.bot]\n")
        .nth(1)
        .and_then(|table| table.split("\n[").next())
        .unwrap_or_else(|| panic!("a [budget.bot] table: {printed}"));
    assert!(
        bot_budget
            .lines()
            .any(|line| line.starts_with("per-day = [\"20 USD\", \"500 turns\"]") && line.ends_with("# file")),
        "{printed}"
    );
}

#[test]
fn the_readme_stays_short_and_links_every_page_of_the_reference() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move reference to docs/"
    );
    let linked: BTreeSet<&str> = relative_links(&readme)
        .map(|target| target.split_once('#').map_or(target, |(file, _)| file))
        .collect();
    let unlinked: Vec<String> = documents()
        .into_iter()
        .map(|(page, _)| page)
        .filter(|page| page != "README.md" && !linked.contains(page.as_str()))
        .collect();
    assert!(
        unlinked.is_empty(),
        "README.md links to no page {unlinked:?}: a maintainer would not find them"
    );
}
