//! Who is asking and whether they may, as kube-apiserver decides it before any handler
//! runs: the impersonation filter (`Impersonate-User`, `Impersonate-Group`), then RBAC
//! (Roles, ClusterRoles and their bindings, read from the store on every request, so a
//! binding applied with `kubectl` counts at once), answering 403 with the real message.
//!
//! The sandbox's own bearer token is the cluster admin (`kubernetes-admin` in
//! `system:masters`, as kubeadm names it), which RBAC never limits; an impersonated
//! identity, or the user of another token ([`crate::tokens`]), meets RBAC.
//! Non-resource paths (discovery, `/version`, OpenAPI) are open to every authenticated
//! user, as the default `system:discovery` binding makes them. Aggregated ClusterRoles are not evaluated (their rules are
//! whatever was stored), and `Impersonate-Uid` and `Impersonate-Extra-*` are accepted
//! without a check of their own.
//!
//! [`authorize`] stands alone, for any handler that must ask the same question
//! (`SelfSubjectAccessReview`).

use std::collections::HashMap;

use http::{HeaderMap, Method};
use serde_json::Value;

use super::status::ApiError;
use super::store::{ResourceKey, Store};

/// The sandbox's authenticated user: kubeadm's admin.
pub(crate) const ADMIN_USER: &str = "kubernetes-admin";
/// Members are allowed everything, without RBAC (kube-apiserver's superuser group).
pub(crate) const MASTERS_GROUP: &str = "system:masters";
/// Every authenticated (or impersonated, non-anonymous) user is in it.
pub(crate) const AUTHENTICATED_GROUP: &str = "system:authenticated";
const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
const ANONYMOUS_USER: &str = "system:anonymous";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const IMPERSONATE_USER: &str = "impersonate-user";
const IMPERSONATE_GROUP: &str = "impersonate-group";

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
}

impl UserInfo {
    /// The holder of the sandbox's token.
    pub(crate) fn admin() -> UserInfo {
        UserInfo {
            name: ADMIN_USER.to_string(),
            groups: vec![MASTERS_GROUP.to_string(), AUTHENTICATED_GROUP.to_string()],
        }
    }

    /// A ServiceAccount as kube-apiserver authenticates (or impersonates) it.
    pub(crate) fn service_account(namespace: &str, name: &str) -> UserInfo {
        UserInfo {
            name: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
            groups: vec![
                SERVICE_ACCOUNTS_GROUP.to_string(),
                format!("{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
                AUTHENTICATED_GROUP.to_string(),
            ],
        }
    }

    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS_GROUP)
    }
}

/// What a resource request asks to do, as kube-apiserver's `RequestInfo` reads it
/// from the method and path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    /// Empty for a cluster-scoped request.
    pub(crate) namespace: String,
    /// Empty for a collection (list, create, deletecollection).
    pub(crate) name: String,
}

