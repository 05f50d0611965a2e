"""Printers of rbac.authorization.k8s.io bindings (kube prints Roles and ClusterRoles with the generic columns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import age_of, field, mappings, name_of
from .table import AGE, NAME, Doc, Printer, col


def _subjects(obj: Mapping[str, Any]) -> list[str]:
    """[USERS, GROUPS, SERVICEACCOUNTS]: names, ``namespace/name`` for service accounts, each joined by ``, ``."""
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in mappings(obj.get("subjects")):
        kind, name = subject.get("kind"), str(subject.get("name") or "")
        if kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace') or ''}/{name}")
        elif kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
    return [", ".join(users), ", ".join(groups), ", ".join(accounts)]


def _binding_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """ROLE as Kind/name of the roleRef, then the subjects by kind."""
    role = f"{field(obj, 'roleRef', 'kind') or ''}/{field(obj, 'roleRef', 'name') or ''}"
    return [name_of(obj), role, age_of(obj, now), *_subjects(obj)]


def _binding_printer(kind: str, noun: str) -> Printer:
    return Printer((
        NAME, col("Role", description=Doc(f"api.rbac.v1.{kind}", "roleRef")), AGE,
        col("Users", priority=1, description=f"Users in the {noun}"),
        col("Groups", priority=1, description=f"Groups in the {noun}"),
        col("ServiceAccounts", priority=1, description=f"ServiceAccounts in the {noun}"),
    ), _binding_row)


ROLEBINDING = _binding_printer("RoleBinding", "roleBinding")
CLUSTERROLEBINDING = _binding_printer("ClusterRoleBinding", "clusterRoleBinding")
