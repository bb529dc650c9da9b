//! Sync windows: when automation may act. A policy check of the loop's "act" step,
//! with Argo CD's semantics. A leaf below the configuration (which compiles windows)
//! and the workers (which consult them): it uses only `duration`.
//!
//! A window is a cron schedule in a time zone and a duration: it is *active* at `now`
//! when some fire time `t` of its schedule satisfies `t <= now < t + duration`. Any
//! active deny window closes; when allow windows exist and none is active, closed;
//! otherwise open. Durations are absolute (8h is eight hours even across a DST change),
//! fire times are local wall-clock times of the window's zone: a time skipped by a
//! spring-forward change does not fire, one repeated by a fall-back change fires twice
//! (the behaviour of the `cron` crate).
//!
//! Pure: the clock is a parameter.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron::Schedule;

use tether_schema::duration::format_duration;

/// Largest change of a zone's UTC offset we order fire times across. The cron iterator
/// walks local wall-clock time, so around a fall-back change its instants are not in
/// order; any fire more than this after another can no longer be preceded by a later
/// one. Real DST shifts are 1 h (2 h in Antarctica/Troll); a zone that jumps further
/// (Samoa skipping a day in 2011) may see fire times out of order at that one change.
const OFFSET_CHANGE_MARGIN: chrono::TimeDelta = chrono::TimeDelta::hours(3);

/// Longest run of overlapping fire times merged when computing when an active window
/// ends. A schedule that fires more often than its duration (`* * * * *` for 1h) is
/// always active; past this many fires its end is reported as the last one computed,
/// which is still a time before which the window cannot close.
const MAX_MERGED_FIRES: usize = 10_000;

/// Whether a window permits or forbids syncing while active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowKind {
    Allow,
    Deny,
}

impl fmt::Display for WindowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WindowKind::Allow => "allow",
            WindowKind::Deny => "deny",
        })
    }
}

/// One compiled sync window.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncWindow {
    pub kind: WindowKind,
    /// The expression as written (5, 6 or 7 fields), for messages.
    pub expression: String,
    pub schedule: Schedule,
    pub duration: Duration,
    pub time_zone: Tz,
}

/// May automation act now?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Open,
    Closed { reason: String },
}

#[cfg(test)]
impl Verdict {
    pub(crate) fn is_open(&self) -> bool {
        matches!(self, Verdict::Open)
    }
}

/// A window's state at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// Active since a fire time, until (at least) an instant.
    Active {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// Inactive; becomes active at the next fire time, if the schedule fires again.
    Inactive { next_start: Option<DateTime<Utc>> },
}

/// A window that cannot be built: the message says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WindowError(pub String);

impl SyncWindow {
    /// Compiles a window. `expression` is standard 5-field cron (minute hour
    /// day-of-month month day-of-week, Sunday = 0 or 7), or the `cron` crate's 6/7-field
    /// form with seconds first (and Quartz's day-of-week numbering, Sunday = 1).
    pub fn new(
        kind: WindowKind,
        expression: &str,
        duration: Duration,
        time_zone: Tz,
    ) -> Result<SyncWindow, WindowError> {
        if duration.is_zero() {
            return Err(WindowError("the duration must be positive".into()));
        }
        if chrono::TimeDelta::from_std(duration).is_err() {
            return Err(WindowError("the duration is too long".into()));
        }
        Ok(SyncWindow {
            kind,
            expression: expression.trim().to_string(),
            schedule: parse_schedule(expression)?,
            duration,
            time_zone,
        })
    }

    fn delta(&self) -> chrono::TimeDelta {
        // Checked in `new`; a window built by hand with an absurd duration saturates.
        chrono::TimeDelta::from_std(self.duration).unwrap_or(chrono::TimeDelta::MAX)
    }

