//! tree-sitter parsing: a file's text to its top-level items, per language.

use crate::model::{FileEntry, Item, Lang};
use tree_sitter::{Language, Node, Parser};

const SIG_MAX: usize = 200;
const DOC_MAX: usize = 160;

/// One parser per language, made on first use (a worker thread owns one set).
#[derive(Default)]
pub struct Parsers {
    parsers: Vec<(Lang, Parser)>,
}

/// The tree-sitter grammar of a language (public so a benchmark can time
/// parsing alone against a whole run).
pub fn language(lang: Lang) -> Language {
    match lang {
        Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
        Lang::Python => tree_sitter_python::LANGUAGE.into(),
        Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
        Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
        Lang::Go => tree_sitter_go::LANGUAGE.into(),
    }
}

impl Parsers {
    fn get(&mut self, lang: Lang) -> Result<&mut Parser, String> {
        if let Some(i) = self.parsers.iter().position(|(l, _)| *l == lang) {
            return Ok(&mut self.parsers[i].1);
        }
        let mut p = Parser::new();
        p.set_language(&language(lang)).map_err(|e| format!("grammar not loadable: {e}"))?;
        self.parsers.push((lang, p));
        Ok(&mut self.parsers.last_mut().expect("just pushed").1)
    }

    /// Parses `bytes` as `lang`. Never fails: a problem becomes the entry's error.
    pub fn extract(&mut self, lang: Lang, bytes: &[u8]) -> FileEntry {
        let Ok(src) = std::str::from_utf8(bytes) else {
            return FileEntry::failed(lang, "not valid UTF-8 text");
        };
        let parser = match self.get(lang) {
            Ok(p) => p,
            Err(e) => return FileEntry::failed(lang, e),
        };
        let Some(tree) = parser.parse(src, None) else {
            return FileEntry::failed(lang, "the parser gave up");
        };
        let root = tree.root_node();
        let mut entry = FileEntry { lang, doc: None, items: vec![], error: None, binary: false };
        let s = Src(src);
        match lang {
            Lang::Rust => {
                entry.doc = rust_file_doc(root, s);
                rust_items(root, s, &mut entry.items);
            }
            Lang::Python => {
                entry.doc = root
                    .named_children(&mut root.walk())
                    .find(|n| n.kind() != "comment")
                    .and_then(|n| py_string_doc(n, s));
                py_items(root, s, &mut entry.items, 0);
            }
            Lang::TypeScript | Lang::Tsx | Lang::JavaScript => {
                entry.doc = js_file_doc(root, s);
                js_items(root, s, &mut entry.items);
            }
            Lang::Go => go_items(root, s, &mut entry),
        }
        if root.has_error() {
            entry.error = Some(error_reason(root, s));
        }
        entry
    }
}

#[derive(Clone, Copy)]
struct Src<'a>(&'a str);

impl<'a> Src<'a> {
    fn text(self, n: Node) -> &'a str {
        &self.0[n.byte_range()]
    }
    fn range(self, a: usize, b: usize) -> &'a str {
        &self.0[a..b.max(a)]
    }
    fn field(self, n: Node, f: &str) -> Option<&'a str> {
        n.child_by_field_name(f).map(|c| self.text(c))
    }
}

/// Whitespace collapsed to single spaces, capped with an ellipsis.
fn collapse(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 4));
    for (i, w) in s.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(w);
    }
    // Multi-line parameter lists: `( a, b, )` reads as `(a, b)`.
    if out.contains("( ") || out.contains(" )") || out.contains(",)") {
        out = out.replace("( ", "(").replace(" )", ")").replace(",)", ")");
    }
    cap(out, max)
}

fn cap(s: String, max: usize) -> String {
    if s.chars().count() <= max {
        return s;
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t = t.trim_end().to_string();
    t.push('…');
    t
}

/// Source from `start` to the start of the node's body (or its end), without a
/// trailing `;`, `:`, `=` or `=>`.
fn sig_upto(s: Src, start: usize, n: Node, body_field: &str) -> String {
    let end = n.child_by_field_name(body_field).map(|b| b.start_byte()).unwrap_or(n.end_byte());
    let mut t = s.range(start, end).trim_end();
    loop {
        let before = t;
        for suffix in ["=>", ";", ":", "="] {
            t = t.strip_suffix(suffix).unwrap_or(t).trim_end();
        }
        if t == before {
            break;
        }
    }
    collapse(t, SIG_MAX)
}

fn item(kind: &str, name: &str, sig: String, doc: Option<String>) -> Item {
    Item { kind: kind.into(), name: collapse(name, 80), sig, doc, children: vec![] }
}

/// The first non-empty line of comment text, markers stripped.
fn first_doc_line<'a>(lines: impl Iterator<Item = &'a str>) -> Option<String> {
    for l in lines {
        let t = l.trim().trim_start_matches('*').trim();
        if !t.is_empty() {
            return Some(collapse(t, DOC_MAX));
        }
    }
    None
}

