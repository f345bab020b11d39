//! A parsed document as one tape: every value in document order, each container followed by
//! its contents, so that a document fills two buffers however many objects and arrays it has.
//!
//! Entries are pushed where they stay, and never moved. A container knows where its contents
//! end, so its items are read by stepping over each one's contents; an object also keeps where
//! its members are in canonical order, in a second buffer of places. Leaving a value out marks
//! it removed in place.

use std::cell::Cell;

use super::order::utf16_cmp;
use super::{CanonicalError, Node, Text};

/// Where a value is on the tape.
pub(crate) type TapeIndex = usize;

/// Where an object's contents end on the tape, and where its members' places lie in canonical
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Members {
    /// Just past its last content.
    end: TapeIndex,
    /// The first of its members' places in the tree's order buffer.
    order: usize,
    /// How many members it has, those left out included.
    len: usize,
}

/// One value of a document: a member of an object with its name, an item of an array or the
/// root without.
#[derive(Debug, Clone)]
struct Member<'a> {
    name: Option<Text<'a>>,
    value: Node<'a>,
}

impl Member<'_> {
    /// An entry not yet named nor given its value.
    const UNSET: Self = Self {
        name: None,
        value: Node::Null,
    };

    /// The member's name, to sort by.
    fn key(&self) -> &str {
        self.name.as_ref().map_or("", Text::as_str)
    }
}

/// A parsed document.
#[derive(Debug, Clone)]
pub(crate) struct Tree<'a> {
    /// The root first, then every value in document order.
    tape: Vec<Member<'a>>,
    /// Each object's member places, sorted by name.
    order: Vec<TapeIndex>,
}

/// The root's place.
pub(crate) const ROOT: TapeIndex = 0;

/// The most entries a thread keeps for its next document (56 KiB, and 8 KiB of member places):
/// room for bodies of about 8 KiB, more than tool arguments usually take.
const MOST_KEPT: usize = 1024;

thread_local! {
    /// The buffers of the last tree dropped on this thread, emptied, for the next document:
    /// a ~1 KiB body's tape is about 7 KiB, past the sizes the allocator keeps at hand for
    /// reuse, and taking it from the allocator and giving it back cost every request more
    /// than reading this. A tape of more than [`MOST_KEPT`] entries is let go.
    static SPARE: Cell<(Vec<Member<'static>>, Vec<TapeIndex>)> =
        const { Cell::new((Vec::new(), Vec::new())) };
}

/// `tape`, emptied, as a buffer of entries borrowing for another lifetime: its allocation is
/// kept, since collecting a vector's own iterator into a vector of a type of the same layout
/// reuses the allocation in place. The entries borrow their text, so a spare tape must be
/// emptied and re-typed for each document.
fn retyped<'b>(mut tape: Vec<Member<'_>>) -> Vec<Member<'b>> {
    tape.clear();
    tape.into_iter()
        .map(|_| unreachable!("the tape was emptied"))
        .collect()
}

impl Drop for Tree<'_> {
    /// Leaves the buffers, emptied, for the next document this thread reads.
    fn drop(&mut self) {
        if self.tape.capacity() > MOST_KEPT || self.order.capacity() > MOST_KEPT {
            return;
        }
        let tape = retyped(std::mem::take(&mut self.tape));
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        // A thread being torn down keeps nothing.
        let _ = SPARE.try_with(|spare| spare.set((tape, order)));
    }
}

/// The most entries reserved before a document is read (about 224 KiB): past it the tape grows
/// with what the document holds, so that a large body of few values (one long string) is not
/// met with room for as many entries as its size would allow.
const MOST_RESERVED: usize = 4096;

/// How many bytes of JSON text one reserved entry stands for: a little under what tool
/// arguments take (about 13 bytes a value in the nested records benchmarked), so that the tape
/// of most documents never grows, each growth copying every entry so far. Reserving more costs
/// little: only the entries written are touched.
const BYTES_PER_VALUE: usize = 8;

