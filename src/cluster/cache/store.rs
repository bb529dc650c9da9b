//! How the watch cache holds one kind's objects: their compact JSON appended to a few
//! large chunks, and per object its app and where its JSON lies.
//!
//! One small allocation per object, living as long as the object, ends up between
//! the short-lived allocations of every pass (a pass parses its app's objects while
//! watch events of other apps arrive): when the passes' memory is freed, the pages
//! those few objects sit in stay. At 10,000 objects that cost more than the objects
//! themselves. Chunks of up to [`CHUNK_MAX`] are pages of their own, freed whole.
//! A replaced or deleted object leaves a hole; holes are compacted away once they
//! outgrow a quarter of what is held ([`compact_due`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Name;

/// The smallest chunk: a kind with a handful of objects holds no more than this
/// beyond them.
const CHUNK_MIN: usize = 4 * 1024;
/// The largest chunk: beyond mimalloc's medium size (128 KiB), so a chunk is a page
/// of its own, and small enough that a kind's last, partly filled chunk wastes
/// little. An object larger than this gets a chunk of its own size.
const CHUNK_MAX: usize = 256 * 1024;

/// Where one object's JSON lies, and its app (shared by every object of the app).
struct Slot {
    app: Option<Arc<str>>,
    chunk: u32,
    start: u32,
    len: u32,
}

/// One kind's objects.
#[derive(Default)]
pub(super) struct KindObjects {
    index: HashMap<Name, Slot>,
    chunks: Vec<Vec<u8>>,
    /// App names, each held once.
    apps: HashSet<Arc<str>>,
    /// Bytes of the chunks held by objects replaced or deleted since.
    dead: usize,
    /// Bytes of the chunks held by the objects in `index`.
    live: usize,
}

impl KindObjects {
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// The JSON of the object `name`, if held.
    pub(super) fn get(&self, name: &Name) -> Option<&[u8]> {
        self.index.get(name).map(|slot| self.bytes(slot))
    }

    /// The app of the object `name`, if held and labelled.
    pub(super) fn app(&self, name: &Name) -> Option<&str> {
        self.index.get(name)?.app.as_deref()
    }

    /// Every object held: its name, app and JSON.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Name, Option<&str>, &[u8])> {
        self.index
            .iter()
            .map(|(name, slot)| (name, slot.app.as_deref(), self.bytes(slot)))
    }

    /// Holds `json` as the object `name` of `app`, in place of what was held.
    pub(super) fn insert(&mut self, name: Name, app: Option<&str>, json: &[u8]) {
        let app = app.map(|app| self.intern(app));
        let slot = self.append(app, json);
        if let Some(old) = self.index.insert(name, slot) {
            self.forget(&old);
        }
        if compact_due(self.dead, self.live) {
            self.compact();
        }
    }

    /// Stops holding the object `name`; whether it was held.
    pub(super) fn remove(&mut self, name: &Name) -> bool {
        let Some(old) = self.index.remove(name) else {
            return false;
        };
        self.forget(&old);
        if compact_due(self.dead, self.live) {
            self.compact();
        }
        true
    }

    /// Gives back the spare room of a complete listing: until the next change, its
    /// last chunk is all the kind will hold.
    pub(super) fn shrink(&mut self) {
        if let Some(last) = self.chunks.last_mut() {
            last.shrink_to_fit();
        }
        self.index.shrink_to_fit();
    }

    fn bytes(&self, slot: &Slot) -> &[u8] {
        let start = slot.start as usize;
        self.chunks
            .get(slot.chunk as usize)
            .and_then(|chunk| chunk.get(start..start + slot.len as usize))
            .unwrap_or_default()
    }

    fn intern(&mut self, app: &str) -> Arc<str> {
        if let Some(held) = self.apps.get(app) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(app);
        self.apps.insert(held.clone());
        held
    }

    /// Copies `json` to the end of the last chunk, or of a new one when it does not fit.
    fn append(&mut self, app: Option<Arc<str>>, json: &[u8]) -> Slot {
        let fits = self
            .chunks
            .last()
            .is_some_and(|last| last.capacity() - last.len() >= json.len());
        if !fits {
            // Chunks grow with what the kind holds, so a small kind wastes little
            // and a large one has few chunks.
            let size = (self.live / 4).clamp(CHUNK_MIN, CHUNK_MAX).max(json.len());
            self.chunks.push(Vec::with_capacity(size));
        }
        let chunk = self.chunks.len() - 1;
        let last = &mut self.chunks[chunk];
        let start = last.len();
        last.extend_from_slice(json);
        self.live += json.len();
        Slot {
            app,
            // A chunk holds at most max(CHUNK_MAX, one object) bytes, and objects are
            // bounded by the API server's request size (3 MiB), so offsets fit.
            chunk: chunk as u32,
            start: start as u32,
            len: json.len() as u32,
        }
    }

    fn forget(&mut self, old: &Slot) {
        self.live -= old.len as usize;
        self.dead += old.len as usize;
    }

    /// Copies every held object into fresh chunks, leaving the holes behind, and
    /// drops the names of apps that no longer hold an object here.
    fn compact(&mut self) {
        let old = std::mem::take(&mut self.chunks);
        let index = std::mem::take(&mut self.index);
        self.dead = 0;
        self.live = 0;
        let mut fresh = HashMap::with_capacity(index.len());
        for (name, slot) in index {
            let start = slot.start as usize;
            let json = old
                .get(slot.chunk as usize)
                .and_then(|chunk| chunk.get(start..start + slot.len as usize))
                .unwrap_or_default();
            let moved = self.append(slot.app, json);
            fresh.insert(name, moved);
        }
        self.index = fresh;
        self.apps.retain(|app| Arc::strong_count(app) > 1);
    }
}

