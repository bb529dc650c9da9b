//! Workloads: Deployments, StatefulSets, DaemonSets, ReplicationControllers, Jobs,
//! CronJobs and HorizontalPodAutoscalers.

use serde_json::{Map, Value, json};

use super::core::default_pvc_spec;
use super::pods::{default_pod_template, default_template_at};
use super::{
    Obj, array, canonicalize_value, child, ensure_obj, is_empty_str, is_unset, set_ptr, set_str,
    sort_keys, str_of,
};

pub(super) fn default_replication_controller(o: &mut Obj) {
    let template_labels = o
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = template_labels {
        if let Some(spec) = child(o, "spec")
            && spec
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            spec.insert("selector".into(), labels.clone());
        }
        if let Some(meta) = ensure_obj(o, "metadata")
            && meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            meta.insert("labels".into(), labels);
        }
    }
    if let Some(spec) = child(o, "spec") {
        set_ptr(spec, "replicas", json!(1));
        default_template_at(spec);
    }
}

pub(super) fn default_deployment(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_ptr(spec, "replicas", json!(1));
    if let Some(strategy) = ensure_obj(spec, "strategy") {
        set_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = ensure_obj(strategy, "rollingUpdate")
        {
            set_ptr(rolling, "maxUnavailable", json!("25%"));
            set_ptr(rolling, "maxSurge", json!("25%"));
        }
    }
    set_ptr(spec, "revisionHistoryLimit", json!(10));
    set_ptr(spec, "progressDeadlineSeconds", json!(600));
    default_template_at(spec);
}

pub(super) fn default_stateful_set(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = ensure_obj(spec, "updateStrategy") {
        if is_empty_str(strategy.get("type")) {
            strategy.insert("type".into(), json!("RollingUpdate"));
            set_ptr(strategy, "rollingUpdate", json!({}));
        }
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = child(strategy, "rollingUpdate")
        {
            set_ptr(rolling, "partition", json!(0));
        }
    }
    if let Some(policy) = ensure_obj(spec, "persistentVolumeClaimRetentionPolicy") {
        set_str(policy, "whenDeleted", "Retain");
        set_str(policy, "whenScaled", "Retain");
    }
    set_ptr(spec, "replicas", json!(1));
    set_ptr(spec, "revisionHistoryLimit", json!(10));
    default_template_at(spec);
    if let Some(templates) = array(spec, "volumeClaimTemplates") {
        for t in templates.iter_mut().filter_map(Value::as_object_mut) {
            set_str(t, "apiVersion", "v1");
            set_str(t, "kind", "PersistentVolumeClaim");
            if let Some(pvc_spec) = child(t, "spec") {
                default_pvc_spec(pvc_spec);
            }
            if let Some(status) = ensure_obj(t, "status") {
                set_str(status, "phase", "Pending");
            }
        }
    }
}

pub(super) const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

