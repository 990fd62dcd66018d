//! The layers of `src/` import only downwards: main/bench/demo → progress/workload → ui →
//! server → credentials → sql → explain → planner → exec → storage → catalog → config → error.
//! An import may skip layers but never point up, and only `main.rs` reaches `server`. Inside a
//! folder, no files use one another in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers from the top; a module may use the ones after it.
const LAYERS: &[&str] = &[
    "bench",
    "demo",
    "progress",
    "workload",
    "ui",
    "server",
    "credentials",
    "sql",
    "explain",
    "planner",
    "exec",
    "storage",
    "catalog",
    "config",
    "metrics",
    "error",
];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == layer)
}

/// The module path of a source file below `src/`: `sql/pg_catalog/mod.rs` → `[sql, pg_catalog]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The top-level module of every path `source` uses: `crate::{a::x, b}` gives `a` and `b`.
fn referenced_layers(source: &str, module: &[String]) -> Vec<String> {
    paths_in(source, module, &BTreeSet::new()).into_iter().filter_map(|path| path.into_iter().next()).collect()
}

/// Every import that points up, as `file: layer → layer`.
fn upward_imports(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    collect_sources(root, &mut files);
    let mut violations = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).expect("under src");
        let module = module_path(relative);
        let Some(own) = module.first() else { continue };
        if own == "main" {
            continue;
        }
        let own_rank = rank(own).unwrap_or_else(|| panic!("{} is in no layer; add it to LAYERS", relative.display()));
        let source = std::fs::read_to_string(&file).expect("readable source");
        for layer in referenced_layers(&source, &module) {
            let points_up = match rank(&layer) {
                Some(target) => target < own_rank || (layer == "server" && own != "server"),
                None => false,
            };
            if points_up && layer != *own {
                violations.push(format!("{}: {own} → {layer}", relative.display()));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

fn collect_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "lib.rs") {
            out.push(path);
        }
    }
}

/// Every circle of files inside a folder of `root`, as `folder: a → b, b → a` (the uses
/// between the files of the circle). A folder's files are its `.rs` files, its `mod.rs`
/// included, and its child folders, each standing for everything below it. A file uses what
/// its `crate::`, `self::` and `super::` paths reach and, in a `mod.rs`, the paths through its
/// child modules; a name a `mod.rs` re-exports (`pub use child::Name`) is its child's, the rest
/// of what it names is its own. A `mod.rs`'s `mod x;` lines and re-exports are wiring, not
/// uses; comments and test code are left out, since a test may use helpers that use what it
/// tests.
fn circles(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    collect_sources(root, &mut files);
    let mut graphs: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(root).expect("under src");
        let folder: Vec<String> = relative.parent().into_iter().flatten().map(|p| p.to_string_lossy().into()).collect();
        let own = relative.file_stem().expect("a file name").to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&file).expect("readable source");
        let is_mod = own == "mod";
        let children = if is_mod { source.lines().filter_map(declared_module).collect() } else { BTreeSet::new() };
        for path in paths_in(&code_of(&source, is_mod), &module_path(relative), &children) {
            // The file's node in each folder above it, and what the path reaches there.
            for depth in 0..=folder.len() {
                if path.len() <= depth || path[..depth] != folder[..depth] {
                    break;
                }
                let from = folder.get(depth).unwrap_or(&own);
                let dir: PathBuf = folder[..depth].iter().collect();
                if let Some(to) = sibling(&root.join(&dir), &path[depth]).filter(|to| to != from) {
                    graphs.entry(dir).or_default().entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    let mut found = Vec::new();
    for (dir, graph) in &graphs {
        for circle in strongly_connected(graph) {
            let uses: Vec<String> = circle
                .iter()
                .flat_map(|a| graph[a].iter().filter(|b| circle.contains(*b)).map(move |b| format!("{a} → {b}")))
                .collect();
            found.push(format!("{}: {}", dir.display(), uses.join(", ")));
        }
    }
    found
}

/// The paths `code` uses, from the crate's root: `super::x::{y, z::*}` in module `[a, b]`
/// gives `[a, x, y]` and `[a, x, z, *]`. `children`: the modules a `mod.rs` declares, whose
/// paths need no prefix.
fn paths_in(code: &str, module: &[String], children: &BTreeSet<&str>) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let in_path = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        let start = if in_path { None } else { path_start(rest, module, children) };
        let Some((base, prefix)) = start else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let (expanded, length) = expand(&rest[prefix..]);
        paths.extend(expanded.into_iter().map(|path| [base.clone(), path].concat()));
        i += prefix + length.max(1);
    }
    paths
}

