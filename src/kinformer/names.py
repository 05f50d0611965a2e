"""Kubernetes name rules (k8s.io/apimachinery/pkg/util/validation), shared by selectors and the API server.

Each check returns the error messages apimachinery gives (empty when the value is valid), with its wording,
so users see the texts they know from kube-apiserver. Patterns match the whole value: a trailing newline
is never accepted (Go's ``$`` means end of text).
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = [
    "DNS1035_LABEL_MAX_LENGTH",
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "all_qualified_names",
    "is_config_map_key",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_path_segment_name",
    "is_qualified_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
DNS1035_LABEL_MAX_LENGTH = 63
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
CONFIG_MAP_KEY_MAX_LENGTH = 253

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                      "must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
                          "or '.', and must start and end with an alphanumeric character")
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character")
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_SHORT_QUALIFIED_NAME_RE = re.compile(f"({_DNS1123_SUBDOMAIN_FMT}/)?{_QUALIFIED_NAME_FMT}")  # within both bounds
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_CONFIG_MAP_KEY_RE = re.compile(_CONFIG_MAP_KEY_FMT)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError text: the message, examples and the pattern."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _length_and_format(value: str, max_len: int, pattern: re.Pattern[str], error: str) -> list[str]:
    errors = []
    if len(value) > max_len:
        errors.append(max_len_error(max_len))
    if not pattern.fullmatch(value):
        errors.append(error)
    return errors


_DNS1123_LABEL_ERROR = regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc")
_DNS1123_SUBDOMAIN_ERROR = regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
_DNS1035_LABEL_ERROR = regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123")


@functools.lru_cache(maxsize=4096)
def _dns1123_label_errors(value: str) -> tuple[str, ...]:
    return tuple(_length_and_format(value, DNS1123_LABEL_MAX_LENGTH, _DNS1123_LABEL_RE, _DNS1123_LABEL_ERROR))


def is_dns1123_label(value: str) -> list[str]:
    """``value`` as an RFC 1123 label (namespace names, most name parts): at most 63 characters."""
    if len(value) <= DNS1123_LABEL_MAX_LENGTH and _DNS1123_LABEL_RE.fullmatch(value):
        return []  # valid (the cache is for the messages of invalid values)
    return list(_dns1123_label_errors(value))


@functools.lru_cache(maxsize=4096)
def _dns1123_subdomain_errors(value: str) -> tuple[str, ...]:
    return tuple(_length_and_format(value, DNS1123_SUBDOMAIN_MAX_LENGTH, _DNS1123_SUBDOMAIN_RE,
                                    _DNS1123_SUBDOMAIN_ERROR))


def is_dns1123_subdomain(value: str) -> list[str]:
    """``value`` as an RFC 1123 subdomain (most object names): at most 253 characters."""
    if len(value) <= DNS1123_SUBDOMAIN_MAX_LENGTH and _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        return []  # valid: most names are new, and a cache of them would only churn
    return list(_dns1123_subdomain_errors(value))


@functools.lru_cache(maxsize=4096)
def _dns1035_label_errors(value: str) -> tuple[str, ...]:
    return tuple(_length_and_format(value, DNS1035_LABEL_MAX_LENGTH, _DNS1035_LABEL_RE, _DNS1035_LABEL_ERROR))


def is_dns1035_label(value: str) -> list[str]:
    """``value`` as an RFC 1035 label (Service names: must start with a letter): at most 63 characters."""
    if len(value) <= DNS1035_LABEL_MAX_LENGTH and _DNS1035_LABEL_RE.fullmatch(value):
        return []
    return list(_dns1035_label_errors(value))


@functools.lru_cache(maxsize=4096)
def _qualified_name_errors(value: str) -> tuple[str, ...]:
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix)]
    else:
        return ("a qualified name " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                  "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errors.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                 "123-abc"))
    return tuple(errors)


def all_qualified_names(values: list[Any]) -> bool:
    """Whether every item of ``values`` is a string :func:`is_qualified_name` finds nothing wrong with, found
    without a Python call per item (a list of 140,000 finalizers); False may still be all valid (a prefixed
    name longer than 63 characters): then ask :func:`is_qualified_name` of each."""
    return (set(map(type, values)) <= {str} and max(map(len, values), default=0) <= QUALIFIED_NAME_MAX_LENGTH
            and all(map(_SHORT_QUALIFIED_NAME_RE.fullmatch, values)))


def is_qualified_name(value: str) -> list[str]:
    """``value`` as a qualified name (label and annotation keys, finalizers): ``[prefix/]name``, the prefix an
    RFC 1123 subdomain, the name at most 63 characters."""
    if len(value) <= QUALIFIED_NAME_MAX_LENGTH and _SHORT_QUALIFIED_NAME_RE.fullmatch(value):
        return []  # valid (the cache is for the messages of invalid values)
    return list(_qualified_name_errors(value))


@functools.lru_cache(maxsize=4096)
def _label_value_errors(value: str) -> tuple[str, ...]:
    return tuple(_length_and_format(value, LABEL_VALUE_MAX_LENGTH, _LABEL_VALUE_RE,
                                    regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")))


def is_valid_label_value(value: str) -> list[str]:
    """``value`` as a label value: empty, or a qualified name's name part (at most 63 characters)."""
    return list(_label_value_errors(value))


@functools.lru_cache(maxsize=4096)
def _config_map_key_errors(key: str) -> tuple[str, ...]:
    errors = _length_and_format(key, CONFIG_MAP_KEY_MAX_LENGTH, _CONFIG_MAP_KEY_RE,
                                regex_error(_CONFIG_MAP_KEY_MSG, _CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME",
                                            "key-name"))
    if key == ".":
        errors.append("must not be '.'")
    elif key == "..":
        errors.append("must not be '..'")
    elif key.startswith(".."):
        errors.append("must not start with '..'")
    return tuple(errors)


def is_config_map_key(key: str) -> list[str]:
    """``key`` as a ConfigMap/Secret data key: at most 253 of ``[-._a-zA-Z0-9]``, not ``.``, ``..``, ``..*``."""
    return list(_config_map_key_errors(key))


def is_path_segment_name(value: str) -> list[str]:
    """apimachinery's path segment rule (RBAC objects, APIServices, flow control objects): a name that is
    usable as one URL path segment, so ``system:controller:foo`` is valid."""
    errors = [f"may not be '{bad}'" for bad in (".", "..") if value == bad]
    return errors + [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]
