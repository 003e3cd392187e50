"""The normalisation of a route's ``/models`` answer (sessions.capabilities): ids only plus
what the route advertises; a value listed two ways is a conflict, unknown, never a pick."""

from __future__ import annotations

from sessions.capabilities import digest_of, normalise


def test_not_a_model_list():
    for body in (None, [], ["a"], {"models": ["a"]}, {"data": {"id": "a"}}, "text"):
        assert normalise(body) is None


def test_ids_are_kept_sorted_and_invalid_ids_skipped():
    body = {"data": [{"id": "b"}, {"id": " a "}, {"id": ""}, {"id": 7}, {"id": "x\ny"},
                     {"id": "z" * 201}, "c", {"name": "no-id"}]}
    assert normalise(body) == [{"id": "a"}, {"id": "b"}]


def test_a_model_listed_twice_keeps_what_agrees_and_flags_what_differs():
    body = {"data": [{"id": "m", "context_window": 100, "max_output_tokens": 10},
                     {"id": "m", "context_window": 200, "max_output_tokens": 10}]}
    assert normalise(body) == [{"id": "m", "max_output_tokens": 10,
                                "conflicts": ["context_window"]}]


def test_unadvertised_or_malformed_fields_stay_unknown():
    body = {"data": [{"id": "m", "context_window": "big", "max_tokens": True,
                      "input_modalities": "text", "supported_parameters": "tools"}]}
    assert normalise(body) == [{"id": "m"}]


def test_tool_support_from_flags_or_parameters_and_their_disagreement():
    body = {"data": [{"id": "a", "supported_parameters": ["tools"]},
                     {"id": "b", "capabilities": {"tool_use": False}},
                     {"id": "c", "supports_tools": True, "supported_parameters": ["top_p"]}]}
    assert normalise(body) == [{"id": "a", "tool_calls": True},
                               {"id": "b", "tool_calls": False},
                               {"id": "c", "conflicts": ["tool_calls"]}]


def test_the_digest_ignores_listing_order_but_not_the_route_or_content():
    one = normalise({"data": [{"id": "a"}, {"id": "b", "context_length": 5}]})
    two = normalise({"data": [{"id": "b", "context_length": 5}, {"id": "a"}]})
    route = ("openai-compat", "http://h/v1", "ok")
    assert digest_of(*route, one) == digest_of(*route, two)
    assert digest_of("openai-compat", "http://other/v1", "ok", one) != digest_of(*route, one)
    assert digest_of(*route, normalise({"data": [{"id": "a"}]})) != digest_of(*route, one)


# ------------------------------------------------------------- Anthropic's paged list
def test_anthropic_pages_are_followed_by_last_id_until_has_more_is_false():
    from sessions.capabilities import next_after

    assert next_after({"data": [], "has_more": False, "last_id": "b"}, set()) is None
    assert next_after({"data": [{"id": "a"}]}, set()) is None  # not paged: one page
    assert next_after({"data": [], "has_more": True, "last_id": "b"}, {"a"}) == "b"


def test_a_page_loop_or_a_missing_cursor_fails_the_paging():
    import pytest

    from sessions.capabilities import PagingFailed, next_after

    with pytest.raises(PagingFailed, match="again"):
        next_after({"data": [], "has_more": True, "last_id": "b"}, {"a", "b"})
    for last in (None, "", 7):
        with pytest.raises(PagingFailed, match="no last_id"):
            next_after({"data": [], "has_more": True, "last_id": last}, set())


def test_an_anthropic_root_lists_its_models_under_v1():
    from sessions.provider_routes import models_url

    assert models_url("anthropic-compat", "https://api.anthropic.com/") == (
        "https://api.anthropic.com/v1/models")
    assert models_url("anthropic-compat", "https://gw.example/v1") == (
        "https://gw.example/v1/models")
    assert models_url("openai-compat", "https://api.openai.com/v1") == (
        "https://api.openai.com/v1/models")
