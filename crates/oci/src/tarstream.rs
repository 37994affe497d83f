//! Reading a layer's tar stream entry by entry, within caps, the way a container runtime reads
//! it (Go's archive/tar, which containerd uses, decides where readers differ): ustar, GNU and
//! PAX headers, GNU long names and links, PAX records (`path`, `linkpath`, `size`, `uid`,
//! `gid`), GNU sparse files. The tar crate decodes a header's fields; the framing is ours, so
//! that nothing is held in proportion to what a header claims: an extension header's data is
//! read only up to [`MAX_EXTENSION_BYTES`], a sparse map only up to [`MAX_SPARSE_REGIONS`], an
//! entry's content only as the caller reads it, and the zeros of a sparse file's holes count
//! against the decompressed budget as the bytes they stand for. Each refusal names the entry:
//! its header's offset always, its path once known (quoted by its start). Sync and pure over a `Read`.

use std::fmt;
use std::io::{self, Read};

use crate::quote::shown_bytes as shown;

/// The most data an extension header (PAX records, a GNU long name or link) may carry; Go's
/// archive/tar refuses more too.
pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;
/// The most regions a GNU sparse map may list: what a megabyte of its extension blocks holds.
pub const MAX_SPARSE_REGIONS: usize = (1 << 20) / 24;

const BLOCK: u64 = 512;

/// What an entry is, from its type flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file, GNU sparse files included (their content expanded).
    File,
    Dir,
    Symlink,
    Hardlink,
    /// A device, a FIFO, or a type no runtime creates a path for; the flag as written.
    Other(u8),
}

/// One entry, its extension headers applied.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: Vec<u8>,
    pub link: Vec<u8>,
    pub kind: Kind,
    /// The bytes its content has: a sparse file's real size, holes included.
    pub size: u64,
    pub uid: u64,
    pub gid: u64,
    pub mode: u32,
    /// Where its first header (an extension header, if any) starts in the tar stream.
    pub offset: u64,
}

/// Which entry a refusal is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    /// Where its first header starts in the (decompressed) tar stream.
    pub offset: u64,
    /// Its path, once its headers said it (the start of it, if long).
    pub path: Option<String>,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "entry {path:?} (header at byte {})", self.offset),
            None => write!(f, "header at byte {}", self.offset),
        }
    }
}

/// Why a tar stream cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TarError {
    /// The bytes under the tar (the registry's stream, the decompressor) failed.
    #[error(transparent)]
    Stream(io::Error),
    #[error("tar {at}: {reason}")]
    Entry { at: At, reason: Reason },
}