pub(super) fn default_daemon_set(o: &mut Obj, old: Option<&Value>) {
    // The template generation lives in an annotation; the server owns it: 1 on create,
    // the stored value on update, plus one when the template changed.
    let generation = match old {
        None => 1,
        Some(old) => old
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(1),
    };
    if let Some(spec) = child(o, "spec") {
        if let Some(strategy) = ensure_obj(spec, "updateStrategy") {
            set_str(strategy, "type", "RollingUpdate");
            if str_of(strategy, "type") == "RollingUpdate"
                && let Some(rolling) = ensure_obj(strategy, "rollingUpdate")
            {
                set_ptr(rolling, "maxUnavailable", json!(1));
                set_ptr(rolling, "maxSurge", json!(0));
            }
        }
        set_ptr(spec, "revisionHistoryLimit", json!(10));
        default_template_at(spec);
    }
    let template_changed = old.is_some_and(|old| {
        let mut old_template = old
            .get("spec")
            .and_then(|s| s.get("template"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(t) = old_template.as_object_mut() {
            default_pod_template(t);
        }
        o.get("spec").and_then(|s| s.get("template")) != Some(&old_template)
    });
    let generation = if template_changed {
        generation + 1
    } else {
        generation
    };
    if let Some(meta) = ensure_obj(o, "metadata")
        && let Some(annotations) = ensure_obj(meta, "annotations")
    {
        annotations.insert(
            TEMPLATE_GENERATION_ANNOTATION.into(),
            json!(generation.to_string()),
        );
    }
}

pub(super) fn default_job(o: &mut Obj, create: bool) {
    let meta = o.get("metadata").cloned().unwrap_or(Value::Null);
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    let uid = meta.get("uid").and_then(Value::as_str).unwrap_or("");
    let Some(spec) = child(o, "spec") else {
        return;
    };
    if is_unset(spec.get("completions")) && is_unset(spec.get("parallelism")) {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set_ptr(spec, "parallelism", json!(1));
    if is_unset(spec.get("backoffLimit")) {
        let limit = if is_unset(spec.get("backoffLimitPerIndex")) {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    set_ptr(spec, "completionMode", json!("NonIndexed"));
    set_ptr(spec, "suspend", json!(false));
    set_ptr(spec, "manualSelector", json!(false));
    let has_failure_policy = !is_unset(spec.get("podFailurePolicy"));
    if let Some(rules) = child(spec, "podFailurePolicy").and_then(|p| array(p, "rules")) {
        for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(patterns) = array(rule, "onPodConditions") {
                for p in patterns.iter_mut().filter_map(Value::as_object_mut) {
                    set_str(p, "status", "True");
                }
            }
        }
    }
    set_ptr(
        spec,
        "podReplacementPolicy",
        json!(if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    default_template_at(spec);
    let manual = spec
        .get("manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if create && !manual {
        generate_job_selector(spec, name, uid);
    }
    // Read back from storage, a Job without labels shows its template's labels.
    let template_labels = spec
        .get("template")
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = template_labels
        && let Some(meta) = ensure_obj(o, "metadata")
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
}

/// The job strategy's `generateSelector`: the template is labelled with the job's name
/// and uid (legacy and prefixed keys) and selected by the uid.
pub(super) fn generate_job_selector(spec: &mut Obj, name: &str, uid: &str) {
    if let Some(labels) = child(spec, "template")
        .and_then(|t| ensure_obj(t, "metadata"))
        .and_then(|m| ensure_obj(m, "labels"))
    {
        for key in ["job-name", "batch.kubernetes.io/job-name"] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        if !uid.is_empty() {
            for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
                labels.entry(key).or_insert_with(|| json!(uid));
            }
        }
        sort_keys(labels);
    }
    if !uid.is_empty()
        && let Some(match_labels) =
            ensure_obj(spec, "selector").and_then(|s| ensure_obj(s, "matchLabels"))
    {
        match_labels
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert_with(|| json!(uid));
    }
}

pub(super) fn default_cron_job(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "concurrencyPolicy", "Allow");
    set_ptr(spec, "suspend", json!(false));
    set_ptr(spec, "successfulJobsHistoryLimit", json!(3));
    set_ptr(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_template) = child(spec, "jobTemplate") {
        ensure_obj(job_template, "metadata");
        if let Some(job_spec) = child(job_template, "spec") {
            default_template_at(job_spec);
        }
    }
}

pub(super) fn default_hpa(o: &mut Obj) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_ptr(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }]),
        );
    }
    if let Some(metrics) = array(spec, "metrics") {
        for m in metrics.iter_mut().filter_map(Value::as_object_mut) {
            for source in m.values_mut().filter_map(Value::as_object_mut) {
                for key in ["target", "current"] {
                    if let Some(target) = child(source, key) {
                        canonicalize_value(target, "value", None);
                        canonicalize_value(target, "averageValue", None);
                    }
                }
            }
        }
    }
    // A given behavior is completed with the defaults that reproduce the classic HPA.
    if let Some(behavior) = child(spec, "behavior") {
        let up = json!({
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        });
        let down = json!({
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        });
        for (key, defaults) in [("scaleUp", up), ("scaleDown", down)] {
            let mut rules = defaults;
            if let (Some(given), Some(r)) = (
                behavior.get(key).and_then(Value::as_object),
                rules.as_object_mut(),
            ) {
                for (k, v) in given {
                    if !v.is_null() {
                        r.insert(k.clone(), v.clone());
                    }
                }
            }
            behavior.insert(key.into(), rules);
        }
    }
}