    /// Fire times strictly after `after`, in increasing order.
    fn fires_after(&self, after: DateTime<Utc>) -> Fires<'_> {
        let start = after
            .checked_sub_signed(OFFSET_CHANGE_MARGIN)
            .unwrap_or(after)
            .with_timezone(&self.time_zone);
        Fires {
            inner: self.schedule.after(&start),
            after,
            pending: std::collections::BinaryHeap::new(),
            exhausted: false,
        }
    }

    /// Is the window active at `now`, and until when; or when does it next start?
    pub fn state(&self, now: DateTime<Utc>) -> WindowState {
        let d = self.delta();
        let Some(from) = now.checked_sub_signed(d) else {
            return WindowState::Inactive { next_start: None };
        };
        let mut fires = self.fires_after(from);
        let Some(first) = fires.next() else {
            return WindowState::Inactive { next_start: None };
        };
        if first > now {
            return WindowState::Inactive {
                next_start: Some(first),
            };
        }
        // Fires that start before the current one ends extend it.
        let mut until = first + d;
        for fire in fires.take(MAX_MERGED_FIRES) {
            if fire > until {
                break;
            }
            until = fire + d;
        }
        WindowState::Active {
            since: first,
            until,
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} window `{}` ({}, {})",
            self.kind,
            self.expression,
            format_duration(self.duration),
            self.time_zone.name()
        )
    }

    fn local(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.time_zone).to_rfc3339()
    }
}

/// Ascending fire times: the cron iterator's, reordered within [`OFFSET_CHANGE_MARGIN`].
struct Fires<'a> {
    inner: cron::ScheduleIterator<'a, Tz>,
    after: DateTime<Utc>,
    pending: std::collections::BinaryHeap<std::cmp::Reverse<DateTime<Utc>>>,
    exhausted: bool,
}

impl Iterator for Fires<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        loop {
            if let Some(std::cmp::Reverse(min)) = self.pending.peek().copied() {
                let settled = self.exhausted
                    || self.pending.iter().any(|std::cmp::Reverse(t)| {
                        *t > min.checked_add_signed(OFFSET_CHANGE_MARGIN).unwrap_or(min)
                    });
                if settled {
                    self.pending.pop();
                    // A fall-back change yields the same instant only once, but be sure.
                    while self.pending.peek() == Some(&std::cmp::Reverse(min)) {
                        self.pending.pop();
                    }
                    return Some(min);
                }
            } else if self.exhausted {
                return None;
            }
            match self.inner.next() {
                Some(t) => {
                    let t = t.with_timezone(&Utc);
                    if t > self.after {
                        self.pending.push(std::cmp::Reverse(t));
                    }
                }
                None => self.exhausted = true,
            }
        }
    }
}

/// Whether automation may act at `now`: closed by any active deny window, or by allow
/// windows none of which is active.
pub fn verdict(windows: &[SyncWindow], now: DateTime<Utc>) -> Verdict {
    let states: Vec<(&SyncWindow, WindowState)> =
        windows.iter().map(|w| (w, w.state(now))).collect();
    for (w, state) in &states {
        if let (WindowKind::Deny, WindowState::Active { until, .. }) = (w.kind, state) {
            return Verdict::Closed {
                reason: format!("inside {} until {}", w.describe(), w.local(*until)),
            };
        }
    }
    let allows: Vec<_> = states
        .iter()
        .filter(|(w, _)| w.kind == WindowKind::Allow)
        .collect();
    if allows.is_empty()
        || allows
            .iter()
            .any(|(_, s)| matches!(s, WindowState::Active { .. }))
    {
        return Verdict::Open;
    }
    let next = allows
        .iter()
        .filter_map(|(w, s)| match s {
            WindowState::Inactive {
                next_start: Some(t),
            } => Some((*t, *w)),
            _ => None,
        })
        .min_by_key(|(t, _)| *t);
    let reason = match next {
        Some((t, w)) => format!(
            "outside every allow window; next opens at {} ({})",
            w.local(t),
            w.describe()
        ),
        None => "outside every allow window; none opens again".to_string(),
    };
    Verdict::Closed { reason }
}

