//! A process's CPU time and memory, from `/proc` (Linux).

/// User and system CPU time of `pid`, in clock ticks.
pub fn proc_stat_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name (which may hold spaces) start after ") ".
    let rest = &stat[stat.rfind(')').expect("stat has a command") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line; 12 and 13 after the name.
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    utime + stime
}

pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// A figure of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `Threads`...), as written
/// (kB for memory).
pub fn proc_status(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("the field is present")
}

/// A memory figure (`VmRSS`, `VmHWM`, `RssAnon`) of the process, in MiB.
pub fn proc_status_mib(pid: u32, field: &str) -> f64 {
    proc_status(pid, field) / 1024.0
}