/// `/** … */` or `/*! … */` body lines.
fn block_comment_lines(text: &str) -> impl Iterator<Item = &str> {
    let inner = text.get(3..).unwrap_or("");
    let inner = inner.strip_suffix("*/").unwrap_or(inner);
    inner.lines()
}

fn error_reason(root: Node, s: Src) -> String {
    fn find(n: Node) -> Option<Node> {
        if n.is_error() || n.is_missing() {
            return Some(n);
        }
        let mut c = n.walk();
        for child in n.children(&mut c) {
            if child.has_error() || child.is_missing() {
                if let Some(e) = find(child) {
                    return Some(e);
                }
            }
        }
        None
    }
    let Some(e) = find(root) else { return "syntax error".into() };
    let p = e.start_position();
    if e.is_missing() {
        return format!("syntax error at line {}, column {}: missing `{}`", p.row + 1, p.column + 1, e.kind());
    }
    let near: String = s.text(e).lines().next().unwrap_or("").trim().chars().take(30).collect();
    if near.is_empty() {
        format!("syntax error at line {}, column {}", p.row + 1, p.column + 1)
    } else {
        format!("syntax error at line {}, column {} near `{}`", p.row + 1, p.column + 1, near.replace('`', "'"))
    }
}

// ---------------------------------------------------------------- Rust

fn rust_doc_kind(text: &str) -> Option<bool> {
    // Some(true): outer doc (`///`, `/**`), Some(false): inner (`//!`, `/*!`).
    let outer_line = text.starts_with("///") && !text.starts_with("////");
    let outer_block = text.starts_with("/**") && !text.starts_with("/***") && !text.starts_with("/**/");
    if outer_line || outer_block {
        Some(true)
    } else if text.starts_with("//!") || text.starts_with("/*!") {
        Some(false)
    } else {
        None
    }
}

fn rust_comment_first_line(text: &str) -> Option<String> {
    if text.starts_with("//") {
        first_doc_line(std::iter::once(&text[3..]))
    } else {
        first_doc_line(block_comment_lines(text))
    }
}

/// The outer doc comments right above `n` (attributes may sit in between).
fn rust_doc(n: Node, s: Src) -> Option<String> {
    let mut docs = vec![];
    let mut cur = n.prev_named_sibling();
    while let Some(p) = cur {
        match p.kind() {
            "attribute_item" => {}
            "line_comment" | "block_comment" if rust_doc_kind(s.text(p)) == Some(true) => docs.push(p),
            _ => break,
        }
        cur = p.prev_named_sibling();
    }
    docs.iter().rev().find_map(|d| rust_comment_first_line(s.text(*d)))
}

fn rust_file_doc(root: Node, s: Src) -> Option<String> {
    let mut c = root.walk();
    for n in root.named_children(&mut c) {
        match n.kind() {
            "line_comment" | "block_comment" => {
                if rust_doc_kind(s.text(n)) == Some(false) {
                    if let Some(l) = rust_comment_first_line(s.text(n)) {
                        return Some(l);
                    }
                }
            }
            "inner_attribute_item" => {}
            _ => return None,
        }
    }
    None
}

fn rust_is_cfg_test(n: Node, s: Src) -> bool {
    let mut cur = n.prev_named_sibling();
    while let Some(p) = cur {
        match p.kind() {
            "attribute_item" if s.text(p).replace(' ', "").contains("cfg(test)") => return true,
            "attribute_item" | "line_comment" | "block_comment" => {}
            _ => return false,
        }
        cur = p.prev_named_sibling();
    }
    false
}

