//! statsd over a Unix datagram socket (optional): the socket file's life
//! (made with its mode and group, a stale one from a crashed run replaced,
//! removed at stop) and one reader thread, which drains the socket at
//! stop like the UDP readers.
//!
//! The file is the access control: sending needs write permission on it.
//! So it must never exist, even for a moment, with looser permissions than
//! configured. [`bind`] binds inside a fresh private directory (mode 0700,
//! which nobody else may enter), sets the mode and group there, and only
//! then hard-links the finished socket to the configured path. Setting a
//! restrictive umask around `bind` would also close the window, but the
//! umask belongs to the whole process (a thread creating a file at that
//! moment would get it too), while the private directory changes nothing
//! outside itself; and `link` never replaces an existing file, so a file
//! that appears at the path between the stale-socket check and the link is
//! refused, not overwritten.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};
use nix::unistd::Group;

use super::fault::Faulty;
use super::reader::{self, Source, POLL};
use super::stop::Stop;
use super::supervise::Supervisor;
use super::GroupRef;
use super::Ingestor;
use crate::telemetry::Transport;

/// Why the Unix socket could not be set up; each names the config key to
/// change.
#[derive(Debug, thiserror::Error)]
pub enum UnixError {
    /// Something other than a socket is at the path; it is never deleted.
    #[error("`{path}` exists and is {kind}, not a socket; rollstat never deletes it. Move it away, or change `listen.statsd_unix`")]
    NotASocket {
        /// The configured path.
        path: PathBuf,
        /// What it is ("a regular file", "a directory", ...).
        kind: &'static str,
    },
    /// A socket at the path answers: another process serves it.
    #[error("`{path}` is a socket that another process is serving (a test datagram connected); is another rollstat running? Stop it, or change `listen.statsd_unix`")]
    InUse {
        /// The configured path.
        path: PathBuf,
    },
    /// The path could not be checked or cleared.
    #[error("cannot use the path `{path}` of `listen.statsd_unix`: {what}")]
    Path {
        /// The configured path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Binding (or the private directory it needs) failed.
    #[error("cannot bind the statsd Unix socket `{path}` (`listen.statsd_unix`): {what}; the daemon's user must be able to create files in its directory, and the path must be shorter than 100 bytes")]
    Bind {
        /// The configured path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// chmod failed.
    #[error(
        "cannot set mode {mode:04o} on the statsd Unix socket `{path}` (`listen.statsd_unix_mode`)"
    )]
    Mode {
        /// The configured path.
        path: PathBuf,
        /// The mode asked for.
        mode: u32,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// chown failed (EPERM: the daemon's user is not in the group).
    #[error("cannot give the statsd Unix socket `{path}` the group {group} (`listen.statsd_unix_group`); {hint}")]
    Group {
        /// The configured path.
        path: PathBuf,
        /// The group, as configured.
        group: String,
        /// What to do.
        hint: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The group name is unknown, or could not be looked up.
    #[error(transparent)]
    Lookup(#[from] GroupError),
}

/// A `listen.statsd_unix_group` that names no group.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// No such group on this host.
    #[error("no group named `{0}` on this host (`listen.statsd_unix_group`); create it (groupadd {0}), or give an existing group or a numeric gid")]
    NoSuchGroup(String),
    /// The group database could not be read.
    #[error("cannot look up the group `{name}` of `listen.statsd_unix_group`")]
    Failed {
        /// The name.
        name: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// The numeric id of `g`: a name is looked up in the host's group database
/// (NSS: /etc/group, LDAP...), a number is used as it is.
pub fn resolve_group(g: &GroupRef) -> Result<u32, GroupError> {
    match g {
        GroupRef::Id(id) => Ok(*id),
        GroupRef::Name(name) => match Group::from_name(name) {
            Ok(Some(grp)) => Ok(grp.gid.as_raw()),
            Ok(None) => Err(GroupError::NoSuchGroup(name.clone())),
            Err(e) => Err(GroupError::Failed {
                name: name.clone(),
                source: e.into(),
            }),
        },
    }
}

/// What the socket file gets: permission bits and, if set, a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileAccess {
    /// Permission bits (`listen.statsd_unix_mode`).
    pub mode: u32,
    /// Group (`listen.statsd_unix_group`); `None` keeps the daemon's.
    pub group: Option<GroupRef>,
}

/// The bound socket and its file.
pub struct UnixSocket {
    /// What the reader receives on.
    pub socket: UnixDatagram,
    /// The file at the configured path, removed at stop.
    pub file: SocketFile,
}

/// The socket's file at the configured path. [`SocketFile::remove`] (or
/// drop, on any other way out) removes it, if the file there is still the
/// one this process made (someone may have replaced it meanwhile).
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// Device and inode of the file made, to recognise it.
    id: Option<(u64, u64)>,
}

impl SocketFile {
    /// The configured path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file if it is still ours, and says so in the log. Once.
    pub fn remove(&mut self) {
        let Some(id) = self.id.take() else { return };
        match fs::symlink_metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == id => match fs::remove_file(&self.path) {
                Ok(()) => {
                    tracing::info!(path = %self.path.display(), "Removed the statsd Unix socket file.")
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "Cannot remove the statsd Unix socket file; the next start will replace it.")
                }
            },
            Ok(_) => {
                tracing::warn!(path = %self.path.display(), "The statsd Unix socket file was replaced by another file while rollstat ran; leaving that file alone.")
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "Cannot check the statsd Unix socket file before removing it.")
            }
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// What is at the path now.
enum Found {
    Nothing,
    /// A socket nobody serves: left by a run that did not stop cleanly.
    Stale,
}

/// Checks the configured path: free, or a stale socket (to remove). A
/// served socket or any other kind of file is an error.
fn inspect(path: &Path) -> Result<Found, UnixError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(source) => {
            return Err(UnixError::Path {
                path: path.to_path_buf(),
                what: "cannot look at it",
                source,
            })
        }
    };
    let t = meta.file_type();
    if !t.is_socket() {
        let kind = if t.is_file() {
            "a regular file"
        } else if t.is_dir() {
            "a directory"
        } else if t.is_symlink() {
            "a symbolic link"
        } else {
            "a special file"
        };
        return Err(UnixError::NotASocket {
            path: path.to_path_buf(),
            kind,
        });
    }
    // A datagram "connect" to a path whose socket nobody has open is
    // refused; an open socket accepts it (nothing is sent).
    let probe = UnixDatagram::unbound().and_then(|s| s.connect(path));
    match probe {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Found::Stale),
        Ok(()) => Err(UnixError::InUse {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(UnixError::Path {
            path: path.to_path_buf(),
            what: "a socket is there and connecting to it to see whether it is still served failed (remove it if it is stale)",
            source,
        }),
    }
}

/// A private directory beside `path` (mode 0700, made by this call, so
/// nobody else can have opened it), removed with what is left in it on drop.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn beside(path: &Path) -> io::Result<PrivateDir> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let pid = std::process::id();
        let mut last = None;
        // Short names: the socket inside must fit in sun_path too.
        for n in 0..100 {
            let d = dir.join(format!(".rs{pid}.{n}"));
            match DirBuilder::new().mode(0o700).create(&d) {
                Ok(()) => return Ok(PrivateDir(d)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free private directory name")))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.0.join("s"));
        let _ = fs::remove_dir(&self.0);
    }
}

/// Binds the socket at `path` with `access`, replacing a stale socket left
/// by a previous run (and logging it). The file appears at `path` only
/// with its final mode and group.
pub fn bind(path: &Path, access: &FileAccess) -> Result<UnixSocket, UnixError> {
    let gid = access.group.as_ref().map(resolve_group).transpose()?;
    if let Found::Stale = inspect(path)? {
        fs::remove_file(path).map_err(|source| UnixError::Path {
            path: path.to_path_buf(),
            what: "a stale socket from an earlier run is there (nothing serves it), and removing it failed",
            source,
        })?;
        tracing::warn!(path = %path.display(), "Removed a stale statsd Unix socket left by an earlier run that did not stop cleanly.");
    }
    let bind_err = |what| {
        move |source| UnixError::Bind {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    let private = PrivateDir::beside(path).map_err(bind_err(
        "cannot create a private directory beside it to prepare the socket in",
    ))?;
    let tmp = private.0.join("s");
    let socket = UnixDatagram::bind(&tmp).map_err(bind_err("bind failed"))?;
    fs::set_permissions(&tmp, Permissions::from_mode(access.mode)).map_err(|source| {
        UnixError::Mode {
            path: path.to_path_buf(),
            mode: access.mode,
            source,
        }
    })?;
    if let (Some(gid), Some(group)) = (gid, &access.group) {
        std::os::unix::fs::chown(&tmp, None, Some(gid)).map_err(|source| UnixError::Group {
            path: path.to_path_buf(),
            group: group.to_string(),
            hint: if source.kind() == io::ErrorKind::PermissionDenied {
                "the daemon's user must be a member of that group (or the daemon needs CAP_CHOWN); add it (usermod -aG), or choose one of its groups"
            } else {
                "check the group"
            },
            source,
        })?;
    }
    fs::hard_link(&tmp, path).map_err(|source| {
        if source.kind() == io::ErrorKind::AlreadyExists {
            UnixError::Path {
                path: path.to_path_buf(),
                what: "a file appeared there while the socket was being prepared; another process is using the path",
                source,
            }
        } else {
            UnixError::Bind {
                path: path.to_path_buf(),
                what: "cannot link the prepared socket to the path",
                source,
            }
        }
    })?;
    let id = fs::symlink_metadata(path)
        .map(|m| (m.dev(), m.ino()))
        .map_err(bind_err("cannot read back the socket file"))?;
    drop(private);
    socket
        .set_read_timeout(Some(POLL))
        .map_err(bind_err("cannot set its read timeout"))?;
    tracing::info!(path = %path.display(), mode = format!("{:04o}", access.mode), gid, "statsd Unix socket ready.");
    Ok(UnixSocket {
        socket,
        file: SocketFile {
            path: path.to_path_buf(),
            id: Some(id),
        },
    })
}

/// Starts the reader thread: the UDP readers' loop ([`reader::run`]) on
/// this socket, applying every datagram itself. At stop it drains what the
/// kernel already queued (until the stop's deadline), though the file is
/// already gone: a datagram sent before that is kept. A panic restarts it
/// (`sup`).
pub fn spawn(
    sock: UnixDatagram,
    ing: Arc<Ingestor>,
    stop: Arc<Stop>,
    sup: &Supervisor,
) -> io::Result<JoinHandle<()>> {
    let faults = sup.faults.clone();
    let st = stop.clone();
    sup.spawn("rollstat-unix".into(), "unix_reader", stop, move || {
        let mut src = Faulty {
            src: Datagrams(&sock),
            faults: &faults,
            point: "unix_reader",
        };
        reader::run(&mut src, &ing, &st, None, Transport::Unix);
    })
}

/// The Unix socket as a reader's [`Source`]: a wait is a blocking receive
/// (its read timeout is [`POLL`]), a drain a receive with `MSG_DONTWAIT`.
struct Datagrams<'a>(&'a UnixDatagram);

impl Source for Datagrams<'_> {
    fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>> {
        if wait.is_some() {
            return match self.0.recv(buf) {
                Ok(n) => Ok(Some(n)),
                Err(e) if reader::nothing_yet(&e) => Ok(None),
                Err(e) => Err(e),
            };
        }
        loop {
            match recv(self.0.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT) {
                Ok(n) => return Ok(Some(n)),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rollstat-unix-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn access(mode: u32) -> FileAccess {
        FileAccess { mode, group: None }
    }

    #[test]
    fn the_file_gets_its_mode_and_is_removed_once_leaving_nothing_behind() {
        let d = tmp("mode");
        let path = d.join("s.sock");
        let mut u = bind(&path, &access(0o640)).unwrap();
        let m = fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o7777, 0o640);
        // Only the socket: the private directory is gone.
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.sock"]);
        // The socket bound in the private directory still receives at the path.
        UnixDatagram::unbound()
            .unwrap()
            .send_to(b"x:1|c", &path)
            .unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(u.socket.recv(&mut buf).unwrap(), 5);
        u.file.remove();
        assert!(fs::symlink_metadata(&path).is_err());
        u.file.remove();
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_stale_socket_is_replaced_a_served_one_and_a_regular_file_are_refused() {
        let d = tmp("stale");
        let path = d.join("s.sock");
        drop(UnixDatagram::bind(&path).unwrap());
        let u = bind(&path, &access(0o600)).unwrap();
        let again = bind(&path, &access(0o600)).err().unwrap();
        assert!(matches!(again, UnixError::InUse { .. }), "{again}");
        drop(u);
        assert!(fs::symlink_metadata(&path).is_err(), "dropped: removed");
        fs::write(&path, b"keep me").unwrap();
        let e = bind(&path, &access(0o600)).err().unwrap();
        assert!(e.to_string().contains("a regular file"), "{e}");
        assert!(e.to_string().contains("listen.statsd_unix"), "{e}");
        assert_eq!(fs::read(&path).unwrap(), b"keep me");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_that_replaced_the_socket_is_left_alone_at_stop() {
        let d = tmp("replaced");
        let path = d.join("s.sock");
        let mut u = bind(&path, &access(0o600)).unwrap();
        fs::remove_file(&path).unwrap();
        fs::write(&path, b"theirs").unwrap();
        u.file.remove();
        assert_eq!(fs::read(&path).unwrap(), b"theirs");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_unknown_group_name_is_named() {
        let e = resolve_group(&GroupRef::Name("no-such-group-rollstat".into())).unwrap_err();
        assert!(e.to_string().contains("`no-such-group-rollstat`"), "{e}");
        assert_eq!(resolve_group(&GroupRef::Id(4242)).unwrap(), 4242);
    }
}