/// What is wrong with an entry.
#[derive(Debug, thiserror::Error)]
pub enum Reason {
    #[error("the stream ends inside it")]
    Truncated,
    #[error("the header's checksum says {stored}, but its bytes sum to {computed}")]
    Checksum { stored: u32, computed: u32 },
    #[error("its {field} field {value:?} is not a number in octal or base-256")]
    Field { field: &'static str, value: String },
    #[error("its size of {0} bytes does not fit in a tar stream")]
    SizeOverflow(u64),
    #[error("a {what} header of {size} bytes, over the {MAX_EXTENSION_BYTES}-byte cap")]
    ExtensionTooBig { what: &'static str, size: u64 },
    #[error("two {what} headers before one entry")]
    Repeated { what: &'static str },
    #[error("{what} headers with no entry after them")]
    Dangling { what: &'static str },
    #[error("PAX record {index}: {problem}")]
    Pax { index: usize, problem: &'static str },
    #[error("PAX record {key:?} is {value:?}, not a number")]
    PaxNumber { key: &'static str, value: String },
    #[error("sparse map: {0}")]
    Sparse(String),
}

/// A GNU sparse file's data regions (offset, length) in its real size.
#[derive(Debug, Default)]
struct Regions {
    list: Vec<(u64, u64)>,
    /// The region being read, and how far into the file the content reader is.
    next: usize,
    at: u64,
}

/// The entries of a tar stream, one at a time; [`TarReader::content`] reads the last one's.
pub struct TarReader<R> {
    inner: R,
    /// Bytes read from `inner`.
    pos: u64,
    /// Where the current entry's stored data ends and where the next header starts.
    data_end: u64,
    next: u64,
    current: Option<At>,
    size: u64,
    sparse: Option<Regions>,
    /// The zeros of sparse holes may stand for at most `room` bytes, with what was read.
    room: u64,
    holes: u64,
    over: bool,
    done: bool,
}

/// The extension headers read before an entry.
#[derive(Default)]
struct Extensions {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Pax>,
}

#[derive(Default)]
struct Pax {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
    uid: Option<u64>,
    gid: Option<u64>,
}

impl<R: Read> TarReader<R> {
    /// Reads `inner`; decompressed bytes and the holes of sparse files may come to `room`.
    pub fn new(inner: R, room: u64) -> Self {
        Self {
            inner,
            pos: 0,
            data_end: 0,
            next: 0,
            current: None,
            size: 0,
            sparse: None,
            room,
            holes: 0,
            over: false,
            done: false,
        }
    }

    /// The holes of sparse files expanded so far (they count as decompressed bytes).
    pub fn holes(&self) -> u64 {
        self.holes
    }

    /// Whether reading stopped because holes and bytes together passed `room`.
    pub fn over_budget(&self) -> bool {
        self.over
    }

    /// The next entry, or None at the end of the archive (a zero block, or the end of the
    /// stream between entries). What the last entry's content reader left is skipped.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, TarError> {
        if self.done {
            return Ok(None);
        }
        let at = self.current.take().unwrap_or(At {
            offset: self.pos,
            path: None,
        });
        self.skip_to(self.next, &at)?;
        self.sparse = None;
        let offset = self.pos;
        let mut ext = Extensions::default();
        loop {
            let here = At { offset, path: None };
            let header_at = self.pos;
            let mut block = [0u8; BLOCK as usize];
            let got = self.read_full(&mut block)?;
            if got == 0 || (got == block.len() && block.iter().all(|b| *b == 0)) {
                self.done = true;
                return match pending(&ext) {
                    Some(what) => Err(entry(here, Reason::Dangling { what })),
                    None => Ok(None),
                };
            }
            if got < block.len() {
                return Err(entry(here, Reason::Truncated));
            }
            let header = tar::Header::from_byte_slice(&block);
            check_sum(&block).map_err(|reason| entry(here.clone(), reason))?;
            let flag = block[156];
            let header_size = numeric(&block, "size", &here)?;
            let what = match flag {
                b'x' => Some("PAX"),
                b'g' => Some("PAX global"),
                b'L' => Some("GNU long name"),
                b'K' => Some("GNU long link"),
                _ => None,
            };
            if let Some(what) = what {
                if header_size > MAX_EXTENSION_BYTES {
                    return Err(entry(
                        here,
                        Reason::ExtensionTooBig {
                            what,
                            size: header_size,
                        },
                    ));
                }
                let mut data = vec![0u8; header_size as usize];
                if self.read_full(&mut data)? < data.len() {
                    return Err(entry(here, Reason::Truncated));
                }
                let end = self.pos;
                self.skip_to(end.next_multiple_of(BLOCK), &here)?;
                let repeated = match flag {
                    b'x' => ext.pax.replace(parse_pax(&data, &here)?).is_some(),
                    b'L' => ext.long_name.replace(cut_at_nul(data)).is_some(),
                    b'K' => ext.long_link.replace(cut_at_nul(data)).is_some(),
                    // Global records: a runtime ignores them (containerd does), so do we.
                    _ => false,
                };
                if repeated {
                    return Err(entry(here, Reason::Repeated { what }));
                }
                continue;
            }
            return self
                .entry_of(header, header_at, offset, header_size, ext)
                .map(Some);
        }
    }

    /// The entry of `header` (at `header_at`), after the extensions read from `offset`.
    fn entry_of(
        &mut self,
        header: &tar::Header,
        header_at: u64,
        offset: u64,
        header_size: u64,
        ext: Extensions,
    ) -> Result<Entry, TarError> {
        let pax = ext.pax.unwrap_or_default();
        let path = pax
            .path
            .or(ext.long_name)
            .unwrap_or_else(|| header.path_bytes().into_owned());
        let link = pax
            .link
            .or(ext.long_link)
            .or_else(|| header.link_name_bytes().map(|l| l.into_owned()))
            .unwrap_or_default();
        let at = At {
            offset,
            path: Some(shown(&path)),
        };
        let block = header.as_bytes();
        let uid = match pax.uid {
            Some(v) => v,
            None => numeric(block, "uid", &at)?,
        };
        let gid = match pax.gid {
            Some(v) => v,
            None => numeric(block, "gid", &at)?,
        };
        let mode = numeric(block, "mode", &at)?;
        let mode = u32::try_from(mode).map_err(|_| {
            entry(
                at.clone(),
                Reason::Field {
                    field: "mode",
                    value: mode.to_string(),
                },
            )
        })?;
        let stored = pax.size.unwrap_or(header_size);
        let flag = header.as_bytes()[156];
        let kind = match flag {
            // An old-style regular file whose name ends in '/' is a directory (Go reads it so).
            b'\0' if path.ends_with(b"/") => Kind::Dir,
            b'0' | b'\0' | b'7' | b'S' => Kind::File,
            b'1' => Kind::Hardlink,
            b'2' => Kind::Symlink,
            b'5' => Kind::Dir,
            other => Kind::Other(other),
        };
        let data_start = header_at + BLOCK;
        let mut size = stored;
        if flag == b'S' {
            let (regions, real_size) = self.sparse_map(header, &at)?;
            let listed = regions.iter().map(|(_, l)| l).sum::<u64>();
            if listed != stored {
                return Err(entry(
                    at,
                    Reason::Sparse(format!(
                        "its regions hold {listed} bytes, but the entry stores {stored}"
                    )),
                ));
            }
            size = real_size;
            self.sparse = Some(Regions {
                list: regions,
                ..Regions::default()
            });
        }
        // Extension blocks of a sparse map come between the header and the data.
        let data_start = data_start.max(self.pos);
        let data_end = data_start
            .checked_add(stored)
            .ok_or_else(|| entry(at.clone(), Reason::SizeOverflow(stored)))?;
        self.next = data_end
            .checked_next_multiple_of(BLOCK)
            .ok_or_else(|| entry(at.clone(), Reason::SizeOverflow(stored)))?;
        self.data_end = data_end;
        self.size = size;
        self.current = Some(at);
        Ok(Entry {
            path,
            link,
            kind,
            size,
            uid,
            gid,
            mode,
            offset,
        })
    }

    /// A GNU sparse header's regions (from the header, then its extension blocks) and the
    /// file's real size, checked as Go checks them: in order, not overlapping, inside the file.
    fn sparse_map(
        &mut self,
        header: &tar::Header,
        at: &At,
    ) -> Result<(Vec<(u64, u64)>, u64), TarError> {
        let bad = |why: String| entry(at.clone(), Reason::Sparse(why));
        let Some(gnu) = header.as_gnu() else {
            return Err(bad("a sparse entry without a GNU header".into()));
        };
        let real_size =
            number(&gnu.realsize).ok_or_else(|| bad("the real size is not a number".into()))?;
        let mut regions = Vec::new();
        let mut add = |block: &[u8]| -> Result<(), TarError> {
            // A region whose offset starts with NUL ends the list, as in GNU and Go tar.
            if block[0] == 0 {
                return Ok(());
            }
            if regions.len() >= MAX_SPARSE_REGIONS {
                return Err(bad(format!("more than {MAX_SPARSE_REGIONS} regions")));
            }
            let (offset, length) = (number(&block[..12]), number(&block[12..24]));
            let (Some(offset), Some(length)) = (offset, length) else {
                return Err(bad("a region is not a pair of numbers".into()));
            };
            regions.push((offset, length));
            Ok(())
        };
        let mut ended = false;
        for chunk in header.as_bytes()[386..482].chunks(24) {
            ended = ended || chunk[0] == 0;
            if !ended {
                add(chunk)?;
            }
        }
        let mut extended = header.as_bytes()[482] != 0;
        while extended {
            let mut block = [0u8; BLOCK as usize];
            if self.read_full(&mut block)? < block.len() {
                return Err(entry(at.clone(), Reason::Truncated));
            }
            let mut ended = false;
            for chunk in block[..504].chunks(24) {
                ended = ended || chunk[0] == 0;
                if !ended {
                    add(chunk)?;
                }
            }
            extended = block[504] != 0;
        }
        let mut end = 0u64;
        for (offset, length) in &regions {
            if *offset < end {
                return Err(bad(format!(
                    "the region at {offset} starts before the one before it ends ({end})"
                )));
            }
            end = offset
                .checked_add(*length)
                .filter(|e| *e <= real_size)
                .ok_or_else(|| {
                    bad(format!(
                        "the region at {offset} of {length} bytes ends past the real size {real_size}"
                    ))
                })?;
        }
        Ok((regions, real_size))
    }

    /// A reader of the current entry's content: `size` bytes, a sparse file's holes as zeros.
    pub fn content(&mut self) -> Content<'_, R> {
        Content { tar: self }
    }

    /// Reads until `buf` is full or the stream ends; returns how much was read.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize, TarError> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    self.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TarError::Stream(e)),
            }
        }
        Ok(got)
    }

    /// Reads and drops bytes up to stream position `to`.
    fn skip_to(&mut self, to: u64, at: &At) -> Result<(), TarError> {
        let mut scratch = [0u8; 8192];
        while self.pos < to {
            let n = (to - self.pos).min(scratch.len() as u64) as usize;
            if self.read_full(&mut scratch[..n])? < n {
                return Err(entry(at.clone(), Reason::Truncated));
            }
        }
        Ok(())
    }

    /// Reads stored data of the current entry (not past its end).
    fn read_data(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.data_end.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = loop {
            match self.inner.read(&mut buf[..n]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other?,
            }
        };
        self.pos += got as u64;
        if got == 0 {
            return Err(self.truncated());
        }
        Ok(got)
    }

    fn truncated(&self) -> io::Error {
        let at = self.current.clone().unwrap_or(At {
            offset: self.pos,
            path: None,
        });
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            TarError::Entry {
                at,
                reason: Reason::Truncated,
            },
        )
    }
}

