//! How a sync judges an object's health: the CEL rules of the app, of the
//! configuration and built in ([`super::builtin`]), then the built-in verdicts and
//! kstatus of [`super::assess`].

use serde_json::Value;

use tether_diff::manifest::ObjectId;

use super::Assessment;
use super::builtin;
use super::cel::{HealthRules, Rule};

/// How a sync judges health: an app's rules win over the configuration's, which win
/// over the built-in rules ([`super::builtin`]), which win over the built-in verdicts
/// and kstatus of [`super::assess`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Judge<'a> {
    pub app: Option<&'a HealthRules>,
    pub global: Option<&'a HealthRules>,
}

impl<'a> Judge<'a> {
    pub fn new(app: &'a HealthRules, global: &'a HealthRules) -> Judge<'a> {
        Judge {
            app: Some(app),
            global: Some(global),
        }
    }

    /// The rule that judges objects of this group and kind, if one does.
    pub fn rule(&self, group: &str, kind: &str) -> Option<&'a Rule> {
        [self.app, self.global, Some(builtin::rules())]
            .into_iter()
            .flatten()
            .find_map(|rules| rules.get(group, kind))
    }

    /// The health of one live object.
    pub fn assess(&self, id: &ObjectId, live: &Value) -> Assessment {
        if live.pointer("/metadata/deletionTimestamp").is_some() {
            return Assessment::progressing("being deleted");
        }
        let rule = self
            .rule(&id.group, &id.kind)
            .or_else(|| builtin::composite(live));
        match rule {
            Some(rule) => rule.assess(live),
            None => super::assess(id, live),
        }
    }
}
