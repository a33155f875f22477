//! Finding skills on disk: `skills/*/SKILL.md` and flat `skills/*.md` under a directory.
//!
//! Entries whose name starts with `.` or `_` are skipped (templates, drafts, editor files), as is
//! a `README.md` next to the skills;
//! directories without a SKILL.md (such as `skills/scripts/`) are not skills. Symlinks are
//! followed only when their target stays inside the skills directory; one that leaves it is an
//! error, never silently skipped.

use std::path::{Path, PathBuf};

use crate::skill::{parse_skill, Skill, SkillSource};
use crate::Error;

/// Upper bounds so a hostile or huge tree cannot make discovery hang.
const MAX_ENTRIES: usize = 10_000;
const MAX_SCRIPT_DEPTH: usize = 4;
/// SKILL.md files larger than this are refused (they are prompts, not data sets).
pub const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// What discovery found: the skills that parsed, and every error (one per bad file).
#[derive(Debug, Default)]
pub struct Discovery {
    pub skills: Vec<Skill>,
    pub errors: Vec<Error>,
}

/// Discover the skills in `skills_dir` (a directory such as `<agent>/skills`).
/// A missing directory yields nothing.
pub fn discover(skills_dir: &Path) -> Discovery {
    let mut out = Discovery::default();
    let Ok(root) = skills_dir.canonicalize() else {
        return out;
    };
    let mut entries = match std::fs::read_dir(skills_dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .take(MAX_ENTRIES)
            .map(|e| e.path())
            .collect::<Vec<_>>(),
        Err(source) => {
            out.errors.push(Error::Io {
                path: skills_dir.to_path_buf(),
                error: source,
            });
            return out;
        }
    };
    entries.sort();
    for entry in entries {
        let Some(fname) = entry
            .file_name()
            .and_then(|f| f.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if fname.starts_with('.') || fname.starts_with('_') {
            continue;
        }
        // A README in the skills folder documents the folder; it is not a skill.
        if fname.eq_ignore_ascii_case("README.md") {
            continue;
        }
        // Resolve symlinks and keep only targets inside the skills dir.
        let real = match entry.canonicalize() {
            Ok(r) => r,
            Err(source) => {
                out.errors.push(Error::Io {
                    path: entry,
                    error: source,
                });
                continue;
            }
        };
        if !real.starts_with(&root) {
            out.errors.push(Error::SymlinkEscape {
                link: entry,
                target: real,
                skills_dir: skills_dir.to_path_buf(),
            });
            continue;
        }
        if real.is_dir() {
            let skill_md = entry.join("SKILL.md");
            if !skill_md.exists() && std::fs::symlink_metadata(&skill_md).is_err() {
                continue;
            }
            match skill_md.canonicalize() {
                Ok(r) if !r.starts_with(&root) => {
                    out.errors.push(Error::SymlinkEscape {
                        link: skill_md,
                        target: r,
                        skills_dir: skills_dir.to_path_buf(),
                    });
                    continue;
                }
                Err(source) => {
                    out.errors.push(Error::Io {
                        path: skill_md,
                        error: source,
                    });
                    continue;
                }
                Ok(_) => {}
            }
            match load_skill_file(&skill_md, &fname) {
                Ok(mut skill) => match find_scripts(&entry, &root) {
                    Ok(scripts) => {
                        skill.dir = Some(entry.clone());
                        skill.scripts = scripts;
                        out.skills.push(skill);
                    }
                    Err(escape) => out.errors.push(Error::SymlinkEscape {
                        link: escape.0,
                        target: escape.1,
                        skills_dir: skills_dir.to_path_buf(),
                    }),
                },
                Err(e) => out.errors.push(e),
            }
        } else if real.is_file() && fname.ends_with(".md") {
            let stem = fname.trim_end_matches(".md").to_string();
            match load_skill_file(&entry, &stem) {
                Ok(mut skill) => {
                    // Flat skills keep their scripts in skills/scripts/<tool>.sh (initializ/forge).
                    skill.dir = Some(skills_dir.to_path_buf());
                    skill.scripts = skill
                        .tools
                        .iter()
                        .map(|t| skills_dir.join("scripts").join(format!("{}.sh", t.name)))
                        .filter(|p| p.is_file())
                        .collect();
                    out.skills.push(skill);
                }
                Err(e) => out.errors.push(e),
            }
        }
    }
    out
}

/// Read and parse one local SKILL.md (`default_name` when the front matter has no `name`).
pub fn load_skill_file(path: &Path, default_name: &str) -> Result<Skill, Error> {
    let content = read_limited(path)?;
    parse_skill(&content, path, default_name, SkillSource::Local)
}

/// Read a UTF-8 text file of at most [`MAX_SKILL_BYTES`] (SKILL.md, forge.yaml, policy files:
/// prompts and settings, never data sets).
pub fn read_limited(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let io = |error| Error::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::new();
    file.take(MAX_SKILL_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(io)?;
    if buf.len() as u64 > MAX_SKILL_BYTES {
        return Err(io(std::io::Error::other(format!(
            "file is larger than {MAX_SKILL_BYTES} bytes, the limit for skill and agent files"
        ))));
    }
    String::from_utf8(buf).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        ))
    })
}

/// Executable files (or files with a script extension) under a skill directory, other than
/// markdown. A symlink anywhere in the skill directory that leaves `root` is returned as
/// `Err((link, target))`: the runtime would execute or read through it, so the skill is refused.
fn find_scripts(dir: &Path, root: &Path) -> Result<Vec<PathBuf>, (PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Ok(out);
            }
            let p = e.path();
            let Ok(real) = p.canonicalize() else {
                // A dangling symlink: nothing can be read through it.
                continue;
            };
            if !real.starts_with(root) {
                return Err((p, real));
            }
            let name = e.file_name().to_string_lossy().to_string();
            if real.is_dir() {
                if depth < MAX_SCRIPT_DEPTH && !name.starts_with('.') {
                    stack.push((p, depth + 1));
                }
            } else if is_script(&real, &name) {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn is_script(path: &Path, name: &str) -> bool {
    if name.ends_with(".md") {
        return false;
    }
    const EXT: &[&str] = &[
        ".sh", ".bash", ".py", ".js", ".mjs", ".ts", ".rb", ".pl", ".ps1",
    ];
    if EXT.iter().any(|e| name.ends_with(e)) {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(path) {
            return m.permissions().mode() & 0o111 != 0;
        }
    }
    let _ = path;
    false
}
