"""kube's Job and CronJob columns (``kinformer.server.printers.batch``)."""

from __future__ import annotations

from typing import Any

import pytest

from tablelib import cells, headers, meta

SELECTOR = {"matchLabels": {"batch.kubernetes.io/controller-uid": "8f1c"}}
TEMPLATE = {"spec": {"containers": [{"name": "pi", "image": "perl:5.34.0"}], "restartPolicy": "Never"}}


def job(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **m: Any) -> dict[str, Any]:
    base = {"parallelism": 1, "completions": 1, "backoffLimit": 6, "selector": SELECTOR, "template": TEMPLATE}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("pi", **m), "spec": {**base, **(spec or {})},
            "status": status or {}}


def test_job_headers_are_kubes() -> None:
    assert headers("batch", "jobs") == ["Name", "Status", "Completions", "Duration", "Age"]
    assert headers("batch", "jobs", wide=True)[5:] == ["Containers", "Images", "Selector"]


def test_completed_job_prints_complete_completions_and_duration() -> None:
    done = job({"completions": 3, "parallelism": 3},
               {"startTime": "2023-11-14T22:08:30Z", "completionTime": "2023-11-14T22:09:12Z", "succeeded": 3,
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                               {"type": "Complete", "status": "True"}]})
    assert cells("batch", "jobs", done) == ["pi", "Complete", "3/3", "42s", "5m", "pi", "perl:5.34.0",
                                            "batch.kubernetes.io/controller-uid=8f1c"]


def test_running_job_duration_runs_from_start_and_work_queue_completions() -> None:
    running = job({"completions": None, "parallelism": 2}, {"startTime": "2023-11-14T22:12:20Z", "active": 2})
    assert cells("batch", "jobs", running)[1:4] == ["Running", "0/1 of 2", "60s"]
    single = job({"completions": None, "parallelism": None}, {"succeeded": 1})
    assert cells("batch", "jobs", single)[1:4] == ["Running", "1/1", ""]


@pytest.mark.parametrize(("conditions", "deleting", "status"), [
    ([{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}], False, "Failed"),
    ([{"type": "FailureTarget", "status": "True"}], False, "FailureTarget"),
    ([{"type": "Suspended", "status": "True"}], False, "Suspended"),
    ([{"type": "Suspended", "status": "True"}], True, "Terminating"),
    ([{"type": "Complete", "status": "True"}], True, "Complete"),
    ([{"type": "Complete", "status": "False"}], False, "Running"),
])
def test_job_status_precedence(conditions: list[dict[str, str]], deleting: bool, status: str) -> None:
    extra = {"deletionTimestamp": "2023-11-14T22:13:00Z"} if deleting else {}
    assert cells("batch", "jobs", job(status={"conditions": conditions}, **extra))[1] == status


def cronjob(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    base = {"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": TEMPLATE}}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("hello"), "spec": {**base, **spec},
            "status": status or {}}


def test_cronjob_headers_are_kubes() -> None:
    assert headers("batch", "cronjobs") == ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule",
                                            "Age"]


def test_cronjob_rows() -> None:
    scheduled = cronjob({"suspend": False}, {"active": [{"kind": "Job", "name": "hello-28333930"}],
                                              "lastScheduleTime": "2023-11-14T22:10:00Z"})
    assert cells("batch", "cronjobs", scheduled) == ["hello", "*/5 * * * *", "<none>", "False", 1, "3m20s", "5m",
                                                     "pi", "perl:5.34.0", "<none>"]
    fresh = cronjob({"timeZone": "Europe/Berlin"})
    assert cells("batch", "cronjobs", fresh)[2:6] == ["Europe/Berlin", "<unset>", 0, "<none>"]
    assert cells("batch", "cronjobs", cronjob({"suspend": True}))[3] == "True"
