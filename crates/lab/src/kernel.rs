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

/// The fastest link (bit/s, either way) the reference kernel's guest is asked to emulate
/// with `purple linkem` beside Linux's qdiscs: QEMU's TCG on this project's 2-core machines
/// carried 73 Mbit/s in all through static kernel CAKE at 100/50 Mbit/s on the lab's radio,
/// with 34 ms of induced delay the host run did not have.
pub const KERNEL_TOP_BIT_S: u64 = 16_000_000;

/// The share of its capacity at which `--kernel` plays a link whose fastest direction is
/// `top_bit_s`: 1 when it is within [`KERNEL_TOP_BIT_S`], else the largest of 0.5, 0.2, 0.1,
/// 0.05, 0.02, 0.01, ... that brings it there.
pub fn kernel_scale(top_bit_s: u64) -> f64 {
    let mut f = 1.0;
    let steps = [0.5, 0.2, 0.1];
    let mut k = 0;
    while top_bit_s as f64 * f > KERNEL_TOP_BIT_S as f64 && f > 1e-6 {
        f = steps[k % 3] * 0.1f64.powi((k / 3) as i32);
        k += 1;
    }
    f
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
    run_in_guest_with(purple_bin, lab_args, None, timeout_s)
}

/// [`run_in_guest`] with the link file `link` (and the trace or schedule files it names) in
/// the guest too: `--link link.toml` is added to the guest's arguments (see
/// [`ship_link_file`]).
pub fn run_in_guest_with(
    purple_bin: &Path,
    lab_args: &[String],
    link: Option<&Path>,
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
    let mut args: Vec<String> = lab_args.iter().map(|a| sh_quote(a)).collect();
    if let Some(file) = link {
        let name = ship_link_file(file, &ind)?;
        args.extend(["--link".into(), sh_quote(&name)]);
    }
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

/// Copies the link file `file` into `ind` as `link.toml`, self-contained: each direction's
/// `trace` or `schedule` file (relative to the link file's directory, as the file names it)
/// copied beside it as `link-down.trace`, `link-up.schedule`, ..., and named so in the copy;
/// its `name` key set to the file's stem where it has none (the name in tables stays). Returns
/// the copy's name in the guest's directory. Errors name the file.
pub fn ship_link_file(file: &Path, ind: &Path) -> Result<String, Error> {
    let text = std::fs::read_to_string(file).map_err(io(format!("read {}", file.display())))?;
    let bad = |why: String| Error::Option(format!("--link {}: {why}", file.display()));
    let mut t: toml::Table = text.parse().map_err(|e| bad(format!("{e}")))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    for side in ["down", "up"] {
        let Some(toml::Value::Table(d)) = t.get_mut(side) else {
            continue;
        };
        for key in ["trace", "schedule"] {
            let Some(toml::Value::String(named)) = d.get(key) else {
                continue;
            };
            let src = dir.join(named);
            let local = format!("link-{side}.{key}");
            std::fs::copy(&src, ind.join(&local))
                .map_err(io(format!("copy {} into the guest", src.display())))?;
            d.insert(key.into(), toml::Value::String(local));
        }
    }
    if !t.contains_key("name") {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "link".into());
        t.insert("name".into(), toml::Value::String(stem));
    }
    let out = toml::to_string(&t).map_err(|e| bad(format!("{e}")))?;
    let name = "link.toml";
    std::fs::write(ind.join(name), out).map_err(io("write the guest's link file"))?;
    Ok(name.into())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_plays_a_fast_link_at_the_largest_round_share_the_guest_keeps_up_with() {
        for (top_mbit, f) in [
            (8.0, 1.0),
            (16.0, 1.0),
            (20.0, 0.5),
            (40.0, 0.2),
            (130.0, 0.1),
            (150.0, 0.1),
            (200.0, 0.05),
            (1000.0, 0.01),
            (2000.0, 0.005),
        ] {
            let got = kernel_scale((top_mbit * 1e6) as u64);
            assert!((got - f).abs() < 1e-12, "{top_mbit}: {got}");
            assert!(top_mbit * 1e6 * got <= KERNEL_TOP_BIT_S as f64 + 1.0);
        }
    }

    #[test]
    fn a_shipped_link_file_is_self_contained_and_reads_as_the_same_link() {
        let base = std::env::temp_dir().join(format!("plab-ship-{}", std::process::id()));
        let (src, ind) = (base.join("src"), base.join("in"));
        let traces = base.join("traces");
        for d in [&src, &ind, &traces] {
            std::fs::create_dir_all(d).unwrap();
        }
        // The schedule beside the file, the trace in a sibling directory, no `name` key.
        std::fs::write(src.join("steps.down"), "0 step 8mbit\n2 step 4mbit\n").unwrap();
        std::fs::write(traces.join("up.trace"), "1\n2\n3\n4\n").unwrap();
        let file = src.join("mylink.toml");
        std::fs::write(
            &file,
            "duration_s = 4\n[down]\nschedule = \"steps.down\"\ndelay_ms = 5\n\
             [up]\ntrace = \"../traces/up.trace\"\ndelay_ms = 7\n[run]\ndownloads = 3\n",
        )
        .unwrap();
        let name = ship_link_file(&file, &ind).expect("ships");
        assert_eq!(name, "link.toml");
        for f in ["link-down.schedule", "link-up.trace"] {
            assert!(ind.join(f).is_file(), "{f}");
        }
        let (a, run_a) = sim::link_file::LinkDesc::read_with_run(&file).expect("original");
        let (b, run_b) =
            sim::link_file::LinkDesc::read_with_run(&ind.join(&name)).expect("shipped");
        assert_eq!(b.name, "mylink", "the name in tables stays");
        assert_eq!(
            (a.down.capacity, a.up.capacity),
            (b.down.capacity, b.up.capacity)
        );
        assert_eq!(
            (a.down.delay, a.up.delay, a.secs),
            (b.down.delay, b.up.delay, b.secs)
        );
        assert_eq!(run_a, run_b, "the [run] table travels too");
        std::fs::remove_file(traces.join("up.trace")).unwrap();
        let e = ship_link_file(&file, &ind).expect_err("a missing trace");
        assert!(e.to_string().contains("up.trace"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
