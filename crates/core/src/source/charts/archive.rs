//! A chart archive (`.tgz`) read entry by entry under a budget: every byte of it is
//! hostile, so a bomb, a path leaving the chart, a link or device entry, or an archive
//! that is not one chart is refused before anything is written or rendered.

use std::io::Read;
use std::path::Component;

/// A compressed archive larger than this is refused before it is read. Helm's own
/// limit is on the expanded chart ([`MAX_CHART_BYTES`]); the largest charts of
/// well-known repositories (kube-prometheus-stack, with its CRDs) are under 1 MiB
/// compressed, so 20 MiB leaves room without letting a download fill memory.
pub const MAX_ARCHIVE_BYTES: u64 = 20 * 1024 * 1024;

/// The expanded chart may hold at most this many bytes: Helm's
/// `MaxDecompressedChartSize` (pkg/chart/loader, 100 MiB).
pub const MAX_CHART_BYTES: u64 = 100 * 1024 * 1024;

/// One file of a chart may hold at most this many bytes: Helm's
/// `MaxDecompressedFileSize` (5 MiB).
pub const MAX_CHART_FILE_BYTES: u64 = 5 * 1024 * 1024;

/// A chart may hold at most this many files: far above any real chart (Bitnami's
/// largest hold a few hundred), far below what would make the render stage crawl.
pub const MAX_CHART_FILES: usize = 10_000;

/// Why an archive is refused; never retryable (the same bytes fail the same way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveProblem {
    #[error("the archive is over {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the archive expands to over {limit} bytes (a tarball bomb?)")]
    Bomb { limit: u64 },
    #[error("{path}: over {limit} bytes expanded")]
    FileTooLarge { path: String, limit: u64 },
    #[error("the archive holds over {limit} files")]
    TooManyFiles { limit: usize },
    #[error("{path}: the path leaves the chart")]
    Traversal { path: String },
    #[error("{path}: a {kind} entry (only files and directories are accepted)")]
    Special { path: String, kind: &'static str },
    #[error("{path}: not under the chart's own folder {folder}/")]
    Scattered { path: String, folder: String },
    #[error("no {folder}/Chart.yaml: not a chart")]
    NotAChart { folder: String },
    #[error("not a gzip-compressed tar archive: {message}")]
    Corrupt { message: String },
}

/// One file of a chart: its path below the chart's folder, and its bytes.
pub type ChartFile = (String, Vec<u8>);

