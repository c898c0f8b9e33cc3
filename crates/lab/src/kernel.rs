//! The kernel reference: the same lab scenario inside a stock Debian kernel (Linux 6.1 under
//! QEMU, TCG) that has sch_cake, fq_codel, pie and netem, via
//! `shared/tools/refkernel/run-in-guest.sh`. The guest runs this same binary
//! (`purple lab run NAME --guest --json`), with [`crate::RouterStage::Kernel`] and
//! [`crate::DelayStage::Netem`]; the host reads back its JSON.
//!
//! The binary enters the guest through `run-in-guest.sh -i DIR` (stripped of debug info when
//! `objcopy` exists); the guest's initramfs holds the host's glibc (same Debian), and
//! `libgcc_s`/`libm` are added through `REFKERNEL_EXTRA_PATHS`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::io;
use crate::Error;

/// Where `run-in-guest.sh` lives: `$PURPLE_REFKERNEL`, else `/work/shared/tools/refkernel`.
pub fn refkernel_dir() -> PathBuf {
    std::env::var_os("PURPLE_REFKERNEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/tools/refkernel"))
}

/// Whether the reference-kernel tools are present.
pub fn available() -> bool {
    refkernel_dir().join("run-in-guest.sh").is_file()
}

/// Removes a directory tree when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Runs `purple lab run ARGS --guest --json --no-sim --quiet` in the reference kernel with
/// `purple_bin` as the binary, for at most `timeout_s`; returns the guest's JSON, or why not
/// (with the end of the guest's output).
pub fn run_in_guest(
    purple_bin: &Path,
    lab_args: &[String],
    timeout_s: u64,
) -> Result<serde_json::Value, Error> {
    let rk = refkernel_dir();
    let script_runner = rk.join("run-in-guest.sh");
    if !script_runner.is_file() {
        return Err(Error::NoRefKernel(rk));
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("plab-kernel-{}", std::process::id())));
    let (ind, outd) = (tmp.0.join("in"), tmp.0.join("out"));
    for d in [&ind, &outd] {
        std::fs::create_dir_all(d).map_err(io(format!("create {}", d.display())))?;
    }
    ship_binary(purple_bin, &ind)?;
    let args: Vec<String> = lab_args.iter().map(|a| sh_quote(a)).collect();
    let script = tmp.0.join("script.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncd /test\n./purple lab run {} --guest --json --no-sim --quiet \
             > /out/kernel.json 2> /out/kernel.err\nrc=$?\ncat /out/kernel.err\nexit $rc\n",
            args.join(" ")
        ),
    )
    .map_err(io("write the guest script"))?;
    let libs = ["libgcc_s.so.1", "libm.so.6"]
        .iter()
        .map(|l| format!("/lib/x86_64-linux-gnu/{l}"))
        .filter(|p| Path::new(p).exists())
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new(&script_runner)
        .arg("-o")
        .arg(&outd)
        .arg("-i")
        .arg(&ind)
        .arg("-t")
        .arg(timeout_s.to_string())
        .arg(&script)
        .env("REFKERNEL_EXTRA_PATHS", libs)
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("run {}", script_runner.display())))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let tail: String = {
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    let text = std::fs::read_to_string(outd.join("kernel.json")).unwrap_or_default();
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if o.status.success() => Ok(v),
        _ => Err(Error::GuestFailed {
            status: o.status.to_string(),
            tail,
        }),
    }
}

/// Copies `purple_bin` (debug info stripped when `objcopy` exists) and the libraries `ldd`
/// lists that the guest's initramfs may lack (all but libc and the loader) into `ind`.
pub(crate) fn ship_binary(purple_bin: &Path, ind: &Path) -> Result<(), Error> {
    let lib = ind.join("lib");
    std::fs::create_dir_all(&lib).map_err(io(format!("create {}", lib.display())))?;
    let bin = ind.join("purple");
    let stripped = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(purple_bin)
        .arg(&bin)
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !stripped {
        std::fs::copy(purple_bin, &bin).map_err(io("copy the binary"))?;
    }
    if let Ok(o) = Command::new("ldd").arg(purple_bin).output() {
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let Some(p) = line
                .split("=>")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
            else {
                continue;
            };
            let p = Path::new(p);
            let name = p.file_name().map(|n| n.to_string_lossy().to_string());
            if let Some(n) = name.filter(|n| !n.starts_with("libc.so") && !n.starts_with("ld-")) {
                if p.exists() {
                    std::fs::copy(p, lib.join(n)).map_err(io(format!("copy {}", p.display())))?;
                }
            }
        }
    }
    Ok(())
}
