//! How the watch cache holds one kind's objects: their compact JSON, deflated against
//! the kind's first object, appended to a few large chunks, and per object its app
//! and where its bytes lie.
//!
//! Objects of one kind repeat each other: the same keys, labels, managers and field
//! sets, often the same values. Deflated alone a ConfigMap of 700 bytes takes 370;
//! deflated with the kind's first object as a preset dictionary, 80 (its uid and
//! times are most of it). Holding an object then costs about half of what parsing it
//! does (the dictionary is deflated again each time), reading it back a seventh.
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

use miniz_oxide::deflate::core::{
    CompressorOxide, TDEFLFlush, TDEFLStatus, compress_to_output, create_comp_flags_from_zip_params,
};
use miniz_oxide::inflate::TINFLStatus;
use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};
use parking_lot::Mutex;

use super::Name;

/// The smallest chunk: a kind with a handful of objects holds no more than this
/// beyond them.
const CHUNK_MIN: usize = 4 * 1024;
/// The largest chunk: beyond mimalloc's medium size (128 KiB), so a chunk is a page
/// of its own, and small enough that a kind's last, partly filled chunk wastes
/// little. An object larger than this gets a chunk of its own size.
const CHUNK_MAX: usize = 256 * 1024;
/// How much of a kind's first object is its dictionary: deflate looks back 32 KiB at
/// most, and every object held deflates the dictionary first, so a large first
/// object (a CRD) lends only its beginning.
const DICTIONARY_MAX: usize = 8 * 1024;
/// Deflate's fastest level: with a dictionary, higher levels gain a few bytes an object
/// for twice the time.
const LEVEL: i32 = 1;

/// One compressor for every kind: its tables take 300 KiB, too much to keep per kind
/// or to build per object; holding an object takes microseconds, so they queue here.
static COMPRESSOR: Mutex<Option<Box<CompressorOxide>>> = Mutex::new(None);

/// Where one object's deflated JSON lies, and its app (shared by every object of
/// the app).
struct Slot {
    app: Option<Arc<str>>,
    chunk: u32,
    start: u32,
    /// Deflated bytes.
    len: u32,
    /// Bytes of JSON they inflate to.
    json: u32,
}

/// One kind's objects.
#[derive(Default)]
pub(super) struct KindObjects {
    index: HashMap<Name, Slot>,
    chunks: Vec<Vec<u8>>,
    /// App names, each held once.
    apps: HashSet<Arc<str>>,
    /// What every object of the kind is deflated against: the start of the first
    /// object held (empty until then).
    dictionary: Box<[u8]>,
    /// Bytes of the chunks held by objects replaced or deleted since.
    dead: usize,
    /// Bytes of the chunks held by the objects in `index`.
    live: usize,
}

impl KindObjects {
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// The JSON of the object `name`, if held. Bytes that do not inflate (which this
    /// module never writes) read as empty, which no JSON parser accepts.
    pub(super) fn get(&self, name: &Name) -> Option<Vec<u8>> {
        self.index.get(name).map(|slot| self.json(slot))
    }

    /// The app of the object `name`, if held and labelled.
    pub(super) fn app(&self, name: &Name) -> Option<&str> {
        self.index.get(name)?.app.as_deref()
    }

