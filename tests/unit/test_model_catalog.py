"""Model catalog entries: provider model lists (old and new form), Codex model/list entries
and @native-variant: references, as pure logic."""

import pytest

from runtimes import catalog


def test_provider_models_keep_bare_names_and_take_objects():
    stored, problem = catalog.check_provider_models(
        [" gpt-5.5 ", {"name": "small", "display_name": "Small one", "efforts": ["low"]},
         {"name": "plain"}])
    assert problem is None
    assert stored == ["gpt-5.5", {"name": "small", "display_name": "Small one",
                                  "efforts": ["low"]}, "plain"]
    listed = catalog.provider_catalog(stored).as_dict()
    assert listed["status"] == "ok" and listed["source"] == "provider"
    assert [(m["ref"], m["display_name"], m["efforts"]) for m in listed["models"]] == [
        ("gpt-5.5", "gpt-5.5", []), ("small", "Small one", ["low"]), ("plain", "plain", [])]


@pytest.mark.parametrize("raw, needle", [
    ("gpt", "must be a list"),
    ([""], "1-120 characters"),
    (["a", "a"], "listed twice"),
    ([{"name": "a", "extra": 1}], "unknown keys extra"),
    ([{"name": "a", "efforts": "high"}], "efforts must be a list"),
    ([{"display_name": "x"}], "name must be a string"),
    ([3], "must be a model name or an object"),
    (["@native-variant:abc"], "native discovery"),
])
def test_bad_provider_model_lists_are_refused(raw, needle):
    stored, problem = catalog.check_provider_models(raw)
    assert stored == [] and needle in problem


def test_native_variant_round_trip_and_refusals():
    ref = catalog.native_variant_ref("gpt-6", "gpt-6-fast-preset")
    assert ref.startswith("@native-variant:")
    assert catalog.parse_native_variant(ref) == ("gpt-6", "gpt-6-fast-preset")
    assert catalog.launch_model(ref) == "gpt-6"
    assert catalog.launch_model("gpt-6") == "gpt-6"
    for bad in ("@native-variant:", "@native-variant:!!!", "@native-variant:e30"):
        with pytest.raises(ValueError, match="native-variant"):
            catalog.parse_native_variant(bad)


def test_codex_entries_keep_declared_efforts_and_make_variants_opaque():
    plain = catalog.codex_entry({
        "id": "gpt-6", "model": "gpt-6", "displayName": "GPT-6", "isDefault": True,
        "defaultReasoningEffort": "low", "description": "d",
        "supportedReasoningEfforts": [{"reasoningEffort": "low", "description": ""},
                                      {"reasoningEffort": "high", "description": ""}]})
    assert plain.as_dict() == {"ref": "gpt-6", "display_name": "GPT-6",
                               "efforts": ["low", "high"], "default_effort": "low",
                               "is_default": True, "description": "d"}
    variant = catalog.codex_entry({"id": "gpt-6-preset", "model": "gpt-6", "displayName": "",
                                   "supportedReasoningEfforts": []})
    assert catalog.parse_native_variant(variant.ref) == ("gpt-6", "gpt-6-preset")
    assert variant.as_dict()["display_name"] == variant.ref


def test_login_is_an_account_or_a_provider_without_openai_auth():
    assert not catalog.logged_in({"account": None, "requiresOpenaiAuth": True})
    assert catalog.logged_in({"account": {"type": "apiKey"}, "requiresOpenaiAuth": True})
    assert catalog.logged_in({"account": None, "requiresOpenaiAuth": False})
