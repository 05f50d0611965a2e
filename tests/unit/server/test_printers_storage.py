"""kube's columns of PersistentVolumes, claims and the storage.k8s.io kinds (``kinformer.server.printers.storage``)."""

from __future__ import annotations

from typing import Any

from tablelib import cells, headers, meta


def pvc(spec: dict[str, Any], status: dict[str, Any], **m: Any) -> dict[str, Any]:
    base = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "standard", "volumeMode": "Filesystem"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("data", **m),
            "spec": {**base, **spec}, "status": status}


def test_persistent_volume_row() -> None:
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta("pv-1"),
          "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "standard",
                   "volumeMode": "Filesystem", "claimRef": {"namespace": "default", "name": "data"},
                   "hostPath": {"path": "/data"}},
          "status": {"phase": "Bound"}}
    assert headers("", "persistentvolumes") == ["Name", "Capacity", "Access Modes", "Reclaim Policy", "Status",
                                                "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age"]
    assert cells("", "persistentvolumes", pv) == ["pv-1", "10Gi", "RWO,RWX", "Retain", "Bound", "default/data",
                                                  "standard", "<unset>", "", "5m", "Filesystem"]
    released = {"metadata": meta("pv-2", deletionTimestamp="2023-11-14T22:13:00Z",
                                 annotations={"volume.beta.kubernetes.io/storage-class": "legacy"}),
                "spec": {}, "status": {"phase": "Released"}}
    assert cells("", "persistentvolumes", released) == ["pv-2", "0", "", "", "Terminating", "", "legacy",
                                                        "<unset>", "", "5m", "<unset>"]


def test_persistent_volume_claim_rows() -> None:
    assert headers("", "persistentvolumeclaims") == ["Name", "Status", "Volume", "Capacity", "Access Modes",
                                                     "StorageClass", "VolumeAttributesClass", "Age"]
    bound = pvc({"volumeName": "pv-1"}, {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                         "capacity": {"storage": "10Gi"}})
    assert cells("", "persistentvolumeclaims", bound) == ["data", "Bound", "pv-1", "10Gi", "RWO", "standard",
                                                          "<unset>", "5m", "Filesystem"]
    resized = pvc({"volumeName": "pv-2"}, {"phase": "Bound", "accessModes": ["ReadWriteOncePod"],
                                           "capacity": {"storage": "1024Mi"}})
    assert cells("", "persistentvolumeclaims", resized)[3:5] == ["1Gi", "RWOP"]
    pending = pvc({}, {"phase": "Pending"})
    assert cells("", "persistentvolumeclaims", pending) == ["data", "Pending", "", "", "", "standard", "<unset>",
                                                            "5m", "Filesystem"]


def test_storage_class_row_marks_the_default() -> None:
    sc = {"metadata": meta("local-path", annotations={"storageclass.kubernetes.io/is-default-class": "true"}),
          "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"}
    assert headers("storage.k8s.io", "storageclasses") == ["Name", "Provisioner", "ReclaimPolicy",
                                                           "VolumeBindingMode", "AllowVolumeExpansion", "Age"]
    assert cells("storage.k8s.io", "storageclasses", sc) == ["local-path (default)", "rancher.io/local-path",
                                                             "Delete", "WaitForFirstConsumer", False, "5m"]


def test_csi_driver_csi_node_and_volume_attachment_rows() -> None:
    driver = {"metadata": meta("hostpath.csi.k8s.io"),
              "spec": {"attachRequired": False, "podInfoOnMount": True, "storageCapacity": True,
                       "tokenRequests": [{"audience": "vault"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}}
    assert cells("storage.k8s.io", "csidrivers", driver) == ["hostpath.csi.k8s.io", False, True, True, "vault", False,
                                                             "Persistent,Ephemeral", "5m"]
    assert cells("storage.k8s.io", "csidrivers", {"metadata": meta("d"), "spec": {}})[1:7] == \
        [True, False, False, "<unset>", False, "<none>"]
    node = {"metadata": meta("n1"), "spec": {"drivers": [{"name": "a", "nodeID": "n1"}, {"name": "b", "nodeID": "n1"}]}}
    assert cells("storage.k8s.io", "csinodes", node) == ["n1", 2, "5m"]
    va = {"metadata": meta("csi-123"), "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                                                "source": {"persistentVolumeName": "pv-1"}},
          "status": {"attached": True}}
    assert cells("storage.k8s.io", "volumeattachments", va) == ["csi-123", "ebs.csi.aws.com", "pv-1", "n1", True, "5m"]


def test_csi_storage_capacity_uses_kubes_generic_columns() -> None:
    assert headers("storage.k8s.io", "csistoragecapacities") == ["Name", "Created At"]
