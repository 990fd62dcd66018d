//! The layers of `src/` import only downwards: main/bench/demo → progress/workload → ui →
//! server → credentials → sql → explain → planner → exec → storage → catalog → config → error.
//! An import may skip layers but never point up, and only `main.rs` reaches `server`.

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

/// The first path segments a `crate::…` or `super::…` path reaches, resolved to a top-level
/// module; grouped imports (`crate::{a::x, b}`) give one per group member.
fn referenced_layers(source: &str, module: &[String]) -> Vec<String> {
    let mut layers = Vec::new();
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < source.len() {
        let rest = &source[i..];
        let preceded_by_ident = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if !preceded_by_ident && (rest.starts_with("crate::") || rest.starts_with("super::")) {
            let mut path = rest;
            let from_root = match path.strip_prefix("crate::") {
                Some(after) => {
                    path = after;
                    true
                }
                None => {
                    let mut depth = module.len();
                    while let Some(after) = path.strip_prefix("super::") {
                        depth = depth.saturating_sub(1);
                        path = after;
                    }
                    depth == 0
                }
            };
            if from_root {
                layers.extend(first_segments(path));
            }
            i += rest.len() - path.len();
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    layers
}

/// `planner::x` → `[planner]`; `{planner::x, exec}` → `[planner, exec]`.
fn first_segments(path: &str) -> Vec<String> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let Some(group) = path.strip_prefix('{') else {
        return vec![ident(path)];
    };
    let mut segments = Vec::new();
    let mut nesting = 0;
    let mut start = true;
    for (offset, c) in group.char_indices() {
        match c {
            '{' => nesting += 1,
            '}' if nesting == 0 => break,
            '}' => nesting -= 1,
            ',' if nesting == 0 => start = true,
            c if start && !c.is_whitespace() => {
                segments.push(ident(&group[offset..]));
                start = false;
            }
            _ => {}
        }
    }
    segments
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
