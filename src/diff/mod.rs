//! Pure drift detection: desired × live × rules → drift. No I/O in here.
