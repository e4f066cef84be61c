//! What the tests that compare result files byte for byte share.

use experiments::{RunResults, ScenarioFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Writes the result files of `results` under `dir` and reads every file
/// under it back, by relative path.
pub(crate) fn write_and_read(
    dir: &Path,
    file: &ScenarioFile,
    results: &RunResults,
) -> BTreeMap<PathBuf, Vec<u8>> {
    experiments::report::write(dir, file, results).unwrap();
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                found.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    found
}
