//! The template stage of an AppSet: `{{param}}` placeholders in every string of an
//! App's template replaced by one parameter set's values. Pure: no I/O.
//!
//! The syntax is Argo CD's (fasttemplate) without Go templates: `{{name}}` or
//! `{{ name }}`, no expressions, no defaults. A placeholder naming no parameter is an
//! error naming it (Argo CD leaves it in place, which turns a typo into an App called
//! `web-{{nmae}}`); text without `{{` is left as it is.

use std::collections::BTreeMap;

use serde_json::Value;

/// What a template cannot become.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{{name}}` where the parameter set has no `name`.
    #[error("{place}: unknown parameter {{{{{name}}}}} (this parameter set has: {known})")]
    Unknown {
        place: String,
        name: String,
        known: String,
    },
    /// `{{` without its `}}`.
    #[error("{place}: unclosed {{{{ in {text:?}")]
    Unclosed { place: String, text: String },
}

/// Replaces every placeholder in the strings of `template` (keys are left alone: a
/// key is a field name, never data). `place` names the template's root in errors.
pub fn render(
    template: &Value,
    params: &BTreeMap<String, String>,
    place: &str,
) -> Result<Value, TemplateError> {
    Ok(match template {
        Value::String(text) => Value::String(substitute(text, params, place)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| render(item, params, &format!("{place}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    Ok((
                        key.clone(),
                        render(value, params, &format!("{place}.{key}"))?,
                    ))
                })
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => other.clone(),
    })
}

/// One string with its placeholders replaced.
fn substitute(
    text: &str,
    params: &BTreeMap<String, String>,
    place: &str,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(TemplateError::Unclosed {
                place: place.to_string(),
                text: text.to_string(),
            });
        };
        let name = after[..close].trim();
        let value = params.get(name).ok_or_else(|| TemplateError::Unknown {
            place: place.to_string(),
            name: name.to_string(),
            known: params.keys().cloned().collect::<Vec<_>>().join(", "),
        })?;
        out.push_str(value);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn placeholders_in_every_string_are_replaced_and_the_rest_kept() {
        let template = json!({
            "metadata": {"name": "{{path.basename}}-{{ env }}"},
            "spec": {"source": {"path": "{{path}}", "interval": "1m"}, "replicas": 3,
                     "list": ["{{env}}", true, "plain"]},
        });
        let p = params(&[("path", "teams/a"), ("path.basename", "a"), ("env", "prod")]);
        let out = render(&template, &p, "template").expect("renders");
        assert_eq!(
            out,
            json!({
                "metadata": {"name": "a-prod"},
                "spec": {"source": {"path": "teams/a", "interval": "1m"}, "replicas": 3,
                         "list": ["prod", true, "plain"]},
            })
        );
    }

    #[test]
    fn an_unknown_parameter_is_an_error_naming_it_and_its_place() {
        let template = json!({"spec": {"source": {"path": "apps/{{nmae}}"}}});
        let err = render(&template, &params(&[("name", "a")]), "template")
            .expect_err("unknown")
            .to_string();
        assert_eq!(
            err,
            "template.spec.source.path: unknown parameter {{nmae}} (this parameter set has: name)"
        );
        let err = render(&json!(["x-{{name"]), &params(&[("name", "a")]), "t")
            .expect_err("unclosed")
            .to_string();
        assert!(err.starts_with("t[0]: unclosed {{"), "{err}");
    }

    #[test]
    fn a_value_is_inserted_as_text_never_read_again_as_a_template() {
        let out = render(&json!("{{a}}"), &params(&[("a", "{{b}}")]), "t").expect("renders");
        assert_eq!(out, json!("{{b}}"));
    }
}
