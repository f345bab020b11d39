//! Serialising a parsed tree in canonical form.

use super::number::{write_double, write_integer, NumberKinds};
use super::{Node, Sink, TapeIndex, Text, Tree, ROOT};

/// Writes `tree` in canonical form.
pub(crate) fn emit(tree: &Tree<'_>, kinds: NumberKinds, out: &mut impl Sink) {
    emit_at(tree, ROOT, kinds, out);
}

/// Writes the value at `place` of `tree`. Inlined into the container loops, so that a value
/// that holds none is written in place and only containers cost a call.
#[inline(always)]
fn emit_at(tree: &Tree<'_>, place: TapeIndex, kinds: NumberKinds, out: &mut impl Sink) {
    match tree.node(place) {
        Node::Array { .. } | Node::Object(_) => emit_container(tree, place, kinds, out),
        scalar => emit_scalar(scalar, kinds, out),
    }
}

/// Writes the array or object at `place` of `tree` and its contents.
fn emit_container(tree: &Tree<'_>, place: TapeIndex, kinds: NumberKinds, out: &mut impl Sink) {
    let object = matches!(tree.node(place), Node::Object(_));
    out.put(if object { b"{" } else { b"[" });
    for (i, item) in tree.children(place).enumerate() {
        if i > 0 {
            out.put(b",");
        }
        if let Some(name) = tree.name(item) {
            write_text(name, out);
            out.put(b":");
        }
        emit_at(tree, item, kinds, out);
    }
    out.put(if object { b"}" } else { b"]" });
}

/// Writes a value that holds no values. Doubles in a tree are finite by construction.
#[inline(always)]
fn emit_scalar(node: &Node<'_>, kinds: NumberKinds, out: &mut impl Sink) {
    match node {
        Node::Null => out.put(b"null"),
        Node::Bool(true) => out.put(b"true"),
        Node::Bool(false) => out.put(b"false"),
        Node::Integer(digits) => write_integer(digits, kinds, out),
        Node::Double(value) => {
            // Trees are built only from finite values, so this cannot fail.
            let _ = write_double(*value, kinds, out);
        }
        Node::Decimal(literal) => out.put(literal.as_bytes()),
        Node::String(text) => write_text(text, out),
        // Containers are written by `emit_container`; children left out are skipped, and no
        // pointer names the root.
        Node::Array { .. } | Node::Object(_) | Node::Removed { .. } => {}
    }
}

/// Inlined into the container's loop, with the sink's copy: a call for every name and string
/// cost about 4% of a fingerprint.
#[inline(always)]
fn write_text(text: &Text<'_>, out: &mut impl Sink) {
    match text {
        Text::Quoted(quoted) => out.put(quoted.as_bytes()),
        Text::Decoded(decoded) => write_string(decoded, out),
    }
}

/// Writes a string with the minimal escapes of RFC 8785 §3.2.2.2.
fn write_string(text: &str, out: &mut impl Sink) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    if !bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        out.put(b"\"");
        out.put(bytes);
        out.put(b"\"");
        return;
    }
    out.put(b"\"");
    let mut run_start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let short: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => &[],
            _ => continue,
        };
        out.put(&bytes[run_start..i]);
        run_start = i + 1;
        if short.is_empty() {
            out.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
        } else {
            out.put(short);
        }
    }
    out.put(&bytes[run_start..]);
    out.put(b"\"");
}
