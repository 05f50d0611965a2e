"""ClusterIP and node port allocation: ranges, bands, what counts as taken."""

from __future__ import annotations

import ipaddress

import pytest

from kinformer.server.registry.ipallocator import AllocationError, ServiceAllocator, parse_port_range


def test_dynamic_ips_come_from_the_upper_band_and_never_repeat():
    used: set[str] = set()
    allocator = ServiceAllocator(lambda: used, set, cidr="10.96.0.0/24")
    assert allocator.first_ip == "10.96.0.1" and allocator.family == "IPv4"
    seen = set()
    for _ in range(50):
        ip = allocator.allocate_ip()
        assert ip not in seen and ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/24")
        assert int(ip.rsplit(".", 1)[1]) > 16  # offsets 1..16 are the static band of a /24
        seen.add(ip)


def test_requested_ips_are_checked_against_range_and_use():
    used = {"10.96.0.10"}
    allocator = ServiceAllocator(lambda: used, set, cidr="10.96.0.0/24")
    assert allocator.allocate_ip("10.96.0.11") == "10.96.0.11"
    for ip, why in (("10.96.0.10", "already allocated"), ("10.96.0.11", "already allocated"),
                    ("10.97.0.1", "not in the valid range"), ("10.96.0.255", "not in the valid range"),
                    ("nope", "not a valid IP")):
        with pytest.raises(AllocationError, match=why):
            allocator.allocate_ip(ip)


def test_a_full_range_is_an_error():
    used: set[str] = set()
    allocator = ServiceAllocator(lambda: used, set, cidr="10.0.0.0/29")
    got = {allocator.allocate_ip() for _ in range(6)}
    assert len(got) == 6
    with pytest.raises(AllocationError, match="range is full"):
        allocator.allocate_ip()


def test_node_ports():
    ports = {30000}
    allocator = ServiceAllocator(set, lambda: ports, node_ports=parse_port_range("30000-30002"))
    assert allocator.allocate_node_port(30001) == 30001
    assert allocator.allocate_node_port() == 30002
    with pytest.raises(AllocationError, match="range is full"):
        allocator.allocate_node_port()
    with pytest.raises(AllocationError, match="valid range"):
        allocator.allocate_node_port(80)
    assert parse_port_range("31000") == (31000, 31000)
    with pytest.raises(ValueError):
        parse_port_range("5-1")


def test_a_deleted_service_releases_what_it_holds_at_once():
    """A Service created and deleted before any other allocation frees its address and ports with the delete,
    not after the pending window (default/kubernetes is re-created on its own address right after a delete)."""
    from kinformer.server.registry.resources import Registry

    allocator = ServiceAllocator(set, set, cidr="10.96.0.0/24", node_ports=(31000, 31010))
    ip, port = allocator.allocate_ip("10.96.0.1"), allocator.allocate_node_port(31000)
    services = Registry().get("", "v1", "services")
    svc = {"spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": 443, "nodePort": port}]}}
    allocator.written(services, svc, False)
    with pytest.raises(AllocationError, match="already allocated"):
        allocator.allocate_ip(ip)  # stored but not yet in the cache: still taken
    allocator.written(services, svc, True)
    assert allocator.allocate_ip(ip) == ip and allocator.allocate_node_port(port) == port