impl Attributes {
    /// The attributes of a request to `path`, or None for a non-resource path.
    pub(crate) fn of_request(
        method: &Method,
        path: &str,
        query: &HashMap<String, String>,
    ) -> Option<Attributes> {
        let segments: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let (group, mut parts) = match segments.as_slice() {
            ["api", _, rest @ ..] => ("", rest),
            ["apis", group, _, rest @ ..] => (*group, rest),
            _ => return None,
        };
        if parts.is_empty() {
            return None;
        }
        let mut namespace = "";
        if parts[0] == "namespaces" && parts.len() > 1 {
            namespace = parts[1];
            // `namespaces/{name}/status` and `/finalize` are the namespace's own.
            if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
                parts = &parts[2..];
            }
        }
        let name = parts.get(1).copied().unwrap_or_default();
        let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        let verb = match *method {
            Method::GET if watch => "watch",
            Method::GET if name.is_empty() => "list",
            Method::GET | Method::HEAD => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if name.is_empty() => "deletecollection",
            Method::DELETE => "delete",
            _ => "",
        };
        Some(Attributes {
            verb: verb.to_string(),
            group: group.to_string(),
            resource: parts[0].to_string(),
            subresource: parts.get(2).copied().unwrap_or_default().to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

/// A request RBAC refused: kube-apiserver's answer, and the identity it ran as when
/// impersonation itself was allowed (for the audit).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) user: Option<String>,
    pub(crate) error: ApiError,
}

/// Impersonates and authorizes one request of `requester` (whom its bearer token
/// authenticated): the identity it runs as, or kube-apiserver's refusal.
pub(crate) fn check(
    store: &Store,
    requester: UserInfo,
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<UserInfo, Box<Refusal>> {
    let user = impersonate(store, requester, headers)
        .map_err(|error| Box::new(Refusal { user: None, error }))?;
    if let Some(attributes) = Attributes::of_request(method, path, query)
        && let Err(error) = authorize(store, &user, &attributes)
    {
        return Err(Box::new(Refusal {
            user: Some(user.name),
            error,
        }));
    }
    Ok(user)
}

/// The identity a request runs as: `requester`, or whom it impersonates once the
/// requester may (kube-apiserver's `WithImpersonation` filter). A ServiceAccount's
/// groups are its fixed ones unless groups are impersonated too; a non-anonymous
/// identity is always in `system:authenticated`.
pub(crate) fn impersonate(
    store: &Store,
    requester: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let user = headers
        .get(IMPERSONATE_USER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let groups: Vec<&str> = headers
        .get_all(IMPERSONATE_GROUP)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let Some(user) = user else {
        if groups.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::BadRequest(format!(
            "requested [{}] without impersonating a user",
            groups
                .iter()
                .map(|g| format!("{{Group  {g}    }}"))
                .collect::<Vec<_>>()
                .join(" ")
        )));
    };
    let mut requests: Vec<(&str, String, String)> = Vec::new();
    match user
        .strip_prefix(SERVICE_ACCOUNT_PREFIX)
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
            requests.push(("serviceaccounts", namespace.to_string(), name.to_string()))
        }
        _ => requests.push(("users", String::new(), user.to_string())),
    }
    for group in &groups {
        requests.push(("groups", String::new(), group.to_string()));
    }
    let mut impersonated = UserInfo {
        name: String::new(),
        groups: Vec::new(),
    };
    for (resource, namespace, name) in requests {
        let acting_as = Attributes {
            verb: "impersonate".to_string(),
            group: String::new(),
            resource: resource.to_string(),
            subresource: String::new(),
            namespace: namespace.clone(),
            name: name.clone(),
        };
        authorize(store, &requester, &acting_as)?;
        match resource {
            "serviceaccounts" => {
                impersonated.name = format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}");
                if groups.is_empty() {
                    impersonated.groups = vec![
                        SERVICE_ACCOUNTS_GROUP.to_string(),
                        format!("{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
                    ];
                }
            }
            "users" => impersonated.name = name,
            _ => impersonated.groups.push(name),
        }
    }
    let add_authenticated = impersonated.name != ANONYMOUS_USER
        && !impersonated
            .groups
            .iter()
            .any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP);
    if add_authenticated {
        impersonated.groups.push(AUTHENTICATED_GROUP.to_string());
    }
    Ok(impersonated)
}

/// Whether `user` may do what `attributes` say: `system:masters` always, anyone else
/// when a rule of a role bound to them allows it. Refused: kube-apiserver's 403, with
/// the RBAC authorizer's reason when a binding names a role that does not exist.
pub(crate) fn authorize(
    store: &Store,
    user: &UserInfo,
    attributes: &Attributes,
) -> Result<(), ApiError> {
    if user.is_master() || basic_user_allows(user, attributes) {
        return Ok(());
    }
    let mut errors: Vec<String> = Vec::new();
    let bindings = |resource: &str, namespace: Option<&str>| {
        store
            .list(&rbac_key(resource), namespace)
            .1
            .into_iter()
            .map(|(_, stored)| stored.value())
    };
    for binding in bindings("clusterrolebindings", None) {
        if !applies(&binding, user, "") {
            continue;
        }
        match role_rules(store, &binding, "") {
            Ok(rules) if rules.iter().any(|r| allows(r, attributes)) => return Ok(()),
            Ok(_) => {}
            Err(err) => errors.push(err),
        }
    }
    if !attributes.namespace.is_empty() {
        let namespace = attributes.namespace.as_str();
        for binding in bindings("rolebindings", Some(namespace)) {
            if !applies(&binding, user, namespace) {
                continue;
            }
            match role_rules(store, &binding, namespace) {
                Ok(rules) if rules.iter().any(|r| allows(r, attributes)) => return Ok(()),
                Ok(_) => {}
                Err(err) => errors.push(err),
            }
        }
    }
    errors.dedup();
    let reason = match errors.as_slice() {
        [] => None,
        [one] => Some(format!("RBAC: {one}")),
        many => Some(format!("RBAC: [{}]", many.join(", "))),
    };
    Err(forbidden(user, attributes, reason.as_deref()))
}

/// What the bootstrap `system:basic-user` ClusterRole, bound to every authenticated
/// user, allows: asking about oneself (`kubectl auth can-i`, `auth whoami`).
fn basic_user_allows(user: &UserInfo, attributes: &Attributes) -> bool {
    let authenticated = user.groups.iter().any(|g| g == AUTHENTICATED_GROUP);
    let own = matches!(
        (attributes.group.as_str(), attributes.resource.as_str()),
        (
            "authorization.k8s.io",
            "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
        ) | ("authentication.k8s.io", "selfsubjectreviews")
    );
    authenticated && own && attributes.verb == "create"
}