impl<'a> Tree<'a> {
    /// The value at `place`.
    pub(crate) fn node(&self, place: TapeIndex) -> &Node<'a> {
        &self.tape[place].value
    }

    /// The places of the entries of the container at `place`, in canonical order (an object's
    /// by name, an array's as written), without those left out.
    #[inline]
    pub(crate) fn children(&self, place: TapeIndex) -> Children<'_, 'a> {
        let walk = match self.tape[place].value {
            Node::Array { end } => Walk::Items {
                next: place + 1,
                end,
            },
            Node::Object(members) => {
                Walk::Members(self.order[members.order..members.order + members.len].iter())
            }
            _ => Walk::Done,
        };
        Children { tree: self, walk }
    }

    /// The place just past the value at `at` and its contents.
    #[inline]
    fn after(&self, at: TapeIndex) -> TapeIndex {
        match self.tape[at].value {
            Node::Array { end } | Node::Object(Members { end, .. }) | Node::Removed { end } => end,
            _ => at + 1,
        }
    }

    /// The name of the entry at `place`, if it is a member.
    pub(crate) fn name(&self, place: TapeIndex) -> Option<&Text<'a>> {
        self.tape[place].name.as_ref()
    }

    /// Leaves out the value at `place` and returns it; the tape keeps its contents, which
    /// the value returned still refers to.
    pub(crate) fn remove(&mut self, place: TapeIndex) -> Node<'a> {
        let end = self.after(place);
        std::mem::replace(&mut self.tape[place].value, Node::Removed { end })
    }
}

/// The entries of one container, from [`Tree::children`].
pub(crate) struct Children<'t, 'a> {
    tree: &'t Tree<'a>,
    walk: Walk<'t>,
}

enum Walk<'t> {
    /// An array's items: each found past the contents of the one before.
    Items {
        next: TapeIndex,
        end: TapeIndex,
    },
    /// An object's members, in canonical order.
    Members(std::slice::Iter<'t, TapeIndex>),
    Done,
}

impl Iterator for Children<'_, '_> {
    type Item = TapeIndex;

    #[inline]
    fn next(&mut self) -> Option<TapeIndex> {
        loop {
            let at = match &mut self.walk {
                Walk::Items { next, end } => {
                    if *next >= *end {
                        return None;
                    }
                    let at = *next;
                    *next = self.tree.after(at);
                    at
                }
                Walk::Members(members) => *members.next()?,
                Walk::Done => return None,
            };
            if !matches!(self.tree.tape[at].value, Node::Removed { .. }) {
                return Some(at);
            }
        }
    }
}

/// Builds a [`Tree`]: each value is [`Builder::push`]ed before its contents, given its value by
/// [`Builder::set`], or, a container, closed by [`Builder::close_array`] or
/// [`Builder::close_object`] once its contents are all on the tape.
pub(crate) struct Builder<'a> {
    tree: Tree<'a>,
}

impl<'a> Builder<'a> {
    /// A builder for a JSON text of `bytes`, with room for as many values as such a text
    /// usually holds (up to [`MOST_RESERVED`]), so that the tape seldom grows.
    pub(crate) fn for_text(bytes: usize) -> Self {
        Self::new(bytes / BYTES_PER_VALUE)
    }

    /// A builder with room for about `expected` entries, up to [`MOST_RESERVED`]; the root's
    /// place is [`ROOT`]. Its buffers are the last ones a tree dropped on this thread left,
    /// where there are such.
    pub(crate) fn new(expected: usize) -> Self {
        let (tape, order) = SPARE.try_with(Cell::take).unwrap_or_default();
        let mut tape = retyped(tape);
        tape.reserve(expected.clamp(1, MOST_RESERVED));
        tape.push(Member {
            name: None,
            value: Node::Null,
        });
        Self {
            tree: Tree { tape, order },
        }
    }

    /// Adds an entry, null until it is given its value; returns its place.
    ///
    /// The entry is pushed as a constant and then named in place, inlined into the parser, so
    /// that the name goes from registers straight onto the tape. Built whole and pushed, an
    /// entry was first written to the stack in narrow stores and then copied in 16-byte loads
    /// that had to wait for those stores to land: a third of the parser's time.
    #[inline(always)]
    pub(crate) fn push(&mut self, name: Option<Text<'a>>) -> TapeIndex {
        let tape = &mut self.tree.tape;
        let at = tape.len();
        tape.push(Member::UNSET);
        if name.is_some() {
            tape[at].name = name;
        }
        at
    }

    /// Gives the entry at `place` a value that holds no entries.
    #[inline]
    pub(crate) fn set(&mut self, place: TapeIndex, value: Node<'a>) {
        self.tree.tape[place].value = value;
    }

