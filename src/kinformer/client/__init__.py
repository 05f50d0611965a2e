"""Talking to a Kubernetes API server: configuration, discovery, REST verbs, watch streams, lazy objects."""

from kinformer.client.client import PATCH_CONTENT_TYPES, Client
from kinformer.client.config import AuthProvider, ClientConfig, StaticTokenAuth, TokenFileAuth
from kinformer.client.discovery import Resource, ResourceNotFound
from kinformer.client.exec import ExecCredentialError, ExecCredentialProvider
from kinformer.client.kubeconfig import ConfigError, KubeConfig, load_kubeconfig
from kinformer.client.listwatch import ClientListerWatcher
from kinformer.client.objects import LazyObject, decode_list, decode_object, to_plain
from kinformer.client.resource import ResourceClient

__all__ = [
    "PATCH_CONTENT_TYPES",
    "AuthProvider",
    "Client",
    "ClientConfig",
    "ClientListerWatcher",
    "ConfigError",
    "ExecCredentialError",
    "ExecCredentialProvider",
    "KubeConfig",
    "LazyObject",
    "Resource",
    "ResourceClient",
    "ResourceNotFound",
    "StaticTokenAuth",
    "TokenFileAuth",
    "decode_list",
    "decode_object",
    "load_kubeconfig",
    "to_plain",
]