/// The gzip stream's expanded bytes, counted: past `left`, reading fails and
/// `exceeded` says why (a tar error alone would not).
struct Budget<R> {
    inner: R,
    left: u64,
    exceeded: bool,
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            self.exceeded = true;
            return Err(std::io::Error::other("expanded past the budget"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Headers and padding the expanded tar stream may add to the chart's own bytes:
/// one 512-byte header (and its padding) per file, and long names.
const TAR_OVERHEAD_PER_FILE: u64 = 2048;

/// The files of the chart archive `bytes`, paths relative to the chart's folder (the
/// archive's single top folder, named after the chart as `helm package` writes it).
pub fn unpack(bytes: &[u8], chart: &str) -> Result<Vec<ChartFile>, ArchiveProblem> {
    expand(bytes, Some(chart))
}

/// The files of an OCI artifact's layer `bytes` (`flux push artifact`'s tar.gz of a
/// folder), paths relative to the archive's root, under the same budgets and checks.
pub fn unpack_tree(bytes: &[u8]) -> Result<Vec<ChartFile>, ArchiveProblem> {
    expand(bytes, None)
}

/// `bytes` expanded below `chart`'s folder, or (`None`) below the archive's root.
fn expand(bytes: &[u8], chart: Option<&str>) -> Result<Vec<ChartFile>, ArchiveProblem> {
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(ArchiveProblem::TooLarge {
            limit: MAX_ARCHIVE_BYTES,
        });
    }
    let mut budget = Budget {
        inner: flate2::read::GzDecoder::new(bytes),
        left: MAX_CHART_BYTES + TAR_OVERHEAD_PER_FILE * MAX_CHART_FILES as u64,
        exceeded: false,
    };
    let read = read_entries(&mut budget, chart);
    match read {
        Err(_) if budget.exceeded => Err(ArchiveProblem::Bomb {
            limit: MAX_CHART_BYTES,
        }),
        other => other,
    }
}

fn corrupt(error: std::io::Error) -> ArchiveProblem {
    ArchiveProblem::Corrupt {
        message: error.to_string(),
    }
}

fn read_entries(stream: impl Read, chart: Option<&str>) -> Result<Vec<ChartFile>, ArchiveProblem> {
    let mut archive = tar::Archive::new(stream);
    let mut files: Vec<ChartFile> = Vec::new();
    let mut total: u64 = 0;
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let path = chart_path(&raw, chart)?;
        if kind.is_dir() {
            continue;
        }
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            return Err(ArchiveProblem::Special {
                path: raw,
                kind: kind_name(kind),
            });
        }
        let Some(path) = path else {
            continue; // the chart's folder itself, as a file entry: nothing to keep
        };
        if files.len() >= MAX_CHART_FILES {
            return Err(ArchiveProblem::TooManyFiles {
                limit: MAX_CHART_FILES,
            });
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_CHART_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(corrupt)?;
        if bytes.len() as u64 > MAX_CHART_FILE_BYTES {
            return Err(ArchiveProblem::FileTooLarge {
                path: raw,
                limit: MAX_CHART_FILE_BYTES,
            });
        }
        total += bytes.len() as u64;
        if total > MAX_CHART_BYTES {
            return Err(ArchiveProblem::Bomb {
                limit: MAX_CHART_BYTES,
            });
        }
        files.push((path, bytes));
    }
    if let Some(chart) = chart
        && !files.iter().any(|(p, _)| p == "Chart.yaml")
    {
        return Err(ArchiveProblem::NotAChart {
            folder: chart.to_string(),
        });
    }
    Ok(files)
}

/// `raw` below the chart's folder (`None` for the folder itself), or below the
/// archive's root when there is no chart; refused when it leaves it in any way (`..`,
/// absolute, another top folder).
fn chart_path(raw: &str, chart: Option<&str>) -> Result<Option<String>, ArchiveProblem> {
    let path = std::path::Path::new(raw);
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => {
                return Err(ArchiveProblem::Traversal {
                    path: raw.to_string(),
                });
            }
        }
    }
    let Some(chart) = chart else {
        return Ok((!parts.is_empty()).then(|| parts.join("/")));
    };
    match parts.split_first() {
        Some((top, rest)) if top == chart => Ok((!rest.is_empty()).then(|| rest.join("/"))),
        _ => Err(ArchiveProblem::Scattered {
            path: raw.to_string(),
            folder: chart.to_string(),
        }),
    }
}