/// The next instant after `now` at which the verdict may change (a window starts or
/// ends), so the service can sleep until then; `None` when nothing will ever change.
pub fn next_change(windows: &[SyncWindow], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    windows
        .iter()
        .filter_map(|w| match w.state(now) {
            WindowState::Active { until, .. } => Some(until),
            WindowState::Inactive { next_start } => next_start,
        })
        .min()
}

/// Parses a schedule: standard 5-field cron gets seconds (`0`) prepended and its
/// day-of-week translated to the crate's numbering; 6 and 7 fields are passed through.
pub fn parse_schedule(expression: &str) -> Result<Schedule, WindowError> {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let full = match fields.len() {
        5 => {
            let (dom, dow) = (fields[2], fields[4]);
            if !is_any(dom) && !is_any(dow) {
                // Vixie cron fires when either matches, the `cron` crate only when both
                // do: refuse rather than pick one meaning silently.
                return Err(WindowError(format!(
                    "`{expression}` restricts both day-of-month and day-of-week, which \
                     standard cron reads as either and this parser as both; use one"
                )));
            }
            let dow = standard_day_of_week(dow)
                .map_err(|m| WindowError(format!("`{expression}`: day-of-week {m}")))?;
            format!(
                "0 {} {} {} {} {}",
                fields[0], fields[1], fields[2], fields[3], dow
            )
        }
        6 | 7 => fields.join(" "),
        n => {
            return Err(WindowError(format!(
                "`{expression}` has {n} fields; a schedule has 5 (minute hour \
                 day-of-month month day-of-week), or 6-7 with seconds first"
            )));
        }
    };
    Schedule::from_str(&full)
        .map_err(|e| WindowError(format!("`{expression}` is not a cron schedule: {e}")))
}

fn is_any(field: &str) -> bool {
    field == "*" || field == "?"
}

