//! Reading the files a config names: config.toml itself, mapping files,
//! web configs, tokens and users files, certificates and keys, Redis
//! secrets. Every one is read the same way:
//!
//! * only a **regular file** is opened (a symlink to one is fine): a FIFO,
//!   a socket, a device or a directory is refused before `open`, which
//!   could block a reload for as long as nobody writes to a FIFO;
//! * at most [`MAX_FILE_BYTES`] are read: a larger file is refused, and one
//!   that grows past the cap while it is read is refused too.
//!
//! The caller runs this off the async reactor (start-up, `check-config` and
//! reloads run on their own threads).

use std::io::Read;
use std::path::Path;

/// The largest file rollstat reads as configuration: 16 MiB, far above a
/// statsd_exporter mapping file of thousands of rules or a certificate
/// chain, far below what would hurt the daemon.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a file could not be read. Its `Display` names neither the path nor
/// the key that names it: callers add both.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// `stat`, `open` or `read` failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A FIFO, socket, device or directory.
    #[error("it is {0}, not a regular file; rollstat reads configuration only from regular files")]
    NotRegular(&'static str),
    /// Larger than [`MAX_FILE_BYTES`].
    #[error("it is {0} bytes or more, above the cap of {MAX_FILE_BYTES} bytes for a file rollstat reads")]
    TooLarge(u64),
    /// Not UTF-8 where text is wanted.
    #[error("it is not UTF-8 text")]
    NotUtf8,
}

impl FileError {
    /// The stable reason a refused reload is counted under.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            FileError::Io(_) => "unreadable",
            FileError::NotRegular(_) => "not_regular",
            FileError::TooLarge(_) => "too_large",
            FileError::NotUtf8 => "not_utf8",
        }
    }
}

/// The bytes of the regular file at `path`, at most [`MAX_FILE_BYTES`].
///
/// # Errors
///
/// [`FileError`]: not a regular file, too large, or an I/O error.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, FileError> {
    regular(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    // The file opened may not be the one looked at (renamed in between).
    let meta = file.metadata()?;
    regular(&meta)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge(meta.len()));
    }
    let mut out = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut out)?;
    let read = u64::try_from(out.len()).unwrap_or(u64::MAX);
    if read > MAX_FILE_BYTES {
        return Err(FileError::TooLarge(read));
    }
    Ok(out)
}

/// The text of the regular file at `path`, as [`read_bytes`] reads it.
///
/// # Errors
///
/// [`FileError`]: as [`read_bytes`], or the bytes are not UTF-8.
pub fn read_text(path: &Path) -> Result<String, FileError> {
    String::from_utf8(read_bytes(path)?).map_err(|_| FileError::NotUtf8)
}

fn regular(meta: &std::fs::Metadata) -> Result<(), FileError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(FileError::NotRegular(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "rollstat-file-{}-{}",
            std::process::id(),
            std::thread::current()
                .name()
                .unwrap_or("t")
                .replace("::", "-")
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_and_a_symlink_to_one_are_read() {
        let d = dir();
        let f = d.join("a.toml");
        std::fs::write(&f, "x = 1\n").unwrap();
        let l = d.join("link.toml");
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert_eq!(read_text(&f).unwrap(), "x = 1\n");
        assert_eq!(read_text(&l).unwrap(), "x = 1\n");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = dir();
        let f = d.join("map.yml");
        let _ = std::fs::remove_file(&f);
        let made = std::process::Command::new("mkfifo").arg(&f).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: the integration test covers it
        }
        let e = read_text(&f).unwrap_err();
        assert!(
            matches!(e, FileError::NotRegular("a FIFO (named pipe)")),
            "{e}"
        );
    }

    #[test]
    fn a_directory_is_refused_and_says_so() {
        let e = read_bytes(&dir()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a directory, not a regular file; rollstat reads configuration only from regular files"
        );
    }

    #[test]
    fn a_file_above_the_cap_is_refused() {
        let d = dir();
        let f = d.join("big.yml");
        let file = std::fs::File::create(&f).unwrap();
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_bytes(&f).unwrap_err();
        assert!(
            matches!(e, FileError::TooLarge(n) if n == MAX_FILE_BYTES + 1),
            "{e}"
        );
        file.set_len(MAX_FILE_BYTES).unwrap();
        assert_eq!(read_bytes(&f).unwrap().len() as u64, MAX_FILE_BYTES);
        std::fs::remove_file(&f).unwrap();
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_as_text() {
        let d = dir();
        let f = d.join("bin");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(matches!(read_text(&f), Err(FileError::NotUtf8)));
        assert_eq!(read_bytes(&f).unwrap(), vec![0xff, 0xfe]);
    }
}
