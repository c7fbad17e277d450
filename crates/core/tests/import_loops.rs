//! No file of any crate in this repository depends, through a chain of
//! `crate::…`, `super::…`, `self::…` or child-module paths, on itself: a
//! file-level import loop means two files that can only be understood (and
//! changed) together, so the test fails on the first one and names its files.
//!
//! The check reads the sources, not the compiler: each crate root (`lib.rs`,
//! `main.rs`, `src/bin/*.rs`) and the files its `mod x;` lines reach form one
//! module tree; every path a file names is resolved to the deepest module of
//! that tree it reaches, and that module's file is an edge. Comments, string
//! literals and `#[cfg(test)]` modules are left out (a test module's
//! `use super::*` is not a dependency of the code). Loops are the strongly
//! connected components of more than one file.
//!
//! Run `cargo test -p pcmail-core --test import_loops -- --nocapture` to
//! print the loops found (and the count of files and edges read); with
//! `PCMAIL_LOOP_EDGES=1`, each loop's edges as well.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// The `src` folder of every crate: `crates/*`, `hook-cli`, `src-tauri`.
fn crate_src_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.join("crates")) {
        for e in rd.flatten() {
            out.push(e.path().join("src"));
        }
    }
    out.push(root.join("hook-cli/src"));
    out.push(root.join("src-tauri/src"));
    out.retain(|p| p.is_dir());
    out.sort();
    out
}

/// The crate roots in one `src` folder.
fn crate_roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).filter(|p| p.is_file()).collect();
    if let Ok(rd) = std::fs::read_dir(src.join("bin")) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "rs") {
                roots.push(p);
            } else if p.join("main.rs").is_file() {
                roots.push(p.join("main.rs"));
            }
        }
    }
    roots.sort();
    roots
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sep, // ::
    Punct(char),
}

