//! What this host has that the config's defaults are derived from: its
//! memory (`MemTotal` in `/proc/meminfo`), for `series.max_memory_bytes`
//! when it is not set, and for `check-config`'s warnings.

/// This machine's memory in bytes, if `/proc/meminfo` says.
#[must_use]
pub fn memory_total_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_total(&info)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn meminfo_total(info: &str) -> Option<u64> {
    let kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn memtotal_is_read_in_bytes() {
        let info = "MemTotal:       24634936 kB\nMemFree:         1000 kB\n";
        assert_eq!(super::meminfo_total(info), Some(24_634_936 * 1024));
        assert_eq!(super::meminfo_total("MemFree: 1 kB\n"), None);
    }
}
