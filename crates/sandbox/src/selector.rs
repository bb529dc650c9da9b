//! Label and field selectors of list and watch requests, parsed as kube-apiserver
//! parses them (`k8s.io/apimachinery/pkg/labels`, `pkg/fields`).

use std::collections::BTreeMap;

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            // `!=` and `notin` also match objects without the label, as in Kubernetes.
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed `labelSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub(crate) fn parse(input: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for term in split_terms(input) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(LabelSelector(requirements))
    }

    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as
    /// `metav1.LabelSelectorAsSelector` reads it; None when it cannot be read, which,
    /// as there, selects nothing.
    pub(crate) fn from_object(selector: &Value) -> Option<LabelSelector> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                requirements.push(Requirement::Equals(
                    key.clone(),
                    value.as_str()?.to_string(),
                ));
            }
        }
        for expression in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression["key"].as_str()?.to_string();
            let values = crate::strings(expression.get("values"));
            requirements.push(match expression["operator"].as_str()? {
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                _ => return None,
            });
        }
        Some(LabelSelector(requirements))
    }

    /// Whether the selector has no requirement (and so selects everything).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on commas outside parentheses (`env in (a,b),tier=web`).
fn split_terms(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&input[start..]);
    terms
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(valid_key(key.trim())?));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            valid_key(key.trim())?,
            value.trim().to_string(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(
            valid_key(key.trim())?,
            value.trim().to_string(),
        ));
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim();
        let (negated, set) = if let Some(set) = rest.strip_prefix("notin") {
            (true, set)
        } else if let Some(set) = rest.strip_prefix("in") {
            (false, set)
        } else {
            return Err(format!(
                "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !="
            ));
        };
        let set = set.trim();
        let inner = set
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("unable to parse requirement: found '{set}', expected: '('"))?;
        let values = inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        let key = valid_key(key)?;
        return Ok(if negated {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    Ok(Requirement::Exists(valid_key(term)?))
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label key \"{key}\""
        ))
    }
}

/// A parsed `fieldSelector`: every resource supports `metadata.name` and
/// `metadata.namespace`; some register more (their `AddFieldLabelConversionFunc` in
/// kube-apiserver), listed in [`extra_fields`]. Operators are `=`, `==` and `!=`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

/// The field selectors a resource supports beyond `metadata.name` and
/// `metadata.namespace`, as kube-apiserver registers them (`pkg/apis/*/v1/conversion.go`).
pub(crate) fn extra_fields(group: &str, resource: &str) -> &'static [&'static str] {
    match (group, resource) {
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "replicationcontrollers") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    }
}

impl FieldSelector {
    /// Parses a selector for a resource supporting `extra` fields besides the metadata.
    pub(crate) fn parse(input: &str, extra: &[&str]) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in input.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            let known =
                field == "metadata.name" || field == "metadata.namespace" || extra.contains(&field);
            if !known {
                // The message of `DefaultMetaV1FieldSelectorConversion`; resources with
                // their own conversion say `field label not supported: …`.
                return Err(if extra.is_empty() {
                    format!(
                        "\"{field}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    )
                } else {
                    format!("field label not supported: {field}")
                });
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether the selector reads more than the object's namespace and name.
    pub(crate) fn needs_object(&self) -> bool {
        self.0
            .iter()
            .any(|(field, _, _)| field != "metadata.name" && field != "metadata.namespace")
    }

    /// Whether the object at `namespace`/`name` matches; `object` is only read for
    /// fields other than the metadata ones (see [`FieldSelector::needs_object`]).
    pub(crate) fn matches(&self, namespace: &str, name: &str, object: Option<&Value>) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field.as_str() {
                "metadata.name" => name.to_string(),
                "metadata.namespace" => namespace.to_string(),
                other => object.map(|o| field_value(o, other)).unwrap_or_default(),
            };
            (actual == *value) == *equal
        })
    }
}

/// A selectable field's value as kube-apiserver's field set writes it: a string, a
/// boolean or number in decimal, "" when absent. An Event's `source` is its component.
fn field_value(object: &Value, field: &str) -> String {
    let pointer = match field {
        "source" => "/source/component".to_string(),
        other => format!("/{}", other.replace('.', "/")),
    };
    match object.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let cases = [
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("app in (web, api)", true, false),
            ("app notin (web)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app in (web,db),tier=front", true, false),
            ("", true, true),
        ];
        for (selector, on_web, on_db) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&web), on_web, "{selector} on web");
            assert_eq!(parsed.matches(&db), on_db, "{selector} on db");
        }
    }

    #[test]
    fn label_selector_rejects_garbage() {
        assert!(LabelSelector::parse("app between (a)").is_err());
        assert!(LabelSelector::parse("app in a").is_err());
        assert!(LabelSelector::parse("bad key!").is_err());
    }

    #[test]
    fn field_selector_supports_name_and_namespace_only() {
        let selector =
            FieldSelector::parse("metadata.name=web,metadata.namespace!=kube-system", &[]).unwrap();
        assert!(!selector.needs_object());
        assert!(selector.matches("default", "web", None));
        assert!(!selector.matches("kube-system", "web", None));
        assert!(!selector.matches("default", "db", None));
        assert!(FieldSelector::parse("spec.nodeName=x", &[]).is_err());
    }

    /// `kubectl describe` reads an object's Events with these selectors.
    #[test]
    fn event_selectors_read_the_involved_object() {
        let extra = extra_fields("", "events");
        let selector = FieldSelector::parse(
            "involvedObject.kind=Deployment,involvedObject.name=web,involvedObject.namespace=demo,source=deployment-controller",
            extra,
        )
        .unwrap();
        assert!(selector.needs_object());
        let event = serde_json::json!({"involvedObject": {"kind": "Deployment", "name": "web", "namespace": "demo"}, "source": {"component": "deployment-controller"}});
        assert!(selector.matches("demo", "web.1", Some(&event)));
        let other = serde_json::json!({"involvedObject": {"kind": "ReplicaSet", "name": "web", "namespace": "demo"}});
        assert!(!selector.matches("demo", "web.2", Some(&other)));
        assert_eq!(
            FieldSelector::parse("involvedObject.color=red", extra).unwrap_err(),
            "field label not supported: involvedObject.color"
        );
        let hosts =
            FieldSelector::parse("spec.hostNetwork=true", extra_fields("", "pods")).unwrap();
        assert!(hosts.matches(
            "",
            "p",
            Some(&serde_json::json!({"spec": {"hostNetwork": true}}))
        ));
    }
}
