//! The docs describe the layout there is and stay a map a newcomer can read (issue 24):
//! - docs/ARCHITECTURE.md and docs/modules.md: every file or folder their crate sections
//!   name exists in that crate, and every top-level module of each crate is named;
//! - docs/ARCHITECTURE.md is one page (under 1,500 words) and every path it names exists;
//! - README.md is a front door (under 300 lines) that starts with the two commands;
//! - every subcommand the CLI has has its page in docs/commands/, and no page is left over;
//! - every decision file in docs/decisions/ is listed in its index, and every listed one exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

const DOC: &str = include_str!("../docs/ARCHITECTURE.md");
const MODULES: &str = include_str!("../docs/modules.md");
const README: &str = include_str!("../README.md");

const CRATE_SRCS: [&str; 6] = [
    "src/",
    "format/src/",
    "report/src/",
    "engines/src/",
    "collectors/src/",
    "charts/src/",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The text of the section headed `### `{name}`` (up to the next heading).
fn section<'a>(doc: &'a str, page: &str, name: &str) -> &'a str {
    let head = format!("### `{name}`");
    let start = doc
        .find(&head)
        .unwrap_or_else(|| panic!("{page} has no section {head}"));
    let rest = &doc[start + head.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    &rest[..end]
}

/// Backticked names that look like a source file or folder: `x.rs`, `a/b.rs`, `dir/`.
fn named_paths(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            (t.ends_with(".rs") || t.ends_with('/'))
                && t.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_./".contains(c))
        })
        .map(str::to_string)
        .collect()
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push(p.clone());
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn check_crate(doc: &str, page: &str, section_name: &str, src: &str) -> Vec<String> {
    let root = root().join(src);
    let mut files = vec![];
    all_files(&root, &mut files);
    let rel: Vec<String> = files
        .iter()
        .map(|p| {
            let r = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if p.is_dir() {
                format!("{r}/")
            } else {
                r
            }
        })
        .collect();
    let named = named_paths(section(doc, page, section_name));
    let mut problems = vec![];
    for n in &named {
        // A name is a path from the crate's src/ or from a module folder in it.
        if !rel.iter().any(|r| r == n || r.ends_with(&format!("/{n}"))) {
            problems.push(format!(
                "{page} names `{n}` under `{section_name}`, not in {src}"
            ));
        }
    }
    for top in std::fs::read_dir(&root).unwrap() {
        let p = top.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let name = if p.is_dir() { format!("{name}/") } else { name };
        if name == "lib.rs" && !["charts/", "report/"].contains(&section_name) {
            continue;
        }
        if !named.contains(&name) {
            problems.push(format!(
                "{src}{name} is not named in {page}'s `{section_name}` section"
            ));
        }
    }
    problems
}

fn check_layout(doc: &str, page: &str) -> Vec<String> {
    let mut problems = check_crate(doc, page, "src/", "src/");
    for (section_name, src) in [
        ("format/", "format/src/"),
        ("report/", "report/src/"),
        ("engines/", "engines/src/"),
        ("collectors/", "collectors/src/"),
        ("charts/", "charts/src/"),
    ] {
        problems.extend(check_crate(doc, page, section_name, src));
    }
    problems
}

#[test]
fn the_architecture_page_names_the_layout_there_is() {
    let problems = check_layout(DOC, "ARCHITECTURE.md");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_modules_page_names_the_layout_there_is() {
    let problems = check_layout(MODULES, "modules.md");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_name_that_is_not_there_is_caught() {
    let named = named_paths("| `nowhere.rs` | x |");
    assert!(named.contains("nowhere.rs"));
    let root = root().join("src");
    let mut files = vec![];
    all_files(&root, &mut files);
    assert!(!files.iter().any(|p| p.ends_with("nowhere.rs")));
}

#[test]
fn the_architecture_page_is_one_page_under_1500_words() {
    let words = DOC.split_whitespace().count();
    assert!(words < 1500, "docs/ARCHITECTURE.md has {words} words");
}

/// Every path a page names: backticked source paths (`a/b.rs`, `dir/`, `scripts/setup`),
/// repository paths written out (`tests/layers.rs`) and the targets of its links, which
/// are relative to `dir` (the page's folder). A path names a file from the repository's
/// root, from a crate's src/ or (in a crate section) from a module folder in it.
fn missing_paths(text: &str, dir: &Path) -> Vec<String> {
    let looks_like_path = |t: &str| {
        !t.is_empty()
            && !t.starts_with('/')
            && !t.starts_with('.')
            && t.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_./-".contains(c))
            && (t.ends_with(".rs")
                || t.ends_with(".md")
                || t.ends_with(".toml")
                || (t.contains('/') && !t.contains("//")))
    };
    let mut names: BTreeSet<String> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| looks_like_path(t))
        .map(str::to_string)
        .collect();
    // Paths written out in the prose, `tests/layers.rs` without backticks.
    for word in text.split(|c: char| c.is_whitespace() || "(),;:`[]".contains(c)) {
        if word.contains('/') && word.ends_with(".rs") && looks_like_path(word) {
            names.insert(word.to_string());
        }
    }
    let mut crate_files = vec![];
    for src in CRATE_SRCS {
        all_files(&root().join(src), &mut crate_files);
    }
    let exists = |n: &str| {
        let n_trim = n.trim_end_matches('/');
        root().join(n_trim).exists()
            || CRATE_SRCS
                .iter()
                .any(|src| root().join(src).join(n_trim).exists())
            || crate_files
                .iter()
                .any(|p| p.to_string_lossy().ends_with(&format!("/{n_trim}")))
    };
    let mut problems: Vec<String> = names
        .iter()
        .filter(|n| !exists(n))
        .map(|n| format!("names `{n}`, which is not in the repository"))
        .collect();
    // Link targets: `](target)`, relative to the page.
    for part in text.split("](").skip(1) {
        let target = part.split(')').next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") {
            continue;
        }
        if !dir.join(target).exists() {
            problems.push(format!("links to `{target}`, which does not exist"));
        }
    }
    problems
}

