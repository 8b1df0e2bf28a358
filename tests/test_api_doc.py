"""docs/api.md is generated from the docstrings by docs/gen_api.py: it must be regenerated when they change."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "docs" / "gen_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_md_is_up_to_date():
    gen = _gen_api()
    committed = (ROOT / "docs" / "api.md").read_text()
    assert committed == gen.render(), "docs/api.md is stale: run `python docs/gen_api.py` and commit the result"


def test_api_md_documents_every_exported_name():
    import roofline

    text = (ROOT / "docs" / "api.md").read_text()
    for name in roofline.__all__:
        if name != "devices":
            assert f"roofline.{name}" in text or f"`{name}" in text, name
