"""goals/core/connectors: which document a document-comment connector attaches, and when
the inbox has acknowledged a comment so that its document's cursor may pass it (pure)."""

from __future__ import annotations

import pytest

from goals.core import connectors
from goals.core.lifecycle import Refused


def test_a_bare_document_token_is_a_docx_and_a_typed_one_keeps_its_type():
    assert connectors.document_ref("doxcnA") == ("docx", "doxcnA")
    assert connectors.document_ref(" sheet:shtB ") == ("sheet", "shtB")


@pytest.mark.parametrize("ref", ["", "pdf:doxA", "docx:", "docx:a:b", "x" * 201])
def test_a_malformed_document_reference_is_refused_naming_source_ref(ref):
    with pytest.raises(Refused) as refused:
        connectors.document_ref(ref)
    assert (refused.value.field, refused.value.status) == ("source_ref", 400)


def test_a_comment_no_inbox_took_is_not_held_by_the_inbox():
    assert connectors.comment_acknowledgement([]) is None


def test_the_cursor_waits_while_any_agents_copy_of_the_comment_is_unacknowledged():
    for state in ("pending", "processing", "replying"):
        assert connectors.comment_acknowledgement([(state, "")]) == ""
    assert connectors.comment_acknowledgement([("acked", "replied"), ("processing", "")]) == ""


def test_an_acknowledged_comment_passes_with_its_outcome():
    assert connectors.comment_acknowledgement([("acked", "no_response")]) == "no_response"
    assert connectors.comment_acknowledgement([("acked", "reply_gone")]) == "reply_gone"
    assert connectors.comment_acknowledgement(
        [("acked", "no_response"), ("acked", "replied")]) == "replied"
    assert connectors.comment_acknowledgement([("acked", "")]) == "no_response"
