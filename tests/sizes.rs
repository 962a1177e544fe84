//! Sizes with reasons (docs/ARCHITECTURE.md, "Sizes"): no function over 150 lines and no
//! source file over 800 without a sentence saying why, and the code formatted as
//! rustfmt.toml says. clippy's `too_many_lines` (on for the workspace, threshold in
//! clippy.toml) says the same to whoever runs clippy; this test says it to `cargo test`,
//! so CI (`.ci/run` runs the README's test command) fails on it.
//!
//! A function's lines are counted much as clippy counts them: from its signature to its
//! closing brace, leaving out blank lines and lines that are only a comment (clippy also
//! leaves out a few more, so it may find a function short that this finds long: the
//! reason is an `allow`, not an `expect`, which clippy would call unfulfilled). A long
//! function carries `#[allow(clippy::too_many_lines, reason = "...")]`; a test file may
//! say it once at its top (`#![allow(...)]`: a test reads as one story); a long file says
//! why in its `//!` header, in a paragraph that starts "Long because".

mod common;

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

const MAX_FN_LINES: usize = 150;
const MAX_FILE_LINES: usize = 800;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every Rust file of the workspace: the crates' sources, tests and benches.
fn sources() -> Vec<PathBuf> {
    let mut files = vec![];
    for dir in [
        "src",
        "tests",
        "benches",
        "collectors/src",
        "charts/src",
        "format/src",
        "report/src",
        "engines/src",
    ] {
        let d = root().join(dir);
        if d.is_dir() {
            rs_files(&d, &mut files);
        }
    }
    files.sort();
    files
}

/// Lines from `first` to `last` (1-based, inclusive) that are neither blank nor only a
/// comment.
fn code_lines(lines: &[&str], first: usize, last: usize) -> usize {
    let mut in_block = false;
    let mut n = 0;
    for l in &lines[first - 1..last.min(lines.len())] {
        let t = l.trim();
        if in_block {
            if t.contains("*/") {
                in_block = false;
            }
            continue;
        }
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        if t.starts_with("/*") {
            in_block = !t.contains("*/");
            continue;
        }
        n += 1;
    }
    n
}

fn says_long(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("expect") || a.path().is_ident("allow"))
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().contains("too_many_lines"))
    })
}

struct Long<'a> {
    lines: &'a [&'a str],
    file_allows: bool,
    found: Vec<(String, usize, usize)>,
}

impl Long<'_> {
    fn check(&mut self, name: String, attrs: &[syn::Attribute], span: proc_macro2::Span) {
        let (a, b) = (span.start().line, span.end().line);
        // The signature's first line: after the attributes and doc comments.
        let n = code_lines(self.lines, a, b)
            - attrs
                .iter()
                .map(|at| code_lines(self.lines, at.span().start().line, at.span().end().line))
                .sum::<usize>()
                .min(code_lines(self.lines, a, b));
        if n > MAX_FN_LINES && !says_long(attrs) && !self.file_allows {
            self.found.push((name, a, n));
        }
    }
}

impl<'ast> Visit<'ast> for Long<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(f.sig.ident.to_string(), &f.attrs, f.span());
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(f.sig.ident.to_string(), &f.attrs, f.span());
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.check(f.sig.ident.to_string(), &f.attrs, f.span());
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// Every function over the limit without a reason, as `file:line name (n lines)`.
fn long_functions(path: &Path, text: &str) -> Vec<String> {
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    let mut v = Long {
        lines: &lines,
        file_allows: says_long(&file.attrs),
        found: vec![],
    };
    v.visit_file(&file);
    v.found
        .into_iter()
        .map(|(name, line, n)| format!("{}:{line} {name} ({n} lines)", path.display()))
        .collect()
}

#[test]
fn no_function_is_over_150_lines_without_a_reason() {
    let mut bad = vec![];
    for f in sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let rel = f.strip_prefix(root()).unwrap();
        bad.extend(long_functions(rel, &text));
    }
    assert!(
        bad.is_empty(),
        "functions over {MAX_FN_LINES} lines without \
         #[allow(clippy::too_many_lines, reason = \"...\")]:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_counter_counts_code_lines_and_honours_a_reason() {
    let body: String = (0..151)
        .map(|i| format!("    let _x{i} = {i};\n"))
        .collect();
    let long = format!("fn f() {{\n{body}}}\n");
    assert_eq!(long_functions(Path::new("x.rs"), &long).len(), 1);
    // Comments and blank lines are not code.
    let commented: String = (0..151).map(|_| "    // a word\n\n").collect();
    let short = format!("fn f() {{\n{commented}    let _x = 1;\n}}\n");
    assert!(long_functions(Path::new("x.rs"), &short).is_empty());
    let excused = format!("#[allow(clippy::too_many_lines, reason = \"one table\")]\n{long}");
    assert!(long_functions(Path::new("x.rs"), &excused).is_empty());
    // Inside an impl too.
    let method = format!("struct S;\nimpl S {{\n{long}}}\n");
    assert_eq!(long_functions(Path::new("x.rs"), &method).len(), 1);
}

/// The `//!` header of a file, as one string.
fn header(text: &str) -> String {
    text.lines()
        .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_source_file_is_over_800_lines_without_saying_why() {
    let mut bad = vec![];
    for f in sources() {
        let rel = f.strip_prefix(root()).unwrap().to_path_buf();
        if rel.starts_with("tests") || rel.starts_with("benches") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let n = text.lines().count();
        if n > MAX_FILE_LINES && !header(&text).contains("Long because") {
            bad.push(format!("{} ({n} lines)", rel.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "files over {MAX_FILE_LINES} lines whose //! header has no \"Long because ...\":\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_code_is_formatted_as_rustfmt_toml_says() {
    let toml = std::fs::read_to_string(root().join("rustfmt.toml")).unwrap();
    assert!(toml.contains("max_width = 100"), "{toml}");
    let clippy = std::fs::read_to_string(root().join("clippy.toml")).unwrap();
    assert!(
        clippy.contains(&format!("too-many-lines-threshold = {MAX_FN_LINES}")),
        "{clippy}"
    );
    let out = std::process::Command::new(env!("CARGO"))
        .args(["fmt", "--all", "--", "--check"])
        .current_dir(root())
        .output()
        .unwrap();
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not installed") {
        common::skip("rustfmt is not installed (rustup component add rustfmt)");
        return;
    }
    assert!(
        out.status.success(),
        "cargo fmt --check: run `cargo fmt --all`:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