    /// Makes the entry at `place` an array of the entries pushed since.
    pub(crate) fn close_array(&mut self, place: TapeIndex) {
        let end = self.tree.tape.len();
        self.tree.tape[place].value = Node::Array { end };
    }

    /// Makes the entry at `place` an object of the members pushed since: their places are
    /// sorted by name, and a name given twice is refused.
    pub(crate) fn close_object(&mut self, place: TapeIndex) -> Result<(), CanonicalError> {
        let end = self.tree.tape.len();
        let order = self.tree.order.len();
        if self.tree.order.is_empty() {
            // At most one place per entry.
            self.tree.order.reserve(self.tree.tape.capacity());
        }
        let mut at = place + 1;
        while at < end {
            self.tree.order.push(at);
            at = self.tree.after(at);
        }
        let len = self.tree.order.len() - order;
        let tape = &self.tree.tape;
        let members = &mut self.tree.order[order..];
        // Names in strictly rising order are sorted and unique at once: one pass. Otherwise
        // duplicates are refused after the sort, so an unstable sort cannot reorder equal
        // names.
        let rising = members
            .windows(2)
            .all(|pair| utf16_cmp(tape[pair[0]].key(), tape[pair[1]].key()).is_lt());
        if !rising {
            members.sort_unstable_by(|&a, &b| utf16_cmp(tape[a].key(), tape[b].key()));
            if members
                .windows(2)
                .any(|pair| tape[pair[0]].key() == tape[pair[1]].key())
            {
                return Err(CanonicalError::DuplicateMember);
            }
        }
        self.tree.tape[place].value = Node::Object(Members { end, order, len });
        Ok(())
    }

    /// The tree built.
    pub(crate) fn finish(self) -> Tree<'a> {
        self.tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{emit, parse, NumberKinds};

    fn canonical(tree: &Tree<'_>) -> String {
        let mut out = Vec::new();
        emit(tree, NumberKinds::Distinct, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_value_is_on_one_tape_in_document_order() {
        let tree = parse(br#"{"b":[1,{"d":2,"c":3}],"a":4}"#).unwrap();
        assert_eq!(tree.tape.len(), 7, "the root and six values");
        let names: Vec<_> = tree
            .children(ROOT)
            .map(|at| tree.name(at).unwrap().as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(canonical(&tree), r#"{"a":4,"b":[1,{"c":3,"d":2}]}"#);
    }

    #[test]
    fn a_large_document_with_few_values_reserves_little() {
        let one_string = format!("\"{}\"", "x".repeat(4 << 20));
        let tree = parse(one_string.as_bytes()).unwrap();
        let reserved = tree.tape.capacity() * std::mem::size_of::<Member<'_>>();
        assert!(
            reserved <= one_string.len() / 16,
            "{reserved} bytes reserved for one value of {} bytes",
            one_string.len()
        );
    }

    #[test]
    fn a_document_read_after_another_reuses_its_buffers() {
        let text = br#"{"b":[1,{"d":2,"c":3}],"a":4}"#;
        let first = parse(text).unwrap();
        let (tape, order) = (first.tape.as_ptr() as usize, first.order.as_ptr() as usize);
        drop(first);
        let second = parse(text).unwrap();
        assert_eq!(second.tape.as_ptr() as usize, tape);
        assert_eq!(second.order.as_ptr() as usize, order);
        assert_eq!(canonical(&second), r#"{"a":4,"b":[1,{"c":3,"d":2}]}"#);
    }

    #[test]
    fn a_large_document_leaves_no_buffers_behind() {
        let many = format!("[{}0]", "0,".repeat(MOST_KEPT));
        drop(parse(many.as_bytes()).unwrap());
        let next = parse(b"[1]").unwrap();
        assert!(next.tape.capacity() <= MOST_KEPT);
    }

    #[test]
    fn a_value_left_out_is_skipped_with_its_contents() {
        let mut tree = parse(br#"[1,[2,[3]],4]"#).unwrap();
        let second = tree.children(ROOT).nth(1).unwrap();
        let removed = tree.remove(second);
        assert!(matches!(removed, Node::Array { .. }));
        assert_eq!(canonical(&tree), "[1,4]");
        assert_eq!(tree.children(ROOT).count(), 2);
    }
}
