"""kube's columns of RoleBindings and ClusterRoleBindings; Roles and ClusterRoles keep the generic ones
(``kinformer.server.printers.rbac``)."""

from __future__ import annotations

import pytest

from tablelib import cells, headers, meta

RBAC = "rbac.authorization.k8s.io"


@pytest.mark.parametrize("plural", ["rolebindings", "clusterrolebindings"])
def test_binding_rows(plural: str) -> None:
    binding = {"metadata": meta("read-pods"), "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "User", "name": "jane", "apiGroup": RBAC},
                            {"kind": "Group", "name": "devs", "apiGroup": RBAC},
                            {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
                            {"kind": "User", "name": "joe", "apiGroup": RBAC}]}
    assert headers(RBAC, plural) == ["Name", "Role", "Age"]
    assert headers(RBAC, plural, wide=True)[3:] == ["Users", "Groups", "ServiceAccounts"]
    assert cells(RBAC, plural, binding) == ["read-pods", "ClusterRole/view", "5m", "jane, joe", "devs", "ci/builder"]


@pytest.mark.parametrize("plural", ["roles", "clusterroles"])
def test_roles_print_kubes_generic_columns(plural: str) -> None:
    assert headers(RBAC, plural) == ["Name", "Created At"]
