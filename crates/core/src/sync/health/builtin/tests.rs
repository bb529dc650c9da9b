//! Each built-in rule against status objects its project's controller wrote, trimmed
//! to what a rule reads (`apiVersion`, `kind`, `metadata.generation`, `spec` where it
//! matters, `status` as written). The source of each is named next to it: Argo CD
//! keeps captured objects for its own health checks under
//! `argoproj/argo-cd/resource_customizations/<group>/<Kind>/testdata/`, which the
//! comments below abbreviate as `argo-cd:<group>/<Kind>/<file>`.

use serde_json::{Value, json};

use super::super::Judge;
use super::super::{Assessment, Health};
use super::*;
use tether_diff::manifest::ObjectId;

fn judge(live: &Value) -> Assessment {
    let api_version = live["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let id = ObjectId {
        group: group.into(),
        version: version.into(),
        kind: live["kind"].as_str().unwrap_or_default().into(),
        namespace: Some("ns".into()),
        name: "x".into(),
    };
    Judge::default().assess(&id, live)
}

fn health(live: Value) -> Health {
    judge(&live).health
}

fn conditions(api_version: &str, kind: &str, conditions: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"generation": 1},
           "status": {"conditions": conditions}})
}

#[test]
fn every_built_in_rule_compiles_once() {
    let specs = specs();
    assert!(HealthRules::compile(&specs).is_ok());
    assert_eq!(specs.len(), 14);
    assert!(!rules().is_empty());
    assert!(std::ptr::eq(rules(), rules()));
}

#[test]
fn cert_manager_certificates_and_issuers() {
    let cert = "cert-manager.io/v1";
    // argo-cd:cert-manager.io/Certificate/progressing_issuing.yaml
    let issuing = conditions(
        cert,
        "Certificate",
        json!([
            {"type": "Issuing", "status": "True", "reason": "DoesNotExist",
             "message": "Issuing certificate as Secret does not exist"},
            {"type": "Ready", "status": "False", "reason": "DoesNotExist",
             "message": "Issuing certificate as Secret does not exist"}]),
    );
    let verdict = judge(&issuing);
    assert_eq!(verdict.health, Health::Progressing);
    assert!(
        verdict
            .message
            .starts_with("DoesNotExist: Issuing certificate as Secret does not exist"),
        "{verdict:?}"
    );
    // argo-cd:cert-manager.io/Certificate/degraded_configError.yaml
    let config_error = conditions(
        cert,
        "Certificate",
        json!([{"type": "Ready", "status": "False", "reason": "ConfigError",
                "message": "Resource validation failed: spec.acme.config: Required value: no ACME solver configuration specified for domain \"cd.apps.argoproj.io\""}]),
    );
    let verdict = judge(&config_error);
    assert_eq!(verdict.health, Health::Degraded);
    assert!(
        verdict
            .message
            .starts_with("ConfigError: Resource validation failed")
    );
    // argo-cd:cert-manager.io/Certificate/healthy_issued.yaml
    let issued = conditions(
        cert,
        "Certificate",
        json!([
            {"type": "ValidateFailed", "status": "False", "reason": "OrderValidated", "message": "Order validated"},
            {"type": "Ready", "status": "True", "reason": "CertIssued", "message": "Certificate issued successfully"}]),
    );
    assert_eq!(health(issued), Health::Healthy);
    // A Certificate just created: no status yet.
    let fresh = json!({"apiVersion": cert, "kind": "Certificate", "metadata": {"generation": 1}});
    assert_eq!(health(fresh), Health::Progressing);

    // argo-cd:cert-manager.io/ClusterIssuer/degraded_acmeFailed.yaml
    let acme_failed = conditions(
        cert,
        "ClusterIssuer",
        json!([{"type": "Ready", "status": "False", "reason": "ErrRegisterACMEAccount",
                "message": "Failed to verify ACME account: acme: : 404 page not found\n"}]),
    );
    assert_eq!(health(acme_failed), Health::Degraded);
    // argo-cd:cert-manager.io/Issuer/healthy_registered.yaml
    let registered = conditions(
        cert,
        "Issuer",
        json!([{"type": "Ready", "status": "True", "reason": "ACMEAccountRegistered",
                "message": "The ACME account was registered with the ACME server"}]),
    );
    assert_eq!(health(registered.clone()), Health::Healthy);
    let mut no_status = registered;
    no_status.as_object_mut().map(|o| o.remove("status"));
    assert_eq!(health(no_status), Health::Progressing);
}