fn kind_name(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char | tar::EntryType::Block => "device",
        tar::EntryType::Fifo => "fifo",
        _ => "special",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A tar.gz with `entries` (path, type, bytes) written as raw headers, so that
    /// hostile names (which the tar crate's builder refuses) can be tested.
    fn archive(entries: &[Raw<'_>]) -> Vec<u8> {
        let mut tar = Vec::new();
        for (path, kind, bytes) in entries {
            let mut header = tar::Header::new_old();
            let name = header.as_old_mut();
            name.name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_entry_type(*kind);
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").expect("link name");
            }
            header.set_cksum();
            tar.extend_from_slice(header.as_bytes());
            tar.extend_from_slice(bytes);
            tar.resize(tar.len().div_ceil(512) * 512, 0);
        }
        tar.resize(tar.len() + 1024, 0);
        gzip(&tar)
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        out.write_all(bytes).expect("gzip");
        out.finish().expect("gzip")
    }

    const FILE: tar::EntryType = tar::EntryType::Regular;
    /// An entry to write: path, type, bytes.
    type Raw<'a> = (&'a str, tar::EntryType, &'a [u8]);
    const CHART: &[u8] = b"apiVersion: v2\nname: sub\nversion: 0.1.0\n";

    #[test]
    fn a_chart_unpacks_below_its_folder() {
        let files = unpack(
            &archive(&[
                ("sub/Chart.yaml", FILE, CHART),
                ("sub/templates/cm.yaml", FILE, b"kind: ConfigMap\n"),
            ]),
            "sub",
        )
        .expect("a chart");
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["Chart.yaml", "templates/cm.yaml"]);
    }

    #[test]
    fn traversal_links_and_strangers_are_refused() {
        let cases: [(&[Raw<'_>], &str); 5] = [
            (
                &[("sub/../../etc/cron.d/x", FILE, b"x")],
                "sub/../../etc/cron.d/x: the path leaves the chart",
            ),
            (
                &[("/etc/passwd", FILE, b"x")],
                "/etc/passwd: the path leaves the chart",
            ),
            (
                &[("sub/templates/pw", tar::EntryType::Symlink, b"")],
                "sub/templates/pw: a symbolic link entry (only files and directories are accepted)",
            ),
            (
                &[("other/Chart.yaml", FILE, CHART)],
                "other/Chart.yaml: not under the chart's own folder sub/",
            ),
            (
                &[("sub/values.yaml", FILE, b"a: 1\n")],
                "no sub/Chart.yaml: not a chart",
            ),
        ];
        for (entries, message) in cases {
            let err = unpack(&archive(entries), "sub").expect_err(message);
            assert_eq!(err.to_string(), message);
        }
        let err = unpack(b"not gzip at all", "sub").expect_err("corrupt");
        assert!(matches!(err, ArchiveProblem::Corrupt { .. }), "{err}");
    }

    #[test]
    fn an_artifacts_layer_unpacks_below_its_root_under_the_same_checks() {
        let files = unpack_tree(&archive(&[
            ("./deploy/cm.yaml", FILE, b"kind: ConfigMap\n"),
            ("kustomization.yaml", FILE, b"resources: [deploy/cm.yaml]\n"),
        ]))
        .expect("a folder of YAML");
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["deploy/cm.yaml", "kustomization.yaml"]);
        for (entries, message) in [
            (
                &[("../etc/cron.d/x", FILE, &b"x"[..])][..],
                "../etc/cron.d/x: the path leaves the chart",
            ),
            (
                &[("deploy/pw", tar::EntryType::Symlink, &b""[..])][..],
                "deploy/pw: a symbolic link entry (only files and directories are accepted)",
            ),
        ] {
            let err = unpack_tree(&archive(entries)).expect_err(message);
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn bombs_and_oversized_archives_are_refused_before_they_fill_memory() {
        // 6 MiB of zeros compresses to a few KiB: one file over Helm's per-file limit.
        let zeros = vec![0u8; (MAX_CHART_FILE_BYTES + 1024 * 1024) as usize];
        let err = unpack(
            &archive(&[("sub/Chart.yaml", FILE, CHART), ("sub/big", FILE, &zeros)]),
            "sub",
        )
        .expect_err("a bomb");
        assert_eq!(
            err,
            ArchiveProblem::FileTooLarge {
                path: "sub/big".into(),
                limit: MAX_CHART_FILE_BYTES
            }
        );
        // Files each within the per-file limit, together past the chart's: a few
        // hundred KiB compressed, 105 MiB expanded.
        let five = vec![0u8; MAX_CHART_FILE_BYTES as usize];
        let names: Vec<String> = (0..21).map(|i| format!("sub/f{i}")).collect();
        let mut entries: Vec<Raw<'_>> = vec![("sub/Chart.yaml", FILE, CHART)];
        entries.extend(names.iter().map(|n| (n.as_str(), FILE, five.as_slice())));
        let err = unpack(&archive(&entries), "sub").expect_err("a bomb");
        assert_eq!(
            err,
            ArchiveProblem::Bomb {
                limit: MAX_CHART_BYTES
            }
        );
        let huge = vec![0u8; MAX_ARCHIVE_BYTES as usize + 1];
        assert_eq!(
            unpack(&huge, "sub").expect_err("too large"),
            ArchiveProblem::TooLarge {
                limit: MAX_ARCHIVE_BYTES
            }
        );
    }
}
