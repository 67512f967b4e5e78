"""The wild corpus is well formed: every file parses, binds its spec, and `--explain` runs on it.

Nothing here says which recipe binds: the corpus measures (tests/bench/bench_wild_explain.py), a
test that pinned a wild kernel's binding would turn it into training data.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kernellsp.optimize.propose.recipes import canonical_passes, explain
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

WILD = Path(__file__).resolve().parents[1] / "wild"
MANIFEST: dict[str, dict[str, object]] = {}
for _m in sorted(WILD.glob("manifest-*.toml")):
    MANIFEST.update(tomllib.loads(_m.read_text())["files"])
FILES = sorted(p.name for p in WILD.glob("*.cu"))


def test_every_file_has_provenance_and_every_table_a_file() -> None:
    assert set(MANIFEST) == set(FILES)
    for name, info in MANIFEST.items():
        for key in ("entry", "kind", "repo", "path", "commit", "license"):
            assert info.get(key), (name, key)
        assert len(str(info["commit"])) == 40, name
        assert "Source:" in (WILD / name).read_text().split("\n", 3)[0] + (WILD / name).read_text()[:2000], (
            name
        )
    assert len({str(i["repo"]) for i in MANIFEST.values()}) >= 12


@pytest.mark.parametrize("name", FILES)
def test_explain_runs_without_an_internal_error(name: str) -> None:
    text = (WILD / name).read_text()
    model = parse_source(text, name)
    entry = str(MANIFEST[name]["entry"])
    bound = specmod.entry_spec(model, entry)
    assert bound is not None and not [i for i in (bound.issues or []) if i.severity == "error"], name
    rows = explain(model, entry)
    assert rows
    assert not [r.reason for r in rows if "internal error" in r.reason]
    canonical_passes(model, entry)  # never raises