#[test]
fn argo_rollouts_by_their_phase() {
    let rollout = |generation: i64, status: Value| {
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
               "metadata": {"generation": generation}, "status": status})
    };
    // argo-cd:argoproj.io/Rollout/healthy_newWorkloadGeneration.yaml (observedGeneration
    // is a string in Rollouts).
    let healthy = rollout(
        3,
        json!({"phase": "Healthy", "observedGeneration": "3", "availableReplicas": 5,
               "conditions": [{"type": "Completed", "status": "True", "reason": "RolloutCompleted"},
                              {"type": "Available", "status": "True", "reason": "AvailableReason",
                               "message": "Rollout has minimum availability"}]}),
    );
    assert_eq!(health(healthy), Health::Healthy);
    // argo-cd:argoproj.io/Rollout/suspended_v1.0_pausedRollout.yaml
    let paused = rollout(
        5,
        json!({"phase": "Paused", "message": "CanaryPauseStep", "observedGeneration": "5",
               "conditions": [{"type": "Paused", "status": "True", "reason": "RolloutPaused",
                               "message": "Rollout is paused"}]}),
    );
    let verdict = judge(&paused);
    assert_eq!(verdict.health, Health::Progressing);
    assert!(
        verdict.message.starts_with("CanaryPauseStep"),
        "{verdict:?}"
    );
    // argo-cd:argoproj.io/Rollout/degraded_statusPhaseMessage.yaml
    let degraded = rollout(
        1,
        json!({"phase": "Degraded", "message": "InvalidSpec", "observedGeneration": "8575574967",
               "conditions": {}}),
    );
    let verdict = judge(&degraded);
    assert_eq!(verdict.health, Health::Degraded);
    assert!(verdict.message.starts_with("InvalidSpec"), "{verdict:?}");
}

#[test]
fn external_secrets_and_their_stores() {
    // argo-cd:external-secrets.io/ExternalSecret/degraded.yaml
    let degraded = conditions(
        "external-secrets.io/v1alpha1",
        "ExternalSecret",
        json!([{"type": "Ready", "status": "False", "reason": "SecretSyncedError",
                "message": "could not get secret data from provider: key \"secret/sa/example\" from ExternalSecret \"test-degraded\""}]),
    );
    assert_eq!(health(degraded), Health::Degraded);
    // argo-cd:external-secrets.io/ExternalSecret/progressing.yaml (no status yet)
    let progressing = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "ExternalSecret",
                             "metadata": {"generation": 1}});
    assert_eq!(health(progressing), Health::Progressing);
    // argo-cd:external-secrets.io/SecretStore/healthy.yaml
    let store = conditions(
        "external-secrets.io/v1beta1",
        "SecretStore",
        json!([{"type": "Ready", "status": "True", "reason": "Valid", "message": "store validated"}]),
    );
    assert_eq!(health(store), Health::Healthy);
    // argo-cd:external-secrets.io/ClusterSecretStore/degraded.yaml
    let cluster_store = conditions(
        "external-secrets.io/v1beta1",
        "ClusterSecretStore",
        json!([{"type": "Ready", "status": "False", "reason": "ValidationFailed",
                "message": "unable to validate store"}]),
    );
    assert_eq!(health(cluster_store), Health::Degraded);
}