#[test]
fn every_path_the_architecture_page_names_exists() {
    let problems = missing_paths(DOC, &root().join("docs"));
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_path_that_is_not_there_is_caught() {
    let docs = root().join("docs");
    let p = missing_paths("see `engines/src/nowhere.rs` and tests/nowhere.rs", &docs);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(!missing_paths("[x](nowhere.md)", &docs).is_empty());
    assert!(missing_paths("`engines/src/load/record.rs`, [x](files.md)", &docs).is_empty());
}

#[test]
fn the_readme_is_a_front_door_that_starts_with_the_two_commands() {
    let lines = README.lines().count();
    assert!(lines < 300, "README.md has {lines} lines");
    // The first code block, near the top, holds the two commands exactly.
    let start = README.find("```sh\n").expect("README.md has a sh block");
    assert!(
        README[..start].lines().count() < 12,
        "the first code block comes after the opening paragraph"
    );
    let block = &README[start + 6..];
    let block = &block[..block.find("```").expect("the sh block ends")];
    let cmds: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert_eq!(cmds[0], "scripts/setup && cargo run --release -- demo");
    assert!(cmds[1].starts_with(".ci/run "), "{}", cmds[1]);
}

/// The subcommands the CLI has (clap's definitions, as `diskpulse --help` lists them).
fn subcommands() -> BTreeSet<String> {
    diskpulse::commands::Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect()
}

#[test]
fn every_subcommand_has_its_page() {
    let dir = root().join("docs/commands");
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let subs = subcommands();
    assert!(subs.len() >= 15, "{subs:?}");
    let mut problems = vec![];
    for s in &subs {
        let page = dir.join(format!("{s}.md"));
        match std::fs::read_to_string(&page) {
            Ok(text) if text.starts_with(&format!("# `diskpulse {s}")) => {}
            Ok(text) => problems.push(format!(
                "docs/commands/{s}.md does not open with \"# `diskpulse {s}\": {:?}",
                text.lines().next()
            )),
            Err(e) => problems.push(format!("no docs/commands/{s}.md: {e}")),
        }
        if !index.contains(&format!("]({s}.md)")) {
            problems.push(format!("docs/commands/README.md does not link {s}.md"));
        }
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        if stem != "README" && !subs.contains(stem) {
            problems.push(format!("docs/commands/{name} is no subcommand of the CLI"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_decision_is_in_the_index() {
    let dir = root().join("docs/decisions");
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    files.sort();
    assert!(files.len() >= 80, "{} decision files", files.len());
    let mut problems = vec![];
    for (i, f) in files.iter().enumerate() {
        // NNNN-slug.md, numbered from 0001 without a gap.
        if !f.starts_with(&format!("{:04}-", i + 1)) || !f.ends_with(".md") {
            problems.push(format!(
                "{f}: not NNNN-slug.md in sequence (want {:04})",
                i + 1
            ));
        }
        if !index.contains(&format!("]({f})")) {
            problems.push(format!("{f} is not listed in docs/decisions/README.md"));
        }
    }
    for part in index.split("](").skip(1) {
        let target = part.split(')').next().unwrap_or("");
        if !dir.join(target).exists() {
            problems.push(format!("the index lists {target}, which does not exist"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
