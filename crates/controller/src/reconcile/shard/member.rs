//! Which member Leases are tether's own (issue #24). A member Lease publishes where a
//! replica answers, and its peers call that URL; anyone allowed to write Leases in
//! tether's namespace could publish one. A member Lease counts only when tether wrote
//! what matters in it: its holder and its URL are owned, in `managedFields`, by tether's
//! field manager alone, and its name is its holder's. Anything else is refused (and
//! logged by the shard manager): it is no member, gets no shard and is never called.
//! `managedFields` names the writing client, not the user, so a writer who borrows
//! tether's manager name passes this check; it then meets the peers' signatures
//! (`server::peer_auth`), which it cannot make or answer without the peer token.

use std::collections::HashMap;

use serde_json::Value;

use super::{STATUS_URL_ANNOTATION, member_lease_name};
use tether_schema::ownership::FIELD_MANAGER;

/// Why a member Lease is not taken for tether's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    #[error("it names no holder")]
    NoHolder,
    #[error("its holder {holder:?} is not the replica its name is for")]
    Renamed { holder: String },
    #[error("its {field} was written by {managers}, not by {FIELD_MANAGER}")]
    ForeignWriter {
        field: &'static str,
        managers: String,
    },
}

/// The managers of `managedFields` entries whose fields include `path`
/// (`["f:spec", "f:holderIdentity"]`).
fn managers_of<'a>(lease: &'a Value, path: &[&str]) -> Vec<&'a str> {
    lease
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|entry| {
            let mut fields = entry.get("fieldsV1");
            for step in path {
                fields = fields.and_then(|f| f.get(*step));
            }
            fields.is_some()
        })
        .map(|entry| entry.get("manager").and_then(Value::as_str).unwrap_or(""))
        .collect()
}

/// Whether `field` (at `path` in the fields) was written by tether alone.
fn owned(lease: &Value, field: &'static str, path: &[&str]) -> Result<(), Untrusted> {
    let managers = managers_of(lease, path);
    if !managers.is_empty() && managers.iter().all(|m| *m == FIELD_MANAGER) {
        return Ok(());
    }
    let managers = if managers.is_empty() {
        "no one on record".to_string()
    } else {
        managers.join(", ")
    };
    Err(Untrusted::ForeignWriter { field, managers })
}

/// The member Lease `name` read: its holder and published URL when tether wrote them.
pub fn trusted_member(lease: &Value, name: &str) -> Result<(String, Option<String>), Untrusted> {
    let holder = lease
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
        .ok_or(Untrusted::NoHolder)?;
    if member_lease_name(holder) != name {
        return Err(Untrusted::Renamed {
            holder: holder.to_string(),
        });
    }
    owned(lease, "holderIdentity", &["f:spec", "f:holderIdentity"])?;
    let url = lease
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS_URL_ANNOTATION))
        .and_then(Value::as_str);
    if url.is_some() {
        let key = format!("f:{STATUS_URL_ANNOTATION}");
        owned(
            lease,
            "status URL",
            &["f:metadata", "f:annotations", key.as_str()],
        )?;
    }
    Ok((holder.to_string(), url.map(str::to_string)))
}

/// A string field of a Lease (`/metadata/uid`).
pub(super) fn text_at(lease: &Value, pointer: &str) -> Option<String> {
    lease
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Logs a member Lease refused as not tether's, once per version of it: `refused`
/// holds the resourceVersion last logged, by name.
pub(super) fn log_refusal(
    refused: &mut HashMap<String, String>,
    name: &str,
    lease: &Value,
    err: &Untrusted,
) {
    let version = lease
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if refused.get(name).map(String::as_str) != Some(version) {
        tracing::warn!(lease = %name, error = %err, "a member Lease is not tether's own: it is no member, and its URL is never called");
        refused.insert(name.to_string(), version.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(holder: &str, managers: &[(&str, bool, bool)]) -> Value {
        let entries: Vec<Value> = managers
            .iter()
            .map(|(manager, holds, url)| {
                let mut fields = json!({});
                if *holds {
                    fields["f:spec"] = json!({"f:holderIdentity": {}});
                }
                if *url {
                    fields["f:metadata"] =
                        json!({"f:annotations": {"f:tether.dev/status-url": {}}});
                }
                json!({"manager": manager, "operation": "Update", "fieldsV1": fields})
            })
            .collect();
        json!({
            "metadata": {
                "name": member_lease_name(holder),
                "annotations": {STATUS_URL_ANNOTATION: "http://10.0.0.7:8080"},
                "managedFields": entries,
            },
            "spec": {"holderIdentity": holder},
        })
    }

    #[test]
    fn a_member_lease_counts_only_when_tether_wrote_its_holder_and_url() {
        let name = member_lease_name("tether-0_ab");
        let ours = lease(
            "tether-0_ab",
            &[(FIELD_MANAGER, true, true), ("kubectl-label", false, false)],
        );
        assert_eq!(
            trusted_member(&ours, &name),
            Ok(("tether-0_ab".into(), Some("http://10.0.0.7:8080".into())))
        );
        let forged = lease("tether-0_ab", &[("kubectl-create", true, true)]);
        assert_eq!(
            trusted_member(&forged, &name)
                .expect_err("kubectl wrote it")
                .to_string(),
            "its holderIdentity was written by kubectl-create, not by tether"
        );
        let url_edited = lease(
            "tether-0_ab",
            &[
                (FIELD_MANAGER, true, true),
                ("kubectl-annotate", false, true),
            ],
        );
        assert!(trusted_member(&url_edited, &name).is_err());
        let unrecorded = lease("tether-0_ab", &[]);
        assert!(trusted_member(&unrecorded, &name).is_err());
        assert_eq!(
            trusted_member(&ours, &member_lease_name("evil")),
            Err(Untrusted::Renamed {
                holder: "tether-0_ab".into()
            })
        );
    }
}
