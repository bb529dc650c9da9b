use super::*;
use serde_json::json;

fn put(store: &Store, resource: &str, namespace: &str, mut object: Value) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    store
        .put(
            &rbac_key(resource),
            &(namespace.to_string(), name),
            None,
            &mut object,
        )
        .unwrap();
}

fn attributes(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: String::new(),
        namespace: ns.into(),
        name: name.into(),
    }
}

fn message(err: ApiError) -> String {
    err.to_string()
}

/// A Role allowing ConfigMaps (only `settings` for updates), bound to the
/// ServiceAccount `t1/deployer` without naming its namespace.
fn tenant_store() -> Store {
    let store = Store::new();
    put(
        &store,
        "roles",
        "t1",
        json!({"metadata": {"name": "config", "namespace": "t1"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"], "resourceNames": ["settings"]},
            {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["patch"]},
        ]}),
    );
    put(
        &store,
        "rolebindings",
        "t1",
        json!({"metadata": {"name": "config", "namespace": "t1"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "config"},
            "subjects": [{"kind": "ServiceAccount", "name": "deployer"}]}),
    );
    store
}

#[test]
fn a_role_binding_allows_its_rules_in_its_namespace_only() {
    let store = tenant_store();
    let sa = UserInfo::service_account("t1", "deployer");
    let ok = |a: Attributes| authorize(&store, &sa, &a).is_ok();
    assert!(ok(attributes("get", "", "configmaps", "t1", "a")));
    assert!(ok(attributes("create", "", "configmaps", "t1", "")));
    assert!(ok(attributes("update", "", "configmaps", "t1", "settings")));
    assert!(!ok(attributes("update", "", "configmaps", "t1", "other")));
    assert!(!ok(attributes("get", "", "configmaps", "t2", "a")));
    assert!(!ok(attributes("list", "", "configmaps", "", "")));
    let mut scale = attributes("patch", "apps", "deployments", "t1", "web");
    scale.subresource = "scale".into();
    assert!(ok(scale.clone()));
    scale.subresource = String::new();
    assert!(!ok(scale));
    let other = UserInfo::service_account("t1", "someone");
    assert!(
        authorize(
            &store,
            &other,
            &attributes("get", "", "configmaps", "t1", "a")
        )
        .is_err()
    );
    assert!(
        authorize(
            &store,
            &UserInfo::admin(),
            &attributes("delete", "", "nodes", "", "n")
        )
        .is_ok()
    );
}

#[test]
fn refusals_read_as_kube_apiserver_writes_them() {
    let store = tenant_store();
    let sa = UserInfo::service_account("t1", "deployer");
    let err = authorize(
        &store,
        &sa,
        &attributes("patch", "apps", "deployments", "t1", "web"),
    )
    .unwrap_err();
    assert_eq!(
        err.status(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:t1:deployer\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"t1\"",
            "reason": "Forbidden",
            "details": {"name": "web", "group": "apps", "kind": "deployments"}, "code": 403})
    );
    let err = authorize(&store, &sa, &attributes("list", "", "configmaps", "", "")).unwrap_err();
    assert_eq!(
        message(err.clone()),
        "configmaps is forbidden: User \"system:serviceaccount:t1:deployer\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope"
    );
    assert_eq!(err.status()["details"], json!({"kind": "configmaps"}));
    let mut status = attributes("update", "apps", "deployments", "t1", "web");
    status.subresource = "status".into();
    assert_eq!(
        message(authorize(&store, &sa, &status).unwrap_err()),
        "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:t1:deployer\" cannot update resource \"deployments/status\" in API group \"apps\" in the namespace \"t1\""
    );
}

