"""Admission: kube's built-in admission plugins and the admission webhooks the server calls."""