#[test]
fn sealed_secrets_by_their_synced_condition() {
    // argo-cd:bitnami.com/SealedSecret/healthy.yaml and degraded.yaml
    let sealed = |status: &str, message: &str| {
        json!({"apiVersion": "bitnami.com/v1alpha1", "kind": "SealedSecret",
               "metadata": {"generation": 1},
               "status": {"observedGeneration": 1, "conditions": [
                   {"type": "Synced", "status": status, "message": message}]}})
    };
    assert_eq!(health(sealed("True", "")), Health::Healthy);
    let verdict = judge(&sealed(
        "False",
        "no key could decrypt secret (.dockerconfigjson)",
    ));
    assert_eq!(verdict.health, Health::Degraded);
    assert!(
        verdict
            .message
            .starts_with("Synced: no key could decrypt secret (.dockerconfigjson) [failed"),
        "{verdict:?}"
    );
}

#[test]
fn flux_objects_follow_kstatus() {
    let hr = "helm.toolkit.fluxcd.io/v2";
    // argo-cd:helm.toolkit.fluxcd.io/HelmRelease/progressing.yaml
    let progressing = conditions(
        hr,
        "HelmRelease",
        json!([
            {"type": "Reconciling", "status": "True", "reason": "Progressing",
             "message": "Running 'upgrade' action with timeout of 5m0s"},
            {"type": "Ready", "status": "Unknown", "reason": "Progressing",
             "message": "Running 'upgrade' action with timeout of 5m0s"},
            {"type": "Released", "status": "True", "reason": "InstallSucceeded"}]),
    );
    assert_eq!(health(progressing), Health::Progressing);
    // argo-cd:helm.toolkit.fluxcd.io/HelmRelease/degraded.yaml: the upgrade failed and
    // was rolled back; Flux retries (Reconciling) but its own verdict is Ready=False.
    let degraded = conditions(
        hr,
        "HelmRelease",
        json!([
            {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry"},
            {"type": "Ready", "status": "False", "reason": "RollbackSucceeded",
             "message": "Helm rollback to previous release default/podinfo.v24 with chart podinfo@6.5.4 succeeded"},
            {"type": "Released", "status": "False", "reason": "UpgradeFailed"}]),
    );
    let verdict = judge(&degraded);
    assert_eq!(verdict.health, Health::Degraded);
    assert!(
        verdict
            .message
            .starts_with("RollbackSucceeded: Helm rollback"),
        "{verdict:?}"
    );
    // argo-cd:kustomize.toolkit.fluxcd.io/Kustomization/degraded.yaml and healthy.yaml
    let ks = "kustomize.toolkit.fluxcd.io/v1";
    let failed = conditions(
        ks,
        "Kustomization",
        json!([{"type": "Ready", "status": "False", "reason": "ArtifactFailed",
                "message": "GitRepository.source.toolkit.fluxcd.io \"podinfo\" not found"}]),
    );
    assert_eq!(health(failed), Health::Degraded);
    let ready = conditions(
        ks,
        "Kustomization",
        json!([{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded"}]),
    );
    assert_eq!(health(ready), Health::Healthy);
    // A GitRepository Flux stalled on (kstatus `Stalled`, as source-controller writes
    // for an invalid URL).
    let stalled = conditions(
        "source.toolkit.fluxcd.io/v1",
        "GitRepository",
        json!([{"type": "Stalled", "status": "True", "reason": "URLInvalid"},
               {"type": "Ready", "status": "False", "reason": "URLInvalid"}]),
    );
    assert_eq!(health(stalled), Health::Degraded);
}

#[test]
fn keda_scaled_objects() {
    let keda = "keda.sh/v1alpha1";
    // argo-cd:keda.sh/ScaledObject/keda-healthy.yaml
    let healthy = conditions(
        keda,
        "ScaledObject",
        json!([
            {"type": "Ready", "status": "True", "reason": "ScaledObjectReady",
             "message": "ScaledObject is defined correctly and is ready for scaling"},
            {"type": "Active", "status": "False", "reason": "ScalerNotActive"},
            {"type": "Fallback", "status": "False", "reason": "NoFallbackFound"},
            {"type": "Paused", "status": "Unknown"}]),
    );
    assert_eq!(health(healthy), Health::Healthy);
    // argo-cd:keda.sh/ScaledObject/keda-degraded.yaml
    let degraded = conditions(
        keda,
        "ScaledObject",
        json!([{"type": "Ready", "status": "False", "reason": "ScaledObjectCheckFailed",
                "message": "ScaledObject doesn't have correct triggers specification"}]),
    );
    assert_eq!(health(degraded), Health::Degraded);
    // argo-cd:keda.sh/ScaledObject/keda-progressing.yaml
    let progressing = conditions(
        keda,
        "ScaledObject",
        json!([{"type": "Running", "status": "True", "reason": "Running",
                "message": "Creating HorizontalPodAutoscaler Object"}]),
    );
    assert_eq!(health(progressing), Health::Progressing);
}

#[test]
fn prometheus_operator_workloads() {
    let mon = "monitoring.coreos.com/v1";
    // argo-cd:monitoring.coreos.com/Alertmanager/healthy.yaml
    let healthy = conditions(
        mon,
        "Alertmanager",
        json!([{"type": "Available", "status": "True"}, {"type": "Reconciled", "status": "True"}]),
    );
    assert_eq!(health(healthy), Health::Healthy);
    // argo-cd:monitoring.coreos.com/Prometheus/progressing.yaml
    let some_ready = conditions(
        mon,
        "Prometheus",
        json!([{"type": "Available", "status": "Degraded", "reason": "SomePodsNotReady"},
               {"type": "Reconciled", "status": "True"}]),
    );
    assert_eq!(health(some_ready), Health::Progressing);
    // argo-cd:monitoring.coreos.com/Prometheus/degraded.yaml
    let none_ready = conditions(
        mon,
        "Prometheus",
        json!([{"type": "Available", "status": "False", "reason": "NoPodReady",
                "message": "shard 0: pod prometheus-prometheus-stack-kube-prom-prometheus-0: 0/5 nodes are available"},
               {"type": "Reconciled", "status": "True"}]),
    );
    assert_eq!(health(none_ready), Health::Degraded);
}

#[test]
fn crossplane_composites_and_claims_by_their_shape() {
    // Conditions as Crossplane's docs list them (crossplane/docs,
    // content/master/concepts/managed-resources.md, "Conditions": ReconcileSuccess,
    // ReconcileError, Available, Creating), on an XR with a composition reference as
    // in content/master/concepts/composite-resources.md.
    let xr = |conditions: Value| {
        json!({"apiVersion": "example.org/v1alpha1", "kind": "XDatabase", "metadata": {"generation": 1},
               "spec": {"compositionRef": {"name": "database-aws"}},
               "status": {"conditions": conditions}})
    };
    let synced = json!({"type": "Synced", "status": "True", "reason": "ReconcileSuccess"});
    let creating = json!({"type": "Ready", "status": "False", "reason": "Creating",
                          "message": "Unready resources: bucket"});
    let available = json!({"type": "Ready", "status": "True", "reason": "Available"});
    let error = json!({"type": "Synced", "status": "False", "reason": "ReconcileError",
                       "message": "cannot compose resources"});
    assert_eq!(health(xr(json!([synced, creating]))), Health::Progressing);
    assert_eq!(health(xr(json!([synced, available]))), Health::Healthy);
    assert_eq!(health(xr(json!([error, available]))), Health::Degraded);
    // Ready alone is not enough: the composite must also be Synced.
    assert_eq!(health(xr(json!([available]))), Health::Progressing);
    // A Crossplane v2 XR (`spec.crossplane`) and a claim are recognised the same way.
    let mut v2 = xr(json!([synced, available]));
    v2["spec"] = json!({"crossplane": {"compositionRef": {"name": "database-aws"}}});
    assert!(composite(&v2).is_some());
    let mut other = v2.clone();
    other["spec"] = json!({"replicas": 1});
    assert!(composite(&other).is_none());
    // Without the shape, kstatus judges: Ready=False is Degraded there.
    let mut plain = xr(json!([synced, creating]));
    plain["spec"] = json!({});
    assert_eq!(health(plain), Health::Degraded);
}
