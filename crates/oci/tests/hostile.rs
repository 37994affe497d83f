//! Generated hostile images for what this crate reads from a registry (crates/hostile: never a
//! panic or an abort, bounded time and memory): layer blobs, tar and tar+gzip, applied alone
//! and in stacks onto the merged view and then checked as a plugin's tree; manifests and
//! indexes; image configs; signature artifacts, payloads and records.
//!
//! Tar streams are written here block by block ([`Tar`]), not by the tar crate, so that what a
//! writer refuses is possible: `..`, absolute names, NUL bytes, names past every field, sizes
//! that lie, bad checksums, PAX and GNU extensions in any number and order, sparse maps. A
//! layer input is the blob itself (gzip when it starts with gzip's magic), so a corpus file is
//! a `.tar` or `.tar.gz` that `tar tvf` reads; a stack is layers each after its length (u32,
//! little endian).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::OnceLock;

use hostile::inputs::{json_mutated, mutated};
use hostile::proptest::prelude::*;
use hostile::{Bounds, Target};
use loop_plugins_oci::build::{self, ImageConfig, LayerBuilder, LayerCompression};
use loop_plugins_oci::checks;
use loop_plugins_oci::layers::{self, Budget, LayerError};
use loop_plugins_oci::limits::LOOP_PLUGIN_MAX_BYTES;
use loop_plugins_oci::manifest::{self as image_manifest, Blob, Manifest};
use loop_plugins_oci::media;
use loop_plugins_oci::rootfs::{LOOP_PLUGIN_DIR, NodeKind, RootFs};
use loop_plugins_oci::signing::record::SignatureRecord;
use loop_plugins_oci::signing::{artifact, keys::PublisherKey, payload::Payload, policy};
use loop_plugins_oci::{Digest, Limits};
use model::contract::RunAs;
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: hostile::Counting = hostile::Counting;

/// What the layer targets run under: the reference's /loop-plugin cap as shipped, and caps on
/// decompressed bytes, entries, the tree and its walking small enough for a debug build to
/// reach in a test (there, hashing and inflating a layer take some 100 ms a megabyte, and
/// the input that reaches every cap runs well within the time bound on a busy machine).
const DECOMPRESSED: u64 = 4 << 20;
const ENTRIES: u64 = 7_000;
const PLUGIN_CAP: u64 = LOOP_PLUGIN_MAX_BYTES;
const TREE: u64 = 8 << 20;
const STEPS: u64 = 1_000_000;

fn limits() -> Limits {
    Limits {
        decompressed_bytes: DECOMPRESSED,
        entries: ENTRIES,
        loop_plugin_bytes: PLUGIN_CAP,
        tree_bytes: TREE,
        resolve_steps: STEPS,
        ..Limits::default()
    }
}

/// An applied stack may hold what it read (at most the decompressed budget under
/// /loop-plugin, in a buffer that grows as it fills) and its tree; nothing in proportion to
/// what a header claims (a /loop-plugin file may claim up to 50 MB, over this bound).
const LAYER_BOUNDS: Bounds = Bounds {
    stack: 2 << 20,
    time: std::time::Duration::from_secs(2),
    memory: 32 << 20,
};

// ---------------------------------------------------------------------------------------------
// A tar writer that writes anything.

const BLOCK: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Magic {
    Ustar,
    Gnu,
    V7,
}

/// One header's fields, as written (nothing checked).
#[derive(Clone, Debug)]
struct Head {
    name: Vec<u8>,
    prefix: Vec<u8>,
    link: Vec<u8>,
    kind: u8,
    size: u64,
    uid: u64,
    gid: u64,
    mode: u64,
    magic: Magic,
    base256: bool,
    bad_sum: bool,
    /// GNU sparse: the header's regions (offset, length), whether extension blocks follow,
    /// and the file's real size.
    sparse: Vec<(u64, u64)>,
    extended: bool,
    real_size: u64,
}

impl Head {
    fn new(name: &[u8], kind: u8, size: u64) -> Head {
        Head {
            name: name.to_vec(),
            prefix: Vec::new(),
            link: Vec::new(),
            kind,
            size,
            uid: 0,
            gid: 0,
            mode: 0o644,
            magic: Magic::Ustar,
            base256: false,
            bad_sum: false,
            sparse: Vec::new(),
            extended: false,
            real_size: 0,
        }
    }

    fn bytes(&self) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        put(&mut b[0..100], &self.name);
        number(&mut b[100..108], self.mode, false);
        number(&mut b[108..116], self.uid, self.base256);
        number(&mut b[116..124], self.gid, self.base256);
        number(&mut b[124..136], self.size, self.base256);
        number(&mut b[136..148], 0, false);
        b[156] = self.kind;
        put(&mut b[157..257], &self.link);
        match self.magic {
            Magic::Ustar => {
                b[257..263].copy_from_slice(b"ustar\0");
                b[263..265].copy_from_slice(b"00");
                put(&mut b[345..500], &self.prefix);
            }
            Magic::Gnu => {
                b[257..263].copy_from_slice(b"ustar ");
                b[263..265].copy_from_slice(b" \0");
                for (i, (offset, length)) in self.sparse.iter().take(4).enumerate() {
                    let at = 386 + i * 24;
                    number(&mut b[at..at + 12], *offset, self.base256);
                    number(&mut b[at + 12..at + 24], *length, self.base256);
                }
                b[482] = u8::from(self.extended);
                number(&mut b[483..495], self.real_size, self.base256);
            }
            Magic::V7 => {}
        }
        b[148..156].fill(b' ');
        let sum: u32 = b.iter().map(|&x| u32::from(x)).sum::<u32>() + u32::from(self.bad_sum);
        let digits = format!("{sum:06o}\0 ");
        b[148..156].copy_from_slice(&digits.as_bytes()[digits.len() - 8..]);
        b
    }
}

fn put(field: &mut [u8], value: &[u8]) {
    let n = value.len().min(field.len());
    field[..n].copy_from_slice(&value[..n]);
}

/// Octal when it fits (and base-256 is not asked for), else GNU base-256.
fn number(field: &mut [u8], v: u64, base256: bool) {
    let digits = field.len() - 1;
    let octal = format!("{v:0digits$o}");
    if !base256 && octal.len() == digits {
        field[..digits].copy_from_slice(octal.as_bytes());
        field[digits] = 0;
    } else {
        field.fill(0);
        field[0] = 0x80;
        let be = v.to_be_bytes();
        let n = be.len().min(field.len() - 1);
        let at = field.len() - n;
        field[at..].copy_from_slice(&be[be.len() - n..]);
    }
}

/// One PAX record, its length counting itself.
fn pax_record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let rest = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = rest + 1;
    while len != rest + len.to_string().len() {
        len = rest + len.to_string().len();
    }
    let mut r = len.to_string().into_bytes();
    r.push(b' ');
    r.extend_from_slice(key);
    r.push(b'=');
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

