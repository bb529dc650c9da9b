//! The chart's rights: tether itself writes nothing and apps act as tenants by
//! default; the App CRD and the rights `serve` needs for App objects ship with it.

use super::*;

/// Issue #24: by default tether itself writes nothing of the cluster's objects (it
/// reads, impersonates ServiceAccounts, and keeps its own state and App objects), Apps
/// act as `tether-tenant` of their namespace, and the chart ships the ClusterRole a
/// platform team binds for a tenant. `rbac.singleTeam` restores every right.
#[tokio::test]
async fn tether_itself_writes_nothing_and_apps_act_as_tenants_by_default() {
    let namespace = "tether-system";
    let rendered = render(namespace, "");
    let writes = [
        "*",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let own = rules_of(rendered.named("ClusterRole", FULLNAME));
    // Issue #30: reviews are asked, never stored, and an action's Event is its trail.
    let people = |groups: &Vec<String>, resources: &Vec<String>, verbs: &Vec<String>| {
        let allowed = [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
            ("events.k8s.io", "events"),
        ];
        verbs == &["create"]
            && matches!((groups.as_slice(), resources.as_slice()), ([g], [r])
                if allowed.contains(&(g.as_str(), r.as_str())))
    };
    for (groups, resources, verbs) in &own {
        let writing = verbs.iter().any(|v| writes.contains(&v.as_str()));
        assert!(
            !writing || groups == &["tether.dev"] || people(groups, resources, verbs),
            "tether may write {groups:?}/{resources:?}: {verbs:?}"
        );
    }
    assert!(own.contains(&(
        vec!["".into()],
        vec!["serviceaccounts".into()],
        vec!["impersonate".into()]
    )));
    assert_eq!(
        rendered.config()["server"]["defaultServiceAccount"],
        "tether-tenant"
    );
    let tenant = rendered.named("ClusterRole", &format!("{FULLNAME}-tenant"));
    let tenant_rules = rules_of(tenant);
    assert!(
        tenant_rules.iter().any(|(_, resources, verbs)| resources
            .contains(&"deployments".to_string())
            && verbs.contains(&"patch".to_string())),
        "{tenant_rules:?}"
    );
    // Bound by nothing the chart makes: the platform team binds it per namespace.
    for binding in rendered
        .all("ClusterRoleBinding")
        .into_iter()
        .chain(rendered.all("RoleBinding"))
    {
        assert_ne!(binding["roleRef"]["name"], tenant["metadata"]["name"]);
    }

    // Installed, the API server agrees: tether may impersonate and read, not write.
    let sandbox = install(&rendered, &[namespace]).await;
    let as_tether = format!("--as=system:serviceaccount:{namespace}:{FULLNAME}");
    let can_i = |verb: &'static str, what: &'static str, ns: &'static str| {
        let (sandbox, as_tether) = (&sandbox, as_tether.clone());
        async move {
            let out = sandbox
                .kubectl(&["auth", "can-i", verb, what, "-n", ns, &as_tether])
                .await;
            out.stdout.trim().to_string()
        }
    };
    assert_eq!(
        can_i("impersonate", "serviceaccounts", "team-a").await,
        "yes"
    );
    assert_eq!(can_i("list", "secrets", "team-a").await, "yes");
    assert_eq!(can_i("create", "clusterrolebindings", "team-a").await, "no");
    assert_eq!(can_i("patch", "configmaps", "kube-system").await, "no");
    assert_eq!(
        can_i("patch", "configmaps", namespace).await,
        "yes",
        "its inventory"
    );

    // One team: every right, as before issue #24.
    let single = render(
        namespace,
        "rbac: {singleTeam: true}
",
    );
    let own = rules_of(single.named("ClusterRole", FULLNAME));
    assert_eq!(
        own[0],
        (vec!["*".into()], vec!["*".into()], vec!["*".into()])
    );
    // No default: every App names its ServiceAccount; no tenant ClusterRole if unwanted.
    let strict = render(
        namespace,
        "tenants: {defaultServiceAccount: \"\", createClusterRole: false}\n",
    );
    assert!(strict.config()["server"]["defaultServiceAccount"].is_null());
    assert_eq!(strict.all("ClusterRole").len(), 1);
    // The configuration's own setting wins over the chart's default.
    let own_default = render(
        namespace,
        "config:\n  server:\n    defaultServiceAccount: deployer\n",
    );
    assert_eq!(
        own_default.config()["server"]["defaultServiceAccount"],
        "deployer"
    );
}