/// Whether holes are worth copying the kind for: when they pass a quarter of what is
/// held (so a kind holds at most 1.25 times its objects, and each byte written is
/// copied at most four more times), and at least a small chunk.
fn compact_due(dead: usize, live: usize) -> bool {
    dead > CHUNK_MIN && dead > live / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(namespace: Option<&str>, name: &str) -> Name {
        (namespace.map(Box::from), Box::from(name))
    }

    fn json(name: &str, size: usize) -> Vec<u8> {
        format!("{{\"name\":\"{name}\",\"pad\":\"{}\"}}", "x".repeat(size)).into_bytes()
    }

    #[test]
    fn objects_read_back_as_written_with_their_app() {
        let mut kind = KindObjects::default();
        kind.insert(name(Some("a"), "x"), Some("shop"), &json("x", 10));
        kind.insert(name(None, "y"), None, &json("y", 20));
        assert_eq!(kind.len(), 2);
        assert_eq!(
            kind.get(&name(Some("a"), "x")),
            Some(json("x", 10).as_slice())
        );
        assert_eq!(kind.app(&name(Some("a"), "x")), Some("shop"));
        assert_eq!(kind.get(&name(None, "y")), Some(json("y", 20).as_slice()));
        assert_eq!(kind.app(&name(None, "y")), None);
        assert_eq!(
            kind.get(&name(None, "x")),
            None,
            "namespace is part of the name"
        );
    }

    #[test]
    fn a_replaced_object_reads_its_new_json_and_a_removed_one_nothing() {
        let mut kind = KindObjects::default();
        kind.insert(name(None, "x"), Some("a"), &json("x", 10));
        kind.insert(name(None, "x"), Some("b"), &json("x", 30));
        assert_eq!(kind.len(), 1);
        assert_eq!(kind.get(&name(None, "x")), Some(json("x", 30).as_slice()));
        assert_eq!(kind.app(&name(None, "x")), Some("b"));
        assert!(kind.remove(&name(None, "x")));
        assert!(!kind.remove(&name(None, "x")), "removed once");
        assert_eq!(kind.get(&name(None, "x")), None);
        assert_eq!(kind.len(), 0);
    }

    #[test]
    fn many_objects_share_few_chunks_and_an_app_name() {
        let mut kind = KindObjects::default();
        for i in 0..2_000 {
            kind.insert(
                name(Some("ns"), &format!("o{i}")),
                Some("app"),
                &json("o", 500),
            );
        }
        assert!(kind.chunks.len() < 30, "{} chunks", kind.chunks.len());
        assert_eq!(kind.apps.len(), 1);
        let app = kind.apps.iter().next().map(Arc::strong_count);
        assert_eq!(app, Some(2_001), "every object shares the one name");
        for i in (0..2_000).step_by(97) {
            let n = name(Some("ns"), &format!("o{i}"));
            assert_eq!(kind.get(&n), Some(json("o", 500).as_slice()));
        }
    }

    #[test]
    fn an_object_larger_than_a_chunk_is_held_whole() {
        let mut kind = KindObjects::default();
        kind.insert(name(None, "small"), None, &json("small", 10));
        let big = json("big", CHUNK_MAX * 2);
        kind.insert(name(None, "big"), None, &big);
        kind.insert(name(None, "after"), None, &json("after", 10));
        assert_eq!(kind.get(&name(None, "big")), Some(big.as_slice()));
        assert_eq!(
            kind.get(&name(None, "small")),
            Some(json("small", 10).as_slice())
        );
        assert_eq!(
            kind.get(&name(None, "after")),
            Some(json("after", 10).as_slice())
        );
    }

    #[test]
    fn holes_are_compacted_and_what_is_held_survives_it() {
        let mut kind = KindObjects::default();
        for i in 0..200 {
            kind.insert(
                name(None, &format!("o{i}")),
                Some(&format!("app{}", i % 4)),
                &json("o", 200),
            );
        }
        // Rewriting the same objects over and over: the kind stays near its size.
        for round in 0..50 {
            for i in 0..200 {
                let body = json(&format!("r{round}"), 200);
                kind.insert(
                    name(None, &format!("o{i}")),
                    Some(&format!("app{}", i % 4)),
                    &body,
                );
            }
            let held: usize = kind.chunks.iter().map(Vec::len).sum();
            assert!(
                held <= kind.live + kind.live / 4 + CHUNK_MAX,
                "round {round}: {held} bytes for {}",
                kind.live
            );
            assert!(kind.dead <= CHUNK_MIN.max(kind.live / 4));
        }
        for i in 0..200 {
            assert_eq!(
                kind.get(&name(None, &format!("o{i}"))),
                Some(json("r49", 200).as_slice())
            );
            assert_eq!(
                kind.app(&name(None, &format!("o{i}"))),
                Some(format!("app{}", i % 4).as_str())
            );
        }
        // Deleting an app's objects forgets its name at the next compaction.
        for i in (0..200).filter(|i| i % 4 == 0) {
            assert!(kind.remove(&name(None, &format!("o{i}"))));
        }
        assert_eq!(kind.len(), 150);
        kind.compact();
        assert!(
            kind.apps.iter().all(|app| &**app != "app0"),
            "app0's name is dropped"
        );
        assert_eq!(
            kind.iter()
                .filter(|(_, app, _)| *app == Some("app1"))
                .count(),
            50
        );
    }

    #[test]
    fn compaction_waits_for_holes_worth_the_copy() {
        assert!(!compact_due(0, 0));
        assert!(!compact_due(CHUNK_MIN, 0), "a few small holes stay");
        assert!(compact_due(CHUNK_MIN + 1, 0));
        assert!(!compact_due(100_000, 400_000));
        assert!(compact_due(100_001, 400_000));
    }
}
