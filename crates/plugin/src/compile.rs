//! Building a plugin: one C file to a `.wasm` module with Debian's clang (`--target=wasm32`)
//! and lld's `wasm-ld`, against the header in `plugins/include`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Debian packages the build needs.
pub const DEBIAN_PACKAGES: &str = "clang lld";

/// Compilers tried in order when `AQMLAB_CLANG` is not set.
const CLANGS: [&str; 7] = [
    "clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14",
];

/// The directory holding `aqmlab_qdisc.h` in this source tree.
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/include")
}

/// The clang to use: `$AQMLAB_CLANG`, else the first of clang, clang-19, ..., clang-14 that
/// runs.
pub fn find_clang() -> Result<PathBuf, String> {
    let candidates: Vec<String> = match std::env::var("AQMLAB_CLANG") {
        Ok(c) if !c.is_empty() => vec![c],
        _ => CLANGS.iter().map(|c| c.to_string()).collect(),
    };
    find_clang_among(&candidates)
}

fn find_clang_among(candidates: &[String]) -> Result<PathBuf, String> {
    for c in candidates {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Ok(PathBuf::from(c));
        }
    }
    Err(format!(
        "no C compiler for plugins: tried {}; install Debian's packages {DEBIAN_PACKAGES} (apt-get install {DEBIAN_PACKAGES}), or set AQMLAB_CLANG",
        candidates.join(", ")
    ))
}

/// The clang arguments that build `source` into `output` (besides the compiler itself).
pub fn clang_args(source: &Path, output: &Path, include: &Path) -> Vec<String> {
    [
        "--target=wasm32",
        "-O2",
        "-nostdlib",
        "-Wall",
        "-Wl,--no-entry",
        "-Wl,--export-dynamic",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("-I{}", include.display()),
        "-o".into(),
        output.display().to_string(),
        source.display().to_string(),
    ])
    .collect()
}

/// The clang arguments that build the congestion control `source` (a struct_ops BPF C file)
/// into `output` against the simulator's kernel headers, `include/bpfcc`: its ops are reached
/// through the function table, its `struct tcp_congestion_ops` through the name section, its
/// tunables through its DWARF (`-g`, which leaves the code as it is). The DWARF names the
/// source `cc.bpf.c` and the headers `bpfcc/`, wherever they lie: the same file builds the same
/// module, as the scenario hash (which covers the module) needs.
pub fn cc_clang_args(source: &Path, output: &Path, include: &Path) -> Vec<String> {
    let headers = include.join("bpfcc");
    [
        "--target=wasm32",
        "-O2",
        "-g",
        "-fdebug-compilation-dir=.",
        "-nostdlib",
        "-Wall",
        "-Wl,--no-entry",
        "-Wl,--export-table",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("-ffile-prefix-map={}=cc.bpf.c", source.display()),
        format!("-ffile-prefix-map={}=bpfcc", headers.display()),
        format!("-I{}", headers.display()),
        "-o".into(),
        output.display().to_string(),
        source.display().to_string(),
    ])
    .collect()
}

/// Compile the congestion control `source` into the module `output` and return its bytes
/// (errors as [`compile_c`]'s).
pub fn compile_cc(source: &Path, output: &Path) -> Result<Vec<u8>, String> {
    let args = cc_clang_args(source, output, &include_dir());
    run(&find_clang()?, source, output, &args)
}

/// Compile the C file `source` into the module `output` and return its bytes. Errors name the
/// missing Debian package when the toolchain is incomplete, and carry clang's messages when
/// the source does not build.
pub fn compile_c(source: &Path, output: &Path) -> Result<Vec<u8>, String> {
    compile_c_with(source, output, &[])
}

/// [`compile_c`] with more clang arguments (`-DNAME=VALUE`, ...).
pub fn compile_c_with(source: &Path, output: &Path, extra: &[&str]) -> Result<Vec<u8>, String> {
    compile_using(&find_clang()?, source, output, extra)
}

fn compile_using(
    clang: &Path,
    source: &Path,
    output: &Path,
    extra: &[&str],
) -> Result<Vec<u8>, String> {
    let mut args = clang_args(source, output, &include_dir());
    args.extend(extra.iter().map(|s| s.to_string()));
    run(clang, source, output, &args)
}

/// Run `clang` with `args`; the module's bytes, or clang's failure as one message.
fn run(clang: &Path, source: &Path, output: &Path, args: &[String]) -> Result<Vec<u8>, String> {
    let out = Command::new(clang)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    if !out.status.success() {
        return Err(explain_clang_failure(
            clang,
            source,
            &String::from_utf8_lossy(&out.stderr),
        ));
    }
    std::fs::read(output).map_err(|e| format!("cannot read {}: {e}", output.display()))
}

/// clang's failure on `source` as one message: the Debian packages to install when the
/// toolchain is incomplete (no wasm32 target, no wasm-ld), else clang's own messages.
pub fn explain_clang_failure(clang: &Path, source: &Path, stderr: &str) -> String {
    // clang's words when it cannot run the linker ("unable to execute command: Executable
    // \"wasm-ld\" doesn't exist!"); wasm-ld's own errors (an undefined symbol) are the source's.
    if stderr.contains("unable to execute command") && stderr.contains("wasm-ld") {
        return format!(
            "{} found no wasm-ld (the WebAssembly linker): install Debian's packages {DEBIAN_PACKAGES} (apt-get install {DEBIAN_PACKAGES})\n{stderr}",
            clang.display()
        );
    }
    if stderr.contains("unknown target") || stderr.contains("No available targets") {
        return format!(
            "{} cannot target wasm32: install Debian's packages {DEBIAN_PACKAGES} (apt-get install {DEBIAN_PACKAGES})\n{stderr}",
            clang.display()
        );
    }
    format!(
        "{} failed on {}:\n{stderr}",
        clang.display(),
        source.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_compiler_names_the_debian_packages() {
        let e = find_clang_among(&["/nonexistent/clang".into()]).unwrap_err();
        assert!(e.contains("install Debian's packages clang lld"), "{e}");
    }

    #[test]
    fn a_missing_linker_names_lld() {
        // A clang that runs but cannot find wasm-ld, as Debian's clang without lld says it.
        let dir = std::env::temp_dir().join(format!("aqmlab-plugin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("clang");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'clang: error: unable to execute command: Executable \"wasm-ld\" doesn'\\''t exist!' >&2\nexit 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = compile_using(&fake, &dir.join("x.c"), &dir.join("x.wasm"), &[]).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("found no wasm-ld"), "{e}");
        assert!(e.contains("install Debian's packages clang lld"), "{e}");
    }
}