const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Standard day-of-week (0-7, Sunday = 0 and 7, or names) as an explicit list of names,
/// which the `cron` crate reads the same (its numbers start at Sunday = 1).
fn standard_day_of_week(field: &str) -> Result<String, String> {
    if is_any(field) {
        return Ok(field.to_string());
    }
    let day = |s: &str| -> Result<u32, String> {
        if let Ok(n) = s.parse::<u32>() {
            return if n <= 7 {
                Ok(n % 7)
            } else {
                Err(format!("{n} is not 0-7"))
            };
        }
        DAY_NAMES
            .iter()
            .position(|d| d.eq_ignore_ascii_case(s))
            .map(|i| i as u32)
            .ok_or_else(|| format!("`{s}` is not a day"))
    };
    let mut days = [false; 7];
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("step `{s}` is not a positive number"))?;
                (r, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (0, 6)
        } else if let Some((a, b)) = range.split_once('-') {
            // 7 ends a range as Sunday after Saturday (`5-7` is Fri-Sun).
            let hi = if b == "7" { 7 } else { day(b)? };
            (day(a)?, hi)
        } else if part.contains('/') {
            (day(range)?, 6)
        } else {
            let d = day(range)?;
            (d, d)
        };
        if lo > hi {
            return Err(format!("range `{range}` runs backwards"));
        }
        for d in (lo..=hi).step_by(step as usize) {
            days[(d % 7) as usize] = true;
        }
    }
    Ok(days
        .iter()
        .zip(DAY_NAMES)
        .filter(|(on, _)| **on)
        .map(|(_, name)| name)
        .collect::<Vec<_>>()
        .join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("rfc3339")
            .with_timezone(&Utc)
    }

    fn win(kind: WindowKind, expr: &str, hours: u64, tz: Tz) -> SyncWindow {
        win_minutes(kind, expr, hours * 60, tz)
    }

    fn win_minutes(kind: WindowKind, expr: &str, minutes: u64, tz: Tz) -> SyncWindow {
        SyncWindow::new(kind, expr, Duration::from_secs(minutes * 60), tz).expect("window")
    }

    fn closed(v: Verdict) -> String {
        match v {
            Verdict::Closed { reason } => reason,
            Verdict::Open => panic!("expected closed"),
        }
    }

    const BERLIN: Tz = chrono_tz::Europe::Berlin;

    #[test]
    fn no_windows_is_open_and_never_changes() {
        let now = at("2026-11-22T12:00:00Z");
        assert_eq!(verdict(&[], now), Verdict::Open);
        assert_eq!(next_change(&[], now), None);
    }

    #[test]
    fn a_deny_window_spanning_midnight() {
        // 22:00 Berlin (CET, UTC+1) for 8 h: 21:00Z to 05:00Z the next day.
        let w = [win(WindowKind::Deny, "0 22 * * *", 8, BERLIN)];
        assert!(verdict(&w, at("2026-11-22T20:59:59Z")).is_open());
        assert_eq!(
            closed(verdict(&w, at("2026-11-22T21:00:00Z"))),
            "inside deny window `0 22 * * *` (8h, Europe/Berlin) until 2026-11-23T06:00:00+01:00"
        );
        // After midnight the window is still the one that fired the evening before.
        let reason = closed(verdict(&w, at("2026-11-23T02:00:00Z")));
        assert!(
            reason.ends_with("until 2026-11-23T06:00:00+01:00"),
            "{reason}"
        );
        // The end is exclusive.
        assert!(verdict(&w, at("2026-11-23T05:00:00Z")).is_open());
        assert_eq!(
            next_change(&w, at("2026-11-23T02:00:00Z")),
            Some(at("2026-11-23T05:00:00Z"))
        );
        assert_eq!(
            next_change(&w, at("2026-11-23T05:00:00Z")),
            Some(at("2026-11-23T21:00:00Z"))
        );
    }

    #[test]
    fn allow_windows_close_everything_else() {
        // Weekdays 09:00-17:00 UTC.
        let w = [win(WindowKind::Allow, "0 9 * * 1-5", 8, Tz::UTC)];
        // 2026-11-23 is a Monday.
        assert!(verdict(&w, at("2026-11-23T09:00:00Z")).is_open());
        assert!(verdict(&w, at("2026-11-23T16:59:59Z")).is_open());
        assert_eq!(
            closed(verdict(&w, at("2026-11-23T17:00:00Z"))),
            "outside every allow window; next opens at 2026-11-24T09:00:00+00:00 \
             (allow window `0 9 * * 1-5` (8h, UTC))"
        );
        // Saturday: next opening is Monday.
        let reason = closed(verdict(&w, at("2026-11-28T10:00:00Z")));
        assert!(
            reason.contains("next opens at 2026-11-30T09:00:00+00:00"),
            "{reason}"
        );
        assert_eq!(
            next_change(&w, at("2026-11-28T10:00:00Z")),
            Some(at("2026-11-30T09:00:00Z"))
        );
    }

    #[test]
    fn standard_day_of_week_numbers_mean_what_cron_means() {
        // 0 and 7 are Sunday, 1 is Monday (the `cron` crate alone would read 1 as Sunday).
        let sunday = at("2026-11-22T10:30:00Z");
        let monday = at("2026-11-23T10:30:00Z");
        for expr in ["0 10 * * 0", "0 10 * * 7", "0 10 * * sun", "0 10 * * 6-7"] {
            let w = [win(WindowKind::Deny, expr, 1, Tz::UTC)];
            assert!(!verdict(&w, sunday).is_open(), "{expr} on Sunday");
            assert!(verdict(&w, monday).is_open(), "{expr} on Monday");
        }
        for expr in [
            "0 10 * * 1",
            "0 10 * * MON-FRI",
            "0 10 * * 1-5/2",
            "0 10 * * */2",
        ] {
            let w = [win(WindowKind::Deny, expr, 1, Tz::UTC)];
            let on_sunday = !verdict(&w, sunday).is_open();
            let on_monday = !verdict(&w, monday).is_open();
            // `*/2` is Sun, Tue, Thu, Sat; the others include Monday only.
            if expr.ends_with("*/2") {
                assert!(on_sunday && !on_monday, "{expr}");
            } else {
                assert!(!on_sunday && on_monday, "{expr}");
            }
        }
    }

    #[test]
    fn deny_wins_over_an_overlapping_allow() {
        let w = [
            win(WindowKind::Allow, "0 8 * * *", 10, Tz::UTC),
            win(WindowKind::Deny, "0 12 * * *", 1, Tz::UTC),
        ];
        assert!(verdict(&w, at("2026-11-22T11:59:00Z")).is_open());
        let reason = closed(verdict(&w, at("2026-11-22T12:30:00Z")));
        assert!(
            reason.starts_with("inside deny window `0 12 * * *`"),
            "{reason}"
        );
        assert!(verdict(&w, at("2026-11-22T13:00:00Z")).is_open());
        // Outside the allow window the closing reason is the allow window's.
        let reason = closed(verdict(&w, at("2026-11-22T19:00:00Z")));
        assert!(reason.starts_with("outside every allow window"), "{reason}");
        // Next changes: deny starts at 12:00, then ends 13:00, allow ends 18:00.
        assert_eq!(
            next_change(&w, at("2026-11-22T09:00:00Z")),
            Some(at("2026-11-22T12:00:00Z"))
        );
        assert_eq!(
            next_change(&w, at("2026-11-22T12:00:00Z")),
            Some(at("2026-11-22T13:00:00Z"))
        );
        assert_eq!(
            next_change(&w, at("2026-11-22T13:00:00Z")),
            Some(at("2026-11-22T18:00:00Z"))
        );
    }

    #[test]
    fn any_active_allow_window_opens() {
        let w = [
            win(WindowKind::Allow, "0 1 * * *", 1, Tz::UTC),
            win(WindowKind::Allow, "0 3 * * *", 1, Tz::UTC),
        ];
        assert!(verdict(&w, at("2026-11-22T01:30:00Z")).is_open());
        assert!(verdict(&w, at("2026-11-22T03:30:00Z")).is_open());
        let reason = closed(verdict(&w, at("2026-11-22T02:30:00Z")));
        assert!(
            reason.contains("next opens at 2026-11-22T03:00:00+00:00"),
            "{reason}"
        );
    }

    #[test]
    fn durations_are_absolute_across_a_spring_forward_change() {
        // Berlin moves from CET to CEST at 2026-03-29 02:00 local (01:00Z). A deny
        // window from 22:00 for 8 h ends at 07:00 local, 8 real hours later.
        let w = [win(WindowKind::Deny, "0 22 * * *", 8, BERLIN)];
        let reason = closed(verdict(&w, at("2026-03-29T03:00:00Z")));
        assert!(
            reason.ends_with("until 2026-03-29T07:00:00+02:00"),
            "{reason}"
        );
        assert!(verdict(&w, at("2026-03-29T05:00:00Z")).is_open());
        // The evening of the change fires at 22:00 CEST, 20:00Z.
        assert_eq!(
            next_change(&w, at("2026-03-29T05:00:00Z")),
            Some(at("2026-03-29T20:00:00Z"))
        );
    }

    #[test]
    fn a_skipped_local_time_does_not_fire() {
        // 02:30 does not exist in Berlin on 2026-03-29.
        let w = [win(WindowKind::Deny, "30 2 * * *", 1, BERLIN)];
        assert!(verdict(&w, at("2026-03-29T00:45:00Z")).is_open());
        assert!(verdict(&w, at("2026-03-29T01:15:00Z")).is_open());
        assert_eq!(
            next_change(&w, at("2026-03-28T23:00:00Z")),
            Some(at("2026-03-30T00:30:00Z"))
        );
        // The day before it fired at 02:30 CET (01:30Z).
        assert!(!verdict(&w, at("2026-03-28T01:45:00Z")).is_open());
    }

    #[test]
    fn a_repeated_local_time_fires_twice() {
        // Berlin falls back from 03:00 CEST to 02:00 CET on 2026-10-25: 02:30 happens at
        // 00:30Z and again at 01:30Z.
        let w = [win_minutes(WindowKind::Deny, "30 2 * * *", 20, BERLIN)];
        assert!(!verdict(&w, at("2026-10-25T00:40:00Z")).is_open());
        assert!(verdict(&w, at("2026-10-25T01:00:00Z")).is_open());
        // Asked between the two, in the repeated hour, the second is still found.
        assert_eq!(
            next_change(&w, at("2026-10-25T01:00:00Z")),
            Some(at("2026-10-25T01:30:00Z"))
        );
        let reason = closed(verdict(&w, at("2026-10-25T01:40:00Z")));
        assert!(
            reason.ends_with("until 2026-10-25T02:50:00+01:00"),
            "{reason}"
        );
        assert!(verdict(&w, at("2026-10-25T01:50:00Z")).is_open());
    }

    #[test]
    fn overlapping_fires_merge_into_one_active_span() {
        // Every hour for 90 minutes, between 08:00 and 10:00: active 08:00 to 11:30.
        let w = [win_minutes(WindowKind::Deny, "0 8-10 * * *", 90, Tz::UTC)];
        let reason = closed(verdict(&w, at("2026-11-22T08:10:00Z")));
        assert!(
            reason.ends_with("until 2026-11-22T11:30:00+00:00"),
            "{reason}"
        );
        assert_eq!(
            w[0].state(at("2026-11-22T09:10:00Z")),
            WindowState::Active {
                since: at("2026-11-22T08:00:00Z"),
                until: at("2026-11-22T11:30:00Z")
            }
        );
    }

    #[test]
    fn an_always_active_window_reports_a_bounded_end() {
        let w = [win(WindowKind::Deny, "* * * * *", 1, Tz::UTC)];
        let now = at("2026-11-22T12:00:30Z");
        assert!(!verdict(&w, now).is_open());
        let change = next_change(&w, now).expect("an end");
        assert!(change > now + chrono::TimeDelta::days(6), "{change}");
    }

    #[test]
    fn a_schedule_that_never_fires_again() {
        let w = [win(WindowKind::Allow, "0 0 0 1 1 * 2020", 1, Tz::UTC)];
        let now = at("2026-11-22T12:00:00Z");
        assert_eq!(
            closed(verdict(&w, now)),
            "outside every allow window; none opens again"
        );
        assert_eq!(next_change(&w, now), None);
    }

    #[test]
    fn six_and_seven_field_schedules_use_the_crate_as_is() {
        let w = [win(WindowKind::Deny, "30 0 22 * * *", 1, Tz::UTC)];
        assert!(!verdict(&w, at("2026-11-22T22:00:31Z")).is_open());
        assert!(verdict(&w, at("2026-11-22T22:00:29Z")).is_open());
    }

    #[test]
    fn bad_schedules_are_refused_with_reasons() {
        let err = |expr: &str| {
            SyncWindow::new(WindowKind::Deny, expr, Duration::from_secs(60), Tz::UTC)
                .expect_err(expr)
                .to_string()
        };
        assert_eq!(
            err("0 22 * *"),
            "`0 22 * *` has 4 fields; a schedule has 5 (minute hour day-of-month month \
             day-of-week), or 6-7 with seconds first"
        );
        assert!(err("61 22 * * *").starts_with("`61 22 * * *` is not a cron schedule: "));
        assert_eq!(
            err("0 22 1 * 1"),
            "`0 22 1 * 1` restricts both day-of-month and day-of-week, which standard cron \
             reads as either and this parser as both; use one"
        );
        assert_eq!(err("0 22 * * 8"), "`0 22 * * 8`: day-of-week 8 is not 0-7");
        assert_eq!(
            err("0 22 * * 5-2"),
            "`0 22 * * 5-2`: day-of-week range `5-2` runs backwards"
        );
        assert_eq!(
            err("0 22 * * */0"),
            "`0 22 * * */0`: day-of-week step `0` is not a positive number"
        );
        assert_eq!(
            err("0 22 * * funday"),
            "`0 22 * * funday`: day-of-week `funday` is not a day"
        );
        let zero = SyncWindow::new(WindowKind::Deny, "0 22 * * *", Duration::ZERO, Tz::UTC)
            .expect_err("zero");
        assert_eq!(zero.to_string(), "the duration must be positive");
    }
}
