//! The decision log: one JSON object per line, rotated by size (`FILE` → `FILE.1` → ... →
//! `FILE.N`). `purple plot LOG` reads it back.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;

/// A size-rotated JSON-lines writer (or stdout when the path is empty).
#[derive(Debug)]
pub struct JsonLog {
    path: Option<PathBuf>,
    file: Option<io::BufWriter<File>>,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

impl JsonLog {
    /// Opens (appending) `path`, or stdout for `""`.
    pub fn open(path: &str, max_bytes: u64, keep: u32) -> io::Result<Self> {
        let mut l = JsonLog {
            path: (!path.is_empty()).then(|| PathBuf::from(path)),
            file: None,
            size: 0,
            max_bytes,
            keep,
        };
        l.reopen()?;
        Ok(l)
    }

    fn reopen(&mut self) -> io::Result<()> {
        if let Some(p) = &self.path {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let f = OpenOptions::new().create(true).append(true).open(p)?;
            self.size = f.metadata()?.len();
            self.file = Some(io::BufWriter::new(f));
        }
        Ok(())
    }

    /// Writes `v` as one line and flushes; rotates first if the line would pass `max_bytes`.
    pub fn write(&mut self, v: &serde_json::Value) -> io::Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        if self.path.is_none() {
            let mut o = io::stdout().lock();
            o.write_all(line.as_bytes())?;
            return o.flush();
        }
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        if let Some(f) = self.file.as_mut() {
            f.write_all(line.as_bytes())?;
            f.flush()?;
            self.size += line.len() as u64;
        }
        Ok(())
    }

    /// Rotates now: `FILE.(N-1)` → `FILE.N`, ..., `FILE` → `FILE.1` (with `keep = 0` the file
    /// is truncated), then reopens `FILE`.
    pub fn rotate(&mut self) -> io::Result<()> {
        let Some(p) = self.path.clone() else {
            return Ok(());
        };
        self.file = None;
        let name = |i: u32| PathBuf::from(format!("{}.{i}", p.display()));
        if self.keep == 0 {
            std::fs::remove_file(&p)?;
        } else {
            for i in (1..self.keep).rev() {
                if name(i).exists() {
                    std::fs::rename(name(i), name(i + 1))?;
                }
            }
            std::fs::rename(&p, name(1))?;
        }
        self.reopen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_rotates_by_size_and_keeps_n_files() {
        let dir = std::env::temp_dir().join(format!("purple-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("c.jsonl");
        let mut l = JsonLog::open(p.to_str().unwrap(), 100, 2).unwrap();
        for i in 0..20 {
            l.write(&serde_json::json!({ "i": i, "pad": "xxxxxxxxxxxxxxxxxxxx" }))
                .unwrap();
        }
        let main = std::fs::read_to_string(&p).unwrap();
        assert!(main.len() <= 100);
        assert!(main
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
        assert!(dir.join("c.jsonl.1").exists() && dir.join("c.jsonl.2").exists());
        assert!(!dir.join("c.jsonl.3").exists());
        assert!(main.contains("\"i\":19"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