/// Tokens of Rust source with comments and literals dropped.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 1;
            i += 2;
            while i < c.len() && depth > 0 {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (ch == 'r' || ch == 'b')
            && !out.last().is_some_and(|t| matches!(t, Tok::Ident(_)))
            && raw_string_start(&c, i).is_some()
        {
            let (hashes, body) = raw_string_start(&c, i).unwrap();
            i = body;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if ch == '\'' {
            // A char literal ('a', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::Sep);
            i += 2;
        } else if ch.is_whitespace() || ch.is_ascii_digit() {
            i += 1;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, `br"`…: the number of `#` and where the body starts.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

/// Drops `#[cfg(test)] mod name { … }` blocks.
fn without_test_modules(t: Vec<Tok>) -> Vec<Tok> {
    let ident = |k: usize, s: &str| matches!(t.get(k), Some(Tok::Ident(x)) if x == s);
    let punct = |k: usize, p: char| t.get(k) == Some(&Tok::Punct(p));
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        // # [ cfg ( test ) ]
        if punct(i, '#') && punct(i + 1, '[') && ident(i + 2, "cfg") && punct(i + 3, '(') && ident(i + 4, "test") {
            let mut j = i + 5;
            while j < t.len() && !punct(j, ']') {
                j += 1;
            }
            j += 1;
            if ident(j, "pub") {
                j += 1;
            }
            if ident(j, "mod") && matches!(t.get(j + 1), Some(Tok::Ident(_))) && punct(j + 2, '{') {
                let mut depth = 0;
                let mut k = j + 2;
                while k < t.len() {
                    if punct(k, '{') {
                        depth += 1;
                    } else if punct(k, '}') {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    k += 1;
                }
                i = k + 1;
                continue;
            }
        }
        out.push(t[i].clone());
        i += 1;
    }
    out
}

/// `mod name;` declarations (file modules; inline `mod name { }` are not files).
fn file_mod_decls(t: &[Tok]) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..t.len().saturating_sub(2) {
        if let (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) = (&t[i], &t[i + 1], &t[i + 2]) {
            if m == "mod" {
                out.push(name.clone());
            }
        }
    }
    out
}

struct ModFile {
    path: PathBuf,
    module: Vec<String>,
    toks: Vec<Tok>,
    children: Vec<String>,
}

fn collect_tree(root: &Path) -> Vec<ModFile> {
    let mut out = Vec::new();
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = todo.pop() {
        let Ok(src) = std::fs::read_to_string(&path) else { continue };
        let all = tokens(&src);
        // `#[cfg(test)] mod tests;` files are reached too: they are files of the tree.
        let children = file_mod_decls(&all);
        let toks = without_test_modules(all);
        let fname = path.file_name().unwrap().to_string_lossy().to_string();
        let dir = if module.is_empty() || fname == "mod.rs" {
            path.parent().unwrap().to_path_buf()
        } else {
            path.parent().unwrap().join(path.file_stem().unwrap())
        };
        for ch in &children {
            let a = dir.join(format!("{ch}.rs"));
            let b = dir.join(ch).join("mod.rs");
            let child = if a.is_file() { a } else { b };
            let mut m = module.clone();
            m.push(ch.clone());
            todo.push((child, m));
        }
        out.push(ModFile { path, module, toks, children });
    }
    out
}

/// Every module path a file names, as absolute segment lists. Inside an
/// inline `mod name { … }`, `self` and `super` count from that module.
fn referenced_paths(f: &ModFile) -> Vec<Vec<String>> {
    let t = &f.toks;
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(m) if m == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct('{'))) = (t.get(i + 1), t.get(i + 2)) {
                    inline.push((name.clone(), depth));
                }
            }
            _ => {}
        }
        let here: Vec<String> = f.module.iter().cloned().chain(inline.iter().map(|(n, _)| n.clone())).collect();
        let prev_sep = i > 0 && t[i - 1] == Tok::Sep;
        if let (Tok::Ident(first), Some(Tok::Sep)) = (&t[i], t.get(i + 1)) {
            if !prev_sep {
                let base: Option<Vec<String>> = match first.as_str() {
                    "crate" => Some(vec![]),
                    "self" => Some(here.clone()),
                    "super" => Some(here[..here.len().saturating_sub(1)].to_vec()),
                    name if inline.is_empty() && f.children.iter().any(|c| c == name) => {
                        let mut m = f.module.clone();
                        m.push(name.to_string());
                        Some(m)
                    }
                    _ => None,
                };
                if let Some(base) = base {
                    let mut j = i + 2;
                    parse_tree(t, &mut j, base, &mut out);
                    i = j;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// After a `::`: `ident(::ident)*`, `{tree, tree}`, `*`, `super`.
fn parse_tree(t: &[Tok], j: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    loop {
        match t.get(*j) {
            Some(Tok::Ident(s)) if s == "super" => {
                prefix.pop();
                *j += 1;
            }
            Some(Tok::Ident(s)) if s == "self" => {
                *j += 1;
            }
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                *j += 1;
            }
            Some(Tok::Punct('{')) => {
                *j += 1;
                loop {
                    match t.get(*j) {
                        None => return,
                        Some(Tok::Punct('}')) => {
                            *j += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *j += 1,
                        _ => {
                            let before = *j;
                            parse_tree(t, j, prefix.clone(), out);
                            // `as name` and the like: skip to the next `,` or `}`.
                            while let Some(tok) = t.get(*j) {
                                if matches!(tok, Tok::Punct(',') | Tok::Punct('}')) {
                                    break;
                                }
                                *j += 1;
                            }
                            if *j == before {
                                *j += 1;
                            }
                        }
                    }
                }
            }
            _ => {
                out.push(prefix);
                return;
            }
        }
        if t.get(*j) == Some(&Tok::Sep) {
            *j += 1;
        } else {
            out.push(prefix);
            return;
        }
    }
}

/// Strongly connected components (Tarjan), of more than one node.
fn loops(n: usize, edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct S<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut S<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in s.edges[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s =
        S { edges, index: vec![None; n], low: vec![0; n], on: vec![false; n], stack: vec![], next: 0, out: vec![] };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The loops of one crate root, each as the files in it (relative to the repo).
fn loops_of(root_file: &Path, repo: &Path) -> (Vec<Vec<String>>, usize) {
    let files = collect_tree(root_file);
    let by_module: BTreeMap<Vec<String>, usize> =
        files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
    let mut edges = vec![BTreeSet::new(); files.len()];
    for (i, f) in files.iter().enumerate() {
        for p in referenced_paths(f) {
            // The deepest module of the tree the path reaches.
            let target = (0..=p.len()).rev().find_map(|k| by_module.get(&p[..k]));
            if let Some(&t) = target {
                if t != i {
                    edges[i].insert(t);
                }
            }
        }
    }
    let n_edges = edges.iter().map(BTreeSet::len).sum();
    let rel = |i: usize| files[i].path.strip_prefix(repo).unwrap_or(&files[i].path).display().to_string();
    // PCMAIL_LOOP_EDGES=1: each loop's edges too, to see which import to move.
    if std::env::var_os("PCMAIL_LOOP_EDGES").is_some() {
        for comp in loops(files.len(), &edges) {
            for &a in &comp {
                for &b in edges[a].iter().filter(|b| comp.contains(b)) {
                    eprintln!("  edge {} -> {}", rel(a), rel(b));
                }
            }
        }
    }
    let mut out: Vec<Vec<String>> = loops(files.len(), &edges)
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(rel).collect();
            names.sort();
            names
        })
        .collect();
    out.sort();
    (out, n_edges)
}

/// Loops that are known and still to be cut, each as its files (sorted,
/// space-separated). A loop not listed fails the test, and so does a listed
/// one that is gone (take it off the list).
const KNOWN_LOOPS: &[&str] = &[
    "crates/bench/src/cluster.rs crates/bench/src/jobs.rs crates/bench/src/main.rs",
    "crates/bench-pc/src/handoffs.rs crates/bench-pc/src/jobs.rs crates/bench-pc/src/main.rs",
    "crates/codemap/src/lib.rs crates/codemap/src/walk.rs",
    "crates/service/src/lib.rs crates/service/src/manager.rs crates/service/src/render.rs crates/service/src/rule.rs",
    "crates/store/src/codemap.rs crates/store/src/inbox.rs crates/store/src/lib.rs crates/store/src/marks.rs crates/store/src/outbox.rs crates/store/src/schema.rs crates/store/src/sent.rs crates/store/src/timeline.rs",
    "src-tauri/src/commands.rs src-tauri/src/main.rs",
    "src-tauri/src/shell.rs src-tauri/src/state.rs",
];

#[test]
fn no_file_depends_on_itself_through_its_imports() {
    let repo = repo_root();
    let mut found = Vec::new();
    let (mut roots, mut edges) = (0, 0);
    for src in crate_src_dirs(&repo) {
        for root in crate_roots(&src) {
            roots += 1;
            let (l, e) = loops_of(&root, &repo);
            edges += e;
            found.extend(l);
        }
    }
    eprintln!("{roots} crate roots, {edges} file-to-file edges, {} loops", found.len());
    for l in &found {
        eprintln!("loop of {} files: {}", l.len(), l.join(" "));
    }
    assert!(roots > 10 && edges > 100, "the sources were read: {roots} roots, {edges} edges");
    let found: Vec<String> = found.iter().map(|l| l.join(" ")).collect();
    let new: Vec<&String> = found.iter().filter(|l| !KNOWN_LOOPS.contains(&l.as_str())).collect();
    let gone: Vec<&&str> = KNOWN_LOOPS.iter().filter(|k| !found.iter().any(|l| l == *k)).collect();
    assert!(
        new.is_empty(),
        "{} file-level import loops (move the type or constant both sides need into a module of its own):\n  {}",
        new.len(),
        new.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n  ")
    );
    assert!(gone.is_empty(), "these loops are gone: take them off KNOWN_LOOPS:\n  {gone:?}");
}

#[test]
fn the_checker_sees_a_loop_through_super_and_a_group_import() {
    let dir = tempfile_dir();
    std::fs::create_dir_all(dir.join("src/ops")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "mod engine;\nmod ops;\n// crate::ops in a comment\n").unwrap();
    std::fs::write(
        dir.join("src/engine.rs"),
        "use crate::{ops::{self, dispatch}};\nfn f() { let _ = \"crate::x\"; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/ops/mod.rs"),
        "mod send;\npub fn dispatch() { send::send() }\nmod inner { use super::dispatch; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/ops/send.rs"),
        "use super::super::engine::Ctx;\n#[cfg(test)]\nmod tests { use crate::ops::dispatch; }\n",
    )
    .unwrap();
    let (l, _) = loops_of(&dir.join("src/lib.rs"), &dir);
    assert_eq!(l, vec![vec!["src/engine.rs".to_string(), "src/ops/mod.rs".into(), "src/ops/send.rs".into()]]);
    // Cut the edge back to engine: no loop.
    std::fs::write(dir.join("src/ops/send.rs"), "pub fn send() {}\n").unwrap();
    assert!(loops_of(&dir.join("src/lib.rs"), &dir).0.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("pcmail-import-loops-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