/// Where a path starting at `text` begins, and the length of its `crate::`, `self::` or
/// `super::` prefix (none for a path through a child module of a `mod.rs`).
fn path_start(text: &str, module: &[String], children: &BTreeSet<&str>) -> Option<(Vec<String>, usize)> {
    if text.starts_with("crate::") {
        return Some((Vec::new(), "crate::".len()));
    }
    if text.starts_with("self::") {
        return Some((module.to_vec(), "self::".len()));
    }
    let supers = text.len() - text.trim_start_matches("super::").len();
    if supers > 0 {
        return Some((module[..module.len().saturating_sub(supers / "super::".len())].to_vec(), supers));
    }
    let name = ident(text);
    (children.contains(name) && text[name.len()..].starts_with("::")).then(|| (module.to_vec(), 0))
}

/// The paths a path's text names, group by group, and the length of that text.
fn expand(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let rest = &text[at..];
        if let Some(group) = rest.strip_prefix('{') {
            let (members, length) = group_members(group);
            let mut paths = Vec::new();
            for member in members.into_iter().map(str::trim).filter(|m| !m.is_empty()) {
                match member {
                    "self" => paths.push(segments.clone()),
                    member => paths.extend(expand(member).0.into_iter().map(|path| [segments.clone(), path].concat())),
                }
            }
            return (paths, at + 1 + length);
        }
        if rest.starts_with('*') {
            segments.push("*".to_string());
            return (vec![segments], at + 1);
        }
        let name = ident(rest);
        if name.is_empty() {
            return (vec![segments], at);
        }
        segments.push(name.to_string());
        at += name.len();
        if !text[at..].starts_with("::") {
            return (vec![segments], at);
        }
        at += "::".len();
    }
}

/// The members of a group up to its closing brace, and the length up to and with that brace.
fn group_members(group: &str) -> (Vec<&str>, usize) {
    let (mut members, mut nesting, mut start) = (Vec::new(), 0, 0);
    for (offset, c) in group.char_indices() {
        match c {
            '{' => nesting += 1,
            '}' if nesting == 0 => {
                members.push(&group[start..offset]);
                return (members, offset + 1);
            }
            '}' => nesting -= 1,
            ',' if nesting == 0 => {
                members.push(&group[start..offset]);
                start = offset + 1;
            }
            _ => {}
        }
    }
    members.push(&group[start..]);
    (members, group.len())
}

fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !c.is_ascii_alphanumeric() && c != '_').unwrap_or(text.len());
    &text[..end]
}

/// `source` without comments and test code and, in a `mod.rs`, without its wiring.
fn code_of(source: &str, is_mod: bool) -> String {
    let mut code = String::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("#[cfg(test)]") {
            let item = if rest.trim().is_empty() { lines.next() } else { Some(line) };
            skip_item(item.unwrap_or_default(), &mut lines);
        } else if is_mod && (declared_module(line).is_some() || is_reexport(line)) {
            let mut statement = line;
            while !statement.trim_end().ends_with(';') {
                let Some(next) = lines.next() else { break };
                statement = next;
            }
        } else if !trimmed.starts_with("//") {
            code.push_str(line.split(" // ").next().unwrap_or_default());
            code.push('\n');
        }
    }
    code
}

/// Skips an item that starts at `first`: that line, or up to the brace that closes it.
fn skip_item<'a>(first: &str, lines: &mut impl Iterator<Item = &'a str>) {
    if first.trim_end().ends_with(';') {
        return;
    }
    let indent = &first[..first.len() - first.trim_start().len()];
    for line in lines {
        if line.strip_prefix(indent).is_some_and(|rest| rest.starts_with('}')) {
            return;
        }
    }
}

/// `x` of a `mod x;` line.
fn declared_module(line: &str) -> Option<&str> {
    let line = line.trim();
    let line = line.strip_prefix("#[cfg(test)]").unwrap_or(line).trim_start();
    Some(ident(without_visibility(line).strip_prefix("mod ")?.strip_suffix(';')?))
}

/// A `pub use` (or `pub(crate) use`) line.
fn is_reexport(line: &str) -> bool {
    let line = line.trim();
    let rest = without_visibility(line);
    rest.len() < line.len() && rest.starts_with("use ")
}