fn rust_items(parent: Node, s: Src, out: &mut Vec<Item>) {
    let mut c = parent.walk();
    for n in parent.named_children(&mut c) {
        let kind = match n.kind() {
            "function_item" | "function_signature_item" => "fn",
            "struct_item" => "struct",
            "enum_item" => "enum",
            "union_item" => "union",
            "trait_item" => "trait",
            "impl_item" => "impl",
            "mod_item" => "mod",
            "type_item" | "associated_type" => "type",
            "const_item" => "const",
            "static_item" => "static",
            "macro_definition" => "macro",
            _ => continue,
        };
        if kind == "mod" && rust_is_cfg_test(n, s) {
            continue;
        }
        let sig = match kind {
            "const" | "static" => sig_upto(s, n.start_byte(), n, "value"),
            "macro" => format!("macro_rules! {}", s.field(n, "name").unwrap_or("?")),
            "type" => sig_upto(s, n.start_byte(), n, "-"),
            _ => sig_upto(s, n.start_byte(), n, "body"),
        };
        let name = if kind == "impl" {
            let ty = s.field(n, "type").unwrap_or("?");
            match s.field(n, "trait") {
                Some(t) => format!("{t} for {ty}"),
                None => ty.to_string(),
            }
        } else {
            s.field(n, "name").unwrap_or("?").to_string()
        };
        let mut it = item(kind, &name, sig, rust_doc(n, s));
        if matches!(kind, "impl" | "trait" | "mod") {
            if let Some(body) = n.child_by_field_name("body") {
                rust_items(body, s, &mut it.children);
            }
        }
        out.push(it);
    }
}

// ---------------------------------------------------------------- Python

/// The docstring of a statement that is a string expression.
fn py_string_doc(stmt: Node, s: Src) -> Option<String> {
    if stmt.kind() != "expression_statement" {
        return None;
    }
    let str_node = stmt.named_child(0)?;
    if str_node.kind() != "string" {
        return None;
    }
    let t = s.text(str_node).trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let q = if t.starts_with("\"\"\"") || t.starts_with("'''") { 3 } else { 1 };
    let inner = t.get(q..t.len().saturating_sub(q).max(q)).unwrap_or("");
    first_doc_line(inner.lines())
}

fn py_body_doc(def: Node, s: Src) -> Option<String> {
    let body = def.child_by_field_name("body")?;
    let first = body.named_children(&mut body.walk()).find(|n| n.kind() != "comment")?;
    py_string_doc(first, s)
}

/// A `def` or `class` up to its `:`: a comment between the colon and the
/// body (`def f(): # why`) is not part of the signature.
fn py_sig(s: Src, def: Node) -> String {
    let mut c = def.walk();
    let colon = def.children(&mut c).filter(|ch| ch.kind() == ":").last();
    match colon {
        Some(colon) => collapse(s.range(def.start_byte(), colon.start_byte()).trim_end(), SIG_MAX),
        None => sig_upto(s, def.start_byte(), def, "body"),
    }
}

