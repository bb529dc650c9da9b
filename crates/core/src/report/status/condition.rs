//! The conditions an app's status carries, named once: their types and statuses as
//! enums, and the reasons tether sets itself (beside those of the stage that failed,
//! which its error names). On the wire they are the strings Kubernetes conditions use
//! (`type: Ready`, `status: "True"`), so the App's status, the API and the dashboard
//! read as before.

use std::fmt;

use serde::{Serialize, Serializer};

/// What a condition is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// The last pass succeeded (kstatus's and Flux's summary condition).
    Ready,
    /// Passes stopped until something changes (a person, new inputs).
    Stalled,
    /// Nothing is left drifted from Git.
    Synced,
    /// The app's objects are healthy.
    Healthy,
    /// The source fetched.
    SourceReady,
    /// The revision passed `source.verify`.
    SourceVerified,
    /// A rollback holds the app at an earlier revision.
    Pinned,
}

impl ConditionType {
    /// As Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Stalled => "Stalled",
            ConditionType::Synced => "Synced",
            ConditionType::Healthy => "Healthy",
            ConditionType::SourceReady => "SourceReady",
            ConditionType::SourceVerified => "SourceVerified",
            ConditionType::Pinned => "Pinned",
        }
    }
}

/// Whether a condition holds, as Kubernetes spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// `True` or `False` as `holds` says.
    pub fn of(holds: bool) -> ConditionStatus {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

macro_rules! as_wire_string {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    )*};
}

as_wire_string!(ConditionType, ConditionStatus);

/// The reasons tether sets itself. A failed stage's reason comes from its error
/// (`PassError::reason`, `SourceError::reason`, …).
pub mod reason {
    /// The pass succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// The pass failed and is retried, backing off.
    pub const RETRYING: &str = "Retrying";
    /// The source fetched.
    pub const FETCHED: &str = "Fetched";
    /// The source could not be fetched.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// Nothing is left drifted.
    pub const SYNCED: &str = "Synced";
    /// Some objects differ from Git.
    pub const OUT_OF_SYNC: &str = "OutOfSync";
    /// The revision passed `source.verify`.
    pub const VERIFIED: &str = "Verified";
    /// A rollback pins the app.
    pub const ROLLED_BACK: &str = "RolledBack";
    /// Git moved past a rollback: the app follows it again.
    pub const GIT_MOVED: &str = "GitMoved";
    /// A person let go of the rollback.
    pub const UNPINNED: &str = "Unpinned";
    /// The `Ready` condition's reason while an app waits for its dependencies
    /// (`dependsOn`): Flux's reason for the same wait, so tools that know Flux read it.
    pub const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_the_strings_kubernetes_conditions_use_on_the_wire() {
        let json = serde_json::json!({
            "type": ConditionType::SourceReady,
            "status": ConditionStatus::of(false),
        });
        assert_eq!(
            json,
            serde_json::json!({"type": "SourceReady", "status": "False"})
        );
        assert_eq!(ConditionStatus::Unknown.to_string(), "Unknown");
        assert_eq!(ConditionType::Pinned.to_string(), "Pinned");
    }
}
