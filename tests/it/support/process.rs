//! External tools and child processes: where the repository and the
//! tools the tests need are (failing, never skipping, when one is missing),
//! commands run with a time limit, long-running children (Prometheus,
//! chromedriver, redis-server) that die with the test, temporary
//! directories and free ports.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The repository root (where `config.toml` and `tests/clients` live).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The message for a missing external tool: never skip silently.
pub fn missing(what: &str) -> ! {
    panic!("{what} is missing: run `.ci/install-deps` (it installs every tool the integration tests use)")
}

/// The absolute path of `name` on PATH, or a failure that says how to get it.
pub fn require_tool(name: &str) -> PathBuf {
    find_tool(name).unwrap_or_else(|| missing(&format!("`{name}`")))
}

/// The absolute path of `name` on PATH, if it is there (for the tools
/// whose tests skip off CI when they are missing).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The Python of `tests/clients/python/.venv`, with the packages of its
/// `requirements.txt`: the statsd clients and `prometheus_client`.
pub fn python() -> PathBuf {
    let p = repo().join("tests/clients/python/.venv/bin/python");
    if !p.is_file() {
        missing("the Python venv (tests/clients/python/.venv)");
    }
    p
}

/// A temporary directory removed on drop, named `rollstat-it-<tag>-...`.
pub struct TempDir(rollstat_testkit::TempDir);

impl TempDir {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        TempDir(rollstat_testkit::TempDir::new(&format!(
            "rollstat-it-{tag}"
        )))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// A child process with its stdout and stderr in `<dir>/<name>.out` and
/// `<dir>/<name>.err`, killed (by its own pid) and reaped on drop, which
/// also prints its stderr if the test is failing.
pub struct Proc {
    child: Child,
    name: String,
    stderr: PathBuf,
}

impl Proc {
    /// Starts `cmd` (stdin closed) with its output in files under `dir`.
    pub fn spawn(name: &str, cmd: &mut Command, dir: &Path) -> Proc {
        let file = |ext: &str| {
            std::fs::File::create(dir.join(format!("{name}.{ext}"))).expect("create log file")
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file("out"))
            .stderr(file("err"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            child,
            name: name.to_string(),
            stderr: dir.join(format!("{name}.err")),
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails if the process has exited (its stderr follows, from drop).
    pub fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!("{} exited early ({st}); its stderr follows", self.name);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- {} stderr ---\n{}",
                self.name,
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            );
        }
    }
}

/// What a finished external command did.
#[derive(Debug)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

/// Runs `cmd` with `stdin`, killing it after `limit`.
pub fn run(cmd: &mut Command, stdin: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let mut inp = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = inp.write_all(&data);
    });
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}; stderr so far is lost with the kill");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A loopback TCP port free right now (for tools that cannot bind port 0
/// and report it, like Prometheus).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind port 0")
        .port()
}