fn py_items(parent: Node, s: Src, out: &mut Vec<Item>, depth: usize) {
    let mut c = parent.walk();
    for n in parent.named_children(&mut c) {
        let def = if n.kind() == "decorated_definition" {
            match n.child_by_field_name("definition") {
                Some(d) => d,
                None => continue,
            }
        } else {
            n
        };
        match def.kind() {
            "function_definition" => {
                let sig = py_sig(s, def);
                let kind = if depth > 0 { "method" } else { "def" };
                out.push(item(kind, s.field(def, "name").unwrap_or("?"), sig, py_body_doc(def, s)));
            }
            "class_definition" => {
                let sig = py_sig(s, def);
                let mut it = item("class", s.field(def, "name").unwrap_or("?"), sig, py_body_doc(def, s));
                if depth < 2 {
                    if let Some(body) = def.child_by_field_name("body") {
                        py_items(body, s, &mut it.children, depth + 1);
                    }
                }
                out.push(it);
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------- TypeScript / JavaScript

fn jsdoc_text_line(text: &str) -> Option<String> {
    if text.starts_with("/*") {
        first_doc_line(block_comment_lines(text).filter(|l| !l.trim().trim_start_matches('*').trim().starts_with('@')))
    } else {
        first_doc_line(std::iter::once(text.trim_start_matches('/')))
    }
}

/// A `/** … */` comment (or a `//` comment block) ending on the line above `n`.
fn js_doc(n: Node, s: Src) -> Option<String> {
    let mut top = None;
    let mut below = n;
    while let Some(p) = below.prev_named_sibling() {
        if p.kind() != "comment" || p.end_position().row + 1 < below.start_position().row {
            break;
        }
        let t = s.text(p);
        if t.starts_with("/**") {
            return jsdoc_text_line(t);
        }
        if !t.starts_with("//") {
            break;
        }
        top = Some(p);
        below = p;
    }
    // A run of `//` lines: its first line.
    top.and_then(|p| jsdoc_text_line(s.text(p)))
}

fn js_file_doc(root: Node, s: Src) -> Option<String> {
    let mut c = root.walk();
    let mut kids = root.named_children(&mut c).filter(|n| n.kind() != "hash_bang_line");
    let first = kids.next()?;
    if first.kind() != "comment" {
        return None;
    }
    // A comment glued to the next statement documents that statement, not the file.
    let mut last = first;
    for n in kids {
        if n.start_position().row > last.end_position().row + 1 {
            break;
        }
        if n.kind() != "comment" {
            return None;
        }
        last = n;
    }
    jsdoc_text_line(s.text(first))
}

/// Where a declaration's own text starts: after its decorators, else `start`.
fn after_decorators(n: Node, start: usize) -> usize {
    let mut start = start;
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        if ch.kind() == "decorator" {
            start = ch.end_byte();
        }
    }
    start
}

fn js_items(parent: Node, s: Src, out: &mut Vec<Item>) {
    let mut c = parent.walk();
    for n in parent.named_children(&mut c) {
        js_stmt(n, n.start_byte(), n, false, s, out);
    }
}

fn is_function_value(kind: &str) -> bool {
    matches!(kind, "arrow_function" | "function_expression" | "function" | "generator_function")
}

/// `start`: where the signature starts (`export`/`declare` included);
/// `doc_at`: the node whose preceding comment is the doc.
fn js_stmt(n: Node, start: usize, doc_at: Node, exported: bool, s: Src, out: &mut Vec<Item>) {
    let doc = || js_doc(doc_at, s);
    match n.kind() {
        "export_statement" => {
            if let Some(d) = n.child_by_field_name("declaration") {
                js_stmt(d, after_decorators(n, start), doc_at, true, s, out);
            } else if let Some(v) = n.child_by_field_name("value") {
                if is_function_value(v.kind()) || v.kind() == "class" {
                    let kind = if v.kind() == "class" { "class" } else { "function" };
                    out.push(item(kind, "default", sig_upto(s, start, v, "body"), doc()));
                }
            }
        }
        "ambient_declaration" => {
            if let Some(d) = n.named_child(0) {
                js_stmt(d, start, doc_at, exported, s, out);
            }
        }
        "expression_statement" => {
            // TypeScript parses `namespace X {}` as an expression statement.
            if let Some(m) = n.named_child(0).filter(|m| m.kind() == "internal_module") {
                js_stmt(m, start, doc_at, exported, s, out);
            }
        }
        "function_declaration" | "generator_function_declaration" | "function_signature" => {
            out.push(item("function", s.field(n, "name").unwrap_or("?"), sig_upto(s, start, n, "body"), doc()));
        }
        "class_declaration" | "abstract_class_declaration" => {
            let start = after_decorators(n, start);
            let mut it = item("class", s.field(n, "name").unwrap_or("?"), sig_upto(s, start, n, "body"), doc());
            if let Some(body) = n.child_by_field_name("body") {
                let mut bc = body.walk();
                for m in body.named_children(&mut bc) {
                    if matches!(m.kind(), "method_definition" | "method_signature" | "abstract_method_signature") {
                        let ms = after_decorators(m, m.start_byte());
                        it.children.push(item(
                            "method",
                            s.field(m, "name").unwrap_or("?"),
                            sig_upto(s, ms, m, "body"),
                            js_doc(m, s),
                        ));
                    }
                }
            }
            out.push(it);
        }
        "interface_declaration" => {
            let mut it = item("interface", s.field(n, "name").unwrap_or("?"), sig_upto(s, start, n, "body"), doc());
            // Its members are its API: methods and properties with their types.
            if let Some(body) = n.child_by_field_name("body") {
                let mut bc = body.walk();
                for m in body.named_children(&mut bc) {
                    let kind = match m.kind() {
                        "method_signature" => "method",
                        "property_signature" => "property",
                        _ => continue,
                    };
                    let sig = sig_upto(s, m.start_byte(), m, "-");
                    let sig = sig.strip_suffix(',').unwrap_or(&sig).to_string();
                    it.children.push(item(kind, s.field(m, "name").unwrap_or("?"), sig, js_doc(m, s)));
                }
            }
            out.push(it);
        }
        "type_alias_declaration" => {
            out.push(item("type", s.field(n, "name").unwrap_or("?"), sig_upto(s, start, n, "-"), doc()));
        }
        "enum_declaration" => {
            out.push(item("enum", s.field(n, "name").unwrap_or("?"), sig_upto(s, start, n, "body"), doc()));
        }
        "internal_module" | "module" => {
            let mut it = item("namespace", s.field(n, "name").unwrap_or("?"), sig_upto(s, start, n, "body"), doc());
            if let Some(body) = n.child_by_field_name("body") {
                js_items(body, s, &mut it.children);
            }
            out.push(it);
        }
        "lexical_declaration" | "variable_declaration" => {
            let mut dc = n.walk();
            let decls: Vec<Node> = n.named_children(&mut dc).filter(|d| d.kind() == "variable_declarator").collect();
            let Some(first) = decls.first() else { return };
            let prefix = collapse(s.range(start, first.start_byte()), 40);
            for d in &decls {
                let name = s.field(*d, "name").unwrap_or("?");
                let value = d.child_by_field_name("value");
                let vk = value.map(|v| v.kind()).unwrap_or("");
                let (kind, rest) = if is_function_value(vk) {
                    let v = value.expect("kind came from it");
                    ("function", sig_upto(s, d.start_byte(), v, "body"))
                } else if vk == "class" {
                    ("class", sig_upto(s, d.start_byte(), value.expect("kind came from it"), "body"))
                } else if exported {
                    ("const", sig_upto(s, d.start_byte(), *d, "value"))
                } else {
                    continue;
                };
                out.push(item(kind, name, collapse(&format!("{prefix} {rest}"), SIG_MAX), doc()));
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- Go

/// The `//` comment block right above `n`, its first line.
fn go_doc(n: Node, s: Src) -> Option<String> {
    let mut top = None;
    let mut below = n;
    while let Some(p) = below.prev_sibling() {
        if p.kind() != "comment" || p.end_position().row + 1 < below.start_position().row {
            break;
        }
        top = Some(p);
        below = p;
    }
    let t = s.text(top?);
    if let Some(body) = t.strip_prefix("/*") {
        first_doc_line(body.strip_suffix("*/").unwrap_or(body).lines())
    } else {
        first_doc_line(std::iter::once(&t[2..]))
    }
}

fn go_exported(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_uppercase())
}

/// The type name of a method's receiver: `(m *Mail)` → `Mail`, `(l List[T])` → `List`.
fn go_receiver_type(receiver: Node, s: Src) -> Option<String> {
    let text = s.text(receiver).trim_start_matches('(').trim_end_matches(')');
    let ty = text.split_whitespace().last()?.trim_start_matches('*');
    let ty = ty.split('[').next()?;
    (!ty.is_empty()).then(|| ty.to_string())
}

fn go_items(root: Node, s: Src, entry: &mut FileEntry) {
    let out = &mut entry.items;
    // Methods go under their type when it is declared in the same file.
    let mut methods: Vec<(String, Item)> = vec![];
    let mut c = root.walk();
    for n in root.named_children(&mut c) {
        match n.kind() {
            "package_clause" => {
                let name = n.named_child(0).map(|p| s.text(p)).unwrap_or("?");
                // Its comment is the file's doc, not repeated on the item.
                entry.doc = go_doc(n, s);
                out.push(item("package", name, format!("package {name}"), None));
            }
            "function_declaration" => {
                out.push(item(
                    "func",
                    s.field(n, "name").unwrap_or("?"),
                    sig_upto(s, n.start_byte(), n, "body"),
                    go_doc(n, s),
                ));
            }
            "method_declaration" => {
                let it = item(
                    "method",
                    s.field(n, "name").unwrap_or("?"),
                    sig_upto(s, n.start_byte(), n, "body"),
                    go_doc(n, s),
                );
                match n.child_by_field_name("receiver").and_then(|r| go_receiver_type(r, s)) {
                    Some(ty) => methods.push((ty, it)),
                    None => out.push(it),
                }
            }
            "type_declaration" => {
                let mut sc = n.walk();
                let specs: Vec<Node> =
                    n.named_children(&mut sc).filter(|t| matches!(t.kind(), "type_spec" | "type_alias")).collect();
                let single = specs.len() == 1;
                for spec in specs {
                    let name = s.field(spec, "name").unwrap_or("?");
                    let ty = spec.child_by_field_name("type");
                    let (kind, sig) = match ty.map(|t| t.kind()) {
                        Some(k @ ("struct_type" | "interface_type")) => {
                            let t = ty.expect("kind came from it");
                            let kw = if k == "struct_type" { "struct" } else { "interface" };
                            (kw, format!("type {} {kw}", collapse(s.range(spec.start_byte(), t.start_byte()), SIG_MAX)))
                        }
                        _ => ("type", format!("type {}", collapse(s.text(spec), SIG_MAX))),
                    };
                    let doc = go_doc(spec, s).or_else(|| if single { go_doc(n, s) } else { None });
                    out.push(item(kind, name, cap(sig, SIG_MAX), doc));
                }
            }
            "const_declaration" | "var_declaration" => {
                let kw = if n.kind() == "const_declaration" { "const" } else { "var" };
                let mut sc = n.walk();
                let specs: Vec<Node> =
                    n.named_children(&mut sc).filter(|t| matches!(t.kind(), "const_spec" | "var_spec")).collect();
                let single = specs.len() == 1;
                for spec in specs {
                    let name = s.field(spec, "name").unwrap_or("?");
                    if !go_exported(name) {
                        continue;
                    }
                    let sig = format!("{kw} {}", sig_upto(s, spec.start_byte(), spec, "value"));
                    let doc = go_doc(spec, s).or_else(|| if single { go_doc(n, s) } else { None });
                    out.push(item(kw, name, cap(sig, SIG_MAX), doc));
                }
            }
            _ => {}
        }
    }
    for (ty, m) in methods {
        match out.iter_mut().find(|i| matches!(i.kind.as_str(), "struct" | "interface" | "type") && i.name == ty) {
            Some(t) => t.children.push(m),
            None => out.push(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(e: &FileEntry) -> Vec<String> {
        e.items.iter().map(|i| format!("{} {}", i.kind, i.name)).collect()
    }

    #[test]
    fn rust_items_docs_and_impls() {
        let src = "//! The crate.\n\n/// Adds.\n#[inline]\npub fn add(a: u32,\n  b: u32) -> u32 { a + b }\n\
                   pub struct S<T> { x: T }\nimpl<T> Clone for S<T> { /// Copies.\n fn clone(&self) -> Self { todo!() } }\n\
                   pub const N: usize = 3;\n#[cfg(test)]\nmod tests { fn t() {} }\n";
        let e = Parsers::default().extract(Lang::Rust, src.as_bytes());
        assert_eq!(e.error, None);
        assert_eq!(e.doc.as_deref(), Some("The crate."));
        assert_eq!(names(&e), ["fn add", "struct S", "impl Clone for S<T>", "const N"]);
        assert_eq!(e.items[0].sig, "pub fn add(a: u32, b: u32) -> u32");
        assert_eq!(e.items[0].doc.as_deref(), Some("Adds."));
        assert_eq!(e.items[2].children[0].sig, "fn clone(&self) -> Self");
        assert_eq!(e.items[2].children[0].doc.as_deref(), Some("Copies."));
        assert_eq!(e.items[3].sig, "pub const N: usize");
    }

    #[test]
    fn a_python_comment_after_the_colon_is_not_in_the_signature() {
        let src = "def f(a: int) -> None:  # install deps\n    pass\n\nclass C(B):  # note\n    def m(self) -> dict[str, int]: # x\n        pass\n";
        let e = Parsers::default().extract(Lang::Python, src.as_bytes());
        assert_eq!(e.items[0].sig, "def f(a: int) -> None");
        assert_eq!(e.items[1].sig, "class C(B)");
        assert_eq!(e.items[1].children[0].sig, "def m(self) -> dict[str, int]");
    }

    #[test]
    fn a_syntax_error_is_reported_with_its_place() {
        let e = Parsers::default().extract(Lang::Rust, b"fn ok() {}\nfn broken( {\n");
        let err = e.error.expect("an error");
        assert!(err.contains("line 2"), "{err}");
        assert!(Parsers::default().extract(Lang::Python, b"\xff\xfe").error.unwrap().contains("UTF-8"));
    }
}