/// `line` after its `pub`, `pub(crate)` or `pub(in …)`.
fn without_visibility(line: &str) -> &str {
    match line.strip_prefix("pub(") {
        Some(rest) => rest.split_once(')').map_or(rest, |(_, rest)| rest).trim_start(),
        None => line.strip_prefix("pub ").unwrap_or(line),
    }
}

/// The file of folder `dir` that `name` reaches: the file or child folder named so, the child
/// the folder's `mod.rs` re-exports the name from, or the `mod.rs` (`lib.rs` at the root) that
/// defines it. A glob reaches the `mod.rs` where it defines anything.
fn sibling(dir: &Path, name: &str) -> Option<String> {
    if dir.join(format!("{name}.rs")).is_file() || dir.join(name).is_dir() {
        return Some(name.to_string());
    }
    let own = ["mod.rs", "lib.rs"].into_iter().map(|f| dir.join(f)).find(|f| f.is_file())?;
    let source = std::fs::read_to_string(&own).expect("readable source");
    let own_name = own.file_stem().expect("a file name").to_string_lossy().into_owned();
    let reexported = reexports(&source).into_iter().find(|(_, reexported)| reexported == name);
    match reexported {
        Some((child, _)) => Some(child).filter(|c| dir.join(format!("{c}.rs")).is_file() || dir.join(c).is_dir()),
        None => {
            let defined = definitions(&source);
            (if name == "*" { !defined.is_empty() } else { defined.contains(name) }).then_some(own_name)
        }
    }
}

/// `(child, name)` for every name a `mod.rs` re-exports from a child: `pub use child::{a::B, C}`
/// gives `(child, B)` and `(child, C)`.
fn reexports(source: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        if !is_reexport(line) {
            continue;
        }
        let mut statement = line.trim().to_string();
        while !statement.ends_with(';') {
            let Some(next) = lines.next() else { break };
            statement.push_str(next.trim());
        }
        let used = without_visibility(&statement)["use ".len()..].trim_start();
        for path in expand(used).0 {
            let path = if path.first().is_some_and(|p| p == "self") { &path[1..] } else { &path[..] };
            if let [child, .., name] = path {
                found.push((child.clone(), name.clone()));
            }
        }
    }
    found
}

/// The names a file defines at its top level.
fn definitions(source: &str) -> BTreeSet<&str> {
    const KINDS: &[&str] =
        &["fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "union ", "macro_rules! "];
    /// `fn …` of `const fn …`, `async fn …`, `unsafe fn …`.
    fn unqualified(item: &str) -> Option<&str> {
        ["async ", "const ", "unsafe "]
            .iter()
            .find_map(|qualifier| item.strip_prefix(qualifier))
            .filter(|rest| KINDS.iter().any(|kind| rest.starts_with(kind)))
    }
    source
        .lines()
        .filter_map(|line| {
            let mut item = without_visibility(line);
            while let Some(rest) = unqualified(item) {
                item = rest;
            }
            KINDS.iter().find_map(|kind| item.strip_prefix(kind)).map(ident).filter(|name| !name.is_empty())
        })
        .collect()
}

/// The parts of `graph` whose nodes all reach one another, those of more than one node.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<BTreeSet<String>> {
    let reach: BTreeMap<&String, BTreeSet<&String>> = graph.keys().map(|node| (node, reachable(graph, node))).collect();
    reach
        .iter()
        .map(|(node, reached)| {
            reached
                .iter()
                .filter(|other| reach.get(*other).is_some_and(|back| back.contains(node)))
                .map(|n| (*n).clone())
                .collect::<BTreeSet<String>>()
        })
        .filter(|part| part.len() > 1)
        .collect()
}

/// Every node a path from `from` reaches, `from` itself only when on a circle.
fn reachable<'a>(graph: &'a BTreeMap<String, BTreeSet<String>>, from: &String) -> BTreeSet<&'a String> {
    let mut reached = BTreeSet::new();
    let mut todo: Vec<&String> = graph.get(from).into_iter().flatten().collect();
    while let Some(node) = todo.pop() {
        if reached.insert(node) {
            todo.extend(graph.get(node).into_iter().flatten());
        }
    }
    reached
}

#[test]
fn imports_only_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let violations = upward_imports(&src);
    assert!(violations.is_empty(), "imports that point up:\n{}", violations.join("\n"));
}

