"""Who a request is and what it may do: authentication, authorization, RBAC, tokens, impersonation."""