/// Issue #16: Helm installs the App CRD from the chart's `crds/` (the same text `tether
/// crd` prints), and the roles grant what `tether serve` needs for App objects unless
/// `config.server.apps.enabled` is false.
#[tokio::test]
async fn the_chart_ships_the_app_crd_and_the_rights_serve_needs_for_apps() {
    let run = run_helm(
        &["template", RELEASE, "-n", "tether-system", "--include-crds"],
        "",
    );
    assert!(run.success, "helm template failed: {}", run.stderr);
    let objects: Vec<Value> = serde_saphyr::from_multiple(&run.stdout).expect("YAML");
    let crd = objects
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .expect("the App CRD is rendered");
    let shipped: Value =
        serde_saphyr::from_str(tether_controller::config::APP_CRD_YAML).expect("YAML");
    assert_eq!(crd, &shipped);

    let app_rules = |role: &Value| -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
        rules_of(role)
            .into_iter()
            .filter(|(groups, _, _)| groups.iter().any(|g| g == "tether.dev"))
            .collect()
    };
    let rendered = render("tether-system", "");
    let rules = app_rules(rendered.named("ClusterRole", FULLNAME));
    assert_eq!(rules.len(), 3, "{rules:?}");
    assert_eq!(rules[0].1, ["apps"]);
    // create and delete: the Apps an AppSet generates and deletes (issue #28).
    assert_eq!(
        rules[0].2,
        [
            "get", "list", "watch", "patch", "update", "create", "delete"
        ]
    );
    assert_eq!(rules[1].1, ["apps/status"]);
    assert_eq!(rules[1].2, ["get", "patch", "update"]);
    assert_eq!(rules[2].1, ["appsets/status"]);
    assert_eq!(rules[2].2, ["get", "patch", "update"]);
    let crd_rule = &rendered.named("ClusterRole", FULLNAME)["rules"]
        .as_array()
        .and_then(|r| r.last())
        .cloned()
        .expect("rules");
    assert_eq!(crd_rule["resources"][0], "customresourcedefinitions");
    assert_eq!(crd_rule["resourceNames"][0], "apps.tether.dev");
    assert_eq!(strings(&crd_rule["verbs"]), ["get", "list", "watch"]);

    let namespaced = render(
        "tether-system",
        "rbac:\n  scope: namespaced\n  namespaces: [team-a]\nconfig:\n  server:\n    apps:\n      namespaces: [team-a]\n",
    );
    let role = namespaced
        .all("Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "team-a")
        .expect("the team-a Role");
    assert_eq!(app_rules(role).len(), 3);
    assert_eq!(
        namespaced.config()["server"]["apps"]["namespaces"][0],
        "team-a"
    );

    let off = render(
        "tether-system",
        "config:\n  server:\n    apps:\n      enabled: false\n",
    );
    assert!(app_rules(off.named("ClusterRole", FULLNAME)).is_empty());

    // Applied as Helm would (CRDs first), the CRD serves `kubectl get tapp`.
    let sandbox = TestSandbox::start().await;
    let dir = sandbox.dir.path().join("crds");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("app.yaml"),
        serde_json::to_string(crd).expect("JSON"),
    )
    .expect("write");
    apply_rendered(&sandbox, &dir).await;
    crate::support::eventually("the App kind is served", || async {
        (sandbox.kubectl(&["get", "tapp", "-A"]).await.code == 0).then_some(())
    })
    .await;
}