#[test]
fn the_check_sees_upward_and_grouped_imports() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("storage/mod.rs", "use crate::catalog::metastore::Metastore;\nuse super::error::SqlError;\n");
    write("catalog/types.rs", "use crate::{error::SqlError, planner::x};\n");
    write("planner/rule.rs", "use super::super::sql::Session;\nfn f() { crate::exec::run(); }\n");
    write("bench.rs", "use crate::server::Server;\n");
    write("ui/access.rs", "use crate::server::auth::Authenticator;\n");
    write("exec/join.rs", "use super::shuffle::Exchange;\nlet not_a_path = my_crate::sql::x;\n");
    assert_eq!(
        upward_imports(dir.path()),
        vec![
            "bench.rs: bench → server",
            "catalog/types.rs: catalog → planner",
            "planner/rule.rs: planner → sql",
            "ui/access.rs: ui → server"
        ]
    );
}

#[test]
fn no_files_use_one_another_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let circles = circles(&src);
    assert!(circles.is_empty(), "files in a circle:\n{}", circles.join("\n"));
}

#[test]
fn the_check_sees_circles_of_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    // Two files.
    write("exec/join.rs", "use super::merge_join;\nfn f() { super::range::numbers(); }\n");
    write("exec/merge_join.rs", "use super::join::{JoinSpec, JoinStrategy};\n");
    // Test code and comments do not count.
    write("exec/range.rs", "// super::join::JoinSpec\n#[cfg(test)]\nmod tests {\n    use super::super::join;\n}\n");
    // Three files, one through a group.
    write("explain/a.rs", "use crate::explain::b::B;\n");
    write("explain/b.rs", "use super::{c::C, mode::Mode};\n");
    write("explain/c.rs", "fn f() -> super::a::A {}\n");
    write("explain/mode.rs", "pub enum Mode {}\n");
    // A folder counts as one file in its parent, whatever file in it uses the other.
    write("exec/one_shot.rs", "use super::sort::SortExec;\n");
    write("exec/sort/mod.rs", "mod sort_exec;\npub use sort_exec::SortExec;\n");
    write("exec/sort/sort_exec.rs", "use crate::exec::one_shot::one_shot_plan;\n");
    // A child using a name its mod.rs re-exports uses the file that defines it, and one using
    // what mod.rs defines uses mod.rs, which only wires its children: no circle.
    write(
        "shuffle/mod.rs",
        "mod exec;\nmod reader;\n\npub use exec::Exec;\npub(crate) use reader::{\n    Spec,\n};\n\npub struct Metrics;\n",
    );
    write("shuffle/reader.rs", "pub enum Spec {}\n");
    write("shuffle/exec.rs", "use super::{Metrics, Spec};\n");
    // A mod.rs whose own code uses a child that uses what the mod.rs defines.
    write("ui/mod.rs", "mod pages;\n\npub(crate) struct UiState;\n\nfn router() { pages::list(); }\n");
    write("ui/pages.rs", "use super::UiState;\n");
    assert_eq!(
        circles(dir.path()),
        vec![
            "exec: join → merge_join, merge_join → join",
            "exec: one_shot → sort, sort → one_shot",
            "explain: a → b, b → c, c → a",
            "ui: mod → pages, pages → mod",
        ]
    );
}

/// The most lines a source file may hold before its tests: past it, a file holds more than one
/// topic and is split by topic.
const MAX_LINES_BEFORE_TESTS: usize = 900;

/// Every source file of `root` with more than [`MAX_LINES_BEFORE_TESTS`] lines before its
/// `#[cfg(test)]` module, as `path: lines`.
fn oversized_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    collect_sources(root, &mut files);
    let mut oversized: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let source = std::fs::read_to_string(file).expect("readable source");
            let lines = source.lines().take_while(|line| line.trim() != "#[cfg(test)]").count();
            (lines > MAX_LINES_BEFORE_TESTS)
                .then(|| format!("{}: {lines}", file.strip_prefix(root).expect("under src").display()))
        })
        .collect();
    oversized.sort();
    oversized
}

#[test]
fn no_source_file_is_over_900_lines_before_its_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let oversized = oversized_files(&src);
    assert!(oversized.is_empty(), "files to split by topic:\n{}", oversized.join("\n"));
}

#[test]
fn the_size_check_counts_lines_before_the_tests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let body = |lines: usize| "fn f() {}\n".repeat(lines);
    std::fs::write(dir.path().join("long.rs"), body(901)).expect("write");
    std::fs::write(dir.path().join("tested.rs"), body(900) + "#[cfg(test)]\nmod tests {}\n" + &body(500))
        .expect("write");
    assert_eq!(oversized_files(dir.path()), vec!["long.rs: 901"]);
}