/// The rules `user` holds in `namespace` (and cluster-wide), as the RBAC authorizer's
/// `RulesFor` lists them for a SelfSubjectRulesReview: `system:masters` holds every
/// rule; a binding whose role does not exist adds nothing and makes the answer
/// incomplete.
pub(crate) fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> (Vec<Value>, bool) {
    if user.is_master() {
        let all = serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]});
        return (vec![all], false);
    }
    let mut rules = vec![
        serde_json::json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
        serde_json::json!({"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]}),
    ];
    let mut incomplete = false;
    let mut collect = |bindings: Vec<(
        super::store::ObjectKey,
        std::sync::Arc<super::store::Stored>,
    )>,
                       scope: &str| {
        for (_, stored) in bindings {
            let binding = stored.value();
            if !applies(&binding, user, scope) {
                continue;
            }
            match role_rules(store, &binding, scope) {
                Ok(found) => rules.extend(found),
                Err(_) => incomplete = true,
            }
        }
    };
    collect(store.list(&rbac_key("clusterrolebindings"), None).1, "");
    if !namespace.is_empty() {
        collect(
            store.list(&rbac_key("rolebindings"), Some(namespace)).1,
            namespace,
        );
    }
    (rules, incomplete)
}

/// kube-apiserver's refusal (`responsewriters.Forbidden`, then `NewForbidden`).
pub(crate) fn forbidden(
    user: &UserInfo,
    attributes: &Attributes,
    reason: Option<&str>,
) -> ApiError {
    let mut resource = attributes.resource.clone();
    if !attributes.subresource.is_empty() {
        resource = format!("{resource}/{}", attributes.subresource);
    }
    let scope = if attributes.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", attributes.namespace)
    };
    let mut why = format!(
        "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        user.name, attributes.verb, resource, attributes.group
    );
    if let Some(reason) = reason {
        why = format!("{why}: {reason}");
    }
    let qualified = if attributes.group.is_empty() {
        attributes.resource.clone()
    } else {
        format!("{}.{}", attributes.resource, attributes.group)
    };
    let message = if attributes.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", attributes.name)
    };
    ApiError::Denied {
        group: attributes.group.clone(),
        resource: attributes.resource.clone(),
        name: attributes.name.clone(),
        message,
    }
}

fn rbac_key(resource: &str) -> ResourceKey {
    ResourceKey {
        group: RBAC_GROUP.to_string(),
        resource: resource.to_string(),
    }
}

/// Whether one of a binding's subjects is `user`. A ServiceAccount subject without a
/// namespace means the RoleBinding's own.
fn applies(binding: &Value, user: &UserInfo, namespace: &str) -> bool {
    let Some(subjects) = binding.get("subjects").and_then(Value::as_array) else {
        return false;
    };
    subjects.iter().any(|subject| {
        let field = |key: &str| subject.get(key).and_then(Value::as_str).unwrap_or_default();
        match field("kind") {
            "User" => field("name") == user.name,
            "Group" => user.groups.iter().any(|g| g == field("name")),
            "ServiceAccount" => {
                let ns = match field("namespace") {
                    "" => namespace,
                    ns => ns,
                };
                !ns.is_empty()
                    && user.name == format!("{SERVICE_ACCOUNT_PREFIX}{ns}:{}", field("name"))
            }
            _ => false,
        }
    })
}

/// The rules of the role a binding refers to; a role that does not exist is the
/// lister's NotFound message (`role.rbac.authorization.k8s.io "x" not found`).
fn role_rules(store: &Store, binding: &Value, namespace: &str) -> Result<Vec<Value>, String> {
    let field = |key: &str| {
        binding
            .pointer(&format!("/roleRef/{key}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = field("name");
    let (resource, singular, key) = match field("kind") {
        "Role" if !namespace.is_empty() => ("roles", "role", (namespace.to_string(), name)),
        "ClusterRole" => ("clusterroles", "clusterrole", (String::new(), name)),
        other => return Err(format!("unsupported role reference kind: {other:?}")),
    };
    let stored = store
        .get(&rbac_key(resource), &(key.0, key.1.to_string()))
        .ok_or_else(|| format!("{singular}.{RBAC_GROUP} {name:?} not found"))?;
    Ok(stored
        .value()
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// RBAC's `RuleAllows`: verb, API group, resource (or `*/subresource`) and, when the
/// rule names any, the object's name.
fn allows(rule: &Value, attributes: &Attributes) -> bool {
    let list = |key: &str| -> Vec<&str> {
        rule.get(key)
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let verbs = list("verbs");
    let groups = list("apiGroups");
    let resources = list("resources");
    let names = list("resourceNames");
    let verb_ok = verbs.iter().any(|v| *v == "*" || *v == attributes.verb);
    let group_ok = groups.iter().any(|g| *g == "*" || *g == attributes.group);
    let combined = if attributes.subresource.is_empty() {
        attributes.resource.clone()
    } else {
        format!("{}/{}", attributes.resource, attributes.subresource)
    };
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!attributes.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attributes.subresource.as_str()))
    });
    let name_ok = names.is_empty() || names.contains(&attributes.name.as_str());
    verb_ok && group_ok && resource_ok && name_ok
}

#[cfg(test)]
mod tests;
