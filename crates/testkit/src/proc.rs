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

/// What a child process cost, from the kernel's accounting of that child alone.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub wall: std::time::Duration,
    /// User and system CPU time.
    pub cpu: std::time::Duration,
    /// The high-water mark of its resident set, in MiB.
    pub peak_rss_mib: f64,
    /// Its exit code, `None` when a signal ended it.
    pub code: Option<i32>,
}

/// Runs `command` to its end (its output where the caller pointed it) and reports its wall time, CPU
/// time and peak RSS from `wait4`, which `Command::wait` cannot give: it drops the
/// rusage. Blocks: call it from a blocking thread in async code.
// The child is reaped by wait4 below.
#[allow(clippy::zombie_processes)]
pub fn run_measured(command: &mut std::process::Command) -> std::io::Result<Usage> {
    let started = std::time::Instant::now();
    let child = command.spawn()?;
    let pid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child spawned above, not yet waited for; both pointers are
    // to locals. wait4 reports this child's own figures, not those of earlier ones.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    if waited != pid {
        return Err(std::io::Error::last_os_error());
    }
    let time = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    Ok(Usage {
        wall,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
    })
}