/// The current entry's content, `size` bytes.
pub struct Content<'a, R> {
    tar: &'a mut TarReader<R>,
}

impl<R: Read> Read for Content<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let tar = &mut *self.tar;
        let size = tar.size;
        let Some(regions) = tar.sparse.as_mut() else {
            return tar.read_data(buf);
        };
        // Regions of no bytes are passed over here, not one call each.
        while let Some(&(offset, length)) = regions.list.get(regions.next) {
            if regions.at < offset || regions.at < offset + length {
                break;
            }
            regions.next += 1;
        }
        if regions.at >= size || buf.is_empty() {
            return Ok(0);
        }
        match regions.list.get(regions.next).copied() {
            // Inside a region: its stored bytes.
            Some((offset, length)) if regions.at >= offset => {
                let left = offset + length - regions.at;
                let n = (buf.len() as u64).min(left) as usize;
                let n = tar.read_data(&mut buf[..n])?;
                if let Some(regions) = tar.sparse.as_mut() {
                    regions.at += n as u64;
                }
                Ok(n)
            }
            // Before the next region, or after the last: zeros, counted as decompressed.
            next => {
                let hole_end = next.map_or(size, |(offset, _)| offset);
                let n = (buf.len() as u64).min(hole_end - regions.at) as usize;
                regions.at += n as u64;
                tar.holes += n as u64;
                if tar.holes.saturating_add(tar.pos) > tar.room {
                    tar.over = true;
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a sparse file's holes expand past the decompressed budget",
                    ));
                }
                buf[..n].fill(0);
                Ok(n)
            }
        }
    }
}

