"""Status errors never echo a client's value in full: messages and causes are cut, head and tail kept."""

from __future__ import annotations

from kinformer.server.machinery import status as st


def test_short_text_is_unchanged() -> None:
    assert st.truncate("short", 10) == "short"


def test_long_text_keeps_its_head_and_tail() -> None:
    text = 'metadata.labels: Invalid value: "' + "x" * 100_000 + '": must be no more than 63 characters'
    cut = st.truncate(text, 300)
    assert len(cut) <= 300
    assert cut.startswith('metadata.labels: Invalid value: "xxx') and cut.endswith("must be no more than 63 characters")
    assert "characters truncated" in cut


def test_status_error_bounds_message_and_causes() -> None:
    causes = [{"reason": "FieldValueInvalid", "field": f"data.k{i}", "message": "Invalid value: " + "v" * 10_000}
              for i in range(st.MAX_CAUSES + 5)]
    err = st.StatusError(422, "Invalid", "ConfigMap \"x\" is invalid: " + "y" * 1_000_000,
                         details={"name": "x", "causes": causes})
    body = err.status()
    assert len(body["message"]) <= st.MAX_MESSAGE and body["message"].startswith('ConfigMap "x" is invalid: yyy')
    kept = body["details"]["causes"]
    assert len(kept) == st.MAX_CAUSES + 1 and kept[-1]["message"] == "5 more causes left out"
    assert all(len(c["message"]) <= st.MAX_CAUSE_MESSAGE for c in kept)
    assert kept[0]["field"] == "data.k0" and causes[0]["message"].startswith("Invalid value: vvv")  # input untouched
    assert len(err.response().body) < 200_000
