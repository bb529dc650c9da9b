//! RBAC: the roleRef and subjects' API group of bindings.

use serde_json::Value;

use super::{Obj, array, child, set_str, str_of};

pub(super) fn default_role_binding(o: &mut Obj) {
    if let Some(role_ref) = child(o, "roleRef") {
        set_str(role_ref, "apiGroup", "rbac.authorization.k8s.io");
    }
    if let Some(subjects) = array(o, "subjects") {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            if matches!(str_of(s, "kind"), "User" | "Group") {
                set_str(s, "apiGroup", "rbac.authorization.k8s.io");
            }
        }
    }
}