#[derive(Default)]
struct Tar {
    bytes: Vec<u8>,
}

impl Tar {
    fn raw(&mut self, head: &Head, data: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(&head.bytes());
        self.bytes.extend_from_slice(data);
        self.pad();
        self
    }

    fn pad(&mut self) {
        let over = self.bytes.len() % BLOCK;
        if over != 0 {
            self.bytes.resize(self.bytes.len() + BLOCK - over, 0);
        }
    }

    fn file(&mut self, name: &str, data: &[u8]) -> &mut Self {
        self.raw(&Head::new(name.as_bytes(), b'0', data.len() as u64), data)
    }

    fn dir(&mut self, name: &str) -> &mut Self {
        let mut h = Head::new(name.as_bytes(), b'5', 0);
        h.mode = 0o755;
        self.raw(&h, &[])
    }

    fn link(&mut self, kind: u8, name: &str, target: &str) -> &mut Self {
        let mut h = Head::new(name.as_bytes(), kind, 0);
        h.link = target.as_bytes().to_vec();
        self.raw(&h, &[])
    }

    fn pax(&mut self, kind: u8, records: &[(&[u8], &[u8])]) -> &mut Self {
        let data: Vec<u8> = records.iter().flat_map(|(k, v)| pax_record(k, v)).collect();
        self.raw(&Head::new(b"PaxHeaders/x", kind, data.len() as u64), &data)
    }

    fn gnu_long(&mut self, kind: u8, name: &[u8]) -> &mut Self {
        let mut data = name.to_vec();
        data.push(0);
        let mut h = Head::new(b"././@LongLink", kind, data.len() as u64);
        h.magic = Magic::Gnu;
        self.raw(&h, &data)
    }

    fn end(&mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0; 2 * BLOCK]);
        std::mem::take(&mut self.bytes)
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    gzip_at(bytes, flate2::Compression::fast())
}

fn gzip_at(bytes: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), level);
    gz.write_all(bytes).expect("writes to memory");
    gz.finish().expect("writes to memory")
}

