"""The read side of Hive's SQL-standard authorization, as a metastore with no grants answers it.

hivemesh keeps no roles or grants (it enforces no privileges). Clients that ask anyway get what the
Hive 4 metastore answers before anyone granted anything, checked against Apache Hive 4.2.0 in
``tests/test_hive4_client_calls.py``: the built-in roles ``admin`` and ``public``, every user a
member of ``public``, no privileges. Trino's ``hive.security=sql-standard`` sends these calls.
Grant and revoke calls stay unimplemented (UNKNOWN_METHOD), so nobody believes a grant was kept.
"""

from __future__ import annotations

from typing import Any

from hive_metastore.ttypes import (
    GetPrincipalsInRoleResponse,
    GetRoleGrantsForPrincipalResponse,
    HiveObjectType,
    PrincipalPrivilegeSet,
    PrincipalType,
    Role,
    RolePrincipalGrant,
)

__all__ = ["BUILTIN_ROLES", "PUBLIC_ROLE", "AuthorizationMixin"]

PUBLIC_ROLE = "public"
ADMIN_ROLE = "admin"
BUILTIN_ROLES = (ADMIN_ROLE, PUBLIC_ROLE)


class AuthorizationMixin:
    """get_role_names, list_roles, get_role_grants_for_principal, get_principals_in_role,
    get_privilege_set and list_privileges of a metastore without grants."""

    def get_role_names(self) -> list[str]:
        """The built-in roles: ``["admin", "public"]``."""
        return list(BUILTIN_ROLES)

    def list_roles(self, principal_name: str, principal_type: int) -> list[Role]:
        """Roles of a principal: a user is in ``public`` (createTime 0, owner ``public``); groups
        and roles are in none."""
        if principal_type != PrincipalType.USER:
            return []
        return [Role(roleName=PUBLIC_ROLE, createTime=0, ownerName=PUBLIC_ROLE)]

    def get_role_grants_for_principal(self, request: Any) -> GetRoleGrantsForPrincipalResponse:
        """GetRoleGrantsForPrincipalRequest -> a user's implicit membership of ``public``
        (grantTime 0, no grant option); nothing for other principal types."""
        grants = []
        if request.principal_type == PrincipalType.USER:
            grants.append(
                RolePrincipalGrant(
                    roleName=PUBLIC_ROLE,
                    principalName=request.principal_name,
                    principalType=PrincipalType.USER,
                    grantOption=False,
                    grantTime=0,
                )
            )
        return GetRoleGrantsForPrincipalResponse(principalGrants=grants)

    def get_principals_in_role(self, request: Any) -> GetPrincipalsInRoleResponse:
        """GetPrincipalsInRoleRequest -> no explicit members (of any role, existing or not)."""
        return GetPrincipalsInRoleResponse(principalGrants=[])

    def get_privilege_set(
        self, hiveObject: Any, user_name: str | None, group_names: list[str] | None
    ) -> PrincipalPrivilegeSet:  # noqa: N803
        """The privileges of a user and groups on an object: none. As Hive shapes the answer: for the
        global object only the asked groups' map (empty) is present; for a database, table,
        partition or column the user, each group and the user's role ``public`` map to no grants.
        """
        groups = list(group_names or [])
        if hiveObject is None or hiveObject.objectType == HiveObjectType.GLOBAL:
            return PrincipalPrivilegeSet(groupPrivileges={} if groups else None)
        return PrincipalPrivilegeSet(
            userPrivileges={user_name: []} if user_name else None,
            groupPrivileges={g: [] for g in groups} if groups else None,
            rolePrivileges={PUBLIC_ROLE: []} if user_name else None,
        )

    def list_privileges(self, principal_name: str, principal_type: int, hiveObject: Any) -> list[Any]:  # noqa: N803
        """Grants of a principal on an object: none."""
        return []