#[test]
fn a_binding_to_a_missing_role_gives_the_rbac_reason() {
    let store = Store::new();
    put(
        &store,
        "clusterrolebindings",
        "",
        json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "gone"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts:t1"}]}),
    );
    let sa = UserInfo::service_account("t1", "deployer");
    assert_eq!(
        message(authorize(&store, &sa, &attributes("get", "", "pods", "t1", "p")).unwrap_err()),
        "pods \"p\" is forbidden: User \"system:serviceaccount:t1:deployer\" cannot get resource \"pods\" in API group \"\" in the namespace \"t1\": RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
    );
    // A ClusterRole that exists, bound cluster-wide, allows in every namespace.
    put(
        &store,
        "clusterroles",
        "",
        json!({"metadata": {"name": "gone"}, "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]}),
    );
    assert!(authorize(&store, &sa, &attributes("get", "", "pods", "t9", "p")).is_ok());
    assert!(
        authorize(
            &store,
            &sa,
            &attributes("get", "apps", "deployments", "", "")
        )
        .is_ok()
    );
}

#[test]
fn requests_are_read_as_request_info_reads_them() {
    let q = HashMap::new();
    let of = |m: &Method, p: &str, q: &HashMap<String, String>| {
        Attributes::of_request(m, p, q).expect("a resource request")
    };
    // Each request, and its attributes: verb, group, resource, namespace, name.
    let cases = [
        "PATCH /apis/apps/v1/namespaces/t1/deployments/web => patch,apps,deployments,t1,web",
        "GET /api/v1/namespaces/t1 => get,,namespaces,t1,t1",
        "POST /api/v1/namespaces => create,,namespaces,,",
        "GET /apis/apps/v1/deployments?watch=true => watch,apps,deployments,,",
        "DELETE /api/v1/namespaces/t1/configmaps => deletecollection,,configmaps,t1,",
    ];
    for case in cases {
        let (request, expected) = case.split_once(" => ").expect("request => attributes");
        let (method, request) = request.split_once(' ').expect("method and path");
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let (path, query) = request.split_once('?').unwrap_or((request, ""));
        let query: HashMap<String, String> = query
            .split_once('=')
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into_iter()
            .collect();
        let [verb, group, resource, ns, name] = expected.split(',').collect::<Vec<_>>()[..] else {
            panic!("{expected}: five attributes");
        };
        let expected = attributes(verb, group, resource, ns, name);
        assert_eq!(of(&method, path, &query), expected, "{case}");
    }
    let finalize = of(&Method::PUT, "/api/v1/namespaces/t1/finalize", &q);
    assert_eq!(
        (finalize.resource.as_str(), finalize.subresource.as_str()),
        ("namespaces", "finalize")
    );
    assert_eq!(
        Attributes::of_request(&Method::GET, "/apis/apps/v1", &q),
        None
    );
    assert_eq!(Attributes::of_request(&Method::GET, "/version", &q), None);
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(*k, v.parse().unwrap());
    }
    map
}

#[test]
fn the_admin_impersonates_a_service_account_with_its_groups() {
    let store = Store::new();
    let user = impersonate(
        &store,
        UserInfo::admin(),
        &headers(&[("impersonate-user", "system:serviceaccount:t1:deployer")]),
    )
    .unwrap();
    assert_eq!(user, UserInfo::service_account("t1", "deployer"));
    let user = impersonate(
        &store,
        UserInfo::admin(),
        &headers(&[("impersonate-user", "jane"), ("impersonate-group", "devs")]),
    )
    .unwrap();
    assert_eq!(user.name, "jane");
    assert_eq!(user.groups, ["devs", AUTHENTICATED_GROUP]);
    assert_eq!(
        impersonate(&store, UserInfo::admin(), &HeaderMap::new()).unwrap(),
        UserInfo::admin()
    );
    assert!(matches!(
        impersonate(
            &store,
            UserInfo::admin(),
            &headers(&[("impersonate-group", "devs")])
        ),
        Err(ApiError::BadRequest(_))
    ));
}

#[test]
fn impersonating_needs_the_impersonate_verb() {
    let store = Store::new();
    let jane = UserInfo {
        name: "jane".into(),
        groups: vec![AUTHENTICATED_GROUP.into()],
    };
    let err = impersonate(
        &store,
        jane.clone(),
        &headers(&[("impersonate-user", "system:serviceaccount:t1:deployer")]),
    )
    .unwrap_err();
    assert_eq!(
        err.status(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "serviceaccounts \"deployer\" is forbidden: User \"jane\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"t1\"",
            "reason": "Forbidden",
            "details": {"name": "deployer", "kind": "serviceaccounts"}, "code": 403})
    );
    let err = impersonate(
        &store,
        jane.clone(),
        &headers(&[("impersonate-user", "bob")]),
    )
    .unwrap_err();
    assert_eq!(
        message(err),
        "users \"bob\" is forbidden: User \"jane\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    put(
        &store,
        "clusterroles",
        "",
        json!({"metadata": {"name": "impersonator"}, "rules": [
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]}),
    );
    put(
        &store,
        "clusterrolebindings",
        "",
        json!({"metadata": {"name": "jane"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "impersonator"},
            "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": "jane"}]}),
    );
    let user = impersonate(
        &store,
        jane,
        &headers(&[("impersonate-user", "system:serviceaccount:t1:deployer")]),
    )
    .unwrap();
    assert_eq!(user, UserInfo::service_account("t1", "deployer"));
}

/// `kubectl auth can-i` and `auth whoami` as anyone: the bootstrap
/// `system:basic-user` binding lets every authenticated user ask about themselves.
#[test]
fn everyone_may_ask_about_themselves_and_list_their_rules() {
    let store = tenant_store();
    let stranger = UserInfo::service_account("t9", "nobody");
    for (group, resource) in [
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    ] {
        assert!(
            authorize(
                &store,
                &stranger,
                &attributes("create", group, resource, "", "")
            )
            .is_ok()
        );
    }
    assert!(
        authorize(
            &store,
            &stranger,
            &attributes(
                "create",
                "authorization.k8s.io",
                "subjectaccessreviews",
                "",
                ""
            )
        )
        .is_err()
    );
    let (rules, incomplete) = rules_for(&store, &UserInfo::service_account("t1", "deployer"), "t1");
    assert!(!incomplete);
    assert_eq!(
        rules.len(),
        5,
        "two of basic-user, three of the Role: {rules:?}"
    );
    let (rules, _) = rules_for(&store, &UserInfo::admin(), "t1");
    assert_eq!(
        rules,
        vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})]
    );
}
