//! Workloads (apps, batch, autoscaling): selectors and template labels, Job and
//! CronJob specs, HPA bounds.

use serde_json::Value;

use super::go_format::{go_intstr, go_label_selector, go_string_map};
use super::pods::validate_pod_template;
use super::selectors::{selector_matches, selector_size, validate_selector_labels};
use super::{
    CRON_JOB_NAME_MAX, FieldError, SELECTOR_MISMATCH_MSG, is_zero_intstr, str_at,
    supported_unless_empty, validate_nonnegative,
};

pub(super) fn validate_workload(kind: &str, spec: &Value, errs: &mut Vec<FieldError>) {
    let selector = spec.get("selector").filter(|s| !s.is_null());
    validate_nonnegative(spec.get("replicas"), "spec.replicas", errs);
    validate_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds", errs);
    let empty_msg = match kind {
        "StatefulSet" => "empty selector is invalid for statefulset",
        "DaemonSet" => "empty selector is invalid for daemonset",
        // ReplicaSet's validation reuses the Deployment wording.
        _ => "empty selector is invalid for deployment",
    };
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_labels = template.get("metadata").and_then(|m| m.get("labels"));
    let mismatch = || {
        FieldError::invalid(
            "spec.template.metadata.labels",
            &go_string_map(template_labels),
            SELECTOR_MISMATCH_MSG,
        )
    };
    let is_empty_selector = selector.is_some_and(|s| selector_size(s) == 0);
    if kind == "DaemonSet" {
        validate_selector_labels(selector, "spec.selector", errs);
        if !selector_matches(selector, template_labels) {
            errs.push(mismatch());
        }
        if is_empty_selector {
            errs.push(FieldError::invalid(
                "spec.selector",
                &go_label_selector(selector),
                empty_msg,
            ));
        }
    } else {
        match selector {
            None => errs.push(FieldError::required("spec.selector", "")),
            Some(_) => {
                validate_selector_labels(selector, "spec.selector", errs);
                if is_empty_selector {
                    errs.push(FieldError::invalid(
                        "spec.selector",
                        &go_label_selector(selector),
                        empty_msg,
                    ));
                }
            }
        }
        // An empty selector selects everything; a missing one selects nothing.
        if !is_empty_selector && !selector_matches(selector, template_labels) {
            errs.push(mismatch());
        }
    }
    validate_pod_template(template, "spec.template", errs);
    let restart = template
        .get("spec")
        .map(|s| str_at(s, "restartPolicy"))
        .unwrap_or("");
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            restart,
            &["Always"],
        ));
    }
    if kind == "StatefulSet" {
        let policy = str_at(spec, "podManagementPolicy");
        if !policy.is_empty() && policy != "OrderedReady" && policy != "Parallel" {
            errs.push(FieldError::invalid_str(
                "spec.podManagementPolicy",
                policy,
                "must be 'OrderedReady' or 'Parallel'",
            ));
        }
    }
    if kind == "Deployment" {
        let strategy = spec.get("strategy").unwrap_or(&Value::Null);
        let ty = str_at(strategy, "type");
        supported_unless_empty(
            "spec.strategy.type",
            ty,
            &["Recreate", "RollingUpdate"],
            errs,
        );
        if ty == "Recreate" && strategy.get("rollingUpdate").is_some_and(|r| !r.is_null()) {
            errs.push(FieldError::forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            ));
        }
        if let Some(rolling) = strategy.get("rollingUpdate")
            && is_zero_intstr(rolling.get("maxUnavailable"))
            && is_zero_intstr(rolling.get("maxSurge"))
        {
            errs.push(FieldError::invalid(
                "spec.strategy.rollingUpdate.maxUnavailable",
                &go_intstr(rolling.get("maxUnavailable")),
                "may not be 0 when `maxSurge` is 0",
            ));
        }
    }
}

pub(super) fn validate_job_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        validate_nonnegative(spec.get(key), &format!("{path}.{key}"), errs);
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    validate_pod_template(template, &format!("{path}.template"), errs);
    let restart = template
        .get("spec")
        .map(|s| str_at(s, "restartPolicy"))
        .unwrap_or("");
    if restart != "OnFailure" && restart != "Never" {
        errs.push(FieldError::not_supported(
            &format!("{path}.template.spec.restartPolicy"),
            restart,
            &["OnFailure", "Never"],
        ));
    }
    let mode = str_at(spec, "completionMode");
    supported_unless_empty(
        &format!("{path}.completionMode"),
        mode,
        &["NonIndexed", "Indexed"],
        errs,
    );
}

pub(super) fn validate_cron_job(obj: &Value, errs: &mut Vec<FieldError>) {
    let name = obj["metadata"]
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.len() > CRON_JOB_NAME_MAX {
        errs.push(FieldError::invalid_str(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if str_at(spec, "schedule").is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    }
    let policy = str_at(spec, "concurrencyPolicy");
    supported_unless_empty(
        "spec.concurrencyPolicy",
        policy,
        &["Allow", "Forbid", "Replace"],
        errs,
    );
    for key in [
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "startingDeadlineSeconds",
    ] {
        validate_nonnegative(spec.get(key), &format!("spec.{key}"), errs);
    }
    let job_spec = spec
        .get("jobTemplate")
        .and_then(|t| t.get("spec"))
        .unwrap_or(&Value::Null);
    validate_job_spec(job_spec, "spec.jobTemplate.spec", errs);
}

pub(super) fn validate_hpa(spec: &Value, errs: &mut Vec<FieldError>) {
    let target = spec.get("scaleTargetRef").unwrap_or(&Value::Null);
    for key in ["kind", "name"] {
        if str_at(target, key).is_empty() {
            errs.push(FieldError::required(
                &format!("spec.scaleTargetRef.{key}"),
                "",
            ));
        }
    }
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    if let Some(m) = min
        && m < 1
    {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            &m.to_string(),
            "must be greater than or equal to 1",
        ));
    }
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(m) = min
        && max < m
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        ));
    }
}