fn entry(at: At, reason: Reason) -> TarError {
    TarError::Entry { at, reason }
}

fn pending(ext: &Extensions) -> Option<&'static str> {
    if ext.pax.is_some() {
        Some("PAX")
    } else if ext.long_name.is_some() {
        Some("GNU long name")
    } else if ext.long_link.is_some() {
        Some("GNU long link")
    } else {
        None
    }
}

/// A GNU long name's data ends at its first NUL, as Go reads it.
fn cut_at_nul(mut data: Vec<u8>) -> Vec<u8> {
    if let Some(at) = data.iter().position(|b| *b == 0) {
        data.truncate(at);
    }
    data
}

/// Checks the header's checksum: the sum of its bytes with the checksum field as spaces,
/// unsigned (as every writer computes it) or signed (as some old ones did; Go accepts both).
fn check_sum(block: &[u8]) -> Result<(), Reason> {
    let field = &block[148..156];
    let spaces = 8 * u32::from(b' ');
    let unsigned: u32 = block.iter().map(|b| u32::from(*b)).sum::<u32>()
        - field.iter().map(|b| u32::from(*b)).sum::<u32>()
        + spaces;
    let signed: i64 = block.iter().map(|b| i64::from(*b as i8)).sum::<i64>()
        - field.iter().map(|b| i64::from(*b as i8)).sum::<i64>()
        + i64::from(spaces);
    let stored = number(field).and_then(|v| u32::try_from(v).ok());
    match stored {
        Some(s) if s == unsigned || i64::from(s) == signed => Ok(()),
        _ => Err(Reason::Checksum {
            stored: stored.unwrap_or(u32::MAX),
            computed: unsigned,
        }),
    }
}

