//! The README stays a page for users and its Layout section stays true: at most 350 lines,
//! every path the Layout block names exists, every top-level module under `src/` is named
//! there, and every page it links to exists.

use std::path::{Path, PathBuf};

const MAX_README_LINES: usize = 350;

/// The pages the README links to, one for each part of the documentation.
const PAGES: &[&str] = &[
    "docs/sql.md",
    "docs/spark-differences.md",
    "docs/operations.md",
    "docs/architecture.md",
    "docs/reliability.md",
    "bench/README.md",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md is readable")
}

/// The lines of the fenced code block under the `## Layout` heading.
fn layout_block(readme: &str) -> Vec<&str> {
    let section: Vec<&str> = readme
        .lines()
        .skip_while(|line| line.trim_end() != "## Layout")
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .collect();
    let start = section.iter().position(|line| line.starts_with("```")).expect("a code block under `## Layout`");
    section[start + 1..].iter().copied().take_while(|line| !line.starts_with("```")).collect()
}

/// The path each entry of the block names: the first word of every line that does not start
/// with whitespace (indented lines continue the entry above).
fn named_paths<'a>(block: &[&'a str]) -> Vec<&'a str> {
    block
        .iter()
        .copied()
        .filter(|line| !line.starts_with(char::is_whitespace))
        .filter_map(|line| line.split_whitespace().next())
        .collect()
}

/// The targets of the Markdown links in `text` that are paths inside the repository, without
/// their `#anchor`.
fn relative_links(text: &str) -> Vec<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or_default())
        .filter(|target| !target.is_empty() && !target.contains("://"))
        .collect()
}

/// The top-level modules of `src`: `src/x` for each folder and each `.rs` file but `lib.rs`.
fn top_level_modules(src: &Path) -> Vec<String> {
    let mut modules = Vec::new();
    for entry in std::fs::read_dir(src).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let is_module = path.is_dir() || (name.ends_with(".rs") && name != "lib.rs");
        if is_module {
            modules.push(format!("src/{name}"));
        }
    }
    modules.sort();
    modules
}

#[test]
fn the_readme_is_short() {
    let lines = readme().lines().count();
    assert!(lines <= MAX_README_LINES, "README.md has {lines} lines, more than {MAX_README_LINES}");
}

#[test]
fn the_layout_names_only_paths_that_exist() {
    let readme = readme();
    let named = named_paths(&layout_block(&readme));
    assert!(named.iter().any(|path| path.starts_with("src/")), "the Layout block names nothing under src/");
    let missing: Vec<&str> = named.into_iter().filter(|path| !root().join(path).exists()).collect();
    assert!(missing.is_empty(), "README.md's Layout names paths that do not exist: {missing:?}");
}

#[test]
fn the_layout_names_every_top_level_module() {
    let readme = readme();
    let named = named_paths(&layout_block(&readme));
    let unnamed: Vec<String> = top_level_modules(&root().join("src"))
        .into_iter()
        .filter(|module| !named.iter().any(|path| path.trim_end_matches('/') == module.as_str()))
        .collect();
    assert!(unnamed.is_empty(), "README.md's Layout leaves out {unnamed:?}");
}

#[test]
fn the_readme_links_to_every_page_and_each_exists() {
    let readme = readme();
    let links = relative_links(&readme);
    let unlinked: Vec<&str> = PAGES.iter().copied().filter(|page| !links.contains(page)).collect();
    assert!(unlinked.is_empty(), "README.md does not link to {unlinked:?}");
    let broken: Vec<&str> = links.into_iter().filter(|link| !root().join(link).exists()).collect();
    assert!(broken.is_empty(), "README.md links to files that do not exist: {broken:?}");
}

#[test]
fn the_checks_read_the_layout_block_and_links() {
    let text = concat!(
        "# t\n\n## Layout\n\nSee [the map](docs/map.md#files).\n\n",
        "```\nsrc/a/   one\n         more about a\nsrc/b.rs two\n```\n\n",
        "## After\n\n```\nsrc/c/\n```\n",
    );
    assert_eq!(named_paths(&layout_block(text)), vec!["src/a/", "src/b.rs"]);
    assert_eq!(relative_links(text), vec!["docs/map.md"]);
    let links = "[x](docs/a.md) [y](https://e.org/) [z](#here) ![p](docs/p.png)";
    assert_eq!(relative_links(links), vec!["docs/a.md", "docs/p.png"]);
}