/// A small deterministic generator for the choices made while writing a layer.
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Dice {
        Dice(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------------------------
// Generated layers.

/// Path components the layer rules treat specially, and a few plain ones.
const COMPONENTS: &[&str] = &[
    "loop-plugin",
    "loop-plugin",
    "plugin.json",
    "ui",
    "main",
    "index.html",
    "data",
    "a",
    "b",
    "etc",
    "..",
    ".",
    "",
    ".wh.loop-plugin",
    ".wh..wh..opq",
    ".wh.a",
    ".wh.ui",
    ".wh.plugin.json",
    ".wh.data",
    ".wh.",
    ".wh..wh.aufs",
    "x\0y",
    "\u{202e}rtl",
    "l",
    "m",
];

fn path(d: &mut Dice) -> Vec<u8> {
    match d.below(28) {
        // Deep: up to 3000 components, or up to a million (two megabytes of name).
        0 => {
            let mut p = "a/".repeat(d.below(3000) as usize);
            p.push_str(d.pick(COMPONENTS));
            p.into_bytes()
        }
        1 => "loop-plugin/"
            .repeat(d.below(1_000_000) as usize / 6)
            .into_bytes(),
        // One long component.
        2 => format!("loop-plugin/{}", "d".repeat(d.below(6000) as usize)).into_bytes(),
        // Any bytes.
        3 => (0..d.below(300)).map(|_| d.next() as u8).collect(),
        4 => [b"/".as_slice(), &path(d)].concat(),
        5 => [b"./".as_slice(), &path(d)].concat(),
        6 => b"../../../etc/passwd".to_vec(),
        n => {
            let mut p = Vec::new();
            if n % 2 == 0 {
                p.extend_from_slice(b"loop-plugin/");
            }
            for i in 0..1 + d.below(5) {
                if i > 0 {
                    p.extend_from_slice(if d.one_in(10) { b"//" } else { b"/" });
                }
                p.extend_from_slice(d.pick(COMPONENTS).as_bytes());
            }
            if d.one_in(6) {
                p.push(b'/');
            }
            p
        }
    }
}

fn target(d: &mut Dice) -> Vec<u8> {
    match d.below(10) {
        0 => b"/".to_vec(),
        1 => b"../../../../etc".to_vec(),
        2 => format!("/{}", String::from_utf8_lossy(&path(d))).into_bytes(),
        3 => "../".repeat(d.below(50) as usize).into_bytes(),
        _ => path(d),
    }
}

/// Type flags, the common ones more often: files, old files, contiguous files, directories,
/// symlinks, hard links, devices, FIFOs, sparse files, extensions, and kinds no one writes.
const KINDS: &[u8] = b"0000\x00755522211346SxgLKVMND";

/// Header sizes that lie, from a little to everything a u64 holds.
const CLAIMS: &[u64] = &[
    10_000_000_000,
    u64::MAX,
    u64::MAX - 511,
    u64::MAX - 512,
    1 << 63,
    40_000_000,
    LOOP_PLUGIN_MAX_BYTES,
    LOOP_PLUGIN_MAX_BYTES + 1,
    8_589_934_591, // the largest 11-digit octal
    0,
    1,
    511,
    513,
];

fn data(d: &mut Dice) -> Vec<u8> {
    match d.below(12) {
        0 => br#"{"id":"echo","name":"Echo","version":"1","api":"1"}"#.to_vec(),
        1 => vec![b'z'; d.below(20_000) as usize],
        _ => (0..d.below(40)).map(|_| d.next() as u8).collect(),
    }
}

fn pax_value(d: &mut Dice) -> Vec<u8> {
    match d.below(8) {
        0 => b"-1".to_vec(),
        1 => b"99999999999999999999999".to_vec(),
        2 => b"4000000000".to_vec(),
        3 => b"".to_vec(),
        4 => b"0x10".to_vec(),
        5 => u64::MAX.to_string().into_bytes(),
        _ => d.below(100_000).to_string().into_bytes(),
    }
}

/// One entry, with whatever extension headers go before it.
fn entry(tar: &mut Tar, d: &mut Dice) {
    let name = path(d);
    let kind = d.pick(KINDS);
    let mut body = data(d);
    let mut h = Head::new(&name, kind, body.len() as u64);
    h.magic = d.pick(&[Magic::Ustar, Magic::Ustar, Magic::Gnu, Magic::V7]);
    h.mode = if d.one_in(8) { d.next() } else { 0o755 };
    h.uid = if d.one_in(8) {
        d.next()
    } else {
        d.below(70_000)
    };
    h.gid = if d.one_in(8) {
        d.next()
    } else {
        d.below(70_000)
    };
    h.base256 = d.one_in(10);
    h.bad_sum = d.one_in(40);
    if matches!(kind, b'1' | b'2') || d.one_in(10) {
        h.link = target(d);
    }
    // The name: in the field (cut at 100 bytes), split over ustar's prefix, or in an extension.
    let mut pax: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    match d.below(6) {
        0 if name.len() <= 255 => {
            if let Some(at) = name.iter().rposition(|&c| c == b'/') {
                h.prefix = name[..at].to_vec();
                h.name = name[at + 1..].to_vec();
                h.magic = Magic::Ustar;
            }
        }
        1 => pax.push((b"path".to_vec(), name.clone())),
        2 => {
            tar.gnu_long(b'L', &name);
        }
        3 => {
            tar.gnu_long(b'L', &name);
            pax.push((b"path".to_vec(), path(d)));
        }
        _ => {}
    }
    match d.below(8) {
        0 => pax.push((b"linkpath".to_vec(), target(d))),
        1 => {
            tar.gnu_long(b'K', &target(d));
        }
        _ => {}
    }
    if d.one_in(6) {
        let key = d.pick(&[
            "size",
            "uid",
            "gid",
            "mtime",
            "GNU.sparse.size",
            "SCHILY.xattr.security.capability",
            "",
            "=",
        ]);
        pax.push((key.as_bytes().to_vec(), pax_value(d)));
    }
    // A size that lies about the data that follows.
    if d.one_in(8) {
        h.size = d.pick(CLAIMS);
        if d.one_in(2) {
            body.truncate(d.below(body.len() as u64 + 1) as usize);
        }
    }
    if kind == b'S' {
        h.magic = Magic::Gnu;
        let regions = if d.one_in(4) {
            d.below(3000)
        } else {
            d.below(8)
        };
        let mut at = 0u64;
        let mut all = Vec::new();
        for _ in 0..regions {
            at += if d.one_in(10) {
                d.next() >> 20
            } else {
                d.below(4) * 512
            };
            let len = if d.one_in(10) {
                d.next() >> 40
            } else {
                d.below(3) * 512
            };
            all.push((at, len));
            at = at.saturating_add(len);
        }
        h.real_size = if d.one_in(5) { d.pick(CLAIMS) } else { at };
        h.sparse = all.iter().take(4).copied().collect();
        h.extended = all.len() > 4 || d.one_in(10);
        let stored: u64 = all.iter().map(|(_, l)| *l).fold(0, u64::saturating_add);
        if !d.one_in(5) {
            h.size = stored;
            body = vec![b's'; stored.min(8192) as usize];
        }
        if !pax.is_empty() {
            let records: Vec<(&[u8], &[u8])> = pax.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            tar.pax(b'x', &records);
        }
        tar.bytes.extend_from_slice(&h.bytes());
        for chunk in all.get(4..).unwrap_or_default().chunks(21) {
            let mut ext = [0u8; BLOCK];
            for (i, (offset, length)) in chunk.iter().enumerate() {
                number(&mut ext[i * 24..i * 24 + 12], *offset, false);
                number(&mut ext[i * 24 + 12..i * 24 + 24], *length, false);
            }
            ext[504] = 1;
            tar.bytes.extend_from_slice(&ext);
        }
        if let Some(last) = tar.bytes.len().checked_sub(8).filter(|_| all.len() > 4) {
            tar.bytes[last] = 0; // the last extension block says no more follow
        }
        tar.bytes.extend_from_slice(&body);
        tar.pad();
        return;
    }
    if !pax.is_empty() {
        let records: Vec<(&[u8], &[u8])> = pax.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        tar.pax(if d.one_in(8) { b'g' } else { b'x' }, &records);
    }
    tar.raw(&h, &body);
}

/// A layer of `entries` generated entries, ended, cut or followed by junk, maybe gzipped.
fn layer_of(seed: u64, entries: usize) -> Vec<u8> {
    let mut d = Dice::new(seed);
    let mut tar = Tar::default();
    for _ in 0..entries {
        entry(&mut tar, &mut d);
    }
    let mut bytes = match d.below(6) {
        0 => std::mem::take(&mut tar.bytes),
        1 => {
            let mut b = tar.end();
            let cut = d.below(b.len() as u64 + 1) as usize;
            b.truncate(cut);
            b
        }
        2 => {
            let mut b = tar.end();
            b.extend((0..d.below(2000)).map(|_| d.next() as u8));
            b
        }
        _ => tar.end(),
    };
    if d.one_in(2) {
        bytes = gzip(&bytes);
        match d.below(6) {
            0 => {
                let cut = d.below(bytes.len() as u64 + 1) as usize;
                bytes.truncate(cut);
            }
            1 => {
                let again = bytes.clone();
                bytes.extend_from_slice(&again);
            }
            2 => bytes.extend_from_slice(b"trailing junk"),
            _ => {}
        }
    }
    bytes
}

/// Many entries: one directory's worth of files, then as many opaque markers for it, or a
/// chain of symlinks through each other.
fn crowd(seed: u64, n: usize) -> Vec<u8> {
    let mut d = Dice::new(seed);
    let mut tar = Tar::default();
    match d.below(3) {
        0 => {
            for i in 0..n {
                tar.file(&format!("loop-plugin/ui/f{i}"), b"x");
            }
            for _ in 0..n {
                tar.file("loop-plugin/ui/.wh..wh..opq", b"");
            }
        }
        1 => {
            for i in 0..n {
                tar.link(b'2', &format!("l{i}"), &format!("l{}/l{}", i + 1, i + 1));
            }
            for i in 0..n {
                tar.file(&format!("l{i}/x"), b"x");
            }
        }
        _ => {
            for i in 0..n {
                tar.dir(&format!("d{i}"));
                tar.file(&format!("d{i}/.wh..wh..opq"), b"");
                tar.file(&format!(".wh.d{}", i / 2), b"");
            }
        }
    }
    let bytes = tar.end();
    if d.one_in(2) { gzip(&bytes) } else { bytes }
}

/// Decompressing past the budget from a few kilobytes: zeros in a file, and zeros that are
/// not even a tar.
fn bombs() -> &'static [Vec<u8>] {
    static BOMBS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    BOMBS.get_or_init(|| {
        let zeros = vec![0u8; DECOMPRESSED as usize + (1 << 20)];
        let mut tar = Tar::default();
        tar.file("loop-plugin/ui/zeros", &zeros);
        let mut outside = Tar::default();
        outside.file("zeros", &zeros);
        vec![gzip(&tar.end()), gzip(&outside.end()), gzip(&zeros)]
    })
}

/// Valid layers (the shape of a plugin image's) and the extensions real writers use: what
/// byte-level mutations start from.
fn layer_seeds() -> Vec<Vec<u8>> {
    let plugin = LayerBuilder::new()
        .dir("loop-plugin", 0, 0, 0o755)
        .file("loop-plugin/plugin.json", b"{\"id\":\"echo\"}", 0, 0, 0o644)
        .file("loop-plugin/ui/main/index.html", b"<p>hi</p>", 0, 0, 0o644)
        .symlink("loop-plugin/ui/link", "main/index.html")
        .hardlink("loop-plugin/copy.json", "loop-plugin/plugin.json")
        .dir("data", 1000, 1000, 0o755)
        .whiteout("etc/old")
        .opaque("loop-plugin/ui")
        .file(
            &format!("loop-plugin/{}/deep.json", "n".repeat(150)),
            b"{}",
            0,
            0,
            0o644,
        );
    let mut pax = Tar::default();
    pax.pax(
        b'x',
        &[
            (b"path", b"loop-plugin/plugin.json"),
            (b"uid", b"4000000000"),
        ],
    )
    .file("short", b"{}")
    .gnu_long(b'L', b"loop-plugin/ui/a-long-name.html")
    .file("x", b"<p>")
    .pax(b'g', &[(b"comment", b"global")])
    .gnu_long(b'K', b"loop-plugin/plugin.json")
    .link(b'1', "loop-plugin/hard", "ignored");
    let mut sparse = Head::new(b"loop-plugin/sparse", b'S', 1024);
    sparse.magic = Magic::Gnu;
    sparse.sparse = vec![(0, 512), (4096, 512)];
    sparse.real_size = 8192;
    let mut special = Tar::default();
    special.raw(&sparse, &[b'q'; 1024]);
    special.raw(&Head::new(b"dev/null", b'3', 0), &[]);
    special.raw(&Head::new(b"loop-plugin/fifo", b'6', 0), &[]);
    let pax = pax.end();
    let special = special.end();
    vec![
        plugin.build(LayerCompression::None).unwrap().bytes,
        plugin.build(LayerCompression::Gzip).unwrap().bytes,
        pax.clone(),
        gzip(&pax),
        special,
    ]
}

fn layer_inputs() -> BoxedStrategy<Vec<u8>> {
    // Crowds and bombs take a debug build a tenth of a second and more each: fewer of them.
    prop_oneof![
        30 => (any::<u64>(), 0usize..24).prop_map(|(seed, n)| layer_of(seed, n)),
        15 => mutated(layer_seeds()),
        2 => (any::<u64>(), 1usize..2000).prop_map(|(seed, n)| crowd(seed, n)),
        1 => (0..bombs().len()).prop_map(|i| bombs()[i].clone()),
    ]
    .boxed()
}

/// A stack's layers, each after its length.
fn stack_bytes(layers: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in layers {
        out.extend_from_slice(&(l.len() as u32).to_le_bytes());
        out.extend_from_slice(l);
    }
    out
}

fn stack_layers(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut layers = Vec::new();
    while bytes.len() >= 4 {
        let len = u32::from_le_bytes(bytes[..4].try_into().expect("four bytes")) as usize;
        let len = len.min(bytes.len() - 4);
        layers.push(&bytes[4..4 + len]);
        bytes = &bytes[4 + len..];
    }
    layers
}

fn stack_inputs() -> BoxedStrategy<Vec<u8>> {
    let one = prop_oneof![
        30 => (any::<u64>(), 0usize..16).prop_map(|(seed, n)| layer_of(seed, n)),
        10 => mutated(layer_seeds()),
        1 => (0..bombs().len()).prop_map(|i| bombs()[i].clone()),
    ];
    prop::collection::vec(one, 1..6)
        .prop_map(|layers| stack_bytes(&layers))
        .boxed()
}

// ---------------------------------------------------------------------------------------------
// The property of the layer targets.

fn blob(bytes: &[u8]) -> Blob {
    let media_type = if bytes.starts_with(&[0x1f, 0x8b]) {
        media::OCI_LAYER_GZIP
    } else {
        media::OCI_LAYER_TAR
    };
    Blob {
        media_type: media_type.to_string(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
    }
}

/// Applies layers in order as inspect does; a refusal must be a typed error with a message
/// of bounded length, and what was applied must keep the merged view's invariants.
fn apply_stack(layers: &[&[u8]]) -> Result<(), String> {
    let mut fs = RootFs::for_limits(&limits());
    let mut budget = Budget::new(DECOMPRESSED, ENTRIES);
    for (index, bytes) in layers.iter().enumerate() {
        let result = layers::apply_layer(&mut fs, index, &blob(bytes), None, *bytes, &mut budget);
        if let Err(e) = result {
            return refusal_is_well_formed(&e);
        }
        merged_view_holds(&fs)?;
    }
    let _ = checks::check_tree(
        &fs,
        RunAs {
            uid: 1000,
            gid: None,
        },
        PLUGIN_CAP,
    );
    Ok(())
}

fn refusal_is_well_formed(e: &LayerError) -> Result<(), String> {
    let message = e.to_string();
    if message.is_empty() {
        return Err(format!("refused with an empty message: {e:?}"));
    }
    if message.len() > MAX_MESSAGE {
        return Err(format!(
            "refused with a message of {} bytes: {}…",
            message.len(),
            message.chars().take(200).collect::<String>()
        ));
    }
    Ok(())
}

/// The merged view: every path relative, clean and under a directory of the view; each file
/// under /loop-plugin holding the bytes its size says, counted once, under the cap; the tree
/// under its cap.
fn merged_view_holds(fs: &RootFs) -> Result<(), String> {
    let mut kinds: BTreeMap<String, bool> = BTreeMap::new();
    let mut bytes = 0u64;
    for (path, node) in fs.below("") {
        if path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(format!("the merged view holds {path:?}"));
        }
        if let Some((parent, _)) = path.rsplit_once('/')
            && kinds.get(parent) != Some(&true)
        {
            return Err(format!(
                "{path:?} is in the view, but not as a child of a directory"
            ));
        }
        kinds.insert(path.clone(), node.kind == NodeKind::Dir);
        let in_plugin = path.starts_with(&format!("{LOOP_PLUGIN_DIR}/"));
        if let (true, NodeKind::File { size, content }) = (in_plugin, &node.kind) {
            bytes += size;
            match content {
                Some(c) if c.len() as u64 == *size => {}
                Some(c) => {
                    return Err(format!(
                        "{path:?} holds {} bytes but its size is {size}",
                        c.len()
                    ));
                }
                None => return Err(format!("{path:?} is under /loop-plugin without its bytes")),
            }
        }
    }
    if bytes != fs.loop_plugin_bytes() {
        return Err(format!(
            "/loop-plugin holds {bytes} bytes but {} are counted",
            fs.loop_plugin_bytes()
        ));
    }
    if bytes > PLUGIN_CAP {
        return Err(format!("/loop-plugin holds {bytes} bytes, over the cap"));
    }
    if fs.tree_bytes() > TREE {
        return Err(format!(
            "the tree takes {} bytes, over its cap",
            fs.tree_bytes()
        ));
    }
    Ok(())
}

#[test]
fn layer() {
    Target::new("layer", env!("CARGO_MANIFEST_DIR"))
        .bounds(LAYER_BOUNDS)
        .run(layer_inputs, |bytes| apply_stack(&[bytes]));
}

#[test]
fn layer_stack() {
    Target::new("layer_stack", env!("CARGO_MANIFEST_DIR"))
        .bounds(LAYER_BOUNDS)
        .run(stack_inputs, |bytes| apply_stack(&stack_layers(bytes)));
}

// ---------------------------------------------------------------------------------------------
// Manifests, indexes, configs.

fn plugin_image() -> build::BuiltImage {
    let layer = LayerBuilder::new()
        .file("loop-plugin/plugin.json", b"{}", 0, 0, 0o644)
        .dir("data", 1000, 1000, 0o755)
        .build(LayerCompression::Gzip)
        .unwrap();
    let config = ImageConfig {
        entrypoint: vec!["/echo".into()],
        cmd: vec!["--serve".into()],
        user: Some("1000:1000".into()),
        labels: BTreeMap::from([("dev.loop.plugin".to_string(), "1".to_string())]),
        env: vec!["PATH=/bin".into()],
        working_dir: Some("/".into()),
        ..ImageConfig::default()
    };
    build::build_image(&config, vec![layer])
}

fn manifest_seeds() -> Vec<Value> {
    let image = plugin_image();
    let (index, _) = build::build_index(&[(&image, "linux", "arm64"), (&image, "linux", "amd64")]);
    let d = |media_type: &str, size: u64| json!({"mediaType": media_type, "digest": Digest::of(media_type.as_bytes()).to_string(), "size": size});
    vec![
        serde_json::from_slice(&image.manifest).unwrap(),
        serde_json::from_slice(&index).unwrap(),
        json!({"schemaVersion": 2, "mediaType": media::DOCKER_MANIFEST,
            "config": d(media::DOCKER_CONFIG, 1469),
            "layers": [d(media::DOCKER_LAYER_GZIP, 2_811_478), d(media::DOCKER_FOREIGN_LAYER_GZIP, 1)]}),
        json!({"schemaVersion": 2, "mediaType": media::DOCKER_MANIFEST_LIST, "manifests": [
            {"mediaType": media::DOCKER_MANIFEST, "digest": Digest::of(b"a").to_string(), "size": 528,
             "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}},
            {"mediaType": media::OCI_INDEX, "digest": Digest::of(b"b").to_string(), "size": 528,
             "platform": {"architecture": "amd64", "os": "linux", "os.version": "10.0", "os.features": ["x"]}}]}),
        json!({"schemaVersion": 2, "mediaType": media::OCI_MANIFEST, "artifactType": "application/x",
            "config": d(media::OCI_EMPTY, 2), "layers": [d(media::OCI_LAYER_ZSTD, 10)],
            "subject": d(media::OCI_MANIFEST, 100), "annotations": {"org.opencontainers.image.created": "now"}}),
    ]
}

fn json_inputs(seeds: Vec<Value>) -> BoxedStrategy<Vec<u8>> {
    let texts: Vec<Vec<u8>> = seeds
        .iter()
        .map(|v| serde_json::to_vec_pretty(v).unwrap())
        .collect();
    prop_oneof![
        1 => mutated(texts),
        1 => json_mutated(seeds, 120).prop_map(|v| serde_json::to_vec(&v).unwrap()),
    ]
    .boxed()
}

const CONTENT_TYPES: &[Option<&str>] = &[
    None,
    Some(media::OCI_MANIFEST),
    Some(media::OCI_INDEX),
    Some(media::DOCKER_MANIFEST_LIST),
    Some("application/vnd.docker.distribution.manifest.v2+json; charset=utf-8"),
    Some(""),
    Some(";;;"),
];

#[test]
fn image_manifest() {
    Target::new("image_manifest", env!("CARGO_MANIFEST_DIR")).run(
        || json_inputs(manifest_seeds()),
        |bytes| {
            let limits = Limits::default();
            let content_type = CONTENT_TYPES[bytes.len() % CONTENT_TYPES.len()];
            match image_manifest::parse(bytes, content_type) {
                Ok(Manifest::Image(m)) => {
                    short(image_manifest::image_blobs(&m, &limits).err())?;
                }
                Ok(Manifest::Index(i)) => {
                    short(image_manifest::select_platform(&i, &limits).err())?;
                }
                Err(e) => short(Some(e))?,
            }
            Ok(())
        },
    );
}

/// A refusal is quoted in a Plugin's status and in Events: it says what is wrong in a few
/// lines, whatever the input quoted in it.
fn short(refusal: Option<impl std::fmt::Display>) -> Result<(), String> {
    match refusal.map(|e| e.to_string()) {
        Some(m) if m.len() > MAX_MESSAGE => Err(format!(
            "a refusal of {} bytes: {}…",
            m.len(),
            m.chars().take(200).collect::<String>()
        )),
        _ => Ok(()),
    }
}

/// The longest refusal message: a path at PATH_MAX, quoted, and some words.
const MAX_MESSAGE: usize = 8 << 10;

#[test]
fn image_config() {
    let seeds = || {
        let image = plugin_image();
        let docker = json!({"architecture": "amd64", "os": "linux", "created": "2024-01-01T00:00:00Z",
            "config": {"User": "65532", "Env": ["A=b"], "Entrypoint": null, "Cmd": ["/x"],
                "Labels": {"dev.loop.plugin": "1", "other": ""}, "ExposedPorts": {"80/tcp": {}},
                "Volumes": {"/data": {}}, "StopSignal": "SIGTERM"},
            "rootfs": {"type": "layers", "diff_ids": [Digest::of(b"a").to_string(), Digest::of(b"b").to_string()]},
            "history": [{"created_by": "COPY . /", "empty_layer": true}]});
        json_inputs(vec![serde_json::from_slice(&image.config).unwrap(), docker])
    };
    Target::new("image_config", env!("CARGO_MANIFEST_DIR")).run(seeds, |bytes| {
        for layers in [0, 1, 2] {
            short(checks::check_config(bytes, layers).err())?;
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Signatures: the artifact a registry returns, the payload it points at, the record a
// Plugin carries, judged by the policy in every mode.

fn signature_seeds() -> Vec<Value> {
    let key = PublisherKey::generate().unwrap();
    let payload = Payload::new(
        "echo",
        "0.1.0",
        Digest::of(b"{}").hex(),
        "localhost:5000/echo",
        &Digest::of(b"m"),
    );
    let record = SignatureRecord::sign(&key, &payload);
    let built = artifact::build(std::slice::from_ref(&record));
    vec![
        serde_json::from_slice(&built.manifest).unwrap(),
        serde_json::from_slice(&payload.to_bytes()).unwrap(),
        serde_json::to_value(&record).unwrap(),
    ]
}

#[test]
fn signatures() {
    Target::new("signatures", env!("CARGO_MANIFEST_DIR")).run(
        || json_inputs(signature_seeds()),
        |bytes| {
            short(artifact::parse(bytes).err())?;
            short(Payload::parse(bytes).err())?;
            let Ok(record) = serde_json::from_slice::<SignatureRecord>(bytes) else {
                return Ok(());
            };
            short(record.verify().err())?;
            // The subject the payload claims, so the policy judges the signature itself.
            let subject = match record.claimed_payload() {
                Ok(p) => policy::Subject {
                    plugin: p.plugin.name,
                    version: p.plugin.version,
                    repository: p.image.repository,
                    manifest_digest: Digest::parse(&p.image.digest).unwrap_or(Digest::of(b"")),
                    plugin_json_sha256: p.plugin.plugin_json_sha256,
                },
                Err(_) => policy::Subject {
                    plugin: "echo".into(),
                    version: "0.1.0".into(),
                    repository: "localhost:5000/echo".into(),
                    manifest_digest: Digest::of(b"m"),
                    plugin_json_sha256: Digest::of(b"{}").hex().to_string(),
                },
            };
            let trusted = vec![record.public_key.clone()];
            for mode in ["disabled", "permissive", "strict", "other"] {
                let mode = policy::SignatureMode::parse(mode);
                let admission = policy::decide(&mode, &trusted, Some(&record), &subject);
                short(Some(admission.message).filter(|m| m.len() > MAX_MESSAGE))?;
            }
            let _ = policy::pick(std::slice::from_ref(&record), &trusted);
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// The hand-made corpus: one file for each kind of hostile layer, kept beside the inputs the
// generators found.

fn head(name: &str, kind: u8, size: u64) -> Head {
    Head::new(name.as_bytes(), kind, size)
}

fn sparse_head(name: &str, regions: &[(u64, u64)], real_size: u64) -> (Head, Vec<u8>) {
    let stored: u64 = regions.iter().map(|(_, l)| l).sum();
    let mut h = head(name, b'S', stored);
    h.magic = Magic::Gnu;
    h.sparse = regions.iter().take(4).copied().collect();
    h.extended = regions.len() > 4;
    h.real_size = real_size;
    let mut blocks = Vec::new();
    let rest = regions.get(4..).unwrap_or_default();
    for (i, chunk) in rest.chunks(21).enumerate() {
        let mut ext = [0u8; BLOCK];
        for (j, (offset, length)) in chunk.iter().enumerate() {
            number(&mut ext[j * 24..j * 24 + 12], *offset, false);
            number(&mut ext[j * 24 + 12..j * 24 + 24], *length, false);
        }
        ext[504] = u8::from((i + 1) * 21 < rest.len());
        blocks.extend_from_slice(&ext);
    }
    blocks.extend(std::iter::repeat_n(b'q', stored as usize));
    (h, blocks)
}

fn layer_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let small = |bytes: &[u8]| gzip_at(bytes, flate2::Compression::best());
    let mut cases: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut add = |name: &'static str, bytes: Vec<u8>| cases.push((name, bytes));
    let pj = br#"{"id":"echo"}"#;

    // Headers whose size is a lie, in and out of /loop-plugin; the stream ends early.
    let mut t = Tar::default();
    t.raw(&head("opt/big", b'0', 10_000_000_000), b"only this");
    add("claim-10gb-outside-plugin.tar", t.bytes);
    let mut t = Tar::default();
    t.raw(&head("loop-plugin/big", b'0', 10_000_000_000), b"only this");
    add("claim-10gb-in-plugin.tar", t.bytes);
    let mut t = Tar::default();
    t.raw(
        &head("loop-plugin/ui/big.js", b'0', PLUGIN_CAP),
        b"only this",
    );
    add("claim-50mb-in-plugin-truncated.tar", t.bytes);
    let mut t = Tar::default();
    t.file("loop-plugin/plugin.json", pj);
    let mut h = head("loop-plugin/max", b'0', u64::MAX - 4096);
    h.base256 = true;
    t.raw(&h, b"x");
    add("claim-u64-max-base256.tar", t.bytes);
    let mut t = Tar::default();
    t.file("loop-plugin/plugin.json", pj);
    let mut h = head("loop-plugin/huge", b'0', 1 << 63);
    h.base256 = true;
    t.raw(&h, b"x");
    add("claim-2-pow-63-after-a-file.tar", t.bytes);
    let mut t = Tar::default();
    t.pax(b'x', &[(b"size", b"18446744073709551000")])
        .raw(&head("loop-plugin/p", b'0', 1), b"x");
    add("pax-size-near-u64-max.tar", t.end());

    // Compression bombs.
    let zeros = vec![0u8; DECOMPRESSED as usize + (1 << 20)];
    let mut t = Tar::default();
    t.file("loop-plugin/ui/zeros", &zeros);
    add("gzip-bomb-in-plugin.tar.gz", small(&t.end()));
    let mut t = Tar::default();
    t.file("zeros", &zeros);
    add("gzip-bomb-outside-plugin.tar.gz", small(&t.end()));
    add("gzip-bomb-not-a-tar.gz", small(&zeros));
    drop(zeros);

    // Names.
    let mut t = Tar::default();
    t.file("loop-plugin/../../etc/passwd", b"x");
    add("dotdot-entry.tar", t.end());
    let mut t = Tar::default();
    t.file("/etc/passwd", b"x");
    add("absolute-entry.tar", t.end());
    let mut t = Tar::default();
    t.pax(b'x', &[(b"path", b"loop-plugin/plugin.json\0/../../x")])
        .file("y", pj);
    t.file("loop-plugin/a\0b", b"x");
    add("nul-in-names.tar", t.end());
    let mut t = Tar::default();
    t.gnu_long(b'L', b"loop-plugin/first")
        .gnu_long(b'L', b"loop-plugin/second")
        .file("x", b"x");
    add("gnu-long-name-twice.tar", t.end());
    let mut t = Tar::default();
    t.pax(b'x', &[(b"path", b"loop-plugin/orphan")]);
    add("pax-header-without-entry.tar", t.end());
    let mut t = Tar::default();
    let long = format!(
        "loop-plugin/{}/plugin.json",
        vec!["n".repeat(100); 3].join("/")
    );
    t.pax(b'x', &[(b"path", long.as_bytes())]).file("short", pj);
    t.gnu_long(b'L', long.as_bytes()).file("short2", pj);
    add("pax-and-gnu-long-names.tar", t.end());
    let mut t = Tar::default();
    t.gnu_long(b'L', "a/".repeat(2 << 20).as_bytes())
        .file("x", b"x");
    add("gnu-long-name-4mib-deep.tar.gz", small(&t.end()));
    let mut t = Tar::default();
    t.pax(b'x', &[(b"path", "d".repeat(3 << 20).as_bytes())])
        .file("x", b"x");
    add("pax-path-3mib.tar.gz", small(&t.end()));
    let mut t = Tar::default();
    t.gnu_long(b'K', "/".repeat(3 << 20).as_bytes())
        .link(b'2', "l", "x");
    add("gnu-long-link-3mib.tar.gz", small(&t.end()));

    // Symlinks and hard links.
    let mut t = Tar::default();
    t.link(b'2', "a/b", "../../etc").file("a/b/passwd", b"x");
    add("symlink-out-of-tree.tar", t.end());
    let mut t = Tar::default();
    t.link(b'2', "up", "/../..").file("up/x", b"x");
    add("symlink-absolute-climbing-out.tar", t.end());
    let mut t = Tar::default();
    t.link(b'2', "a", "b")
        .link(b'2', "b", "a")
        .file("a/x", b"x");
    t.link(b'2', "s", "s").file("s/x", b"x");
    add("symlink-cycles.tar", t.end());
    let mut t = Tar::default();
    for i in 0..40 {
        t.link(b'2', &format!("l{i}"), &format!("l{}/l{}", i + 1, i + 1));
    }
    t.dir("l40").file("l0/x", b"x");
    add("symlink-doubling-chain.tar", t.end());
    let mut t = Tar::default();
    t.link(b'2', "loop-plugin", "/etc")
        .file("loop-plugin/plugin.json", pj);
    t.link(b'2', "x", "loop-plugin").file("x/passwd", b"x");
    add("symlinked-parents.tar", t.end());
    let mut t = Tar::default();
    t.file("etc/passwd", b"root")
        .link(b'1', "loop-plugin/pw", "../etc/passwd");
    t.link(b'1', "loop-plugin/abs", "/etc/passwd");
    add("hardlink-out-of-tree.tar", t.end());
    let mut t = Tar::default();
    t.link(b'1', "loop-plugin/self", "loop-plugin/self");
    t.link(b'2', "l", "/etc").file("etc/passwd", b"root");
    t.link(b'1', "loop-plugin/x", "l/passwd");
    add("hardlink-self-and-through-symlink.tar", t.end());
    let mut t = Tar::default();
    t.file("loop-plugin/plugin.json", &[b'j'; 1000]);
    for i in 0..2000 {
        t.link(
            b'1',
            &format!("loop-plugin/h{i}"),
            "loop-plugin/plugin.json",
        );
    }
    add("hardlinks-counted-again.tar.gz", small(&t.end()));

    // Whiteouts and opaque markers within one layer.
    let mut t = Tar::default();
    t.file("loop-plugin/plugin.json", pj)
        .file(".wh.loop-plugin", b"");
    t.file("loop-plugin/.wh..wh..opq", b"")
        .file(".wh..wh..opq", b"");
    t.file("loop-plugin/.wh.", b"")
        .file("loop-plugin/.wh..wh..wh..opq", b"");
    add("whiteouts-in-their-own-layer.tar", t.end());

    // Devices, FIFOs, and kinds no one writes.
    let mut t = Tar::default();
    t.raw(&head("dev/null", b'3', 0), &[]);
    t.raw(&head("dev/sda", b'4', 0), &[]);
    t.raw(&head("loop-plugin/plugin.json", b'6', 0), &[]);
    t.raw(&head("loop-plugin/ui/x", b'7', 3), b"abc");
    t.raw(&head("loop-plugin/ui/y", b'V', 3), b"abc");
    t.raw(&head("loop-plugin/ui/z", 0xff, 3), b"abc");
    add("devices-fifos-and-odd-kinds.tar", t.end());

    // Sparse files.
    let mut t = Tar::default();
    let (h, body) = sparse_head("loop-plugin/sparse", &[(0, 512), (4096, 512)], 8192);
    t.raw(&h, &body);
    add("sparse.tar", t.end());
    let mut t = Tar::default();
    let regions: Vec<(u64, u64)> = (0..5000).map(|i| (i * 1024, 0)).collect();
    let (h, body) = sparse_head("opt/holes", &regions, 5000 * 1024);
    t.raw(&h, &body);
    add("sparse-5000-regions.tar.gz", small(&t.end()));
    let mut t = Tar::default();
    let (h, body) = sparse_head(
        "loop-plugin/ui/holes",
        &[(40_000_000 - 512, 512)],
        40_000_000,
    );
    t.raw(&h, &body);
    add("sparse-40mb-of-holes-in-plugin.tar", t.end());
    let mut t = Tar::default();
    let (h, body) = sparse_head("loop-plugin/holes", &[(0, 512)], 10_000_000_000);
    t.raw(&h, &body);
    add("sparse-claims-10gb.tar", t.end());
    let mut t = Tar::default();
    let (mut h, body) = sparse_head("loop-plugin/bad", &[(4096, 512), (0, 512)], 8192);
    h.size = 1024;
    t.raw(&h, &body);
    add("sparse-overlapping.tar", t.end());

    // The same path as a file, a directory, a symlink and a hard link.
    let mut t = Tar::default();
    t.file("loop-plugin/plugin.json", pj)
        .file("loop-plugin/x", b"file");
    t.dir("loop-plugin/x").file("loop-plugin/x/y", b"below");
    t.link(b'2', "loop-plugin/x", "/etc")
        .file("loop-plugin/x/passwd", b"x");
    t.link(b'1', "loop-plugin/x", "loop-plugin/plugin.json")
        .dir("loop-plugin/x");
    add("duplicate-paths.tar", t.end());

    // Cut short.
    let mut t = Tar::default();
    t.file("loop-plugin/plugin.json", pj)
        .file("loop-plugin/ui/a.html", &[b'a'; 2000]);
    let whole = t.end();
    add("truncated-mid-header.tar", whole[..BLOCK + 100].to_vec());
    add("truncated-mid-data.tar", whole[..3 * BLOCK + 100].to_vec());
    let gz = small(&whole);
    add("truncated.tar.gz", gz[..gz.len() / 2].to_vec());

    // Many entries, and the work they can make.
    let mut t = Tar::default();
    for _ in 0..ENTRIES + 1 {
        t.file("x", b"");
    }
    add("more-entries-than-the-budget.tar.gz", small(&t.end()));
    let mut t = Tar::default();
    for i in 0..3000 {
        t.file(&format!("loop-plugin/ui/{i:04}"), b"");
    }
    for _ in 0..3000 {
        t.file("loop-plugin/ui/.wh..wh..opq", b"");
    }
    add("opaque-markers-over-many-files.tar.gz", small(&t.end()));
    let mut t = Tar::default();
    let deep = "b/".repeat(2000);
    for i in 0..1000 {
        t.gnu_long(b'L', format!("a{i}/{deep}x").as_bytes())
            .file("x", b"");
    }
    add("deep-paths-making-directories.tar.gz", small(&t.end()));
    cases
}

fn stack_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let pj = br#"{"id":"echo"}"#;
    let mut base = Tar::default();
    base.file("loop-plugin/plugin.json", pj)
        .file("loop-plugin/ui/a.html", b"<p>");
    base.dir("data").link(b'2', "l", "loop-plugin");
    let base = base.end();
    let over = |build: &dyn Fn(&mut Tar)| {
        let mut t = Tar::default();
        build(&mut t);
        stack_bytes(&[base.clone(), t.end()])
    };
    vec![
        (
            "whiteout-of-loop-plugin.stack",
            over(&|t| {
                t.file(".wh.loop-plugin", b"");
            }),
        ),
        (
            "whiteout-then-readd.stack",
            over(&|t| {
                t.file(".wh.loop-plugin", b"")
                    .file("loop-plugin/plugin.json", b"{}");
            }),
        ),
        (
            "whiteout-through-symlinked-parent.stack",
            over(&|t| {
                t.file("l/.wh.plugin.json", b"").file("l/.wh..wh..opq", b"");
            }),
        ),
        (
            "opaque-root.stack",
            over(&|t| {
                t.file(".wh..wh..opq", b"").file("./.wh..wh..opq", b"");
            }),
        ),
        (
            "loop-plugin-replaced-by-a-file.stack",
            over(&|t| {
                t.file("loop-plugin", b"x").link(b'2', "data", "/");
            }),
        ),
    ]
}

/// Documents that quote 20 KB of themselves where a refusal would name them.
fn json_corpus() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let long = "x".repeat(20_000);
    let d = |media_type: &str| json!({"mediaType": media_type, "digest": Digest::of(b"x").to_string(), "size": 1});
    let platforms: Vec<Value> = (0..200)
        .map(|i| {
            let mut e = d(media::OCI_MANIFEST);
            e["platform"] =
                json!({"os": format!("{i}{}", "o".repeat(100)), "architecture": "amd64"});
            e
        })
        .collect();
    let key = PublisherKey::generate().unwrap();
    let payload = Payload::new(
        "echo",
        "0.1.0",
        Digest::of(b"{}").hex(),
        "r/echo",
        &Digest::of(b"m"),
    );
    let mut record = serde_json::to_value(SignatureRecord::sign(&key, &payload)).unwrap();
    record["publicKey"] = json!(long);
    let mut wrong_type = serde_json::to_value(&payload).unwrap();
    wrong_type["type"] = json!(long);
    let cases = [
        (
            "image_manifest",
            "media-type-20kb.json",
            json!({"schemaVersion": 2, "mediaType": long}),
        ),
        (
            "image_manifest",
            "not-json-quoting-20kb.json",
            json!({"schemaVersion": 2, "manifests": long}),
        ),
        (
            "image_manifest",
            "layer-media-type-20kb.json",
            json!({"schemaVersion": 2,
            "mediaType": media::OCI_MANIFEST, "config": d(media::OCI_CONFIG), "layers": [d(&long)]}),
        ),
        (
            "image_manifest",
            "index-of-200-long-platforms.json",
            json!({"schemaVersion": 2, "manifests": platforms}),
        ),
        (
            "image_config",
            "user-20kb.json",
            json!({"architecture": "amd64", "os": "linux",
            "config": {"User": long, "Labels": {"dev.loop.plugin": "1"}}, "rootfs": {"diff_ids": []}}),
        ),
        (
            "image_config",
            "label-20kb.json",
            json!({"architecture": "amd64", "os": "linux",
            "config": {"Labels": {"dev.loop.plugin": long}}, "rootfs": {"diff_ids": []}}),
        ),
        (
            "image_config",
            "os-20kb.json",
            json!({"architecture": long, "os": long, "rootfs": {}}),
        ),
        ("signatures", "record-public-key-20kb.json", record),
        (
            "signatures",
            "artifact-type-20kb.json",
            json!({"artifactType": long, "layers": []}),
        ),
        ("signatures", "payload-type-20kb.json", wrong_type),
    ];
    cases
        .into_iter()
        .map(|(target, name, v)| (target, name, serde_json::to_vec(&v).unwrap()))
        .collect()
}

/// Every hand-made case is in the corpus (`LOOP_FUZZ_SAVE=1` writes them).
#[test]
fn hand_made_corpus_is_in_place() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile");
    let save = std::env::var_os("LOOP_FUZZ_SAVE").is_some();
    let mut missing = Vec::new();
    let layers = [("layer", layer_corpus()), ("layer_stack", stack_corpus())];
    let layers = layers
        .into_iter()
        .flat_map(|(target, cases)| cases.into_iter().map(move |(n, b)| (target, n, b)));
    // The signature record's key is made anew each time: its file is written, not compared.
    for (target, name, bytes) in layers.chain(json_corpus()) {
        {
            assert!(bytes.len() < 100 << 10, "{name} is {} bytes", bytes.len());
            let path = dir.join(target).join(name);
            if save {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &bytes).unwrap();
            } else if name.starts_with("record-") {
                if !path.is_file() {
                    missing.push(path.display().to_string());
                }
            } else if std::fs::read(&path).ok().as_deref() != Some(&bytes[..]) {
                missing.push(path.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in the corpus as written here (LOOP_FUZZ_SAVE=1 writes them): {missing:#?}"
    );
}

/// [`PATH_COST`] is about what a path takes in memory: a view of many paths, wide or deep,
/// holds no more than the tree's count of it, and not much less.
#[test]
fn path_cost_is_what_a_path_takes() {
    use loop_plugins_oci::rootfs::{EntryKind, Meta};
    type Entry = fn(usize) -> (String, EntryKind);
    let shapes: [(&str, Entry); 3] = [
        ("wide", |i| {
            (format!("d{}/f{i}", i % 100), EntryKind::File { size: 0 })
        }),
        ("deep", |i| {
            (format!("{}x", "d/".repeat(i % 2000)), EntryKind::Dir)
        }),
        ("links", |i| {
            let target = format!("../t{i}");
            (format!("l/l{i}"), EntryKind::Symlink { target })
        }),
    ];
    for (shape, entry) in shapes {
        let (counted, held) = hostile::measure(|| {
            let mut fs = RootFs::new(PLUGIN_CAP);
            for i in 0..20_000 {
                let (path, kind) = entry(i);
                fs.apply(&path, kind, Meta::default(), &mut std::io::empty())
                    .unwrap();
            }
            fs.tree_bytes()
        });
        eprintln!("{shape}: counted {counted}, held at most {held}");
        assert!(
            held as u64 <= counted,
            "{shape}: counted {counted}, held {held}"
        );
        assert!(
            held as u64 * 3 >= counted,
            "{shape}: counted {counted}, held {held}"
        );
    }
}