    /// Every object held: its name and app.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Name, Option<&str>)> {
        self.index
            .iter()
            .map(|(name, slot)| (name, slot.app.as_deref()))
    }

    /// The JSON of every object of `app`; the others are not inflated.
    pub(super) fn owned_by<'a>(&'a self, app: &'a str) -> impl Iterator<Item = Vec<u8>> + 'a {
        self.index
            .values()
            .filter(move |slot| slot.app.as_deref() == Some(app))
            .map(|slot| self.json(slot))
    }

    /// Holds `json` as the object `name` of `app`, in place of what was held.
    pub(super) fn insert(&mut self, name: Name, app: Option<&str>, json: &[u8]) {
        if self.dictionary.is_empty() {
            self.dictionary = Box::from(&json[..json.len().min(DICTIONARY_MAX)]);
        }
        let app = app.map(|app| self.intern(app));
        // Unreachable for a compressor that only meets memory: the object is then
        // held as bytes that read back as no JSON, and a pass reads the server for it.
        let deflated = deflate(&self.dictionary, json).unwrap_or_default();
        let mut slot = self.append(app, &deflated);
        slot.json = json.len() as u32;
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

    /// Keeps only the objects `keep` accepts, given each one's name, app and a way to
    /// read its JSON (inflated only when asked), and gives back the memory of the rest.
    pub(super) fn retain(
        &mut self,
        mut keep: impl FnMut(&Name, Option<&str>, &dyn Fn() -> Vec<u8>) -> bool,
    ) {
        let dropped: Vec<Name> = self
            .index
            .iter()
            .filter(|(name, slot)| !keep(name, slot.app.as_deref(), &|| self.json(slot)))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &dropped {
            self.remove(name);
        }
        self.apps.retain(|app| Arc::strong_count(app) > 1);
        self.shrink();
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

    fn json(&self, slot: &Slot) -> Vec<u8> {
        inflate(&self.dictionary, self.bytes(slot), slot.json as usize).unwrap_or_default()
    }

    fn intern(&mut self, app: &str) -> Arc<str> {
        if let Some(held) = self.apps.get(app) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(app);
        self.apps.insert(held.clone());
        held
    }

    /// Copies `bytes` to the end of the last chunk, or of a new one when they do not
    /// fit.
    fn append(&mut self, app: Option<Arc<str>>, bytes: &[u8]) -> Slot {
        let fits = self
            .chunks
            .last()
            .is_some_and(|last| last.capacity() - last.len() >= bytes.len());
        if !fits {
            // Chunks grow with what the kind holds, so a small kind wastes little
            // and a large one has few chunks.
            let size = (self.live / 4).clamp(CHUNK_MIN, CHUNK_MAX).max(bytes.len());
            self.chunks.push(Vec::with_capacity(size));
        }
        let chunk = self.chunks.len() - 1;
        let last = &mut self.chunks[chunk];
        let start = last.len();
        last.extend_from_slice(bytes);
        self.live += bytes.len();
        Slot {
            app,
            // A chunk holds at most max(CHUNK_MAX, one object) bytes, and objects are
            // bounded by the API server's request size (3 MiB), so offsets fit.
            chunk: chunk as u32,
            start: start as u32,
            len: bytes.len() as u32,
            json: 0,
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
            let bytes = old
                .get(slot.chunk as usize)
                .and_then(|chunk| chunk.get(start..start + slot.len as usize))
                .unwrap_or_default();
            let mut moved = self.append(slot.app, bytes);
            moved.json = slot.json;
            fresh.insert(name, moved);
        }
        self.index = fresh;
        self.apps.retain(|app| Arc::strong_count(app) > 1);
    }
}

/// `json` deflated (raw, no header) as the continuation of a stream that began with
/// `dictionary`: what follows the dictionary's own blocks, which a sync flush ends on
/// a byte boundary. Inflating it after the dictionary gives `json` back.
fn deflate(dictionary: &[u8], json: &[u8]) -> Option<Vec<u8>> {
    let mut held = COMPRESSOR.lock();
    let compressor = held.get_or_insert_with(|| {
        Box::new(CompressorOxide::new(create_comp_flags_from_zip_params(
            LEVEL, 0, 0,
        )))
    });
    compressor.reset();
    let (status, _) = compress_to_output(compressor, dictionary, TDEFLFlush::Sync, |_| true);
    if status != TDEFLStatus::Okay {
        return None;
    }
    let mut out = Vec::with_capacity(json.len() / 4);
    let (status, _) = compress_to_output(compressor, json, TDEFLFlush::Finish, |bytes| {
        out.extend_from_slice(bytes);
        true
    });
    (status == TDEFLStatus::Done).then_some(out)
}

/// The `len` bytes of JSON that `deflated` holds, read after `dictionary`.
fn inflate(dictionary: &[u8], deflated: &[u8], len: usize) -> Option<Vec<u8>> {
    // The dictionary goes first in the output, where back-references reach it; one
    // spare byte lets the end of the stream be read with the output full.
    let mut out = vec![0; dictionary.len() + len + 1];
    out[..dictionary.len()].copy_from_slice(dictionary);
    let mut decompressor = Box::<DecompressorOxide>::default();
    let (status, _, written) = decompress(
        &mut decompressor,
        deflated,
        &mut out,
        dictionary.len(),
        inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
    );
    if status != TINFLStatus::Done || written != len {
        return None;
    }
    out.truncate(dictionary.len() + len);
    out.drain(..dictionary.len());
    Some(out)
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
        assert_eq!(kind.get(&name(Some("a"), "x")), Some(json("x", 10)));
        assert_eq!(kind.app(&name(Some("a"), "x")), Some("shop"));
        assert_eq!(kind.get(&name(None, "y")), Some(json("y", 20)));
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
        assert_eq!(kind.get(&name(None, "x")), Some(json("x", 30)));
        assert_eq!(kind.app(&name(None, "x")), Some("b"));
        assert!(kind.remove(&name(None, "x")));
        assert!(!kind.remove(&name(None, "x")), "removed once");
        assert_eq!(kind.get(&name(None, "x")), None);
        assert_eq!(kind.len(), 0);
    }

    /// How a lost shard's objects go: kept by name and app, JSON read only for the
    /// objects of no app (an inventory names its app in its labels).
    #[test]
    fn retain_keeps_what_it_is_told_and_reads_json_of_unlabelled_objects_only() {
        let mut kind = KindObjects::default();
        for i in 0..100 {
            let app = format!("app{}", i % 2);
            kind.insert(
                name(Some("ns"), &format!("o{i}")),
                Some(&app),
                &json("o", 300),
            );
        }
        kind.insert(name(Some("ns"), "inventory"), None, &json("inventory", 10));
        let mut read = Vec::new();
        kind.retain(|name, app, object| match app {
            Some(app) => app == "app0",
            None => {
                read.push((name.clone(), object()));
                false
            }
        });
        assert_eq!(
            read,
            vec![(name(Some("ns"), "inventory"), json("inventory", 10))]
        );
        assert_eq!(kind.len(), 50);
        assert!(kind.iter().all(|(_, app)| app == Some("app0")));
        assert_eq!(kind.get(&name(Some("ns"), "o4")), Some(json("o", 300)));
        assert_eq!(kind.get(&name(Some("ns"), "o5")), None);
        assert!(
            kind.apps.iter().all(|app| &**app == "app0"),
            "app1 is forgotten"
        );
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
            assert_eq!(kind.get(&n), Some(json("o", 500)));
        }
    }

    #[test]
    fn an_object_larger_than_a_chunk_is_held_whole() {
        let mut kind = KindObjects::default();
        kind.insert(name(None, "small"), None, &json("small", 10));
        let big = json("big", CHUNK_MAX * 2);
        kind.insert(name(None, "big"), None, &big);
        kind.insert(name(None, "after"), None, &json("after", 10));
        assert_eq!(kind.get(&name(None, "big")), Some(big));
        assert_eq!(kind.get(&name(None, "small")), Some(json("small", 10)));
        assert_eq!(kind.get(&name(None, "after")), Some(json("after", 10)));
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
                Some(json("r49", 200))
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
            kind.iter().filter(|(_, app)| *app == Some("app1")).count(),
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

    /// A ConfigMap as the API server sends it back: what differs between two is
    /// their name, uid, times and data.
    fn configmap(i: usize) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": format!("cm-{i}"), "namespace": format!("fleet-{}", i % 10),
                "uid": format!("{:08x}-4b1e-4c2d-9f00-{:012x}", i * 7919, i * 104_729),
                "resourceVersion": format!("{}", 1000 + i),
                "creationTimestamp": format!("2026-11-24T09:{:02}:{:02}Z", i / 60 % 60, i % 60),
                "labels": {"app.kubernetes.io/managed-by": "tether", "tether.dev/app": format!("fleet-{}", i % 10)},
                "managedFields": [{
                    "manager": "tether", "operation": "Apply", "apiVersion": "v1",
                    "time": format!("2026-11-24T09:{:02}:{:02}Z", i / 60 % 60, i % 60),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:key": {}, "f:mode": {}}, "f:metadata": {"f:labels": {
                        "f:app.kubernetes.io/managed-by": {}, "f:tether.dev/app": {}}}}
                }]
            },
            "data": {"key": format!("v{i}"), "mode": "production"}
        }))
        .unwrap_or_default()
    }

    #[test]
    fn objects_of_a_kind_are_held_in_a_fraction_of_their_json_and_read_back_exactly() {
        let mut kind = KindObjects::default();
        let mut json = 0;
        for i in 0..1_000 {
            let object = configmap(i);
            json += object.len();
            kind.insert(name(Some("ns"), &format!("cm-{i}")), Some("app"), &object);
        }
        for i in 0..1_000 {
            assert_eq!(
                kind.get(&name(Some("ns"), &format!("cm-{i}"))),
                Some(configmap(i))
            );
        }
        // The last chunk's spare room aside.
        kind.shrink();
        let held: usize = kind.chunks.iter().map(Vec::capacity).sum();
        assert!(held * 4 < json, "{held} bytes held for {json} of JSON");
        let owned: Vec<Vec<u8>> = kind.owned_by("app").collect();
        assert_eq!(owned.len(), 1_000);
        assert!(owned.contains(&configmap(500)));
        assert_eq!(kind.owned_by("other").count(), 0);
    }

    #[test]
    fn an_object_unlike_the_dictionary_or_beyond_its_window_reads_back_exactly() {
        let mut kind = KindObjects::default();
        kind.insert(name(None, "first"), None, &configmap(1));
        let unlike: Vec<u8> = (0..100_000u32)
            .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
            .collect();
        kind.insert(name(None, "unlike"), None, &unlike);
        let repeated = [configmap(1), vec![b' '; 40_000], configmap(1)].concat();
        kind.insert(name(None, "repeated"), None, &repeated);
        assert_eq!(kind.get(&name(None, "unlike")), Some(unlike));
        assert_eq!(kind.get(&name(None, "repeated")), Some(repeated));
        assert_eq!(kind.get(&name(None, "first")), Some(configmap(1)));
    }

    #[test]
    fn bytes_that_do_not_inflate_read_as_no_json() {
        let dictionary = configmap(1);
        let deflated = deflate(&dictionary, &configmap(2)).unwrap_or_default();
        assert_eq!(
            inflate(&dictionary, &deflated, configmap(2).len()),
            Some(configmap(2))
        );
        // A wrong length, a cut stream, no dictionary: nothing, never other JSON.
        assert_eq!(
            inflate(&dictionary, &deflated, configmap(2).len() - 1),
            None
        );
        assert_eq!(
            inflate(
                &dictionary,
                &deflated[..deflated.len() / 2],
                configmap(2).len()
            ),
            None
        );
        assert_eq!(
            inflate(&[], &deflated, configmap(2).len()),
            None,
            "back-references reach nothing"
        );
    }
}