/// A header's numeric field, by name; blank is 0, as Go reads it.
fn numeric(block: &[u8], field: &'static str, at: &At) -> Result<u64, TarError> {
    let range = match field {
        "mode" => 100..108,
        "uid" => 108..116,
        "gid" => 116..124,
        _ => 124..136,
    };
    number(&block[range.clone()]).ok_or_else(|| {
        entry(
            at.clone(),
            Reason::Field {
                field,
                value: String::from_utf8_lossy(&block[range]).into_owned(),
            },
        )
    })
}

/// A numeric field: octal digits (spaces and NULs around them) or GNU base-256.
fn number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        if field[0] & 0x40 != 0 {
            return None; // negative
        }
        let mut v: u64 = u64::from(field[0] & 0x3f);
        for b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(*b))?;
        }
        return Some(v);
    }
    let text = field
        .iter()
        .skip_while(|b| **b == b' ' || **b == 0)
        .take_while(|b| **b != b' ' && **b != 0);
    let mut v: u64 = 0;
    let mut digits = 0;
    for b in text {
        if !(b'0'..=b'7').contains(b) {
            return None;
        }
        v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
        digits += 1;
    }
    (digits > 0 || field.iter().all(|b| *b == 0 || *b == b' ')).then_some(v)
}

/// PAX records: `<length> <key>=<value>\n`, the length counting the whole record.
fn parse_pax(data: &[u8], at: &At) -> Result<Pax, TarError> {
    let mut pax = Pax::default();
    let mut rest = data;
    let mut index = 0;
    while !rest.is_empty() {
        let bad = |problem| entry(at.clone(), Reason::Pax { index, problem });
        let space = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| bad("no space after its length"))?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("its length is not a decimal number"))?;
        if len <= space + 1 || len > rest.len() {
            return Err(bad("its length runs past the header"));
        }
        let record = &rest[space + 1..len];
        let Some((b'\n', body)) = record.split_last() else {
            return Err(bad("it does not end with a newline"));
        };
        let eq = body
            .iter()
            .position(|b| *b == b'=')
            .filter(|at| *at > 0)
            .ok_or_else(|| bad("it has no key"))?;
        let (key, value) = (&body[..eq], &body[eq + 1..]);
        let numeric = |key: &'static str| -> Result<u64, TarError> {
            std::str::from_utf8(value)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    entry(
                        at.clone(),
                        Reason::PaxNumber {
                            key,
                            value: shown(value),
                        },
                    )
                })
        };
        match key {
            b"path" | b"linkpath" if value.contains(&0) => {
                return Err(bad("a path holds a NUL byte"));
            }
            b"path" => pax.path = Some(value.to_vec()),
            b"linkpath" => pax.link = Some(value.to_vec()),
            b"size" => pax.size = Some(numeric("size")?),
            b"uid" => pax.uid = Some(numeric("uid")?),
            b"gid" => pax.gid = Some(numeric("gid")?),
            _ => {}
        }
        rest = &rest[len..];
        index += 1;
    }
    Ok(pax)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A header block with its checksum, written through the tar crate's setters.
    fn header(path: &str, kind: tar::EntryType, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        h
    }

    fn block(h: &tar::Header, data: &[u8]) -> Vec<u8> {
        let mut out = h.as_bytes().to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
        out
    }

    fn extension(kind: tar::EntryType, data: &[u8]) -> Vec<u8> {
        block(&header("././@LongLink", kind, data.len() as u64), data)
    }

    fn pax(records: &[(&str, &str)]) -> Vec<u8> {
        let mut data = Vec::new();
        for (k, v) in records {
            let rest = k.len() + v.len() + 3;
            let mut len = rest + 1;
            while len != rest + len.to_string().len() {
                len = rest + len.to_string().len();
            }
            data.extend_from_slice(format!("{len} {k}={v}\n").as_bytes());
        }
        extension(tar::EntryType::XHeader, &data)
    }

    fn end(mut bytes: Vec<u8>) -> Vec<u8> {
        bytes.extend_from_slice(&[0; 1024]);
        bytes
    }

    /// Every entry's path and content, or the first refusal.
    fn read_all(bytes: &[u8], room: u64) -> Result<Vec<(String, Vec<u8>)>, TarError> {
        let mut tar = TarReader::new(bytes, room);
        let mut out = Vec::new();
        while let Some(entry) = tar.next_entry()? {
            let mut content = Vec::new();
            tar.content()
                .read_to_end(&mut content)
                .map_err(TarError::Stream)?;
            out.push((String::from_utf8_lossy(&entry.path).into_owned(), content));
        }
        Ok(out)
    }

    fn reason(r: Result<Vec<(String, Vec<u8>)>, TarError>) -> (At, Reason) {
        match r {
            Err(TarError::Entry { at, reason }) => (at, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_what_a_writer_writes() {
        let mut b = tar::Builder::new(Vec::new());
        let long = format!(
            "loop-plugin/{}/index.html",
            vec!["d".repeat(90); 3].join("/")
        );
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_mode(0o644);
        b.append_data(&mut h, &long, &b"<p>"[..]).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "l", format!("/{long}")).unwrap();
        let bytes = b.into_inner().unwrap();
        let mut tar = TarReader::new(&bytes[..], u64::MAX);
        let first = tar.next_entry().unwrap().unwrap();
        assert_eq!(
            (first.path.as_slice(), first.kind, first.size),
            (long.as_bytes(), Kind::File, 3)
        );
        let second = tar.next_entry().unwrap().unwrap();
        assert_eq!(second.link, format!("/{long}").into_bytes());
        assert!(tar.next_entry().unwrap().is_none());
    }

    #[test]
    fn extension_headers_are_read_up_to_a_megabyte() {
        let big = vec![b'a'; MAX_EXTENSION_BYTES as usize + 1];
        let mut bytes = extension(tar::EntryType::GNULongName, &big);
        bytes.extend(block(&header("x", tar::EntryType::Regular, 0), &[]));
        let (at, why) = reason(read_all(&end(bytes), u64::MAX));
        assert_eq!(at.offset, 0);
        assert!(
            matches!(why, Reason::ExtensionTooBig { what: "GNU long name", size } if size == MAX_EXTENSION_BYTES + 1),
            "{why}"
        );
        // Refused from the header, before reading what it claims.
        let claim = extension(tar::EntryType::XHeader, &[])
            .into_iter()
            .enumerate()
            .map(|(i, b)| if (124..136).contains(&i) { 0 } else { b })
            .collect::<Vec<u8>>();
        let mut h = tar::Header::from_byte_slice(&claim[..512]).clone();
        h.set_size(10_000_000_000);
        h.set_cksum();
        let (_, why) = reason(read_all(h.as_bytes(), u64::MAX));
        assert!(
            matches!(why, Reason::ExtensionTooBig { what: "PAX", .. }),
            "{why}"
        );
    }

    #[test]
    fn pax_wins_over_gnu_names_and_the_header() {
        let mut bytes = extension(tar::EntryType::GNULongName, b"from-gnu\0ignored");
        bytes.extend(pax(&[
            ("path", "from-pax"),
            ("uid", "4000000000"),
            ("size", "2"),
        ]));
        bytes.extend(block(
            &header("from-header", tar::EntryType::Regular, 9),
            b"ok",
        ));
        let mut tar = TarReader::new(&bytes[..], u64::MAX);
        let entry = tar.next_entry().unwrap().unwrap();
        assert_eq!(entry.path, b"from-pax");
        assert_eq!((entry.uid, entry.size), (4_000_000_000, 2));
        let mut only_gnu = extension(tar::EntryType::GNULongName, b"from-gnu\0ignored");
        only_gnu.extend(block(&header("h", tar::EntryType::Regular, 0), &[]));
        let entries = read_all(&end(only_gnu), u64::MAX).unwrap();
        assert_eq!(entries[0].0, "from-gnu", "a GNU long name ends at its NUL");
    }

    #[test]
    fn bad_pax_records_are_refused_naming_the_header() {
        for (data, want) in [
            (&b"9 a=b\n"[..], "its length runs past the header"),
            (b"x a=b\n", "its length is not a decimal number"),
            (b"6 a=bc", "it does not end with a newline"),
            (b"6 =bc\n", "it has no key"),
            (b"12 path=a\0b\n", "a path holds a NUL byte"),
        ] {
            let mut bytes = extension(tar::EntryType::XHeader, data);
            bytes.extend(block(&header("x", tar::EntryType::Regular, 0), &[]));
            let (at, why) = reason(read_all(&end(bytes), u64::MAX));
            assert_eq!(at.offset, 0);
            assert!(
                matches!(why, Reason::Pax { problem, .. } if problem == want),
                "{why}"
            );
        }
        let mut bytes = pax(&[("size", "-1")]);
        bytes.extend(block(&header("x", tar::EntryType::Regular, 0), &[]));
        let (_, why) = reason(read_all(&end(bytes), u64::MAX));
        assert!(
            matches!(why, Reason::PaxNumber { key: "size", .. }),
            "{why}"
        );
    }

    #[test]
    fn extensions_once_each_and_before_an_entry() {
        let mut twice = pax(&[("path", "a")]);
        twice.extend(pax(&[("path", "b")]));
        twice.extend(block(&header("x", tar::EntryType::Regular, 0), &[]));
        let (_, why) = reason(read_all(&end(twice), u64::MAX));
        assert!(matches!(why, Reason::Repeated { what: "PAX" }), "{why}");
        let (_, why) = reason(read_all(&end(pax(&[("path", "a")])), u64::MAX));
        assert!(matches!(why, Reason::Dangling { what: "PAX" }), "{why}");
        // Global records are passed over, as a runtime passes over them.
        let mut global = extension(tar::EntryType::XGlobalHeader, b"12 path=gl\n");
        global.extend(block(&header("x", tar::EntryType::Regular, 0), &[]));
        let entries = read_all(&end(global), u64::MAX).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].0, "x");
    }

    #[test]
    fn checksums_and_truncation_are_refused_naming_the_entry() {
        let mut h = header("loop-plugin/plugin.json", tar::EntryType::Regular, 100);
        let good = block(&h, &[b'x'; 100]);
        h.as_mut_bytes()[0] = b'L';
        let bad = block(&h, &[]);
        let (at, why) = reason(read_all(&bad, u64::MAX));
        assert!(matches!(why, Reason::Checksum { .. }), "{why}");
        assert_eq!(at.to_string(), "header at byte 0");
        let cut = &good[..512 + 10];
        let mut tar = TarReader::new(cut, u64::MAX);
        tar.next_entry().unwrap().unwrap();
        let err = tar.content().read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(
            err.to_string()
                .contains("entry \"loop-plugin/plugin.json\" (header at byte 0)"),
            "{err}"
        );
        // Unread content is skipped; a stream that ends inside it names the entry.
        let mut tar = TarReader::new(&good[..600], u64::MAX);
        tar.next_entry().unwrap().unwrap();
        let (at, why) = match tar.next_entry() {
            Err(TarError::Entry { at, reason }) => (at, reason),
            other => panic!("{other:?}"),
        };
        assert!(matches!(why, Reason::Truncated), "{why}");
        assert_eq!(at.path.as_deref(), Some("loop-plugin/plugin.json"));
        // The signed sum some old writers used is a checksum too.
        let mut high = header("\u{e9}", tar::EntryType::Regular, 0);
        let bytes = high.as_mut_bytes();
        let signed: i64 = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    i64::from(*b as i8)
                }
            })
            .sum();
        bytes[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
        assert_eq!(
            read_all(&end(block(&high, &[])), u64::MAX).unwrap().len(),
            1
        );
    }

    #[test]
    fn numbers_in_octal_and_base_256() {
        assert_eq!(number(b"0000644\0"), Some(0o644));
        assert_eq!(number(b"  644 \0\0"), Some(0o644));
        assert_eq!(number(b"\0\0\0\0\0\0\0\0"), Some(0));
        assert_eq!(number(b"0008\0"), None);
        assert_eq!(number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]), Some(256));
        assert_eq!(number(&[0xff; 12]), None, "negative");
        assert_eq!(
            number(&[0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None,
            "past u64"
        );
    }

    /// A GNU sparse entry: `regions` in the header (and extension blocks past four), `data`
    /// stored.
    pub(crate) fn sparse(path: &str, regions: &[(u64, u64)], real: u64, data: &[u8]) -> Vec<u8> {
        let mut h = header(path, tar::EntryType::GNUSparse, data.len() as u64);
        // Octal where it fits, else GNU base-256.
        let octal = |field: &mut [u8], v: u64| {
            let digits = field.len() - 1;
            let text = format!("{v:0digits$o}");
            if text.len() == digits {
                field[..digits].copy_from_slice(text.as_bytes());
            } else {
                field.fill(0);
                field[0] = 0x80;
                let at = field.len() - 8;
                field[at..].copy_from_slice(&v.to_be_bytes());
            }
        };
        let gnu = h.as_gnu_mut().unwrap();
        for (slot, (offset, length)) in gnu.sparse.iter_mut().zip(regions) {
            octal(&mut slot.offset, *offset);
            octal(&mut slot.numbytes, *length);
        }
        octal(&mut gnu.realsize, real);
        gnu.isextended[0] = u8::from(regions.len() > 4);
        h.set_cksum();
        let mut out = h.as_bytes().to_vec();
        let rest = regions.get(4..).unwrap_or_default();
        for (i, chunk) in rest.chunks(21).enumerate() {
            let mut ext = [0u8; 512];
            for (j, (offset, length)) in chunk.iter().enumerate() {
                octal(&mut ext[j * 24..j * 24 + 12], *offset);
                octal(&mut ext[j * 24 + 12..j * 24 + 24], *length);
            }
            ext[504] = u8::from((i + 1) * 21 < rest.len());
            out.extend_from_slice(&ext);
        }
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
        out
    }

    #[test]
    fn sparse_files_read_as_their_holes_and_data() {
        let bytes = end(sparse("s", &[(2, 3), (10, 1)], 12, b"abcd"));
        let entries = read_all(&bytes, u64::MAX).unwrap();
        assert_eq!(entries[0].1, b"\0\0abc\0\0\0\0\0d\0");
        // Many regions, in extension blocks, zero-length ones among them.
        let regions: Vec<(u64, u64)> = (0..100).map(|i| (i * 4, i % 2)).collect();
        let data = vec![b'q'; 50];
        let bytes = end(sparse("many", &regions, 400, &data));
        let content = &read_all(&bytes, u64::MAX).unwrap()[0].1;
        assert_eq!(content.len(), 400);
        assert_eq!(content.iter().filter(|b| **b == b'q').count(), 50);
    }

    #[test]
    fn sparse_holes_count_against_the_room() {
        let bytes = end(sparse("holes", &[(1 << 20, 1)], (1 << 20) + 1, b"x"));
        let mut tar = TarReader::new(&bytes[..], 100_000);
        tar.next_entry().unwrap().unwrap();
        let err = tar.content().read_to_end(&mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("decompressed budget"), "{err}");
        assert!(tar.over_budget());
    }

    #[test]
    fn bad_sparse_maps_are_refused() {
        for (regions, real, data, want) in [
            (vec![(10, 2), (0, 2)], 20, &b"abcd"[..], "starts before"),
            (vec![(10, 2)], 11, b"ab", "past the real size"),
            (
                vec![(u64::MAX - 1, 2)],
                u64::MAX,
                b"ab",
                "past the real size",
            ),
            (
                vec![(0, 2)],
                4,
                b"abcd",
                "hold 2 bytes, but the entry stores 4",
            ),
        ] {
            let (at, why) = reason(read_all(&end(sparse("s", &regions, real, data)), u64::MAX));
            assert_eq!(at.path.as_deref(), Some("s"));
            assert!(
                matches!(&why, Reason::Sparse(m) if m.contains(want)),
                "{why}"
            );
        }
        let regions: Vec<(u64, u64)> = (0..MAX_SPARSE_REGIONS as u64 + 1).map(|i| (i, 0)).collect();
        let bytes = end(sparse("s", &regions, MAX_SPARSE_REGIONS as u64 + 1, &[]));
        let (_, why) = reason(read_all(&bytes, u64::MAX));
        assert!(
            matches!(&why, Reason::Sparse(m) if m.contains("more than")),
            "{why}"
        );
    }

    #[test]
    fn sizes_past_the_stream_are_refused() {
        let mut h = header("big", tar::EntryType::Regular, 0);
        h.as_mut_bytes()[124..136]
            .copy_from_slice(&[0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]);
        h.set_cksum();
        let (at, why) = reason(read_all(h.as_bytes(), u64::MAX));
        assert_eq!(at.path.as_deref(), Some("big"));
        assert!(matches!(why, Reason::SizeOverflow(_)), "{why}");
    }

    #[test]
    fn an_old_regular_file_named_with_a_slash_is_a_directory() {
        let mut h = header("d/", tar::EntryType::Regular, 0);
        h.as_mut_bytes()[156] = 0;
        h.set_cksum();
        let mut tar = TarReader::new(&h.as_bytes()[..], u64::MAX);
        assert_eq!(tar.next_entry().unwrap().unwrap().kind, Kind::Dir);
    }
}
