//! Build script: records the git commit the binary was built from (`hailfire --version`)
//! and, when building on Windows, embeds the icon and version information as a resource.

use std::path::Path;
use std::process::Command;

fn main() {
    let git = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    println!("cargo:rustc-env=HAILFIRE_GIT={}", git.as_deref().unwrap_or(""));
    // Rebuild when the commit changes (only paths that exist: a missing one would make
    // Cargo run this script on every build).
    println!("cargo:rerun-if-changed=build.rs");
    if Path::new(".git/HEAD").exists() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
            if let Some(r) = head.strip_prefix("ref: ") {
                let path = format!(".git/{}", r.trim());
                if Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
    }
    windows_resource();
}

/// The icon (`assets/icon/hailfire.ico`, made by `hailfire icon`) and the version
/// information (from Cargo.toml) in the Windows executable. Needs a Windows host: the
/// resource compiler comes with the Windows SDK or MinGW.
#[cfg(windows)]
fn windows_resource() {
    println!("cargo:rerun-if-changed=assets/icon/hailfire.ico");
    let mut res = winresource::WindowsResource::new();
    res.set_icon("assets/icon/hailfire.ico");
    res.set("ProductName", "Hailfire");
    res.set("FileDescription", "Hailfire: a co-op bullet-hell dungeon game");
    res.compile().expect("embedding the Windows icon and version information");
}

#[cfg(not(windows))]
fn windows_resource() {}
