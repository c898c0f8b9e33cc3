//! `purple-control`: the PURPLE daemon alone, for routers (no simulator, plots or lab; a few
//! hundred KiB when built static, see docs/cross-build.md). Same behaviour as `purple control`
//! and `purple reflector`:
//!
//! ```text
//! purple-control [--config FILE] [--check] [--dry-run] [--record FILE]
//! purple-control reflector [--bind ADDR] [--port N] [--max-pps N]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: purple-control [--config FILE] [--check] [--dry-run] [--record FILE]\n       \
purple-control reflector [--bind ADDR] [--port N] [--max-pps N]\n\
(defaults: --config /etc/purple/purple.toml; reflector --bind 0.0.0.0 --port 8862 --max-pps 1000)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let res = if args.first().map(String::as_str) == Some("reflector") {
        reflector(&args[1..])
    } else {
        control(&args)
    };
    match res {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("purple-control: {e}");
            ExitCode::from(2)
        }
    }
}

/// The value after option `name`, or an error naming the option.
fn value<'a>(it: &mut impl Iterator<Item = &'a String>, name: &str) -> Result<&'a str, String> {
    it.next()
        .map(String::as_str)
        .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
}

fn control(args: &[String]) -> Result<String, String> {
    let mut config = PathBuf::from("/etc/purple/purple.toml");
    let (mut check, mut dry_run) = (false, false);
    let mut record: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" | "-c" => config = PathBuf::from(value(&mut it, a)?),
            "--check" => check = true,
            "--dry-run" => dry_run = true,
            "--record" => record = Some(PathBuf::from(value(&mut it, a)?)),
            "--version" | "-V" => {
                return Ok(format!("purple-control {}\n", env!("CARGO_PKG_VERSION")))
            }
            "--help" | "-h" => return Ok(format!("{USAGE}\n")),
            other => {
                return Err(format!(
                    "unknown argument {other:?} (accepted: --config FILE, --check, --dry-run, \
                     --record FILE, --version, --help, or the subcommand `reflector`)\n{USAGE}"
                ))
            }
        }
    }
    if check {
        daemon::service::check(&config)
    } else {
        daemon::service::run(&config, dry_run, record.as_deref())
    }
    .map_err(|e| e.to_string())
}

fn reflector(args: &[String]) -> Result<String, String> {
    let (mut bind, mut port, mut max_pps) = ("0.0.0.0".to_string(), 8862u16, 1000u32);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bind" => bind = value(&mut it, a)?.to_string(),
            "--port" => {
                let v = value(&mut it, a)?;
                port = v
                    .parse()
                    .map_err(|_| format!("--port {v:?}: accepted: 0 ..= 65535"))?;
            }
            "--max-pps" => {
                let v = value(&mut it, a)?;
                max_pps = v
                    .parse()
                    .map_err(|_| format!("--max-pps {v:?}: accepted: a whole number of replies per second"))?;
            }
            "--help" | "-h" => return Ok(format!("{USAGE}\n")),
            other => {
                return Err(format!(
                    "unknown argument {other:?} (accepted: --bind ADDR, --port N, --max-pps N)\n{USAGE}"
                ))
            }
        }
    }
    daemon::service::reflector(&bind, port, max_pps).map_err(|e| e.to_string())
}
