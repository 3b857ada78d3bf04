//! Build information for `rollstat --version` and `rollstat_build_info`:
//! the git commit, the rustc version and the build profile, handed to the
//! crate as compile-time environment variables (`ROLLSTAT_GIT_COMMIT`,
//! `ROLLSTAT_RUSTC_VERSION`, `ROLLSTAT_BUILD_PROFILE`).
//!
//! The commit is, in order: `ROLLSTAT_BUILD_COMMIT` if set and not empty
//! (for packagers building from a tarball that know the commit), else
//! `git rev-parse --short=12 HEAD` when this crate's directory is the top
//! of a git work tree, else `unknown` (a crate tarball, no git installed, or
//! the sources vendored inside some other repository, whose commit would be
//! the wrong one). Nothing here fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ROLLSTAT_BUILD_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());

    let commit = match std::env::var("ROLLSTAT_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => git_commit(&dir).unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=ROLLSTAT_GIT_COMMIT={commit}");

    // `PROFILE` is `debug` for the dev and test profiles, `release` for
    // release and bench (custom profiles report the one they inherit).
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=ROLLSTAT_BUILD_PROFILE={profile}");

    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let rustc = run(Command::new(rustc).arg("--version"))
        // "rustc 1.85.0 (4d91de4e4 2025-02-17)" -> "1.85.0"
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=ROLLSTAT_RUSTC_VERSION={rustc}");
}

/// HEAD's commit (12 hex digits) if `dir` is the top of a git work tree,
/// and the files to watch so that a new commit or checkout runs this again.
fn git_commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| run(Command::new("git").arg("-C").arg(dir).args(args));
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    // HEAD names the branch (or a commit when detached); the branch's ref
    // is a loose file or a line of packed-refs. In a linked worktree HEAD
    // is under .git/worktrees/<name> and the refs are shared: --git-path
    // resolves both. Only existing files are watched (cargo reruns a build
    // script on every build when a watched path is missing).
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &head_ref]) {
            watch.push(p);
        }
    }
    if let Some(p) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        watch.push(p);
    }
    for p in watch {
        let p = if Path::new(&p).is_absolute() {
            PathBuf::from(p)
        } else {
            dir.join(p)
        };
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    commit
        .bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then_some(commit)
}

/// The command's trimmed stdout if it ran and succeeded.
fn run(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}
